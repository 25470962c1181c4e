"""Run chosen tests N times in a row while CPU hogs keep every CPU busy; count the runs.

    .venv/bin/python tests/soak.py -n 30 tests/lab/test_compare_lab.py
    .venv/bin/python tests/soak.py -n 30 -- --durations=0 -k drop tests/lab/test_faults.py
    make soak TESTS="tests/lab/test_gate_lab.py tests/lab/test_killed.py" N=30

A test whose outcome could depend on timing or on a measured number is proven here:
each round is one `pytest` of the selection in a fresh process, beside one busy-loop
process per CPU (the hogs run at the tests' own priority, so the tests get about half
the machine). Every round runs, whatever the one before did: a failure is a finding to
read, never a reason to try again. Each round's output is kept under the log directory;
the last line is `N passed, M failed` (rounds), and the exit code is 1 if any failed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import pathlib
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _spin() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the parent stops the hogs
    while True:
        pass


def _default_sigint() -> None:
    """The tests get SIGINT's default action, as at a terminal: a soak started in the
    background by a script inherits SIGINT ignored, and the tests that interrupt a run
    with it would then see it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_hogs(n: int) -> list[multiprocessing.Process]:
    hogs = [multiprocessing.Process(target=_spin, daemon=True, name=f"soak-hog-{i}") for i in range(n)]
    for h in hogs:
        h.start()
    return hogs


def stop_hogs(hogs: list[multiprocessing.Process]) -> None:
    for h in hogs:
        h.kill()
    for h in hogs:
        h.join(timeout=10)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="soak", description="Rerun chosen tests N times under a CPU hog and count the rounds "
                                 "(every round runs; a failure is reported, never retried).")
    p.add_argument("tests", nargs="+", help="pytest arguments: files and node ids; after `--`, options "
                                            "too (-k EXPR, --durations=0)")
    p.add_argument("-n", "--rounds", type=int, default=30, help="rounds (default 30)")
    p.add_argument("--hogs", type=int, default=os.cpu_count() or 1,
                   help="busy-loop processes beside the tests (default: one per CPU; 0: none)")
    p.add_argument("--logs", default=None, metavar="DIR",
                   help="where each round's output goes (default results/soak-<UTC time>)")
    a = p.parse_args(argv)
    if a.rounds < 1 or a.hogs < 0:
        p.error("--rounds must be at least 1 and --hogs at least 0")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    logs = pathlib.Path(a.logs or ROOT / "results" / time.strftime("soak-%Y%m%dT%H%M%SZ", time.gmtime()))
    logs.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *a.tests]
    print(f"soak: {a.rounds} rounds of: {' '.join(a.tests)}; {a.hogs} CPU hog(s); logs in {logs}", flush=True)
    hogs = start_hogs(a.hogs)
    passed, failed = 0, []
    try:
        for i in range(1, a.rounds + 1):
            t0 = time.monotonic()
            out = logs / f"round-{i:03d}.log"
            with out.open("w") as f:
                rc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                    preexec_fn=_default_sigint).returncode
            took = time.monotonic() - t0
            last = (out.read_text().strip().splitlines() or ["(no output)"])[-1]
            if rc == 0:
                passed += 1
            else:
                failed.append(i)
            print(f"round {i}/{a.rounds}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {took:.0f} s: {last}",
                  flush=True)
    except KeyboardInterrupt:
        print(f"soak: interrupted after {passed + len(failed)} rounds", flush=True)
        return 130
    finally:
        stop_hogs(hogs)
    if failed:
        print(f"failed rounds: {', '.join(map(str, failed))} (their output: {logs}/round-NNN.log)")
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
