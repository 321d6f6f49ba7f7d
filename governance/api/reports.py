"""The finance usage report over the API: JSON, CSV or XLSX (``?format=`` or Accept).

``GET /api/reports/usage/?start=&end=&month=&level=&cluster=&program=&format=json|csv|xlsx``.
Finance and org admins read it (403 for other roles); a hidden program is a 404; bad input
is a 400 naming the field. Read only: nothing here writes.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import renderers, serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from governance import filters
from governance.api.views import resolve_visible
from governance.reports.columns import report_filename
from governance.reports.csv_writer import report_csv
from governance.reports.query import report_for_query, report_query_parse
from governance.reports.xlsx_writer import report_xlsx
from governance.selectors.reports import LEVELS


class CSVRenderer(renderers.BaseRenderer):
    """``text/csv``: the view hands over the finished file."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data


class XLSXRenderer(renderers.BaseRenderer):
    """The XLSX workbook, made by the view."""

    media_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    format = "xlsx"
    charset = None
    render_style = "binary"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data


_AMOUNT = {"max_digits": 30, "decimal_places": 6}


class ReportRowSerializer(serializers.Serializer):
    """One row (or the totals): exact GPU-seconds, GPU-hours rounded to the millionth."""

    period_start = serializers.DateField()
    period_end = serializers.DateField()
    level = serializers.CharField()
    node_id = serializers.IntegerField(allow_null=True)
    organization = serializers.CharField()
    program = serializers.CharField()
    project = serializers.CharField()
    cost_centre = serializers.CharField()
    cluster_id = serializers.IntegerField(allow_null=True)
    cluster = serializers.CharField()
    gpu_type = serializers.CharField()
    budgeted_gpu_hours = serializers.DecimalField(**_AMOUNT)
    burst_gpu_hours = serializers.DecimalField(**_AMOUNT)
    free_gpu_hours = serializers.DecimalField(**_AMOUNT)
    total_gpu_hours = serializers.DecimalField(**_AMOUNT)
    budgeted_gpu_seconds = serializers.DecimalField(**_AMOUNT)
    burst_gpu_seconds = serializers.DecimalField(**_AMOUNT)
    free_gpu_seconds = serializers.DecimalField(**_AMOUNT)
    total_gpu_seconds = serializers.DecimalField(**_AMOUNT)
    cost = serializers.DecimalField(max_digits=20, decimal_places=2, allow_null=True)
    uncosted_gpu_seconds = serializers.DecimalField(**_AMOUNT)
    # From the agents' telemetry: allocated minus busy of the measured hours; null when none.
    idle_gpu_hours = serializers.DecimalField(**_AMOUNT, allow_null=True)
    idle_gpu_seconds = serializers.DecimalField(**_AMOUNT, allow_null=True)


class UsageReportSerializer(serializers.Serializer):
    """The report: its period (both days included), level, filters, rows and totals."""

    title = serializers.CharField()
    start = serializers.DateField()
    end = serializers.DateField()
    level = serializers.ChoiceField(choices=LEVELS)
    cluster = serializers.IntegerField(source="cluster.pk", allow_null=True, default=None)
    program = serializers.IntegerField(source="program.pk", allow_null=True, default=None)
    currency = serializers.CharField(allow_null=True)
    warnings = serializers.ListField(child=serializers.CharField())
    rows = ReportRowSerializer(many=True)
    totals = ReportRowSerializer()


_PARAMETERS = [
    OpenApiParameter("month", OpenApiTypes.STR, description="YYYY-MM (default: last month)"),
    OpenApiParameter("start", OpenApiTypes.DATE, description="First day (with end)"),
    OpenApiParameter("end", OpenApiTypes.DATE, description="Last day, included"),
    OpenApiParameter("level", OpenApiTypes.STR, enum=list(LEVELS), description="Default project"),
    OpenApiParameter("cluster", OpenApiTypes.INT, description="One cluster's id"),
    OpenApiParameter("program", OpenApiTypes.INT, description="One program's id"),
    OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv", "xlsx"]),
]


class FormatNegotiation(DefaultContentNegotiation):
    """An unknown ``?format=`` is a 400 naming the parameter (DRF answers 404: no such page).

    An empty ``?format=`` is "not given" (JSON), like every empty query value in the API.
    """

    def select_renderer(self, request, renderers, format_suffix=None):
        wanted = format_suffix or request.query_params.get(self.settings.URL_FORMAT_OVERRIDE)
        if wanted and wanted not in {renderer.format for renderer in renderers}:
            raise serializers.ValidationError(
                {"format": [f"Unknown format {wanted!r}: use json, csv or xlsx."]}
            )
        return super().select_renderer(request, renderers, format_suffix)


class UsageReportView(APIView):
    """GPU-hours budgeted, burst and free, and cost, per month x node x cluster."""

    renderer_classes = [renderers.JSONRenderer, CSVRenderer, XLSXRenderer]
    content_negotiation_class = FormatNegotiation

    @extend_schema(
        summary="Finance usage report (JSON, CSV or XLSX)",
        parameters=_PARAMETERS,
        responses={
            (200, "application/json"): UsageReportSerializer,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="CSV file"),
            (200, XLSXRenderer.media_type): OpenApiResponse(
                OpenApiTypes.BINARY, description="XLSX workbook"
            ),
            404: OpenApiResponse(description="A program not visible to the caller"),
        },
    )
    def get(self, request):
        vis = filters.visibility_of(request)
        if not vis.can_view_reports:
            raise PermissionDenied("Usage reports are for finance and org admins.")
        query = report_query_parse(params=request.query_params, visibility=vis)
        program = None
        if query.program_id is not None:
            program = resolve_visible(
                vis.programs(), query.program_id, field="program", what="program"
            )
        report = report_for_query(query=query, visibility=vis, program=program)
        kind = request.accepted_renderer.format
        if kind == "csv":
            return self._file(report_csv(report=report).encode(), report, "csv")
        if kind == "xlsx":
            return self._file(report_xlsx(report=report), report, "xlsx")
        return Response(UsageReportSerializer(report).data)

    def _file(self, content: bytes, report, extension: str) -> Response:
        response = Response(content)
        name = report_filename(report, extension)
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

    def handle_exception(self, exc):
        """Errors are JSON in the API's one shape, whichever format was asked for."""
        response = super().handle_exception(exc)
        self.request.accepted_renderer = renderers.JSONRenderer()
        self.request.accepted_media_type = "application/json"
        return response


urlpatterns = [
    path("reports/usage/", UsageReportView.as_view(), name="report-usage"),
]
