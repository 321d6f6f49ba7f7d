"""The rows of the dashboards' two long tables, written as HTML in Python.

Owed vs delivered and the fair-share ranking list every node of the tree a viewer sees: 316
rows for an org admin of 300 projects. Through the template engine each row's dozen tags
and twenty variables cost about 0.2 ms, most of the page's time; written here (as Django's
admin writes its change-list cells) a row costs a few microseconds. Every value from the
database or a user is escaped; the markup is the one the templates had.
"""

from __future__ import annotations

import html

from django.utils.safestring import SafeString, mark_safe

DASH = "—"
NO_TELEMETRY = '<span class="muted" title="No agent measured these GPUs">no telemetry</span>'


def escape(value) -> str:
    """``value`` as HTML text: what ``django.utils.html.escape`` writes, without its
    lazy-string wrapper (a few microseconds a call, thousands of calls a page)."""
    return html.escape(str(value))


def _count(number: int) -> str:
    """A whole number as ``localize`` writes it here (en-us, thousands separated)."""
    return f"{number:,}"


def _name_cell(row, url: str, link_title: str = "") -> str:
    """The node's name: a link (to chart or focus it) for a parent, plain for a project."""
    name = escape(row.name)
    if row.kind == "project":
        return f'<td class="node">{name}</td>'
    title = f' title="{link_title}"' if link_title else ""
    return (
        f'<td class="node"><a href="{escape(url)}"{title}>{name}</a>'
        f'<span class="kind">{escape(row.kind)}</span></td>'
    )


def _tr(row, classes: str) -> str:
    return f'<tr class="{classes}" data-node="{escape(row.kind)}-{int(row.id)}">'


def delivery_row_html(line, *, focus_key) -> SafeString:
    """One row of owed vs delivered (``views.dashboard_lines.DeliveryLine``)."""
    row = line.row
    classes = f"level-{int(row.depth)}" + (" is-focus" if focus_key == row.key else "")
    if line.delivery:
        delivery = f'<span class="ratio {line.ratio_class}">{escape(line.delivery)}</span>'
    else:
        delivery = f'<span class="muted" title="Nothing was owed">{DASH}</span>'
    idle = escape(line.idle) if line.idle else NO_TELEMETRY
    return mark_safe(  # every value above is escaped or a number
        _tr(row, classes)
        + _name_cell(row, line.focus_url)
        + f'<td class="num hide-narrow" data-testid="entitled">{escape(line.entitled)}</td>'
        + f'<td class="num" data-testid="owed">{escape(line.owed)}</td>'
        + f'<td class="num">{escape(line.delivered)}</td>'
        + f'<td class="num hide-narrow">{escape(line.burst)}</td>'
        + f'<td class="num hide-narrow">{escape(line.unbudgeted)}</td>'
        + f'<td class="num">{delivery}</td>'
        + f'<td class="num hide-narrow">{escape(line.hourly or DASH)}</td>'
        + f'<td class="num hide-narrow" data-testid="idle">{idle}</td>'
        + "</tr>"
    )


def rank_row_html(line, *, focus_key, days: int) -> SafeString:
    """One row of the fair-share ranking (``views.dashboard_lines.RankLine``); ``days`` is the
    history the rank change is counted over."""
    row = line.row
    classes = (
        f"level-{int(row.depth)}"
        + ("" if row.budgeted else " unbudgeted")
        + (" is-focus" if focus_key == row.key else "")
    )
    if line.usage:
        usage = escape(line.usage)
    else:
        usage = '<span class="muted" title="Includes teams you do not see">hidden</span>'
    if line.metric:
        metric = escape(line.metric)
    elif row.kind == "organization":
        metric = DASH
    elif not row.budgeted:
        metric = '<span class="muted">no share</span>'
    else:
        metric = (
            '<span class="muted" title="Nothing used under its parent in the window: ranked '
            'by name">none used</span>'
        )
    if line.rank:
        rank = f'{escape(line.rank)}<span class="muted"> of {_count(row.siblings)}</span>'
    elif row.depth:
        rank = '<span class="muted">last</span>'
    else:
        rank = ""
    if line.change in ("up", "down"):
        moved = _count(line.rank_change_abs)
        word, arrow = ("Up", "▲") if line.change == "up" else ("Down", "▼")
        rank += (
            f' <span class="delta {line.change} hide-narrow" title="{word} {moved} since '
            f'{int(days)} days ago (was {_count(line.rank_then)})">{arrow}{moved}</span>'
        )
    entitlement = ""
    if row.kind == "project":
        entitled = (
            f'<span class="muted"> / {int(row.entitled_gpus)}</span>'
            if row.entitled_gpus is not None
            else '<span class="muted"> / no share</span>'
        )
        entitlement = f"{int(row.running_gpus)}{entitled}"
    first = (
        '<span class="badge badge-applied" title="Below its entitlement: offered free GPUs '
        'before everyone else, up to it">first</span> '
        if row.below_entitlement
        else ""
    )
    return mark_safe(  # every value above is escaped or a number
        _tr(row, classes)
        + _name_cell(row, line.chart_url, "Chart its children")
        + f'<td class="num">{escape(line.share or DASH)}</td>'
        + f'<td class="num hide-narrow">{usage}</td>'
        + f'<td class="num hide-narrow">{escape(line.usage_share or DASH)}</td>'
        + f'<td class="num metric" data-testid="metric">{metric}</td>'
        + f'<td class="num" data-testid="rank">{rank}</td>'
        + f'<td class="num hide-narrow nowrap" data-testid="entitlement">{entitlement}</td>'
        + f'<td class="num hide-narrow nowrap">{first}{escape(line.position)}</td>'
        + "</tr>"
    )
