"""Root URL configuration: pages, the REST API with its OpenAPI schema, sign-in, admin."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerSplitView

from governance.api.schema_view import SchemaView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    # Built once per process and kept (governance/api/schema_view.py).
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's start-up script as a file: no inline script (CSP).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include("governance.api_urls")),
    path("", include("governance.web_urls")),
]

# JSON 404s under /api/ (an API client gets the API's error shape), the HTML page elsewhere.
handler404 = "governance.api_errors.not_found"
