"""udp.ndrN and udp.pdrN: the highest packet rate of N-byte UDP payloads a path carries
without loss (NDR) or within a loss ratio (PDR, 0.5 % by default), found by trials of blast
at chosen rates (tools/search.py) against one receiver.

The case runs adaptively (Tool.next_phase): trial 01 unpaced, each later one at the rate the
search picks from all the trials before it (the same rate again while its trials' vote is
open), each for the scenario's duration, the last ones a validation's at the result. Per
run: `ndr_pps`/`pdr_pps` (0 when no rate passed), the same in bits/s of UDP payload
(`ndr_bps`/`pdr_bps`), `trials`, `validated` (1: the validation's vote confirmed the rate),
`sender_bound` (1: the sender, not the path, set it), and per trial `trialNN_offered_pps`
(0: unpaced), `trialNN_sent_pps`, `trialNN_loss_pct`.
"""

from __future__ import annotations

import dataclasses

from harness.core.samples import Sample
from harness.sleeve import blast as blast_build
from harness.tools import search
from harness.tools.base import Phase, PhaseOutput, TestSpec, ToolResult
from harness.tools.blast import MAX_PAYLOAD, MIN_PAYLOAD, Blast, last_json, parse_send, send_argv
from harness.tools.common import failed

TRIAL_MARGIN = 15.0           # a trial's timeout past its duration (the report's ask, a loaded machine)


def trial_name(i: int) -> str:
    return f"trial{i + 1:02d}"


def trials_of(outputs: list[PhaseOutput], settings: search.Settings) -> tuple[list[search.Trial], str | None]:
    """The trials the outputs hold, each marked a validation where the search asked for one;
    the first failed trial's reason (None: all parsed)."""
    trials: list[search.Trial] = []
    for out in outputs:
        res = parse_send(out.stdout, out.stderr, out.returncode)
        if not res.ok:
            return trials, f"{out.name}: {res.error}"
        got = {s.metric: s.value for s in res.samples}
        doc = last_json(out.stdout, "send") or {}
        step = search.plan(trials, settings)
        trials.append(search.Trial(asked=float(doc.get("asked_pps", 0.0)), sent=got["sent_pps"],
                                   loss=got["loss_pct"] / 100,
                                   validation=isinstance(step, search.Next) and step.validation))
    return trials, None


class BlastSearch(Blast):
    """The search of `kind` ("ndr" or "pdr") for `size`-byte payloads."""

    adaptive = True

    def __init__(self, kind: str, size: int, settings: search.Settings | None = None,
                 locate=blast_build.local_binary):
        super().__init__(locate)
        if kind not in ("ndr", "pdr"):
            raise ValueError(f"a search is ndr or pdr, not {kind!r}")
        if not MIN_PAYLOAD <= size <= MAX_PAYLOAD:
            raise ValueError(f"blast payload must be {MIN_PAYLOAD}..{MAX_PAYLOAD} bytes, not {size}")
        self.kind, self.payload = kind, size
        self.name = f"udp.{kind}{size}"
        self.settings = settings or search.Settings(loss=0.0 if kind == "ndr" else search.DEFAULT_PDR_LOSS)

    def settings_for(self, spec: TestSpec) -> search.Settings:
        """The scenario's [search] (TestSpec.search, in %) where it gives one, else the tool's."""
        if not spec.search:
            return self.settings
        loss, precision, load_trials = spec.search
        return dataclasses.replace(self.settings, loss=0.0 if self.kind == "ndr" else loss / 100,
                                   precision=precision / 100, load_trials=load_trials)

    def _trial(self, spec: TestSpec, i: int, rate: float) -> Phase:
        return Phase(trial_name(i), send_argv(self.locate(), spec, self.payload, spec.duration, rate),
                     spec.duration + TRIAL_MARGIN)

    def phases(self, spec: TestSpec) -> list[Phase]:
        return [self._trial(spec, 0, 0.0)]

    def next_phase(self, spec: TestSpec, outputs: list[PhaseOutput]) -> Phase | None:
        settings = self.settings_for(spec)
        trials, error = trials_of(outputs, settings)
        if error:
            return None
        step = search.plan(trials, settings)
        return self._trial(spec, len(trials), step.rate) if isinstance(step, search.Next) else None

    def client_argv(self, spec: TestSpec) -> list[str]:
        return self.phases(spec)[0].argv

    def timeout(self, spec: TestSpec) -> float:
        return self.settings.max_trials * (spec.duration + TRIAL_MARGIN)

    def parse(self, stdout: str, stderr: str, returncode: int | None) -> ToolResult:
        """One trial alone."""
        return parse_send(stdout, stderr, returncode)

    def parse_phases(self, outputs: list[PhaseOutput]) -> ToolResult:
        """The trials of a search with the tool's own settings."""
        return self.parse_adaptive(TestSpec(server_addr="", duration=1), outputs)

    def parse_adaptive(self, spec: TestSpec, outputs: list[PhaseOutput]) -> ToolResult:
        settings = self.settings_for(spec)
        trials, error = trials_of(outputs, settings)
        if error:
            return failed(error)
        step = search.plan(trials, settings)
        if not isinstance(step, search.Result):
            return failed(f"the search stopped after {len(trials)} trials, before it ended")
        samples: list[Sample] = []
        for i, t in enumerate(trials):
            n = trial_name(i)
            samples += [Sample(f"{n}_offered_pps", t.asked, "pps"), Sample(f"{n}_sent_pps", t.sent, "pps"),
                        Sample(f"{n}_loss_pct", 100 * t.loss, "pct")]
        k = self.kind
        samples += [Sample(f"{k}_pps", step.rate, "pps"),
                    Sample(f"{k}_bps", search.bits_per_second(step.rate, self.payload), "bps"),
                    Sample("trials", float(step.trials), "count"),
                    Sample("validated", float(step.validated), "bool"),
                    Sample("sender_bound", float(step.sender_bound), "bool")]
        return ToolResult(samples=samples, ok=True)
