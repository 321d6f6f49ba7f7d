"""Forms of the budget pages: they check the shape of input; the services check the rules.

Each form turns what a person typed into the keyword arguments of one service call. Rules that
need the database (siblings ≤ 100 % over time, who may decide what) stay in the services; their
``ValidationError`` is put back next to the field it names by ``add_service_errors``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone

from governance.fields import DayFormField
from governance.models import Cluster, Program, Project

PERCENT_ERRORS = {
    "required": "Enter a percent between 0 and 100 (0 for none).",
    "invalid": "Enter a number, like 42.5.",
    "max_value": "Must be between 0 and 100.",
    "min_value": "Must be between 0 and 100.",
    "max_digits": "Must be between 0 and 100.",
    "max_decimal_places": "Use at most 2 decimals, like 42.25.",
    "max_whole_digits": "Must be between 0 and 100.",
}

# Where a service's error key belongs on the split form (anything else: above the form).
SERVICE_FIELD_ALIASES = {
    "valid_from": "valid_from",
    "effective_from": "valid_from",
    "valid_to": "valid_to",
    "effective_to": "valid_to",
    "reason": "reason",
}


def start_of_day(day: date) -> datetime:
    """Midnight at the start of ``day`` in the site's time zone."""
    return timezone.make_aware(datetime.combine(day, time.min))


def service_errors_add(
    form: forms.Form, error: ValidationError, field_for: Callable[[str], str | None]
) -> None:
    """Show a service's ``ValidationError`` on ``form``: each message of a field the service
    names goes on the form field ``field_for`` gives (``None``: above the form), and a
    message that names no field goes above the form."""
    if not hasattr(error, "error_dict"):
        for message in error.messages:
            form.add_error(None, message)
        return
    for key, messages in error.message_dict.items():
        target = field_for(key)
        for message in messages:
            form.add_error(target, message)


