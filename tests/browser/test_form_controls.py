"""Every field a person types or picks in looks the same on every page with a form: the
border, corners, padding and font of the app's fields, whatever the kind of input (a month
or a time picker included). A kind the stylesheet forgot shows as the browser's own small,
black-bordered box beside the others."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each account's pages with a form (an org admin sees every one but the submit form).
PAGES = {
    "org_admin": [
        "/reports/usage/", "/workloads/", "/nodes/", "/simulator/", "/audit/", "/people/",
        "/dashboards/delivery/", "/dashboards/fairshare/", "/dashboards/health/", "tree",
    ],
    "researcher": ["/workloads/submit/"],
}  # fmt: skip

# Per visible field: its tag and type, and the styles the stylesheet gives every field; the
# reference is a <select> added to the page (selects are styled by the same rule).
FIELD_STYLES = """() => {
  const keys = ["borderTopColor", "borderTopWidth", "borderTopLeftRadius", "paddingLeft",
                "fontFamily", "fontSize", "backgroundColor"];
  const look = (el) => { const s = getComputedStyle(el); return keys.map(k => s[k]).join(" | "); };
  const probe = document.createElement("select");
  document.body.appendChild(probe);
  const reference = look(probe);
  probe.remove();
  const skip = ["hidden", "checkbox", "radio", "submit", "button", "reset", "file", "image"];
  const fields = [...document.querySelectorAll("main input, main select, main textarea")]
    .filter(el => !skip.includes(el.type) && el.getClientRects().length > 0);
  return {reference, fields: fields.map(el => [`${el.tagName.toLowerCase()}[${el.type}] ${el.name}`, look(el)])};
}"""


@pytest.mark.parametrize("account", sorted(PAGES))
def test_every_field_has_the_apps_look(page, live_server, world, account):
    sign_in(page, live_server, account, world.password)
    seen = 0
    for path in PAGES[account]:
        if path == "tree":
            path = f"/clusters/{world.cluster.pk}/tree/"
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        found = page.evaluate(FIELD_STYLES)
        odd = [(name, style) for name, style in found["fields"] if style != found["reference"]]
        assert not odd, (path, found["reference"], odd)
        seen += len(found["fields"])
    assert seen >= 3  # the pages have forms: the check looked at something
