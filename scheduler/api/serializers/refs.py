"""How the scheduler API names a related object: by id, slug and name."""

from __future__ import annotations

from rest_framework import serializers


class RefSerializer(serializers.Serializer):
    """A related object named by id, slug and name."""

    id = serializers.IntegerField()
    slug = serializers.CharField()
    name = serializers.CharField()


def object_ref(obj) -> dict:
    """``obj`` as a ``RefSerializer`` shows it."""
    return {"id": obj.pk, "slug": obj.slug, "name": obj.name}
