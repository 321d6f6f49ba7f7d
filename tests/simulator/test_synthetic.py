"""The synthetic variant of a trace (a second opinion on a policy): its documented rules."""

from __future__ import annotations

from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from scheduler.simulator.synthetic import VariantRules, copies, variant, write_canonical
from scheduler.simulator.traces import Trace, TraceJob, load_trace, read_trace

DAY = 86400.0


def small_trace():
    """Three days of one-node jobs from two original teams, every 30 minutes."""
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for i in range(3 * 48):
        gpus = 8 if i % 3 == 0 else 1
        team = "aaa" if i % 2 else "bbb"
        minute = i * 30
        stamp = f"2017-10-{1 + minute // 1440:02d} {minute % 1440 // 60:02d}:{minute % 60:02d}:00"
        rows.append(f"{stamp},3600,{gpus},{3600 * gpus},{team}")
    return read_trace("\n".join(rows), "philly")


def test_the_same_seed_gives_the_same_trace_and_another_seed_another():
    trace = small_trace()
    first, again = variant(trace), variant(trace)
    assert [(j.submit_time, j.gpus, j.project) for j in first.jobs] == [
        (j.submit_time, j.gpus, j.project) for j in again.jobs
    ]
    other = variant(trace, VariantRules(seed=7))
    assert [j.project for j in other.jobs] != [j.project for j in first.jobs]


def test_jobs_keep_their_times_and_bursts_are_added_each_day():
    trace = small_trace()
    made = variant(trace, VariantRules(burst_jobs=10))
    originals = [j for j in made.jobs if j.duration == 3600]
    assert sorted(j.submit_time for j in originals) == sorted(j.submit_time for j in trace.jobs)
    bursts = [j for j in made.jobs if j.duration != 3600]
    assert all(j.gpus == 1 and 300 <= j.duration <= 1800 for j in bursts)
    days = Counter(int((j.submit_time - trace.start) // DAY) for j in bursts)
    assert len(days) >= 2  # a burst on each full day the trace covers
    assert all(trace.start <= j.submit_time <= trace.last_submit for j in made.jobs)


def test_one_node_jobs_become_gangs_in_the_stated_proportion():
    jobs = [TraceJob(f"j{i}", float(i), 60.0, 8, "t") for i in range(4000)]
    trace = Trace(jobs=jobs, format="philly", projects=["t"])
    made = variant(trace, VariantRules(burst_jobs=0))
    sizes = Counter(j.gpus for j in made.jobs)
    assert sizes[16] / len(jobs) == pytest.approx(0.15, abs=0.03)
    assert sizes[32] / len(jobs) == pytest.approx(0.05, abs=0.02)
    assert sizes[8] + sizes[16] + sizes[32] == len(jobs)


def test_teams_follow_the_weights_and_an_hour_of_one_team_stays_together():
    trace = small_trace()
    made = variant(trace, VariantRules(team_weights=(1, 1, 1), burst_jobs=0))
    assert set(made.projects) <= {"team1", "team2", "team3"}
    by_hour: dict[tuple[str, int], set[str]] = {}
    for original, new in zip(trace.jobs, made.jobs, strict=True):
        key = (original.project, int(original.submit_time // 3600))
        by_hour.setdefault(key, set()).add(new.project)
    assert all(len(teams) == 1 for teams in by_hour.values())


def test_the_written_csv_replays_as_a_canonical_trace(tmp_path):
    made = variant(small_trace())
    path = write_canonical(made, tmp_path / "variant.csv")
    back = load_trace(path, "canonical")
    assert len(back.jobs) == len(made.jobs)
    assert Counter(j.project for j in back.jobs) == Counter(j.project for j in made.jobs)


def test_the_command_names_a_bad_seed_and_writes_nothing(tmp_path):
    out = tmp_path / "v.csv"
    with pytest.raises(CommandError, match="--seed: 'x' is not a whole number"):
        call_command("trace_variant", "--trace", "nowhere.csv", "--seed", "x", "--out", str(out))
    assert not out.exists()


def test_copies_lay_variants_back_to_back_with_their_own_seeds():
    trace = small_trace()
    one = variant(trace, VariantRules(burst_jobs=5))
    three = copies(trace, 3, VariantRules(burst_jobs=5))
    span = trace.last_submit - trace.start + DAY
    assert len(three.jobs) == sum(
        len(variant(trace, VariantRules(seed=2026 + k, burst_jobs=5)).jobs) for k in range(3)
    )
    first = [j for j in three.jobs if j.submit_time < trace.start + span]
    assert [(j.submit_time, j.gpus, j.project) for j in first] == [
        (j.submit_time, j.gpus, j.project) for j in one.jobs
    ]
    third = [j for j in three.jobs if j.submit_time >= trace.start + 2 * span]
    assert min(j.submit_time for j in third) >= trace.start + 2 * span
    assert len({j.id for j in three.jobs}) == len(three.jobs)
    assert [j.submit_time for j in three.jobs] == sorted(j.submit_time for j in three.jobs)


def test_the_command_refuses_a_bad_number_of_copies(tmp_path):
    out = tmp_path / "v.csv"
    source = tmp_path / "s.csv"
    write_canonical(small_trace(), source)
    for bad in ("0", "-2", "many"):
        with pytest.raises(CommandError, match="--copies"):
            call_command("trace_variant", trace=str(source), copies=bad, out=str(out))
    assert not out.exists()
