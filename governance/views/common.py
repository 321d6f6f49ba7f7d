"""What every budget page needs: the user's visibility (once per request), node lookups."""

from __future__ import annotations

from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404

from governance.models import Organization, Program, Project
from governance.selectors.visibility import Visibility, user_visibility

# URL segment → model of a node of the tree.
NODE_KINDS = {"organization": Organization, "program": Program, "project": Project}


def visibility_of(request: HttpRequest | None) -> Visibility | None:
    """The signed-in user's visibility, built once per request (pages, navigation, API
    filters and serializers share it). ``None`` without a request: schema generation
    instantiates filters and serializers without one."""
    if request is None:
        return None
    cached = getattr(request, "_governance_visibility", None)
    if cached is None:
        cached = user_visibility(user=request.user)
        request._governance_visibility = cached
    return cached


def visible_node(vis: Visibility, kind: str, pk: int) -> Organization | Program | Project:
    """The node ``kind``/``pk`` if this user may see it, else 404 (existence is not leaked)."""
    querysets = {
        "organization": vis.organizations,
        "program": vis.programs,
        "project": vis.projects,
    }
    if kind not in querysets:
        raise Http404("No such kind of node.")
    return get_object_or_404(querysets[kind](), pk=pk)


def node_kind(node) -> str:
    """ "organization", "program" or "project" for a node of the tree."""
    for kind, model in NODE_KINDS.items():
        if isinstance(node, model):
            return kind
    raise TypeError(f"{node!r} is not a node of the budget tree")


def organization_of(node) -> Organization:
    """The organization a node belongs to."""
    if isinstance(node, Organization):
        return node
    if isinstance(node, Program):
        return node.organization
    return node.program.organization
