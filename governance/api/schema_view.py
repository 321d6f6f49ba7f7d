"""The OpenAPI schema endpoint, built once per process and rendered once per format.

drf-spectacular builds the whole schema on every request: it walks every view and
serializer, about a second in a fresh process and a tenth of one after, and renders 180 kB of
YAML or 350 kB of JSON. The schema is a function of the code and the settings alone (it is
served public: the same for every caller), and both are fixed for a process's life, so the
bytes are kept. The API docs page fetches it on every visit.

A request that asks for something else (a ``lang`` or ``version`` parameter, or media-type
parameters such as ``indent=``) is built as drf-spectacular builds it, and not kept: what a
client may vary must not grow the store.
"""

from __future__ import annotations

from typing import ClassVar

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SCHEMA_KWARGS, SpectacularAPIView

# Query parameters that leave the schema as it is: ``format`` only picks a renderer.
_KEPT_PARAMETERS = frozenset({"format"})


class SchemaView(SpectacularAPIView):
    """``SpectacularAPIView`` that keeps each renderer's bytes after the first build."""

    # renderer class -> (body, Content-Type, Content-Disposition)
    _rendered: ClassVar[dict[type, tuple[bytes, str, str]]] = {}

    @extend_schema(**SCHEMA_KWARGS)  # documented as drf-spectacular documents its own view
    def get(self, request, *args, **kwargs):
        """The schema in the negotiated format: kept bytes when the request names nothing
        that changes them, a fresh build otherwise."""
        renderer = request.accepted_renderer
        keeps = set(request.GET) <= _KEPT_PARAMETERS and ";" not in request.accepted_media_type
        if not keeps:
            return super().get(request, *args, **kwargs)
        kept = self._rendered.get(type(renderer))
        if kept is None:
            response = super().get(request, *args, **kwargs)
            # Rendered here as DRF renders it after the view (``finalize_response``, whose
            # headers the answer below still gets).
            response.accepted_renderer = renderer
            response.accepted_media_type = request.accepted_media_type
            response.renderer_context = self.get_renderer_context()
            response.render()
            if response.status_code != 200:
                return response
            kept = (
                bytes(response.content),
                response["Content-Type"],
                response.get("Content-Disposition", ""),
            )
            self._rendered[type(renderer)] = kept
        body, content_type, disposition = kept
        answer = HttpResponse(body, content_type=content_type)
        if disposition:
            answer["Content-Disposition"] = disposition
        return answer
