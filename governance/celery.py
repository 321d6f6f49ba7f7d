"""The Celery application.

Configuration comes from Django settings (``CELERY_*``). Without ``CELERY_BROKER_URL`` tasks
run in-process (eager), so the quick start needs no broker; with it they go to workers.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")

app = Celery("governance")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
