"""One route's decision: what each persona gets, and the outcome rows decisions share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tests.governance.permission_matrix.world import World

SAME_AS_GET = "same as GET"


@dataclass(frozen=True)
class Decision:
    """What each persona gets from one route.

    ``get``/``post`` are seven outcomes in ``COLUMNS`` order for the personas' own objects;
    ``get_other``/``post_other`` for the cross-tenant object named by ``other``. ``post=None``
    means the route does not accept POST: every signed-in persona gets 405, the anonymous
    visitor what they get for GET. ``post=SAME_AS_GET``: the page answers POST like GET.
    """

    get: str
    post: str | None = None
    url: Callable[[World], dict] | None = None
    other: Callable[[World], dict] | None = None
    get_other: str | None = None
    post_other: str | None = None
    payload: Callable[[World, str], dict] | None = None
    payload_other: Callable[[World, str], dict] | None = None


# Columns:                  org_admin program_manager pi researcher finance outsider anonymous
ALL_SIGNED_IN = "200 200 200 200 200 200 403"
SEEN_BY_ORG = "200 200 200 200 200 404 403"  # the personas' own org, cluster, Vision, Detection
ANOTHER_PROGRAM = "200 404 404 404 200 404 403"  # Language, Translation: whole-org roles only
ANOTHER_ORG = "404 404 404 404 404 404 403"  # a foreign organization or cluster
NO_PERSONA = "401 401 401 401 401 401 401"  # node agent endpoints: agent tokens only
PAGE_ALL_SIGNED_IN = "200 200 200 200 200 200 login"
PAGE_SEEN_BY_ORG = "200 200 200 200 200 404 login"
PAGE_ANOTHER_PROGRAM = "200 404 404 404 200 404 login"
PAGE_ANOTHER_ORG = "404 404 404 404 404 404 login"
