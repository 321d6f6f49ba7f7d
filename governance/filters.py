"""django-filter FilterSets for the budget API: one per model, choices scoped to the caller.

Every choice a filter offers (a cluster, a program, a project) comes from the caller's
visibility selector, so an id the caller cannot see is refused exactly like one that does not
exist ("Select a valid choice"), and a filter can never widen a list.
"""

from __future__ import annotations

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Q

from governance.choices import ApprovalState
from governance.fields import InstantFilter
from governance.models import Allocation, ApprovalRequest, Cluster, Organization, Program, Project
from governance.selectors.approvals import approval_inbox, approval_requests_by
from governance.views.common import visibility_of


class StrictBooleanField(forms.Field):
    """``true``/``false`` (or ``1``/``0``); anything else is refused, not read as "no filter".

    django-filter's ``BooleanFilter`` turns an unknown value (``mine=yes``) into "no filter",
    so the caller silently got every row (found by the API fuzzer).
    """

    VALUES = {"true": True, "1": True, "false": False, "0": False}

    def to_python(self, value):
        if value in (None, ""):
            return None
        parsed = self.VALUES.get(str(value).strip().lower())
        if parsed is None:
            raise ValidationError("Use true or false.", code="invalid")
        return parsed

    def validate(self, value):
        """``None`` (not given) is allowed: the filter is optional."""


class StrictBooleanFilter(django_filters.BooleanFilter):
    """``BooleanFilter`` with ``StrictBooleanField``."""

    field_class = StrictBooleanField


_MODELS = {
    "organizations": Organization,
    "programs": Program,
    "projects": Project,
    "clusters": Cluster,
}


def _visible(kind: str):
    """A ``queryset`` callable for ModelChoiceFilter: the caller's visible objects of ``kind``."""

    def queryset(request):
        vis = visibility_of(request)
        return _MODELS[kind].objects.none() if vis is None else getattr(vis, kind)()

    return queryset


class ProgramFilter(django_filters.FilterSet):
    """Programs, optionally of one organization."""

    organization = django_filters.ModelChoiceFilter(queryset=_visible("organizations"))

    class Meta:
        model = Program
        fields = ["organization"]


class ProjectFilter(django_filters.FilterSet):
    """Projects, optionally of one program."""

    program = django_filters.ModelChoiceFilter(queryset=_visible("programs"))

    class Meta:
        model = Project
        fields = ["program"]


class ClusterFilter(django_filters.FilterSet):
    """Clusters, optionally of one organization or GPU type."""

    organization = django_filters.ModelChoiceFilter(queryset=_visible("organizations"))

    class Meta:
        model = Cluster
        fields = ["organization", "gpu_type"]


class AllocationFilter(django_filters.FilterSet):
    """Allocation versions by cluster, program or project; ``active_at`` keeps the rows whose
    window ``[valid_from, valid_to)`` contains that instant (several may; the newest wins)."""

    cluster = django_filters.ModelChoiceFilter(queryset=_visible("clusters"))
    program = django_filters.ModelChoiceFilter(queryset=_visible("programs"))
    project = django_filters.ModelChoiceFilter(queryset=_visible("projects"))
    active_at = InstantFilter(method="filter_active_at")

    class Meta:
        model = Allocation
        fields = ["cluster", "program", "project"]

    def filter_active_at(self, queryset, name, value):
        """Rows in force at ``value``."""
        return queryset.filter(valid_from__lte=value).filter(
            Q(valid_to__isnull=True) | Q(valid_to__gt=value)
        )


class ApprovalRequestFilter(django_filters.FilterSet):
    """Approval requests: ``box=mine`` (requested by me) or ``box=inbox`` (waiting for my
    decision), by state, cluster or program."""

    box = django_filters.ChoiceFilter(
        choices=[("mine", "My requests"), ("inbox", "Waiting for my decision")],
        method="filter_box",
    )
    state = django_filters.MultipleChoiceFilter(choices=ApprovalState.choices)
    cluster = django_filters.ModelChoiceFilter(queryset=_visible("clusters"))
    program = django_filters.ModelChoiceFilter(queryset=_visible("programs"))

    class Meta:
        model = ApprovalRequest
        fields = ["box", "state", "cluster", "program"]

    def filter_box(self, queryset, name, value):
        """Intersect with the inbox or "my requests" selector."""
        user = self.request.user
        selector = approval_inbox if value == "inbox" else approval_requests_by
        return queryset.filter(pk__in=selector(user=user).values("pk"))
