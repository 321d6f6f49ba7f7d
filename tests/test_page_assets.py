"""The check that a page loads nothing from another host reads addresses, not letters."""

from tests.page_assets import off_site_assets


def test_a_token_that_spells_cdn_is_not_an_off_site_asset():
    # A CSRF token is random letters; one in a few hundred contains "cdn". The old check
    # ("cdn" not in the page) failed on such a page although it loads nothing from elsewhere.
    page = (
        '<form><input type="hidden" name="csrfmiddlewaretoken" value="e52y3mqi8cdncvc09">'
        '</form><script src="/static/vendor/plotly/plotly-governance.min.js"></script>'
        "<script src='plotly.min.js'></script><img src=\"data:image/png;base64,AAAA\">"
    )
    assert "cdn" in page.lower()
    assert off_site_assets(page) == []


def test_every_kind_of_off_site_address_is_found():
    page = (
        '<script src="https://cdn.plot.ly/plotly-2.35.2.min.js"></script>'
        '<link rel="stylesheet" href="//fonts.example.org/a.css">'
        '<img src="HTTP://images.example.org/x.png"><iframe src="javascript:alert(1)"></iframe>'
        '<a href="https://example.org/">a link loads nothing</a>'
    )
    assert off_site_assets(page) == [
        "https://cdn.plot.ly/plotly-2.35.2.min.js",
        "//fonts.example.org/a.css",
        "HTTP://images.example.org/x.png",
        "javascript:alert(1)",
    ]
