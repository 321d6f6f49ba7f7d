"""What the bad-input tests send and check: a snapshot of every row the budget API can write,
a signed-in client, valid bodies to spoil, and the shape of a refusal."""

from __future__ import annotations

from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from governance.models import Allocation, ApprovalDecision, ApprovalLine, ApprovalRequest


def snapshot() -> dict:
    """Every row the budget API can write, with the fields a write would change."""
    return {
        "allocations": list(
            Allocation.objects.order_by("pk").values_list(
                "pk", "program_id", "project_id", "percent", "valid_from", "valid_to"
            )
        ),
        "requests": list(ApprovalRequest.objects.order_by("pk").values_list("pk", "state")),
        "lines": list(ApprovalLine.objects.order_by("pk").values_list("pk", "percent")),
        "decisions": list(ApprovalDecision.objects.order_by("pk").values_list("pk", flat=True)),
        "tokens": Token.objects.count(),
    }


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def split(personas, **overrides) -> dict:
    """A valid split of Vision (program A) between Detection and Segmentation."""
    payload = {
        "parent": {"kind": "program", "id": personas.program_a.pk},
        "cluster": personas.cluster.pk,
        "shares": [
            {"node": personas.project_a1.pk, "percent": "50"},
            {"node": personas.project_a2.pk, "percent": "40"},
        ],
        "reason": "Rebalance.",
    }
    payload.update(overrides)
    return payload


def request_by_pi(personas, **overrides) -> dict:
    payload = {
        "parent": {"kind": "program", "id": personas.program_a.pk},
        "cluster": personas.cluster.pk,
        "lines": [{"node": personas.project_a1.pk, "percent": "60"}],
        "reason": "Paper deadline.",
    }
    payload.update(overrides)
    return payload


def refused(response, status: int, *fields: str) -> dict:
    """Assert the status and that ``errors`` names exactly ``fields``; return the body."""
    assert response.status_code == status, response.content
    body = response.json()
    assert isinstance(body["detail"], str) and body["detail"]
    if fields:
        assert sorted(body["errors"]) == sorted(fields), body
    return body
