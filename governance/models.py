"""The budget tree (organization → program → project), clusters, roles, allocations, approvals.

Shares are effective-dated, append-only ``Allocation`` rows: a change never edits an earlier
row, it adds a newer one. Writes go through ``governance.services``; reads that decide what a
user may see go through ``governance.selectors.visibility``.
"""

from __future__ import annotations

import uuid
from decimal import Decimal

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from governance.choices import (
    ORGANIZATION_ROLES,
    PROGRAM_ROLES,
    PROJECT_ROLES,
    ApprovalState,
    AuditAction,
    DecisionAction,
    DeliveryState,
    EmailChoice,
    NotificationKind,
    Role,
)

PERCENT_VALIDATORS = [MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))]


class Organization(models.Model):
    """The root of a budget tree: it holds 100 % of each of its clusters."""

    name = models.CharField(max_length=120, unique=True)
    slug = models.SlugField(max_length=60, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Program(models.Model):
    """A group of projects under an organization; a program manager splits it among them."""

    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="programs"
    )
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=60)

    class Meta:
        ordering = ["organization_id", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "slug"], name="program_slug_unique_in_org"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    """A leaf of the budget tree: it owns workloads and is charged for their GPU time."""

    program = models.ForeignKey(Program, on_delete=models.PROTECT, related_name="projects")
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=60)
    cost_centre = models.CharField(
        max_length=60, blank=True, help_text="Finance's code for charging."
    )

    class Meta:
        ordering = ["program_id", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["program", "slug"], name="project_slug_unique_in_program"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Cluster(models.Model):
    """A pool of nodes of one GPU type; budgets (shares) are per cluster."""

    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="clusters"
    )
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=60)
    gpu_type = models.CharField(max_length=40, help_text="For example h100.")
    nodes = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    gpus_per_node = models.PositiveIntegerField(validators=[MinValueValidator(1)])

    class Meta:
        ordering = ["organization_id", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "slug"], name="cluster_slug_unique_in_org"
            ),
            models.CheckConstraint(condition=Q(nodes__gte=1), name="cluster_has_nodes"),
            models.CheckConstraint(
                condition=Q(gpus_per_node__gte=1), name="cluster_nodes_have_gpus"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.gpu_type})"

    @property
    def total_gpus(self) -> int:
        """GPUs in the cluster when every node is healthy."""
        return self.nodes * self.gpus_per_node


