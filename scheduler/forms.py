"""Forms of the scheduler's pages: submit a workload, ask for a simulation.

Thin: they parse what a person typed into the types the services take. The services
validate the request itself (the same rules as the API) and name the field they refuse.
"""

from __future__ import annotations

import json
import shlex

from django import forms

from governance.api.parsers import MAX_JSON_DEPTH, json_refusal
from scheduler.engine import POLICIES
from scheduler.services.simulations import MAX_UPLOAD_BYTES, PHILLY_DEFAULTS

POLICY_HELP = {
    "fairshare": "fair share (budgets, 7-day window)",
    "quota": "quota",
    "partition": "fixed partitions",
    "fifo": "first in, first out",
}


class WorkloadSubmitForm(forms.Form):
    """A workload as a researcher types it; minutes instead of seconds, a command line."""

    project = forms.TypedChoiceField(coerce=int, choices=())
    cluster = forms.TypedChoiceField(coerce=int, choices=())
    name = forms.CharField(max_length=200)
    gpus = forms.IntegerField(label="GPUs", min_value=1, initial=1)
    nodes = forms.IntegerField(
        min_value=1, initial=1, help_text="More than 1: a gang of whole nodes."
    )
    min_runtime_minutes = forms.IntegerField(
        label="Minimum runtime (minutes)",
        min_value=0,
        max_value=480,
        initial=30,
        help_text="Protected from preemption this long in each run; 0 = free lane.",
    )
    declared_duration_minutes = forms.IntegerField(
        label="Expected duration (minutes)",
        min_value=1,
        required=False,
        help_text="Optional; used for the estimated start of the work queued behind it.",
    )
    resumable = forms.BooleanField(required=False, initial=True, label="Resumable")
    command = forms.CharField(
        max_length=2000, help_text="What to run, e.g. <code>python train.py --epochs 3</code>."
    )

    def __init__(self, *args, projects=(), clusters=(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["project"].choices = [(p.pk, str(p)) for p in projects]
        self.fields["cluster"].choices = [(c.pk, c.name) for c in clusters]

    def clean_command(self) -> list[str]:
        try:
            argv = shlex.split(self.cleaned_data["command"])
        except ValueError as exc:
            raise forms.ValidationError(f"Cannot read the command line: {exc}.") from exc
        if not argv:
            raise forms.ValidationError("Give a command to run.")
        return argv


# A sweep file holds at most 1,000 workloads; 1 MB leaves each about 1 KB.
MAX_SWEEP_BYTES = 1_000_000


class SweepUploadForm(forms.Form):
    """A sweep as a JSON file in the API's bulk shape: ``{"workloads": [...]}`` or the list."""

    sweep_file = forms.FileField(
        label="Sweep file (JSON)",
        help_text=(
            "Up to 1,000 workloads as in <code>POST /api/workloads/bulk/</code>: "
            '<code>{"workloads": [{"project": "detection", "gpus": 1, '
            '"min_runtime_seconds": 900, "launch_spec": {"command": ["python", "train.py", '
            '"--lr", "0.01"]}}, ...]}</code>; at most 1 MB. All are queued or none.'
        ),
    )

    def clean_sweep_file(self) -> dict:
        upload = self.cleaned_data["sweep_file"]
        if upload.size > MAX_SWEEP_BYTES:
            raise forms.ValidationError(f"The file is over {MAX_SWEEP_BYTES // 1_000_000} MB.")
        try:
            data = json.loads(upload.read().decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise forms.ValidationError(f"The file is not JSON in UTF-8: {exc}.") from None
        except RecursionError:
            raise forms.ValidationError(
                f"JSON nested more than {MAX_JSON_DEPTH} levels deep."
            ) from None
        refusal = json_refusal(data)
        if refusal is not None:
            raise forms.ValidationError(refusal)
        return {"workloads": data} if isinstance(data, list) else data


class SimulationForm(forms.Form):
    """The simulator page: trace, cluster shape, budgets, policies and the time window."""

    trace_source = forms.ChoiceField(
        label="Trace",
        choices=[
            ("philly", "Bundled Microsoft Philly trace (82,247 jobs, 109 days)"),
            ("upload", "Upload a CSV in the canonical format"),
        ],
        initial="philly",
        widget=forms.RadioSelect,
    )
    trace_file = forms.FileField(
        required=False,
        label="Trace file",
        help_text=(
            "Header <code>id,submit_time,duration_s,gpus,project,min_runtime_s,resumable</code>; "
            f"at most {MAX_UPLOAD_BYTES // 1_000_000} MB (plain or gzipped)."
        ),
    )
    gpus = forms.IntegerField(label="Cluster GPUs", min_value=1, initial=PHILLY_DEFAULTS["gpus"])
    gpus_per_node = forms.IntegerField(
        label="GPUs per node", min_value=1, initial=PHILLY_DEFAULTS["gpus_per_node"]
    )
    budgets = forms.ChoiceField(
        choices=[
            ("proportional", "Proportional to each team's GPU-hours in the trace"),
            ("live", "The live budget tree of a cluster (trace teams matched by project slug)"),
        ],
        initial="proportional",
        widget=forms.RadioSelect,
    )
    cluster = forms.TypedChoiceField(
        coerce=int, required=False, choices=(), label="Cluster (for the live tree)"
    )
    policies = forms.MultipleChoiceField(
        label="Policies to compare",
        choices=[(p, POLICY_HELP.get(p, p)) for p in POLICIES],
        initial=list(POLICIES),
        widget=forms.CheckboxSelectMultiple,
        help_text="Each is one replay of the same trace; two weeks of Philly take 10 to 30 s each.",
    )
    wake_at_timers = forms.BooleanField(
        required=False,
        initial=False,
        label="Cycle when a wait the engine keeps ends, as the live loop does",
        help_text=(
            "The live loop runs a cycle every 5 s, so a debug workload's patience or a gang's "
            "wait for held nodes ends on time. The replay otherwise cycles at each event and "
            "at most every 16 minutes while nothing changes (the tables in the documentation "
            "are made so): with this, closer to the live loop, for a few percent more cycles."
        ),
    )
    start_day = forms.FloatField(
        label="Start (days after the first job)",
        min_value=0,
        required=False,
        initial=PHILLY_DEFAULTS["start_day"],
    )
    days = forms.FloatField(
        label="Length (days of submissions)",
        min_value=0.01,
        required=False,
        initial=PHILLY_DEFAULTS["days"],
        help_text="Leave both empty for the whole trace: about a minute or more per policy.",
    )

    def __init__(self, *args, clusters=(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["cluster"].choices = [("", "—")] + [(c.pk, c.name) for c in clusters]
