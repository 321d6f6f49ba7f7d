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
  const edge = (s) => [s.borderTopColor, s.borderTopLeftRadius, s.fontFamily].join(" | ");
  const probe = document.createElement("select");
  document.body.appendChild(probe);
  const reference = look(probe);
  const buttonReference = edge(getComputedStyle(probe));
  probe.remove();
  const skip = ["hidden", "checkbox", "radio", "submit", "button", "reset", "file", "image"];
  const fields = [...document.querySelectorAll("main input, main select, main textarea")]
    .filter(el => !skip.includes(el.type) && el.getClientRects().length > 0);
  // A file field's button is drawn like the fields: the same border, corners and font.
  const button = (el) => edge(getComputedStyle(el, "::file-selector-button"));
  const files = [...document.querySelectorAll("main input[type=file]")].filter(el => el.getClientRects().length > 0);
  return {reference, fields: fields.map(el => [`${el.tagName.toLowerCase()}[${el.type}] ${el.name}`, look(el)]),
          buttonReference, files: files.map(el => [el.name, button(el)])};
}"""


@pytest.mark.parametrize("account", sorted(PAGES))
def test_every_field_has_the_apps_look(page, live_server, world, account):
    sign_in(page, live_server, account, world.password)
    seen = files = 0
    for path in PAGES[account]:
        if path == "tree":
            path = f"/clusters/{world.cluster.pk}/tree/"
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        found = page.evaluate(FIELD_STYLES)
        odd = [(name, style) for name, style in found["fields"] if style != found["reference"]]
        assert not odd, (path, found["reference"], odd)
        odd_files = [(n, look) for n, look in found["files"] if look != found["buttonReference"]]
        assert not odd_files, (path, found["buttonReference"], odd_files)
        seen += len(found["fields"])
        files += len(found["files"])
    assert seen >= 3  # the pages have forms: the check looked at something
    assert files >= 1  # the simulator's trace upload, the researcher's sweep file


# Per filter bar (a row of fields and buttons above a table): for each line of it, the tops
# of its labels and the tops and heights of its fields and buttons.
FILTER_ROWS = """() => [...document.querySelectorAll("form.filters")].map(form => {
  const lines = {};
  const line = (el) => {
    const box = el.closest(".field") || el;  // a button's margin stands for a label above it
    const top = box.getBoundingClientRect().top - parseFloat(getComputedStyle(box).marginTop);
    const key = Math.round(top / 40);
    return lines[key] = lines[key] || {labels: [], fields: [], buttons: []};
  };
  for (const label of form.querySelectorAll(".field > label:not(:has(> input))")) {
    if (label.getClientRects().length) line(label).labels.push(Math.round(label.getBoundingClientRect().top));
  }
  for (const el of form.querySelectorAll(".field > input, .field > select")) {
    if (!el.getClientRects().length || ["checkbox", "radio", "hidden"].includes(el.type)) continue;
    const b = el.getBoundingClientRect();
    line(el).fields.push([Math.round(b.top), Math.round(b.height)]);
  }
  // A checkbox inside its label stands where the fields do, as a button does.
  const checks = [...form.querySelectorAll(".field")].filter(f => f.querySelector(":scope > label > input[type=checkbox]"));
  // Every button of the bar, wrapped in a block of its own or not (a wrapped one sat apart).
  for (const el of [...form.querySelectorAll(".btn, button"), ...checks]) {
    if (!el.getClientRects().length) continue;
    const b = el.getBoundingClientRect();
    line(el).buttons.push([Math.round(b.top), Math.round(b.height)]);
  }
  return Object.values(lines);
})"""


# Per field of a filter bar: its name and its width over the page's content width.
FIELD_SHARES = """() => {
  const main = document.querySelector("main");
  const pad = parseFloat(getComputedStyle(main).paddingLeft) + parseFloat(getComputedStyle(main).paddingRight);
  const room = main.clientWidth - pad;
  return [...document.querySelectorAll("form.filters .field > select, form.filters .field > input")]
    .filter(el => el.getClientRects().length && !["checkbox", "radio", "hidden"].includes(el.type))
    .map(el => [el.name, el.getBoundingClientRect().width / room]);
}"""


# Per checkbox of a filter bar: its width, its label's height, and the height of a field.
CHECKBOXES = """() => [...document.querySelectorAll("form.filters input[type=checkbox]")]
  .filter(el => el.getClientRects().length)
  .map(el => [el.getBoundingClientRect().width, el.closest("label").getBoundingClientRect().height,
              parseFloat(getComputedStyle(document.documentElement).getPropertyValue("--control-height"))
                * parseFloat(getComputedStyle(document.documentElement).fontSize)])"""


@pytest.mark.parametrize("width", [1280, 390])
def test_filter_bars_line_up(page, live_server, world, width):
    """A filter bar's labels sit on one line and its fields and buttons on the next, of one
    height, whether a field has a help text under it or not (the audit trail's "Who" has)."""
    page.set_viewport_size({"width": width, "height": 800})
    sign_in(page, live_server, "org_admin", world.password)
    checked = 0
    for path in [
        "/audit/", "/workloads/", "/nodes/", "/reports/usage/", "/dashboards/delivery/",
        "/notifications/", "/notifications/webhook/", "/dashboards/fairshare/",
        "/dashboards/health/", "tree",
    ]:  # fmt: skip
        if path == "tree":
            path = f"/clusters/{world.cluster.pk}/tree/"
        page.goto(f"{live_server.url}{path}")
        for line in (line for bar in page.evaluate(FILTER_ROWS) for line in bar):
            assert len(set(line["labels"])) <= 1, (path, line)
            controls = line["fields"] + line["buttons"]
            assert len({top for top, _ in controls}) <= 1, (path, line)
            assert len({height for _, height in controls}) <= 1, (path, line)
            checked += len(controls)
        if width == 390:
            # On a phone each field has a line of its own, as wide as the page allows.
            for name, share in page.evaluate(FIELD_SHARES):
                assert share > 0.85, (path, name, share)
        # A checkbox stays a box beside its words, whatever width the fields take.
        for box_width, label_height, control_height in page.evaluate(CHECKBOXES):
            assert box_width < 30, (path, width, box_width)
            assert label_height <= control_height, (path, width, label_height)
    assert checked >= 10