class RoleAssignment(models.Model):
    """A user's role on one node of the tree; it applies to the node's whole subtree.

    Org admin and finance are held on an organization, program manager on a program, PI and
    researcher on a project. Exactly one of the three scope columns is set, matching the role.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="roles"
    )
    role = models.CharField(max_length=20, choices=Role.choices)
    organization = models.ForeignKey(
        Organization,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="role_assignments",
    )
    program = models.ForeignKey(
        Program, null=True, blank=True, on_delete=models.CASCADE, related_name="role_assignments"
    )
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="role_assignments"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user_id", "role"]
        constraints = [
            models.CheckConstraint(
                condition=Q(role__in=Role.values), name="role_assignment_role_valid"
            ),
            models.CheckConstraint(
                condition=(
                    Q(
                        role__in=ORGANIZATION_ROLES,
                        organization__isnull=False,
                        program__isnull=True,
                        project__isnull=True,
                    )
                    | Q(
                        role__in=PROGRAM_ROLES,
                        organization__isnull=True,
                        program__isnull=False,
                        project__isnull=True,
                    )
                    | Q(
                        role__in=PROJECT_ROLES,
                        organization__isnull=True,
                        program__isnull=True,
                        project__isnull=False,
                    )
                ),
                name="role_assignment_scope_matches_role",
            ),
            # One constraint per scope column: "unique with nulls not distinct" is not
            # available on SQLite (the quick start), partial unique indexes are everywhere.
            *(
                models.UniqueConstraint(
                    fields=["user", "role", scope],
                    condition=Q(**{f"{scope}__isnull": False}),
                    name=f"role_assignment_unique_on_{scope}",
                )
                for scope in ("organization", "program", "project")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} — {self.get_role_display()} of {self.scope}"

    @property
    def scope(self) -> Organization | Program | Project:
        """The node of the tree this role is held on."""
        return self.organization or self.program or self.project


class Allocation(models.Model):
    """One effective-dated share of a program (of its organization) or a project (of its program).

    Append-only: a change adds a row, it never edits one. The share of a node on a cluster at
    instant t is the newest row (latest ``valid_from``, then latest id) whose window
    ``[valid_from, valid_to)`` contains t; with no such row the node holds 0 %. A row with a
    ``valid_to`` is a temporary grant: once it ends the older open row applies again.
    Siblings' shares on one cluster sum to at most 100 % at every instant; the services check
    this while holding a row lock on the parent, so concurrent writers are serialized.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="allocations")
    program = models.ForeignKey(
        Program, null=True, blank=True, on_delete=models.PROTECT, related_name="allocations"
    )
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.PROTECT, related_name="allocations"
    )
    percent = models.DecimalField(max_digits=5, decimal_places=2, validators=PERCENT_VALIDATORS)
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    set_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.TextField()
    approval_request = models.ForeignKey(
        "ApprovalRequest",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="allocations",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["cluster_id", "valid_from", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(program__isnull=False, project__isnull=True)
                | Q(program__isnull=True, project__isnull=False),
                name="allocation_names_one_node",
            ),
            models.CheckConstraint(
                condition=Q(percent__gte=0, percent__lte=100), name="allocation_percent_0_100"
            ),
            models.CheckConstraint(
                condition=Q(valid_to__isnull=True) | Q(valid_to__gt=models.F("valid_from")),
                name="allocation_valid_to_after_from",
            ),
        ]
        indexes = [
            # Share of one node on one cluster at an instant (the tree page, the engine's input).
            models.Index(
                fields=["cluster", "program", "valid_from"], name="allocation_program_asof"
            ),
            models.Index(
                fields=["cluster", "project", "valid_from"], name="allocation_project_asof"
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.node} {self.percent}% on {self.cluster} from {self.valid_from:%Y-%m-%d %H:%M}"
        )

    @property
    def node(self) -> Program | Project:
        """The program or project this share belongs to."""
        return self.program or self.project


class ApprovalRequest(models.Model):
    """A requested change of shares among the children of one node on one cluster.

    The children are the programs of ``organization`` (when ``program`` is empty) or the
    projects of ``program``. A manager of that parent node decides it; every step is kept in
    ``ApprovalDecision`` rows. Approved requests apply at ``effective_from``.
    """

    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="approval_requests"
    )
    program = models.ForeignKey(
        Program, null=True, blank=True, on_delete=models.PROTECT, related_name="approval_requests"
    )
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="approval_requests")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="approval_requests"
    )
    reason = models.TextField()
    effective_from = models.DateTimeField()
    effective_to = models.DateTimeField(null=True, blank=True)
    state = models.CharField(
        max_length=20, choices=ApprovalState.choices, default=ApprovalState.DRAFT
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=ApprovalState.values), name="approval_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(effective_to__isnull=True)
                | Q(effective_to__gt=models.F("effective_from")),
                name="approval_effective_to_after_from",
            ),
        ]
        indexes = [
            # The inbox: open requests under one parent node.
            models.Index(fields=["organization", "program", "state"], name="approval_inbox"),
        ]

    def __str__(self) -> str:
        return f"Request #{self.pk} ({self.get_state_display()})"

    @property
    def parent(self) -> Organization | Program:
        """The node whose children's shares this request changes."""
        return self.program or self.organization


class ApprovalLine(models.Model):
    """One requested change in an approval request: a child node's new percent."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="lines")
    program = models.ForeignKey(
        Program, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    percent = models.DecimalField(max_digits=5, decimal_places=2, validators=PERCENT_VALIDATORS)
    previous_percent = models.DecimalField(
        max_digits=5, decimal_places=2, help_text="The node's share when the request was made."
    )

    class Meta:
        ordering = ["request_id", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(program__isnull=False, project__isnull=True)
                | Q(program__isnull=True, project__isnull=False),
                name="approval_line_names_one_node",
            ),
            models.CheckConstraint(
                condition=Q(percent__gte=0, percent__lte=100), name="approval_line_percent_0_100"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node}: {self.previous_percent}% → {self.percent}%"

    @property
    def node(self) -> Program | Project:
        """The program or project whose share this line changes."""
        return self.program or self.project


class ApprovalDecision(models.Model):
    """One step in an approval request's history: who did what, when, with which comment."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="decisions")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Empty when the system acted (applying an approved change at its date).",
    )
    action = models.CharField(max_length=20, choices=DecisionAction.choices)
    from_state = models.CharField(max_length=20, choices=ApprovalState.choices, blank=True)
    to_state = models.CharField(max_length=20, choices=ApprovalState.choices)
    comment = models.TextField(blank=True)
    at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["request_id", "at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=DecisionAction.values), name="decision_action_valid"
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.get_action_display()} by {self.actor or 'system'} at {self.at:%Y-%m-%d %H:%M}"
        )


