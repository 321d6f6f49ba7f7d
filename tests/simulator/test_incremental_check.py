"""``tests.bench.incremental_check`` compares whole replays cycle by cycle and says where the
incremental engine and the full recomputation first part."""

from tests.bench import incremental_check


def test_the_first_philly_jobs_are_decided_alike_on_both_paths(capsys):
    incremental_check.main(["fairshare:64:400"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("fairshare:64:400: ")
    counts = out[0].split(": ")[1].split(" cycles")[0].split(" / ")
    assert counts[0] == counts[1] and int(counts[0].replace(",", "")) > 0
    assert out[1] == "  same"
