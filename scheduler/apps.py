"""App configuration for the scheduler."""

from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    """Scheduling engine, simulator and the live driver around them."""

    name = "scheduler"
    verbose_name = "Scheduler"
