"""REST API of the scheduler: researchers' workloads, operators' nodes, node agents' protocol.

- ``views.py``: workloads (submit, cancel, list, detail), nodes (list, drain, undrain, mark
  down) and node agents (create a token) — user endpoints, user tokens or sessions only;
- ``agent.py``: the node agent protocol (register, heartbeat, orders, acks, exits) — agent
  tokens only (``authentication.py``); a user's token is refused there and vice versa.
Routes: ``scheduler/api_urls.py``.
"""
