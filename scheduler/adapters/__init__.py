"""Adapters that let a site keep its own cluster scheduler and govern it from the budget tree.

``slurm``: associations, QOS and ``sacct`` usage. ``kai``: KAI Scheduler queues on Kubernetes
and usage read back from Prometheus. See docs/slurm.md and docs/kubernetes.md.
"""
