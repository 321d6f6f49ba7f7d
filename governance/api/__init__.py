"""REST API of the budget domain (DRF + drf-spectacular), routed in ``governance.api_urls``.

- ``serializers``: output shapes, and input shapes checked before any service runs;
- ``views``: one viewset per model, thin over the visibility selector, selectors and services,
  plus the JSON parser that enforces ``DATA_UPLOAD_MAX_MEMORY_SIZE``.

Errors have one shape, built in ``governance.api_errors``.
"""