class CostRate(models.Model):
    """What one GPU-hour of a GPU type costs, effective-dated like allocations.

    The rate in force at instant t is the newest row (latest ``valid_from``, then latest id)
    whose window ``[valid_from, valid_to)`` contains t; a row with a ``valid_to`` is a
    temporary rate, after which the older open row applies again. Usage is costed hour by
    hour at the rate in force at the start of each hour (``governance.selectors.reports``).
    Hours with no rate in force have no cost (the report says so).
    """

    gpu_type = models.CharField(max_length=40, help_text="Matches Cluster.gpu_type, e.g. h100.")
    rate_per_gpu_hour = models.DecimalField(
        max_digits=12, decimal_places=4, validators=[MinValueValidator(Decimal("0"))]
    )
    currency = models.CharField(max_length=3, default="USD", help_text="ISO 4217 code.")
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["gpu_type", "valid_from", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(rate_per_gpu_hour__gte=0), name="cost_rate_non_negative"
            ),
            models.CheckConstraint(
                condition=Q(valid_to__isnull=True) | Q(valid_to__gt=models.F("valid_from")),
                name="cost_rate_valid_to_after_from",
            ),
        ]
        indexes = [
            # The report: every rate of a GPU type that may apply in a period.
            models.Index(fields=["gpu_type", "valid_from"], name="cost_rate_asof"),
        ]

    def __str__(self) -> str:
        return (
            f"{self.gpu_type}: {self.rate_per_gpu_hour} {self.currency}/GPU-hour "
            f"from {self.valid_from:%Y-%m-%d}"
        )


