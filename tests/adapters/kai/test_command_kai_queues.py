"""``manage.py kai_queues`` on the database: the demo tree, files, determinism, bad input."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from io import StringIO

import jsonschema
import pytest
import yaml
from django.core.management import CommandError, call_command
from django.utils import timezone

from governance.models import Allocation
from scheduler.traces import PHILLY_BUDGETS
from tests.adapters.kai.queue_schema import QUEUE_SCHEMA
from tests.factories import (
    ClusterFactory,
    OrganizationFactory,
    ProgramFactory,
    ProjectFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_cluster():
    """The demo's tree (``philly_budgets.json``, as ``load_demo`` builds it) on 32 x 8 GPUs."""
    tree = json.loads(PHILLY_BUDGETS.read_text())
    organization = OrganizationFactory(name="Philly Research", slug="philly")
    cluster = ClusterFactory(organization=organization, slug="h100", nodes=32, gpus_per_node=8)
    user = UserFactory()
    since = timezone.now() - timedelta(days=30)
    for p in tree["children"]:
        program = ProgramFactory(organization=organization, slug=p["name"], name=p["name"])
        Allocation.objects.create(
            cluster=cluster,
            program=program,
            percent=Decimal(str(p["share"])),
            valid_from=since,
            set_by=user,
            reason="demo",
        )
        for j in p["children"]:
            project = ProjectFactory(program=program, slug=j["name"], name=f"VC {j['name']}")
            Allocation.objects.create(
                cluster=cluster,
                project=project,
                percent=Decimal(str(j["share"])),
                valid_from=since,
                set_by=user,
                reason="demo",
            )
    return cluster


def run(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("kai_queues", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def documents(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_demo_tree_gives_the_hand_computed_quotas(demo_cluster):
    out, err = run("--cluster", "h100")
    docs = documents(out)
    validator = jsonschema.Draft202012Validator(QUEUE_SCHEMA)
    for doc in docs:
        validator.validate(doc)
    gpu = {d["metadata"]["name"]: d["spec"]["resources"]["gpu"] for d in docs}
    parent = {d["metadata"]["name"]: d["spec"].get("parentQueue") for d in docs}
    # 256 GPUs. Programs: 43.18 % → 110.5408, 36.36 % → 93.0816, 20.45 % → 52.352;
    # floor of the sum (255.97) = 255 = the sum of the floors.
    # Vision (110): 42.1 % → 46.54 x2, 10.52 % → 11.63, 5.26 % → 5.81; floor(110.52) = 110,
    # floors 108, the 2 leftovers to .81 (ed69ec) and .63 (2869ce).
    # Language (93): 50 % → 46.54, 25 % → 23.27 x2; floors 92, +1 to ee9e8c (.54).
    # Speech (52): 44.44 % → 23.27, 22.22 % → 11.63 x2, 11.11 % → 5.82; floor(52.35) = 52,
    # floors 50, +1 to 103959 (.82), +1 to the first of the tied 11cb48/e13805 by slug.
    expected_quota = {
        "h100": 256,
        "h100-vision": 110,
        "h100-language": 93,
        "h100-speech": 52,
        "h100-vision-2869ce": 12,
        "h100-vision-6214e9": 46,
        "h100-vision-b436b2": 46,
        "h100-vision-ed69ec": 6,
        "h100-language-0e4a51": 23,
        "h100-language-7f04ca": 23,
        "h100-language-ee9e8c": 47,
        "h100-speech-103959": 6,
        "h100-speech-11cb48": 12,
        "h100-speech-6c71a0": 23,
        "h100-speech-e13805": 11,
    }
    assert {name: g["quota"] for name, g in gpu.items()} == expected_quota
    assert gpu["h100-vision"]["overQuotaWeight"] == 4318
    assert gpu["h100-speech-103959"]["overQuotaWeight"] == 1111
    assert {g["limit"] for g in gpu.values()} == {256}
    assert parent["h100"] is None and parent["h100-speech"] == "h100"
    assert parent["h100-vision-6214e9"] == "h100-vision"
    # Parents come before their children (readable; kubectl does not need it).
    names = [d["metadata"]["name"] for d in docs]
    assert all(names.index(parent[n]) < names.index(n) for n in names if parent[n])
    assert "15 queues for cluster 'h100'" in err


def test_output_is_the_same_on_every_run(demo_cluster):
    assert run("--cluster", "h100")[0] == run("--cluster", "h100")[0]


def test_out_dir_gets_one_file_per_queue_and_reports_stale_ones(demo_cluster, tmp_path):
    out, _ = run("--cluster", "h100", "--out", str(tmp_path))
    files = sorted(p.name for p in tmp_path.glob("*.yaml"))
    assert len(files) == 15 and "h100-vision-6214e9.yaml" in files
    doc = yaml.safe_load((tmp_path / "h100-vision-6214e9.yaml").read_text())
    assert doc["spec"]["parentQueue"] == "h100-vision"
    # A queue generated earlier for a project that is gone is reported, not deleted.
    (tmp_path / "h100-vision-gone.yaml").write_text(
        "metadata:\n  labels:\n    app.kubernetes.io/managed-by: gpu-budget-governance\n"
    )
    (tmp_path / "someone-elses.yaml").write_text("kind: ConfigMap\n")
    out, _ = run("--cluster", "h100", "--out", str(tmp_path))
    assert "stale:" in out and "h100-vision-gone.yaml" in out
    assert "someone-elses" not in out
    assert (tmp_path / "h100-vision-gone.yaml").exists()


def test_options_reach_the_manifests(demo_cluster):
    out, _ = run(
        "--cluster",
        "philly/h100",
        "--prefix",
        "Lab",
        "--gpu-step",
        "0.01",
        "--no-burst",
        "--min-runtime",
        "1h30m",
    )
    docs = {d["metadata"]["name"]: d for d in documents(out)}
    top = docs["lab"]
    assert top["spec"]["preemptMinRuntime"] == "1h30m"
    # 42.1 % of 43.18 % of 256 = 46.5377… → 46.53 or 46.54 (largest remainder); limit = quota.
    leaf = docs["lab-vision-6214e9"]["spec"]["resources"]["gpu"]
    assert leaf["quota"] in (46.53, 46.54) and leaf["limit"] == leaf["quota"]


def test_unknown_cluster_is_named():
    with pytest.raises(CommandError, match="--cluster: no cluster 'nowhere'"):
        run("--cluster", "nowhere")


def test_ambiguous_cluster_slug_asks_for_the_organization(demo_cluster):
    ClusterFactory(slug="h100")
    with pytest.raises(CommandError, match="write it as <organization slug>/<cluster slug>"):
        run("--cluster", "h100")


def test_tree_with_no_shares_is_a_clear_error():
    cluster = ClusterFactory(slug="bare")
    ProjectFactory(program=ProgramFactory(organization=cluster.organization))
    with pytest.raises(CommandError, match=r"cluster 'bare': no project of .* holds a share"):
        run("--cluster", "bare")


@pytest.mark.parametrize(
    ("value", "message"), [("ten minutes", "not a duration"), ("9h", "outside 0 s - 8 h")]
)
def test_bad_min_runtime_is_named(demo_cluster, value, message):
    with pytest.raises(CommandError, match=message):
        run("--cluster", "h100", "--min-runtime", value)
