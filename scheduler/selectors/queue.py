"""My queue at scale: the filters, sort orders and paging of the workload list page.

One ``QueueFilter`` parses the query string (state, project, cluster, mine, sort, page);
anything it cannot read is an error naming the parameter, never a silently different list.
Choices of project and cluster are what the user sees, so a hidden id is refused like a
malformed one.
"""

from __future__ import annotations

from dataclasses import dataclass

import django_filters
from django import forms
from django.core.paginator import Page, Paginator
from django.db.models import Case, Count, F, QuerySet, Value, When

from governance.models import Cluster, Project
from governance.parsing import whole_number
from scheduler.choices import DEMAND_STATES, WorkloadState
from scheduler.models import Workload
from scheduler.selectors.workloads import visible_workloads, with_standing

QUEUE_PAGE_SIZE = 50

# Sort key -> (label, ordering). "queue", the default: waiting work first, in its place in
# the fair-share order (the question a researcher opens the page with is "when does mine
# start?"), then running work (and work being stopped, which will queue again), then the
# rest, each newest first. Ended work comes last so a team with weeks of finished work
# still sees its queue. Only a pending workload's key is read: a running one's is not a
# place in any queue.
_WAITING, _RUNNING, _ENDED = 0, 1, 2
_QUEUE_GROUP = Case(
    When(state=WorkloadState.PENDING, then=Value(_WAITING)),
    When(state__in=DEMAND_STATES, then=Value(_RUNNING)),
    default=Value(_ENDED),
)
_PLACE = Case(When(state=WorkloadState.PENDING, then=F("queue_key")), default=None)
SORTS: dict[str, tuple[str, tuple]] = {
    "queue": (
        "Waiting (in queue order), then running",
        (_QUEUE_GROUP, _PLACE.asc(nulls_last=True), "-submitted_at", "-id"),
    ),
    "position": (
        "Place in the queue",
        (F("queue_key").asc(nulls_last=True), "-submitted_at", "-id"),
    ),
    "newest": ("Newest first", ("-submitted_at", "-id")),
    "oldest": ("Oldest first", ("submitted_at", "id")),
    "gpus": ("Most GPUs first", ("-gpus", "-submitted_at", "-id")),
    "name": ("Name", ("name", "id")),
}


class QueueFilter(django_filters.FilterSet):
    """The query string of "My queue"; ``request`` scopes the project and cluster choices."""

    state = django_filters.ChoiceFilter(choices=WorkloadState.choices, empty_label="Any state")
    project = django_filters.ModelChoiceFilter(
        queryset=lambda request: _visible_projects(request.visibility),
        empty_label="Any project",
    )
    cluster = django_filters.ModelChoiceFilter(
        queryset=lambda request: Cluster.objects.filter(
            organization_id__in=_visible_projects(request.visibility).values(
                "program__organization_id"
            )
        ).order_by("name"),
        empty_label="Any cluster",
    )
    mine = django_filters.BooleanFilter(
        method="only_mine", widget=forms.CheckboxInput, label="Only mine"
    )
    sort = django_filters.ChoiceFilter(
        choices=[(key, label) for key, (label, _) in SORTS.items()],
        method="sorted_by",
        empty_label=None,
        label="Sort",
    )

    class Meta:
        model = Workload
        fields = ["state", "project", "cluster"]

    def only_mine(self, queryset, name, value):
        return queryset.filter(submitted_by=self.request.user) if value else queryset

    def sorted_by(self, queryset, name, value):
        return queryset.order_by(*SORTS[value][1])


def _visible_projects(vis) -> QuerySet[Project]:
    return vis.projects().select_related("program").order_by("name")


@dataclass
class QueuePage:
    """One page of the queue: its workloads, the paging, counts per state and the filter."""

    page: Page
    filter: QueueFilter
    counts: dict[str, int]

    @property
    def workloads(self) -> list[Workload]:
        """The page's workloads."""
        return list(self.page.object_list)


class QueueParamError(ValueError):
    """A query parameter "My queue" cannot read; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def queue_page(*, request, vis) -> QueuePage:
    """The workloads ``vis`` sees, filtered, sorted and paged as ``request.GET`` asks.

    Raises ``QueueParamError`` for a parameter it cannot read (a state, project or cluster
    that does not exist or is not visible, a sort it does not know, a page that is not a
    positive whole number or lies past the last page).
    """
    request.visibility = vis
    params = request.GET.copy()
    params.setdefault("sort", "queue")
    base = with_standing(visible_workloads(vis)).select_related(
        "project", "cluster", "submitted_by"
    )
    queue = QueueFilter(params, queryset=base, request=request)
    if not queue.is_valid():
        field, errors = next(iter(queue.errors.items()))
        raise QueueParamError(field, " ".join(errors))
    # Counts per state under every filter but the state itself: the state links say how
    # many each would show.
    without_state = params.copy()
    without_state.pop("state", None)
    counted = QueueFilter(without_state, queryset=visible_workloads(vis), request=request).qs
    counts = dict.fromkeys(WorkloadState.values, 0)
    for value, n in counted.order_by().values_list("state").annotate(n=Count("id")):
        counts[value] += n
    raw_page = params.get("page", "1")
    number = whole_number(raw_page)
    if number is None or number < 1:
        raise QueueParamError("page", f"{raw_page[:20]!r} is not a page number (1, 2, …).")
    paginator = Paginator(queue.qs, QUEUE_PAGE_SIZE)
    if number > paginator.num_pages:
        raise QueueParamError("page", f"there are {paginator.num_pages} pages.")
    return QueuePage(page=paginator.page(number), filter=queue, counts=counts)
