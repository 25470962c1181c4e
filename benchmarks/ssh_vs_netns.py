"""The quick scenario on the lab (--backend netns) and, back to back, over SSH (--backend ssh)
into the same two host namespaces, each running a real sshd (one host as root, one through
sudo): the ratios side by side, and each run's wall time over the sum of its tests' durations.

    .venv/bin/python benchmarks/ssh_vs_netns.py [--repeats N] [--duration S]

Needs root. Prints a markdown table for BENCHMARKS.md; removes what it made on every path.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "lab")]

from test_testbed_ssh import SshLab  # noqa: E402

from harness import results  # noqa: E402


def run(args: list[str], env=None) -> tuple[pathlib.Path, float]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", *args], cwd=ROOT, capture_output=True,
                       text=True, env=env)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"run failed ({p.returncode}): {p.stderr[-2000:]}")
    return pathlib.Path(p.stdout.splitlines()[0]), wall


def medians(run_dir: pathlib.Path) -> dict:
    df = results.load(run_dir)
    ok = df[df["ok"] & df["metric"].isin(["throughput_bps", "latency_us"])]
    return ok.groupby(["mode", "underlay_mtu", "placement", "test", "metric"])["value"].median().to_dict()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--duration", type=float, default=3)
    a = ap.parse_args()
    flags = [str(ROOT / "scenarios" / "quick.toml"), "--repeats", str(a.repeats), "--duration", str(a.duration), "-q"]
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="obsshlab-"))
    sl = SshLab(tmp)
    # Both "machines" share this kernel's scheduler: without autogroups for both runs, as
    # tests/lab/test_testbed_ssh.py explains (over SSH a host's processes share a session).
    knob = pathlib.Path("/proc/sys/kernel/sched_autogroup_enabled")
    was = knob.read_text().strip() if knob.exists() else None
    if was is not None:
        knob.write_text("0")
    try:
        inv = sl.inventory(extra={0: "manage_underlay = true\n", 1: "manage_underlay = true\n"})
        lab_dir, lab_wall = run([*flags, "--results", str(ROOT / "results")])
        sl.bare()
        ssh_dir, ssh_wall = run([*flags, "--inventory", inv, "--results", str(ROOT / "results")], env=sl.env())
    finally:
        if was is not None:
            knob.write_text(was)
        sl.close()
        shutil.rmtree(tmp, ignore_errors=True)
    ma, mb = medians(lab_dir), medians(ssh_dir)
    n = len({(r["case"], r["repeat"]) for r in results.read_records(lab_dir)})
    tests = n * a.duration
    print(f"netns run {lab_dir.name}, ssh run {ssh_dir.name}; {n} cases of {a.duration:g} s each\n")
    print("| mode / reference | underlay MTU | placement | test | netns ratio | ssh ratio | ssh / netns |")
    print("|---|---|---|---|---|---|---|")
    for (mode, u, pl, test, metric), v in sorted(ma.items()):
        if mode == "native":
            continue
        ref = "native" if mode == "fastdp" else "fastdp"
        rp = "host-host" if ref == "native" else pl
        la = v / ma[(ref, u, rp, test, metric)]
        lb = mb[(mode, u, pl, test, metric)] / mb[(ref, u, rp, test, metric)]
        print(f"| {mode} / {ref} | {u} | {pl} | {test} ({metric}) | {la:.2f} | {lb:.2f} | {lb / la:.2f} |")
    print(f"\nwall time / sum of test durations: netns {lab_wall / tests:.3f} ({lab_wall:.0f} s), "
          f"ssh {ssh_wall / tests:.3f} ({ssh_wall:.0f} s); ssh costs {(ssh_wall / lab_wall - 1) * 100:+.1f} %")


if __name__ == "__main__":
    main()
