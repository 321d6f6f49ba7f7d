"""JSON Schema of a KAI Scheduler ``Queue`` (``scheduling.run.ai/v2``), written for our tests.

Written from KAI Scheduler's own definition at commit 72de64fc (2026-03-07, after v0.12.17;
github.com/NVIDIA/KAI-Scheduler), not copied from it:

- ``pkg/apis/scheduling/v2/queue_types.go`` — ``QueueSpec``: ``displayName``, ``parentQueue``,
  ``resources``, ``priority`` (int, default 100), ``preemptMinRuntime`` and
  ``reclaimMinRuntime`` (``metav1.Duration``: a Go duration string such as ``1h30m``);
- ``pkg/apis/scheduling/v2/resources.go`` — ``QueueResources`` ``gpu``/``cpu``/``memory``,
  each a ``QueueResource`` of ``quota``, ``overQuotaWeight``, ``limit`` (float64);
- ``deployments/kai-scheduler/crds/scheduling.run.ai_queues.yaml`` — the served version
  ``v2``, cluster scope, and the OpenAPI types (``number`` for the three resource fields,
  ``integer`` for priority, ``string`` for the durations);
- ``docs/queues/README.md`` — ``-1`` means unlimited for quota and limit, 0 or unset means
  none; GPU in units (fractions allowed), the over-quota weight an integer;
- ``pkg/apis/scheduling/v2/queue_webhook.go`` — the admission webhook refuses a queue
  without ``spec.resources``.

Stricter than the CRD on purpose: the CRD is structural, so Kubernetes silently *prunes* an
unknown field (a typo would vanish without an error); here unknown fields are refused.
Metadata follows Kubernetes: the name of a cluster-scoped object is a DNS-1123 label here
(KAI uses it as a label value in its metrics), labels and annotations are string maps.
"""

from __future__ import annotations

# A Go time.ParseDuration string as metav1.Duration accepts it (units h, m, s, ms, us, ns).
GO_DURATION = r"^([0-9]+(\.[0-9]+)?(h|m|s|ms|us|µs|ns))+$|^0$"
DNS_1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

QUEUE_RESOURCE = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        # -1 = unlimited; 0 = none; otherwise an amount (GPUs may be fractional).
        "quota": {"type": "number", "minimum": -1},
        "overQuotaWeight": {"type": "integer", "minimum": 0},
        "limit": {"type": "number", "minimum": -1},
    },
}

QUEUE_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "KAI Scheduler Queue (scheduling.run.ai/v2)",
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "scheduling.run.ai/v2"},
        "kind": {"const": "Queue"},
        "metadata": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "maxLength": 63, "pattern": DNS_1123_LABEL},
                "labels": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "string",
                        "maxLength": 63,
                        "pattern": r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$",
                    },
                },
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["resources"],  # queue_webhook.go: "resources must be specified"
            "properties": {
                "displayName": {"type": "string"},
                "parentQueue": {"type": "string", "pattern": DNS_1123_LABEL},
                "priority": {"type": "integer"},
                "preemptMinRuntime": {"type": "string", "pattern": GO_DURATION},
                "reclaimMinRuntime": {"type": "string", "pattern": GO_DURATION},
                "resources": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "gpu": QUEUE_RESOURCE,
                        "cpu": QUEUE_RESOURCE,
                        "memory": QUEUE_RESOURCE,
                    },
                },
            },
        },
    },
}
