"""Ids in pages are written as plain digits, whatever their size.

The site groups thousands (``USE_THOUSAND_SEPARATOR``), and a template's ``{{ obj.pk }}`` is
localized like any number: id 12,345 became ``value="12,345"`` in a select (the form then
asked for a cluster that does not exist) and ``data-testid="workload-12,345"``. Found when
the researcher journey ran after enough tests for ids to pass 999. Ids here are pushed past
10,000 by moving PostgreSQL's sequences, so the pages render real large ids.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from governance.models import Cluster
from scheduler.services.workloads import workload_submit
from tests.personas import build_personas

pytestmark = pytest.mark.django_db


def _ids_from(table: str, start: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", [table, start - 1])


@pytest.fixture
def world(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    _ids_from(Cluster._meta.db_table, 12_345)
    p = build_personas()
    # A second cluster, so the pages offer a choice between clusters.
    Cluster.objects.create(
        organization=p.organization, name="a100", slug="a100", gpu_type="a100", nodes=2,
        gpus_per_node=8,
    )  # fmt: skip
    return p


def _page(user, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


@pytest.mark.parametrize(
    "url",
    [
        "/clusters/{pk}/tree/",
        "/dashboards/delivery/",
        "/dashboards/fairshare/",
        "/reports/usage/",
    ],
)
def test_cluster_choices_carry_plain_digit_ids(world, url):
    cluster = world.cluster
    assert cluster.pk >= 10_000
    html = _page(world.org_admin, url.format(pk=cluster.pk))

    assert f'value="{cluster.pk}"' in html
    assert f"{cluster.pk:,}" not in html


def test_queue_rows_are_named_by_plain_digit_ids(world):
    from scheduler.models import Workload

    _ids_from(Workload._meta.db_table, 23_456)
    workload = workload_submit(
        project=world.project_a1, cluster=world.cluster, name="big-id", gpus=1,
        min_runtime_seconds=600, launch_spec={"command": ["true"]},
        submitted_by=world.researcher,
    )  # fmt: skip
    assert workload.pk >= 10_000
    html = _page(world.researcher, "/workloads/")

    assert f'data-testid="workload-{workload.pk}"' in html
    assert f"{workload.pk:,}" not in html
