"""The REST API (Django REST framework) and its OpenAPI schema (drf-spectacular)."""

from __future__ import annotations

# --- REST API ---------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "governance.api.authentication.LockedTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # Parsers that enforce DATA_UPLOAD_MAX_MEMORY_SIZE (DRF's own read the body unbounded).
    "DEFAULT_PARSER_CLASSES": [
        "governance.api.parsers.LimitedJSONParser",
        "governance.api.parsers.LimitedFormParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "governance.api.pagination.StrictLimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "governance.api_errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU-hour budget governance API",
    "DESCRIPTION": "Budget tree, allocations, approvals, workloads and usage.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Document the refusals (400/401/403/404/413) each operation can give (governance/api/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "governance.api.schema.add_error_responses",
    ],
    # Several models have a "state"; name each enum after its model so the schema is unambiguous.
    "ENUM_NAME_OVERRIDES": {
        "WorkloadStateEnum": "scheduler.choices.WorkloadState",
        "RunEndReasonEnum": "scheduler.choices.RunEndReason",
        "OrderKindEnum": "scheduler.choices.OrderKind",
        "TreeLevelEnum": "governance.selectors.reports.LEVELS",
        "EmailChoiceEnum": "governance.choices.EmailChoice",
        "NotificationKindEnum": "governance.choices.NotificationKind",
    },
}
