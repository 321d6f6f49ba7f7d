"""Field builders shared by several models."""

from __future__ import annotations

from django.conf import settings
from django.db import models


def actor_field(help_text: str) -> models.ForeignKey:
    """Who acted: a user, or empty when the system did (kept while the user exists: PROTECT)."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text=help_text,
    )
