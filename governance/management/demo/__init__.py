"""The pieces of ``manage.py load_demo``: the Philly budget tree and its shares (``tree``), the
demo accounts and their roles (``accounts``), and the demo's approval requests (``requests``)."""
