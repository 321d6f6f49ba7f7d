"""Bounds and field shapes shared by the scheduler's models."""

MAX_MIN_RUNTIME_SECONDS = 8 * 3600

# Ledger amounts are exact decimals: GPUs x microsecond-precision intervals, so the ledger's
# total equals Σ GPUs x run time of the runs with no float rounding.
GPU_SECONDS = {"max_digits": 24, "decimal_places": 6, "default": 0}
