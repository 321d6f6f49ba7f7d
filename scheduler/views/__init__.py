"""Browser pages of the live scheduler: the nodes of a cluster (with operator actions), the
workloads a user may see ("My queue": state, place in the fair-share order, the engine's
reason, minimum-runtime protection, preemptions, estimated start; a submit form) and the
simulator (managers and org admins replay a trace in the background).

Thin: objects come through the visibility selector (hidden ones are 404s), changes go
through the services, and the pages refresh themselves every few seconds so a running
cluster is seen moving (``?live=0`` stops it). The workload and simulation pages refresh only
their live part (``static/js/poll.js``), so a half-typed form survives.

One module per page group; the URLs take every view from here.
"""

from scheduler.views.nodes import node_action, node_detail, nodes
from scheduler.views.simulations import simulation_create, simulation_detail, simulator
from scheduler.views.workloads import (
    workload_cancel_view,
    workload_detail,
    workload_submit_view,
    workloads,
)

__all__ = [
    "node_action",
    "node_detail",
    "nodes",
    "simulation_create",
    "simulation_detail",
    "simulator",
    "workload_cancel_view",
    "workload_detail",
    "workload_submit_view",
    "workloads",
]
