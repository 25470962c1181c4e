import pathlib

from harness.testbeds import cpu

DATA = pathlib.Path(__file__).parents[1] / "data"


def test_parse_real_proc_stat_and_busy_share():
    a = cpu.parse_proc_stat((DATA / "proc_stat_a.txt").read_text())
    b = cpu.parse_proc_stat((DATA / "proc_stat_b.txt").read_text())
    fields = [int(x) for x in (DATA / "proc_stat_a.txt").read_text().split("\n")[0].split()[1:]]
    assert a.busy == fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
    assert a.total == a.busy + fields[3] + fields[4]
    assert b.total > a.total
    pct = cpu.busy_pct(a, b)
    assert 0.0 <= pct <= 100.0


def test_busy_pct_counts_softirq_as_busy():
    a = cpu.parse_proc_stat("cpu  0 0 0 100 0 0 0 0 0 0\n")
    b = cpu.parse_proc_stat("cpu  10 0 10 150 0 0 30 0 0 0\n")
    assert cpu.busy_pct(a, b) == 50.0
