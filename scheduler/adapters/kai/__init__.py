"""KAI Scheduler adapter: the budget tree as KAI ``Queue`` resources, usage back from Prometheus.

- ``queues``: pure generation (tree in, queues out; rounding, weights, names) — no Django.
- ``names``: DNS-1123 queue names, collisions refused.
- ``tree``: reads a cluster's tree and shares from the database for ``queues``.
- ``output``: YAML for ``kubectl apply -f`` (one stream, or one file per queue).
- ``prometheus`` and ``usage``: allocated GPUs per queue read from Prometheus and charged to
  the usage ledger.

Commands: ``manage.py kai_queues`` and ``manage.py kai_import_usage``; see docs/kubernetes.md.
"""