class MonthlyReportDelivery(models.Model):
    """The record that an organization's monthly usage report was e-mailed (one per month).

    Written in the same transaction that sends the mail, unique per (organization, month):
    a retried or duplicated beat run finds it and sends nothing.
    """

    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="report_deliveries"
    )
    month = models.DateField(help_text="First day of the reported month.")
    sent_at = models.DateTimeField()
    recipients = models.JSONField(default=list)
    total_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)

    class Meta:
        ordering = ["-month", "organization_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "month"], name="monthly_report_once_per_month"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.organization} usage report for {self.month:%Y-%m}"


class UsageDay(models.Model):
    """Daily cache of the hourly usage rollup (``scheduler.models.UsageHour``), for reports.

    One row per (cluster, project, UTC day), made from the 24 hourly rows by
    ``governance.services.reports.usage_days_refresh`` once the day is closed (accounted
    past its end), so it never changes afterwards. Besides the plain sums it keeps the
    hour-by-hour figures a sum cannot give back: owed (Σ min(entitled, demand)), hourly
    delivered (Σ min(charged, owed)) and the charged time of hours with no entitlement.
    Why: a month of hourly rows for 300 projects on 2 clusters is 432 k rows, a year 5.3 M;
    the finance report and the dashboards read 24 x fewer rows here. Reads use it only for
    days below ``UsageDayCursor.until`` and the hourly rows for the rest, so the figures are
    the same with or without the cache.

    ``through`` is empty for a whole day. The day in progress is also kept, as rows summing
    its hours from midnight up to ``through`` (the hours accounting will not change again):
    readers take them when ``UsageDayCursor.open_through`` names that ``through``, and the
    later hours from the hourly rows, so a dashboard of today reads an hour or two of hourly
    rows instead of up to 24. Each refresh adds the new rows before it drops those of the
    ``through`` before last: a read that saw the previous cursor still finds its rows.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    through = models.DateTimeField(null=True, blank=True)
    budgeted_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    burst_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    free_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    entitled_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    demand_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    owed_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    hourly_owed_delivered_gpu_seconds = models.DecimalField(
        max_digits=24, decimal_places=6, default=0
    )
    no_share_budgeted_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)

    class Meta:
        ordering = ["day", "project_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "project", "day"],
                condition=models.Q(through__isnull=True),
                name="usage_day_unique",
            ),
            models.UniqueConstraint(
                fields=["cluster", "project", "day", "through"],
                condition=models.Q(through__isnull=False),
                name="usage_day_part_unique",
            ),
        ]
        indexes = [
            # Reports and dashboards: every project of a cluster over a range of days.
            models.Index(fields=["cluster", "day"], name="usage_day_range"),
        ]

    def __str__(self) -> str:
        part = f" until {self.through:%H:%M}" if self.through else ""
        return f"{self.project_id} @ {self.day:%Y-%m-%d}{part}"


class UsageDayCursor(models.Model):
    """Days before ``until`` of one cluster are in ``UsageDay`` (one row per cluster), and
    the hours of day ``until`` before ``open_through`` (when set) in its rows with that
    ``through``. ``generation`` changes whenever usage the cache holds, or hours accounting
    had finished, were written again (``usage_days_reopen``) and with a new cursor: a figure
    kept under the cursor's state is then never taken again."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="+")
    until = models.DateField()
    open_through = models.DateTimeField(null=True, blank=True)
    generation = models.UUIDField(default=uuid.uuid4)

    def __str__(self) -> str:
        return f"{self.cluster_id} daily usage until {self.until}"


class AuditEventQuerySet(models.QuerySet):
    """Audit events are append-only: the app has no path that edits or deletes one."""

    def update(self, **kwargs):
        raise TypeError("Audit events are append-only; they are never updated.")

    def delete(self):
        raise TypeError("Audit events are append-only; they are never deleted.")


class AuditEvent(models.Model):
    """One recorded change: who did what to which object, when, and the values before/after.

    Written by ``governance.services.audit.audit_record`` inside the transaction of the change
    it records, so a change that fails (and rolls back) leaves no event, and a change that
    commits always has one. Append-only: ``save()`` refuses to update an existing row, the
    queryset refuses ``update()``/``delete()``, and on PostgreSQL a trigger refuses UPDATE and
    DELETE (migration 0005). ``actor`` is empty when the system acted (applying an approved
    request at its date, a node whose agent went silent). ``organization`` decides who sees
    the event: the org admins of that organization (``governance.selectors.audit``).
    """

    at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Empty when the system acted.",
    )
    # The actor's username when the event was written: readable even if the user is renamed.
    actor_label = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=30, choices=AuditAction.choices)
    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="audit_events"
    )
    object_kind = models.CharField(
        max_length=30, help_text="program, project, organization, node, workload, …"
    )
    object_id = models.BigIntegerField()
    object_label = models.CharField(max_length=200)
    before = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    after = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    reason = models.TextField(blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=AuditAction.values), name="audit_event_action_valid"
            ),
        ]
        indexes = [
            # The audit page and API: one organization's events, newest first, optionally
            # narrowed to one action or one actor (the page's filters).
            models.Index(fields=["organization", "-at", "-id"], name="audit_org_newest"),
            models.Index(fields=["organization", "action", "-at"], name="audit_org_action"),
            models.Index(fields=["organization", "actor", "-at"], name="audit_org_actor"),
            # "Everything that happened to this object" (a node's or a request's history).
            models.Index(fields=["object_kind", "object_id"], name="audit_object"),
        ]

    def __str__(self) -> str:
        who = self.actor_label or "system"
        return f"{self.get_action_display()} of {self.object_label} by {who} at {self.at:%Y-%m-%d %H:%M}"

    def save(self, *args, **kwargs):
        """Insert only: an event already stored is never rewritten."""
        if self.pk is not None and not self._state.adding:
            raise TypeError("Audit events are append-only; they are never updated.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        """Refused: the audit trail keeps every event."""
        raise TypeError("Audit events are append-only; they are never deleted.")


class Notification(models.Model):
    """One message to one person in the notification centre (the bell on every page).

    ``event_key`` names the event (``run:42:ended``): one row per recipient and event, so a
    retried task or a repeated call never tells anyone twice. Events of one kind that come
    in a burst fold into one unread row per ``collapse_key`` (a team's preemptions within an
    hour): ``count`` says how many, ``updated_at`` when the last one came, and the title is
    rewritten for the total. Reading a row ends its burst; the next event starts a new one.
    """

    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    kind = models.CharField(max_length=30, choices=NotificationKind.choices)
    organization = models.ForeignKey(
        Organization, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=300, blank=True, help_text="A path inside the site.")
    event_key = models.CharField(max_length=200)
    collapse_key = models.CharField(max_length=200, blank=True)
    count = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now, editable=False)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["recipient", "event_key"], name="notification_once_per_event"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=NotificationKind.values), name="notification_kind_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["recipient", "read_at", "-updated_at"], name="notification_inbox"),
            models.Index(
                fields=["recipient", "kind", "collapse_key", "read_at"],
                name="notification_burst",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.recipient} · {self.title}"


class NotificationPreference(models.Model):
    """Whether one person also wants one kind of notification by e-mail (the centre always
    has every kind). No row: the kind's default (``services.notification_mail.EMAIL_DEFAULTS``)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_prefs"
    )
    kind = models.CharField(max_length=30, choices=NotificationKind.choices)
    email = models.CharField(max_length=20, choices=EmailChoice.choices)
    updated_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "kind"], name="notification_pref_once"),
            models.CheckConstraint(
                condition=Q(email__in=EmailChoice.values), name="notification_pref_email_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.kind}: {self.email}"


class DeliveryAttempts(models.Model):
    """How far one outgoing message (an e-mail, a digest, a webhook post) has got: claimed
    before it is sent, so it goes out at most once (``governance.services.deliveries``)."""

    state = models.CharField(
        max_length=20, choices=DeliveryState.choices, default=DeliveryState.QUEUED
    )
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class EmailDelivery(DeliveryAttempts):
    """The e-mail of one notification to its recipient: at most one per notification (a folded
    burst is one e-mail), and at most one send attempt in flight.

    A worker claims the row (``sending``, committed) before it talks to the mail server and
    marks it ``sent`` after; a worker that dies in between leaves ``sending``, which is never
    sent again (``failed`` after a while): nobody gets the same e-mail twice. A refused or
    unreachable server puts it back to ``queued`` for a retry with backoff, then ``failed``.
    """

    notification = models.OneToOneField(
        Notification, on_delete=models.CASCADE, related_name="email_delivery"
    )
    address = models.EmailField()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=DeliveryState.values), name="email_delivery_state_valid"
            ),
        ]
        indexes = [models.Index(fields=["state", "claimed_at"], name="email_delivery_state")]

    def __str__(self) -> str:
        return f"{self.address} · {self.state}"


