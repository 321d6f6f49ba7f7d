"""HTTPS, cookies and headers a browser enforces, and the Content Security Policy."""

from __future__ import annotations

from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE

from governance.settings.core import DEBUG
from governance.settings.environment import env_bool, env_int

# --- Security (effective whenever DEBUG=false) -----------------------------------------
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"

# --- Content Security Policy (django-csp 4; tests/governance/web_security/) --------------------
# Everything comes from our own origin: no CDN (Plotly and Swagger UI are served from static).
# Scripts: our files only, plus a per-response nonce for any inline <script> a template needs
# (``request.csp_nonce``); the pages have none today, and the json_script data blocks are not
# executed, so CSP does not apply to them.
# No 'unsafe-eval': the figures are SVG traces (bar, scatter, sunburst), and Plotly only
# compiles code at run time for its WebGL traces (regl), which we do not use; the browser test
# loads every page with a plot and fails on any CSP violation, so a figure that needed eval
# would be caught there.
# style-src needs 'unsafe-inline': Plotly injects a <style> element with its rules and writes
# style attributes into the SVG it builds, and the templates size meters with style attributes.
# Inline styles cannot run code; scripts stay strict. (A style nonce would not help: Plotly's
# injected <style> carries none, and a nonce in style-src disables 'unsafe-inline'.)
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],  # Swagger UI and Plotly's mode bar draw icons as data: URIs
        "font-src": [SELF],
        "connect-src": [SELF],  # htmx/poll.js fetch our own pages
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
