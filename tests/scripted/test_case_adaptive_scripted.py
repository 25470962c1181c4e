"""An adaptive tool (run/case.py, Tool.next_phase): the NDR search udp.ndr64 runs each trial
its search picks from the trials before, against one receiver, and records the result.
ScriptedHosts answer with real blast lines (tests/data/blast_paced.out) set to a path of
known capacity; no root."""

from __future__ import annotations

import json
import os

import pytest
from captures import capture
from scripted_fixtures import runner_testbed

from harness import results
from harness.hosts.scripted import ScriptedProcess
from harness.run import scenario as S
from harness.run.runner import Runner
from harness.tools import TOOLS, search
from harness.tools.base import TestSpec

CAPACITY = 300_000      # packets/s the fake path carries
UNPACED = 1_000_000     # what the sender manages unpaced


@pytest.fixture
def tb(tmp_path, monkeypatch):
    fake = tmp_path / "blast"
    fake.write_text("#!/bin/sh\nexit 1\n")
    os.chmod(fake, 0o755)
    monkeypatch.setenv("OVERLAYBENCH_BLAST_BINARY", str(fake))
    return runner_testbed(tmp_path, monkeypatch)


def line(asked: float) -> str:
    doc = json.loads(capture("blast_paced")[0])
    sent = UNPACED if asked == 0 else int(asked)
    doc.update(asked_pps=asked, sent=sent, seconds=1.0)
    doc["receiver"]["packets"] = min(sent, CAPACITY)
    return json.dumps(doc) + "\n"


def test_each_trial_follows_from_the_last_and_the_result_is_recorded(tb, tmp_path):
    tool = TOOLS["udp.ndr64"]
    h0, h1 = tb.sides[0].host, tb.sides[1].host
    spec = TestSpec(server_addr="198.18.0.2", duration=1, overlay_mtu=1500, port=9000)
    server = ScriptedProcess.runs()
    h1.expect_start(" ".join(tool.server_argv(spec)), server)
    h1.expect(["ss", "-Hlun", "sport = :9000"], stdout="UNCONN 0 0 *:9000 *:*\n")
    trials: list[search.Trial] = []
    while isinstance(step := search.plan(trials, tool.settings), search.Next):   # what the search will ask
        argv = tool._trial(spec, len(trials), step.rate).argv
        h0.expect_start(" ".join(argv), ScriptedProcess.exits(0, line(step.rate)))
        sent = UNPACED if step.rate == 0 else int(step.rate)          # as line() has it
        trials.append(search.Trial(step.rate, sent, max(0, sent - CAPACITY) / sent, step.validation))
    sc = S.build({"matrix": {"modes": ["native"], "tests": ["udp.ndr64"], "repeats": 1, "duration": 1,
                             "placements": ["host-host"]}})
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    Runner(sc, tb, store).run(S.expand(sc))
    tb.assert_all_used()
    got = {r["metric"]: r["value"] for r in store.records()}
    assert all(r["ok"] for r in store.records())
    assert got["trials"] == len(trials) >= 3 and got["validated"] == 1 and got["sender_bound"] == 0
    assert CAPACITY * 0.98 <= got["ndr_pps"] <= CAPACITY
    assert not any(m.startswith("cpu_") for m in got), "no CPU figure spans a search"
    raw = sorted(p.name for p in (store.path / "raw").iterdir())
    assert sum(n.endswith(".client.out") for n in raw) == len(trials)
    assert server.stopped
