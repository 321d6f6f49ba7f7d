"""Executors that run inside the server: the simulated executor and the demo replay.

``simulated.py`` plays the node agents of the simulated clusters: it heartbeats their nodes,
acknowledges their orders and reports each run's exit once its declared duration has passed
in accelerated time. ``demo.py`` submits the bundled Philly trace's jobs into the demo
organization at the same speed-up, so ``make run`` shows a live cluster moving. ``tasks.py``
holds the Celery task that drives both (one beat entry). ``utilization_model.py`` is the
deterministic rule of how busy the simulated workloads keep their GPUs, and
``simulated_utilization.py`` reports it like an agent (and writes it into
``demo_history.py``'s past). Real machines use the node agent (``scheduler/agent``) instead;
both speak through the same services.
"""
