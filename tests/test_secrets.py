"""Sleeve keys never leave the hosts' key files: not in logs, run.json, raw/, reports or the
terminal; and the key files are gone from hosts and orchestrator when a deployment ends."""

import base64
import logging

import pytest

from conftest import needs_root
from harness import results, scenario as S
from harness.modes import sleeve as sleeve_mod
from harness.report import render
from harness.runner import Runner

pytestmark = [needs_root(), pytest.mark.lab]
KEY = bytes(range(0x40, 0x60))       # 32 bytes nobody else would choose


def _forms(key: bytes) -> list[str]:
    return [key.hex(), key.hex().upper(), base64.b64encode(key).decode(), base64.urlsafe_b64encode(key).decode(),
            base64.b64encode(key).decode().rstrip("=")]


def test_the_sleeve_key_appears_nowhere_and_its_files_go_with_the_deployment(lab, tmp_path, monkeypatch,
                                                                           caplog, capsys):
    monkeypatch.setattr(sleeve_mod.secrets, "token_bytes", lambda n: KEY[:n])
    caplog.set_level(logging.DEBUG)
    sc = S.build({"matrix": {"modes": ["sleeve-crypto"], "tests": ["iperf3.tcp", "ping.flood"], "repeats": 1,
                             "duration": 1, "placements": ["container-container"]}})
    store = results.RunStore.create(tmp_path / "results", {"scenario": sc.to_dict()})
    Runner(sc, lab, store).run(S.expand(sc))
    recs = store.records()
    assert recs and all(r["ok"] for r in recs), [r for r in recs if not r["ok"]]
    report = render.render([store.path], tmp_path / "report.html")

    texts = {"log": caplog.text, "terminal": "".join(capsys.readouterr())}
    for f in [*store.path.rglob("*"), report]:
        if f.is_file():
            texts[str(f)] = f.read_bytes().decode(errors="replace")
    assert len(texts) > 5
    for where, text in texts.items():
        for form in _forms(KEY):
            assert form not in text, f"the key ({form[:8]}…) is in {where}"
    # The deployment is over: no key file on either host nor on this machine.
    left = [p for p in lab.state_dir.rglob("*") if "key" in p.name]
    assert left == [], left
    for s in lab.sides:
        assert s.host.run(["test", "-e", sleeve_mod.Sleeve.key_path(s)], check=False).returncode != 0