class TreeFilterForm(forms.Form):
    """Which cluster the tree shows, and as of which day (today when empty)."""

    cluster = forms.TypedChoiceField(coerce=int, label="Cluster")
    at = DayFormField(
        required=False,
        label="As of",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "Enter a date as YYYY-MM-DD."},
    )

    def __init__(self, *args, clusters: list[Cluster], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["cluster"].choices = [
            (c.pk, f"{c.name} ({c.total_gpus:,} {c.gpu_type} GPUs)") for c in clusters
        ]

    def as_of(self) -> datetime | None:
        """The instant to read shares at: start of the chosen day, or now for today/empty."""
        day = self.cleaned_data.get("at") if self.is_valid() else None
        if day is None or day == timezone.localdate():
            return None
        return start_of_day(day)


@dataclass
class SplitRow:
    """One child in the split editor: the node, its current share, whether this user may edit it."""

    node: Program | Project
    current: Decimal
    editable: bool

    @property
    def field_name(self) -> str:
        return f"percent_{self.node.pk}"


class SplitForm(forms.Form):
    """All children of one node at once, one percent each, a window and a reason.

    ``rows`` are the visible children; read-only rows and the combined share of children this
    user cannot see (``others``) count toward the sum but are not sent to the service.
    """

    valid_from = DayFormField(
        required=False,
        label="Valid from",
        help_text="Empty means now.",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "Enter a date as YYYY-MM-DD."},
    )
    valid_to = DayFormField(
        required=False,
        label="Valid to (optional)",
        help_text="For a temporary change: the old shares come back at the start of this day.",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "Enter a date as YYYY-MM-DD."},
    )
    reason = forms.CharField(
        label="Reason",
        max_length=2000,
        help_text="Kept in the history for everyone who can see these nodes.",
        widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": "Say why the shares change; it is kept in the history."},
    )
    # The day whose shares the editor showed (empty: today). Saving for another day first
    # shows that day's shares: what is saved is always what the editor showed for its start.
    shown_for = DayFormField(required=False, widget=forms.HiddenInput)

    def __init__(
        self,
        *args,
        rows: list[SplitRow],
        others: Decimal = Decimal("0"),
        day: date | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.rows = rows
        self.others = others
        self.day = day
        for row in rows:
            if not row.editable:
                continue
            self.fields[row.field_name] = forms.DecimalField(
                label=row.node.name,
                min_value=Decimal("0"),
                max_value=Decimal("100"),
                max_digits=5,
                decimal_places=2,
                initial=row.current,
                error_messages=PERCENT_ERRORS,
                widget=forms.NumberInput(
                    attrs={
                        "step": "0.01",
                        "min": "0",
                        "max": "100",
                        "inputmode": "decimal",
                        "class": "share-input",
                        "data-current": f"{row.current:.2f}",
                    }
                ),
            )

    def percent_field(self, row: SplitRow):
        """The bound field of ``row`` (templates cannot index by a computed name)."""
        return self[row.field_name] if row.editable else None

    def clean(self):
        cleaned = super().clean()
        valid_from = cleaned.get("valid_from")
        valid_to = cleaned.get("valid_to")
        today = timezone.localdate()
        if valid_from and valid_from < today:
            self.add_error("valid_from", "Cannot start in the past: history is never rewritten.")
        if valid_to:
            start = valid_from or today
            if valid_to <= start:
                self.add_error("valid_to", "Must be after valid from.")
        if any(name.startswith("percent_") for name in self.errors):
            return cleaned
        total = self.others + sum(
            (
                cleaned[row.field_name] if row.editable else row.current
                for row in self.rows
                if not row.editable or row.field_name in cleaned
            ),
            Decimal("0"),
        )
        if total > 100:
            raise ValidationError(
                f"The shares sum to {total:.2f} %; at most 100 % can be handed out. "
                f"Lower some shares by {total - 100:.2f} points."
            )
        if cleaned.get("shown_for") != self.day:
            shown = f"{self.day:%Y-%m-%d}" if self.day else "today"
            raise ValidationError(
                f"The current shares are now those in force on {shown}, the day the change "
                "starts: check the new shares against them, then save again."
            )
        if not self.changed_percents() and not valid_to:
            raise ValidationError(
                "No share was changed: edit at least one percent (or set valid to, to hold "
                "the shown shares for a while), then save."
            )
        return cleaned

    def changed_percents(self) -> dict[Program | Project, Decimal]:
        """The editable children whose percent differs from their current share."""
        changed = {}
        for row in self.rows:
            if not row.editable:
                continue
            value = self.cleaned_data.get(row.field_name)
            if value is not None and value != row.current:
                changed[row.node] = value
        return changed

    def percents_to_save(self) -> dict[Program | Project, Decimal]:
        """What a save writes: the changed children; for a temporary change (valid to set),
        every child shown that holds a share during it, changed or not, so the split is
        exactly what the editor showed until valid to (and extending a temporary share with
        the same values works)."""
        if not self.cleaned_data.get("valid_to"):
            return self.changed_percents()
        held = {}
        for row in self.rows:
            value = self.cleaned_data.get(row.field_name) if row.editable else None
            if value is not None and (value or row.current):
                held[row.node] = value
        return held

    def window(self) -> tuple[datetime | None, datetime | None]:
        """(valid_from, valid_to) as instants; ``None`` start means now."""
        valid_from = self.cleaned_data.get("valid_from")
        valid_to = self.cleaned_data.get("valid_to")
        start = None
        if valid_from and valid_from != timezone.localdate():
            start = start_of_day(valid_from)
        end = start_of_day(valid_to) if valid_to else None
        return start, end

    def add_service_errors(self, error: ValidationError) -> None:
        """Show a service's refusal next to the field it names (else above the form)."""

        def field_for(key: str) -> str | None:
            """The form field a service's error key belongs on (an alias, or the field itself)."""
            target = SERVICE_FIELD_ALIASES.get(key)
            if target is None and key in self.fields:
                target = key
            return target

        service_errors_add(self, error, field_for)


class DecisionForm(forms.Form):
    """A comment on a decision; rejecting needs one so the requester learns why."""

    comment = forms.CharField(
        required=False,
        max_length=2000,
        label="Comment",
        widget=forms.Textarea(attrs={"rows": 3}),
    )

    def __init__(
        self, *args, require_comment: bool = False, label: str = "Comment (optional)", **kwargs
    ):
        super().__init__(*args, **kwargs)
        self.require_comment = require_comment
        self.fields["comment"].label = label
        if require_comment:
            self.fields["comment"].required = True
            self.fields["comment"].error_messages["required"] = (
                "Say why you reject it; the requester will read this."
            )

    def add_service_errors(self, error: ValidationError) -> None:
        """Put a service's refusal on the comment field or above the form."""
        service_errors_add(self, error, lambda key: "comment" if key == "comment" else None)
