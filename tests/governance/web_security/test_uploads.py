"""Uploaded traces and request bodies: oversized uploads, gzip bombs and garbage are refused
with a reason, formulas and markup stay inert text, and the request limit refuses a body
before it is read."""

from __future__ import annotations

import gzip
import os
import tracemalloc

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from scheduler.models import SimulationJob, SimulationJobState
from scheduler.services.simulations import (
    MAX_UPLOAD_BYTES,
    simulation_job_run,
    trace_upload_read,
)

pytestmark = pytest.mark.django_db


# --- Uploaded traces --------------------------------------------------------------------------------

HEADER = "id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\n"


def simulate(user, data: bytes, name: str = "trace.csv"):
    client = Client()
    client.force_login(user)
    return client.post(
        "/simulator/run/",
        {
            "trace_source": "upload",
            "trace_file": SimpleUploadedFile(name, data, content_type="text/csv"),
            "gpus": "8",
            "gpus_per_node": "8",
            "budgets": "proportional",
            "policies": ["fifo"],
        },
    )


def refusal(response) -> str:
    assert response.status_code == 400, response.status_code
    assert SimulationJob.objects.count() == 0
    return response.content.decode()


def test_an_oversized_upload_is_refused_naming_the_limit(personas):
    data = (HEADER + "a,2026-01-05T00:00:00,60,1,p,,\n" * 80_000).encode()
    assert len(data) > MAX_UPLOAD_BYTES
    assert f"the limit is {MAX_UPLOAD_BYTES:,} bytes" in refusal(simulate(personas.org_admin, data))


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """200 MB of zeros gzip to about 200 KB: inside the upload limit, 100 x past it unzipped."""
    bomb = gzip.compress(b"\0" * 200_000_000, compresslevel=9)
    assert len(bomb) < MAX_UPLOAD_BYTES // 5
    return bomb


def test_a_gzip_bomb_is_refused(personas, gzip_bomb):
    html = refusal(simulate(personas.org_admin, gzip_bomb, "trace.csv.gz"))
    assert f"Unzipped, the file is over {MAX_UPLOAD_BYTES:,} bytes" in html


def test_a_gzip_bomb_is_never_inflated_whole(gzip_bomb):
    # It used to be: gzip.decompress() built all 200 MB before the size was checked.
    tracemalloc.start()
    try:
        with pytest.raises(ValidationError):
            trace_upload_read(data=gzip_bomb, name="bomb.csv.gz")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * MAX_UPLOAD_BYTES, f"peak {peak:,} bytes while reading the upload"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (os.urandom(4096), "not a UTF-8 text file"),
        (b"\x1f\x8b" + os.urandom(4096), "not a readable gzip file"),
        (b"\0" * 1000, "header lacks column"),
        (b"", "The submitted file is empty"),
        ((HEADER + "a,2026-01-05T00:00:00,60,1," + "p" * 200_000 + ",,\n").encode(), "line 2"),
        ((HEADER + '"unterminated,2026\n' * 3).encode(), "trace.csv"),
    ],
    ids=["binary", "broken-gzip", "nul-bytes", "empty", "huge-field", "bad-quoting"],
)
def test_garbage_is_refused_with_a_reason(personas, data, reason):
    assert reason in refusal(simulate(personas.org_admin, data))


def test_formula_and_markup_in_a_trace_stay_inert_text(personas):
    # CSV injection: a project named like a spreadsheet formula, and one with markup.
    formula = '=HYPERLINK("http://evil.example","x")'
    markup = "<script>alert(1)</script>"
    text = (
        HEADER
        + f'a,2026-01-05T00:00:00,3600,8,"{formula.replace(chr(34), chr(34) * 2)}",,\n'
        + f"b,2026-01-05T00:10:00,3600,4,{markup},,\n"
    )
    response = simulate(personas.org_admin, text.encode())
    assert response.status_code == 302
    job = SimulationJob.objects.get()
    done = simulation_job_run(job_id=job.pk)
    assert done.state == SimulationJobState.DONE
    # In the charts the name is plain text: its markup escaped, so Plotly draws the characters.
    shown_markup = markup.replace("<", "&lt;").replace(">", "&gt;")
    assert done.result["figures"][0]["delivery"]["data"][0]["x"] == [shown_markup, formula]
    client = Client()
    client.force_login(personas.org_admin)
    page = client.get(reverse("scheduler:simulation-detail", kwargs={"pk": job.pk}))
    html = page.content.decode()
    assert markup not in html  # escaped wherever it is shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html or "\\u003Cscript" in html


def test_an_upload_past_the_request_limit_is_refused_before_it_is_read(personas, settings):
    # It used to be received whole (spooled to disk) and only then refused by the simulator.
    client = Client()
    client.force_login(personas.org_admin)
    body = b"x" * (settings.MAX_REQUEST_BYTES + 1)
    response = client.generic(
        "POST", "/simulator/run/", body, content_type="multipart/form-data; boundary=xyz"
    )
    assert response.status_code == 413
    assert f"the limit is {settings.MAX_REQUEST_BYTES:,} bytes" in response.content.decode()
    api = client.generic("POST", "/api/workloads/", body, content_type="application/json")
    assert api.status_code == 413
    assert api.json()["detail"].startswith("Request body is too large")
    assert SimulationJob.objects.count() == 0


def test_a_trace_at_the_upload_limit_is_still_accepted_by_the_request_limit(settings):
    assert settings.MAX_REQUEST_BYTES > MAX_UPLOAD_BYTES + 64 * 1024  # room for the form fields
