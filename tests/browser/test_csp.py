"""The pages with plots work under the Content Security Policy, in a real browser.

Headless Chromium signs in as the org admin (who sees every chart) and opens each page that
draws Plotly figures. The page must come with the policy header, every figure must be drawn
(Plotly's SVG is in the page), and the browser must report no CSP violation: neither a
``securitypolicyviolation`` event (recorded by a script Playwright injects before the page's
own, which CSP does not govern) nor a console message about the policy. A page that needed an
inline script, eval or a CDN would fail here (see CONTENT_SECURITY_POLICY in settings).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduler.models import SimulationJobState
from scheduler.services.simulations import simulation_job_create, simulation_job_run
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"}`);
});
"""


TRACE = (
    "id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\n"
    "a,2026-01-05T00:00:00,7200,8,detection,,\n"
    "b,2026-01-05T00:10:00,3600,4,segmentation,,\n"
)


def finished_simulation(world):
    """A simulation of a small uploaded trace, run to the end here (its page draws figures)."""
    job = simulation_job_create(
        user=world.org_admin,
        organization=world.organization,
        trace_source="upload",
        upload=TRACE.encode(),
        gpus=8,
        policies=["fifo"],
    )
    done = simulation_job_run(job_id=job.pk)
    assert done.state == SimulationJobState.DONE
    return done


def pages_with_plots(world) -> dict[str, str]:
    return {
        "tree": f"/clusters/{world.cluster.pk}/tree/",
        "delivery": "/dashboards/delivery/",
        "fairshare": "/dashboards/fairshare/",
        "health": "/dashboards/health/",
        "simulation": f"/simulator/{finished_simulation(world).pk}/",
    }


def test_pages_with_plots_draw_them_under_the_policy(page, live_server, world_with_usage):
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.add_init_script(RECORD_VIOLATIONS)
    sign_in(page, live_server, "org_admin", world_with_usage.password)

    for name, path in pages_with_plots(world_with_usage).items():
        console.clear()
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, name
        policy = response.headers.get("content-security-policy", "")
        assert "default-src 'self'" in policy and "'unsafe-eval'" not in policy, policy
        figures = page.locator("[data-figure]")
        assert figures.count() >= 1, f"{name}: no figure on the page"
        # Generous waits: drawing is quick, but the suite shares two cores with other work.
        drawn = page.locator("[data-figure][data-drawn=true]")
        expect(drawn).to_have_count(figures.count(), timeout=30_000)
        expect(page.locator("[data-figure] svg.main-svg").first).to_be_visible(timeout=30_000)
        violations = page.evaluate("window.__cspViolations")
        policy_messages = [m for m in console if "Content Security Policy" in m]
        assert not violations and not policy_messages, (name, violations, policy_messages)


def test_a_violation_would_be_seen(page, live_server, world_with_usage):
    """The checks above are not blind: an inline script on our page is blocked and recorded."""
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    page.add_init_script(RECORD_VIOLATIONS)
    sign_in(page, live_server, "org_admin", world_with_usage.password)
    page.goto(f"{live_server.url}/dashboards/health/")
    page.evaluate(
        """() => { const s = document.createElement("script");
                   s.textContent = "window.__ran = true"; document.body.appendChild(s); }"""
    )
    page.wait_for_function("window.__cspViolations.length > 0", timeout=30_000)
    assert page.evaluate("window.__ran === undefined")
    assert any("script-src" in v for v in page.evaluate("window.__cspViolations"))


def test_api_docs_render_every_operation_under_the_policy(page, live_server, db):
    """Swagger UI starts from our template (the main bundle, no standalone preset) and draws
    the schema's operations, with no CSP violation and no error in the console."""
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    page.add_init_script(RECORD_VIOLATIONS)
    response = page.goto(f"{live_server.url}/api/docs/")
    assert response.status == 200
    submit = page.locator(".opblock-post .opblock-summary-path", has_text="/api/workloads/")
    expect(submit.first).to_be_visible(timeout=30_000)
    assert page.locator(".opblock").count() > 10
    assert page.evaluate("window.__cspViolations") == []
    assert [m for m in console if m.startswith(("error", "pageerror"))] == [], console
