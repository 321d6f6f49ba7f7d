"""What a page loads from elsewhere: every script, stylesheet, image or frame whose address
names another host.

Pages must load nothing from another origin (no CDN). A test checks the addresses the page
loads, not whether some text appears in it: a page carries random tokens (the CSRF token)
whose letters may spell anything.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urlsplit

# The attribute through which each element loads something.
_LOADING_ATTRIBUTES = {
    "script": "src",
    "link": "href",
    "img": "src",
    "iframe": "src",
    "source": "src",
    "video": "src",
    "audio": "src",
}


class _Loads(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.addresses: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = _LOADING_ATTRIBUTES.get(tag)
        for name, value in attrs:
            if name == wanted and value:
                self.addresses.append(value.strip())


def loaded_addresses(html: str) -> list[str]:
    """Every address the page's elements load, in page order."""
    parser = _Loads()
    parser.feed(html)
    parser.close()
    return parser.addresses


def off_site_assets(html: str) -> list[str]:
    """The loaded addresses that name a host (``https://…``, ``//…``) or any scheme other
    than ``data:``; a path on our own site (``/static/…``, ``plotly.js``) is not one."""
    off_site = []
    for address in loaded_addresses(html):
        parts = urlsplit(address)
        if parts.netloc or (parts.scheme and parts.scheme != "data"):
            off_site.append(address)
    return off_site
