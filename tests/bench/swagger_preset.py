"""What Swagger UI's standalone preset costs a first visit of the API docs page.

Run: ``.venv/bin/python -m tests.bench.swagger_preset [ROUNDS]`` (default 21). Two pages are
written to a temporary directory beside copies of the sidecar's Swagger UI files: each loads
the main bundle and starts Swagger UI as the API docs page does ("BaseLayout", an empty
schema given inline); one also loads the standalone preset, as drf-spectacular's own template
did. A server on 127.0.0.1 serves them, and headless Chromium opens each in turn, ``ROUNDS``
times, in a new context (empty cache). Printed: each page's median and fastest
``loadEventEnd`` in milliseconds.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import drf_spectacular_sidecar
from playwright.sync_api import sync_playwright

from tests.browser.conftest import CHROMIUM

DIST = (
    Path(drf_spectacular_sidecar.__file__).parent / "static/drf_spectacular_sidecar/swagger-ui-dist"
)
FILES = ("swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css")
START = (
    'SwaggerUIBundle({spec: {openapi: "3.0.3", info: {title: "t", version: "1"}, paths: {}},'
    ' dom_id: "#swagger-ui", presets: [SwaggerUIBundle.presets.apis], layout: "BaseLayout"});'
)


def _page(preset: bool) -> str:
    extra = '<script src="swagger-ui-standalone-preset.js"></script>' if preset else ""
    return (
        '<!DOCTYPE html><html><head><link rel="stylesheet" href="swagger-ui.css"></head>'
        '<body><div id="swagger-ui"></div><script src="swagger-ui-bundle.js"></script>'
        f"{extra}<script>{START}</script></body></html>"
    )


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no line per request
        pass


def main(rounds: int) -> None:
    """Print the median and fastest load of each page over ``rounds`` alternated visits."""
    with tempfile.TemporaryDirectory() as root:
        for name in FILES:
            shutil.copy(DIST / name, root)
        pages = {"with the preset": "with.html", "without it": "without.html"}
        Path(root, "with.html").write_text(_page(True))
        Path(root, "without.html").write_text(_page(False))
        server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=root))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        loads: dict[str, list[float]] = {label: [] for label in pages}
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
                )
                for i in range(rounds):
                    # Alternate which page goes first, so neither always follows the other.
                    labels = list(pages) if i % 2 else list(reversed(pages))
                    for label in labels:
                        context = browser.new_context()
                        page = context.new_page()
                        page.goto(f"{base}/{pages[label]}", wait_until="load")
                        loads[label].append(
                            page.evaluate(
                                "performance.getEntriesByType('navigation')[0].loadEventEnd"
                            )
                        )
                        context.close()
                browser.close()
        finally:
            server.shutdown()
    for label, times in loads.items():
        print(f"{label}: median {statistics.median(times):.1f} ms, fastest {min(times):.1f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 21)
