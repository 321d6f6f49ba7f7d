"""Form, serializer and filter fields that read days and instants with ``governance.parsing``.

Django's ``DateField``, DRF's ``DateTimeField`` and django-filter's date filters each parse
on their own (localized formats, any Unicode digit, offsets PostgreSQL refuses); these
subclasses keep their widgets, output and OpenAPI types and replace only the reading, so a
day or an instant means the same on every page and API route and a bad one is refused with
the field named.
"""

from __future__ import annotations

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from rest_framework import serializers

from governance.parsing import calendar_day, instant

DAY_INVALID = "Enter a date as YYYY-MM-DD."
INSTANT_INVALID = "Enter a date and time in ISO 8601, such as 2026-12-01T09:30:00Z."


class DayFormField(forms.DateField):
    """A calendar day on a page form or in a filter: ``YYYY-MM-DD`` only."""

    default_error_messages = {"invalid": DAY_INVALID}

    def to_python(self, value):
        if value in self.empty_values:
            return None
        day = calendar_day(value)
        if day is None:
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return day


class InstantFormField(forms.DateTimeField):
    """An instant in a filter: ISO 8601, returned in UTC (see ``parsing.instant``)."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        moment = instant(value, default_zone=timezone.get_current_timezone())
        if moment is None:
            raise ValidationError(INSTANT_INVALID, code="invalid")
        return moment


class InstantSerializerField(serializers.DateTimeField):
    """An instant in a JSON body or query: ISO 8601, read in UTC (see ``parsing.instant``)."""

    default_error_messages = {"invalid": INSTANT_INVALID}

    def to_internal_value(self, value):
        moment = instant(value, default_zone=timezone.get_current_timezone())
        if moment is None:
            self.fail("invalid")
        return moment


class DayFilter(django_filters.DateFilter):
    """django-filter's ``DateFilter`` reading with ``DayFormField``."""

    field_class = DayFormField


class InstantFilter(django_filters.IsoDateTimeFilter):
    """django-filter's ``IsoDateTimeFilter`` reading with ``InstantFormField``."""

    field_class = InstantFormField
