"""The local node agent: an executor that runs workloads as processes on one multi-GPU host.

It talks to the server over HTTP only (``client``), runs and stops processes (``runner``) and
ties the two together in a polling loop (``loop``). Nothing here imports Django or the ORM, so
the agent runs on a machine without the database: ``python -m scheduler.agent --server … ``.
``python manage.py run_agent`` is the same loop started from a Django checkout.
"""
