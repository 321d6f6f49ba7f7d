"""Number formats of the budget pages: percents as "42.10 %", GPU counts as "1,234.5"."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django import template

register = template.Library()

MINUS = "\u2212"  # a true minus sign lines up with the plus in tabular figures


def _decimal(value) -> Decimal | None:
    if value is None or value == "":
        return None
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError, TypeError):
        return None


@register.filter
def pct(value) -> str:
    """A percent with two decimals and a spaced sign: ``42.1`` → ``"42.10 %"`` (empty → "—").

    Rounding never makes a share look like none or like all: a value above 0 that would
    round to 0 reads "< 0.01 %", and one below 100 that would round to 100 "> 99.99 %"."""
    number = _decimal(value)
    if number is None or not number.is_finite():
        return "—"
    shown = number.quantize(Decimal("0.01"))  # as the format below rounds it
    if number > 0 and shown == 0:
        return "< 0.01 %"  # a real, tiny share: "0.00 %" would read as none
    if number < 100 and shown == 100:
        return "> 99.99 %"  # short of all: "100.00 %" would read as every GPU, every hour
    return f"{shown:,.2f} %"


@register.filter
def pct_delta(value) -> str:
    """A signed change in percentage points: ``+5.00 pp``, ``-2.50 pp`` (with a true minus sign), ``±0`` for none."""
    number = _decimal(value)
    if number is None:
        return ""
    if number == 0:
        return "±0"
    sign = "+" if number > 0 else MINUS
    return f"{sign}{abs(number):,.2f} pp"


@register.filter
def gpus(value) -> str:
    """A GPU count with thousands separators: whole numbers bare, fractions to one decimal."""
    number = _decimal(value)
    if number is None:
        return "—"
    if 0 < number < Decimal("0.05"):
        return "< 0.1"
    rounded = round(number, 1)
    if rounded == rounded.to_integral_value():
        return f"{int(rounded):,}"
    return f"{rounded:,.1f}"


@register.filter
def state_badge_class(state: str) -> str:
    """The CSS class of an approval state's badge."""
    return f"badge badge-{state}"


@register.filter
def user_label(user) -> str:
    """A person's display name: full name when known, else the username; "system" for none."""
    if user is None:
        return "system"
    full = user.get_full_name() if hasattr(user, "get_full_name") else ""
    return f"{full} ({user.username})" if full else user.username


@register.filter
def ratio_pct(value) -> str:
    """A ratio (0..1) as a percent like ``pct``: ``0.9824`` → ``"98.24 %"`` (None → "—")."""
    number = _decimal(value)
    return pct(None if number is None else number * 100)


@register.filter
def share_of(value, whole) -> int:
    """``value`` as a whole percent of ``whole`` (0 when ``whole`` is empty): bar heights."""
    number, total = _decimal(value), _decimal(whole)
    if number is None or not total:
        return 0
    return max(0, min(100, round(number * 100 / total)))


@register.filter
def node_badge(state: str) -> str:
    """The CSS class of a node state's badge (the nodes pages' colours)."""
    from scheduler.choices import NODE_BADGES

    return NODE_BADGES.get(state, "badge-draft")
