"""GPU-hour budget governance: the Django project and the budget domain."""

from governance.celery import app as celery_app

__all__ = ("celery_app",)