class EmailDigest(DeliveryAttempts):
    """One person's daily digest e-mail: the notices of the kinds they chose as "daily digest"
    since their previous digest. One row per person and day, claimed before it is sent like
    ``EmailDelivery``, so a day's digest goes out at most once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_digests"
    )
    day = models.DateField()
    address = models.EmailField()
    since = models.DateTimeField(help_text="Notices updated after this are in the digest.")
    until = models.DateTimeField()
    notices = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "day"], name="email_digest_once_a_day"),
            models.CheckConstraint(
                condition=Q(state__in=DeliveryState.values), name="email_digest_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.day} · {self.state}"


class OrganizationWebhook(models.Model):
    """Where an organization's events are posted as JSON (a chat tool's incoming webhook):
    requests awaiting a decision and decided, nodes down or drained, teams under-delivered,
    the monthly report. Set by an org admin; one per organization."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, related_name="webhook"
    )
    url = models.URLField(max_length=500)
    enabled = models.BooleanField(default=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now, editable=False)

    def __str__(self) -> str:
        return f"{self.organization}: {self.url}"


class WebhookDelivery(DeliveryAttempts):
    """One event posted (or to be posted) to an organization's webhook: at most once per event,
    claimed before the request like ``EmailDelivery``; ``count`` events of one burst fold into
    the first delivery instead of being posted one by one."""

    webhook = models.ForeignKey(
        OrganizationWebhook, on_delete=models.CASCADE, related_name="deliveries"
    )
    event_key = models.CharField(max_length=200)
    collapse_key = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=30, choices=NotificationKind.choices)
    payload = models.JSONField(encoder=DjangoJSONEncoder)
    count = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["webhook", "event_key"], name="webhook_once_per_event"),
            models.CheckConstraint(
                condition=Q(state__in=DeliveryState.values), name="webhook_delivery_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.webhook_id} · {self.kind} · {self.state}"
