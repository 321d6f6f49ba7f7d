"""Web security, one module per subject: deploy checks, CSRF on every form, secure cookies and HSTS, the Content
Security Policy header, sign-in throttling, and safe trace uploads.

Production settings are read in a subprocess (``production.py``: ``governance/settings/`` reads the environment
once, at import): ``DEBUG=false`` with a real secret key and host names. The browser half of
the CSP (pages with Plotly draw under it, no violation) is ``tests/browser/test_csp.py``.
"""
