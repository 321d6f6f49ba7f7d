"""Serializers of utilization reports from agents (measured values rounded, not refused)
and of a cluster's idle rule."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

from rest_framework import serializers

from scheduler.selectors.utilization import FOR_MINUTES, PERCENT_MAX, PERCENT_PLACES


class MeasuredDecimalField(serializers.DecimalField):
    """A measured quantity: more decimal places than stored are rounded (half even), not
    refused (agents measure in floats); NaN and infinities are still refused."""

    def validate_precision(self, value):
        if value.is_finite():
            value = value.quantize(
                Decimal(1).scaleb(-self.decimal_places), rounding=ROUND_HALF_EVEN
            )
        return super().validate_precision(value)


class UtilizationItemSerializer(serializers.Serializer):
    """What an agent measured of one run on its node over one period.

    ``busy_gpu_seconds`` null: the node has no GPU telemetry for the period (nothing is
    stored for it, never a 0 % busy)."""

    run = serializers.IntegerField(min_value=1, max_value=2**63 - 1)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    allocated_gpu_seconds = MeasuredDecimalField(max_digits=24, decimal_places=6, min_value=0)
    busy_gpu_seconds = MeasuredDecimalField(
        max_digits=24, decimal_places=6, min_value=0, allow_null=True
    )
    samples = serializers.IntegerField(min_value=0, max_value=2**31 - 1, default=0)
    memory_max_mib = serializers.IntegerField(
        min_value=0, max_value=2**31 - 1, required=False, allow_null=True, default=None
    )
    power_mean_watts = MeasuredDecimalField(
        max_digits=12, decimal_places=3, min_value=0, required=False, allow_null=True, default=None
    )


class UtilizationReportSerializer(serializers.Serializer):
    """A batch of an agent's utilization periods (1 to 1,000; all stored or none)."""

    reports = UtilizationItemSerializer(
        many=True, help_text="1 to 1,000 periods; a bad one is named by its index."
    )


class UtilizationAnswerSerializer(serializers.Serializer):
    """Hour rows written, periods skipped as repeats, periods without GPU telemetry."""

    stored = serializers.IntegerField()
    repeated = serializers.IntegerField()
    no_telemetry = serializers.IntegerField()


class IdlePolicySerializer(serializers.Serializer):
    """A cluster's idle rule: runs busy below ``busy_below_percent`` % for ``for_minutes``
    past their minimum runtime are marked idle and their owners told."""

    cluster = serializers.IntegerField(read_only=True)
    enabled = serializers.BooleanField()
    # The service's bounds, checked here too, so that a body with several bad fields is
    # answered with all of them at once (not those of the serializer first, the rest later).
    busy_below_percent = serializers.DecimalField(
        max_digits=5, decimal_places=PERCENT_PLACES, max_value=PERCENT_MAX
    )
    for_minutes = serializers.IntegerField(min_value=FOR_MINUTES[0], max_value=FOR_MINUTES[1])
    is_default = serializers.BooleanField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True)

    def validate_busy_below_percent(self, value):
        """More than 0: no run is busy less than 0 %, so such a rule would never mark one."""
        if value <= 0:
            raise serializers.ValidationError(f"Must be more than 0 and at most {PERCENT_MAX}.")
        return value
