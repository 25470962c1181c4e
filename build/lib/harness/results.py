"""Run directories: run.json, measurements.jsonl (appended and flushed), raw/.

Schema of one measurements.jsonl line (SCHEMA_VERSION 1):

    run_id, case, mode, datapath, underlay_mtu, overlay_mtu, placement, test,
    streams, repeat, metric, value, unit, ok, error, ts
    (+ rate: the underlay rate cap or null; intervals: optional list of [t, bps])

A failed case is one line with metric "failed", value NaN, ok=false and the reason
in `error`, so it is never silently missing.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
import pathlib
import secrets
from typing import Any, Iterable

from harness.errors import HarnessError

SCHEMA_VERSION = 1

FIELDS = ["run_id", "case", "mode", "datapath", "underlay_mtu", "overlay_mtu", "placement",
          "test", "streams", "repeat", "metric", "value", "unit", "ok", "error", "ts"]


@dataclasses.dataclass(frozen=True)
class Measurement:
    case: str
    mode: str
    datapath: str
    underlay_mtu: int
    overlay_mtu: int
    placement: str
    test: str
    streams: int
    repeat: int
    metric: str
    value: float
    unit: str
    ok: bool = True
    error: str | None = None
    rate: str | None = None
    run_id: str = ""
    ts: str = ""
    intervals: list | None = None

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        if d["intervals"] is None:
            del d["intervals"]
        v = d["value"]
        d["value"] = None if (isinstance(v, float) and math.isnan(v)) else v
        return json.dumps(d, sort_keys=False)


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(2)}"


class RunStore:
    """One run directory. Appends are flushed and fsynced line by line: a killed run keeps
    everything measured before the kill."""

    def __init__(self, path: pathlib.Path):
        self.path = pathlib.Path(path)
        self.raw = self.path / "raw"
        self.run_id = self.path.name

    @classmethod
    def create(cls, root: pathlib.Path | str, meta: dict[str, Any], run_id: str | None = None) -> "RunStore":
        root = pathlib.Path(root)
        run_id = run_id or new_run_id()
        store = cls(root / run_id)
        store.raw.mkdir(parents=True)
        store.write_meta({"schema_version": SCHEMA_VERSION, "run_id": run_id,
                          "start": now_iso(), "end": None, **meta})
        return store

    @classmethod
    def open(cls, path: pathlib.Path | str) -> "RunStore":
        store = cls(resolve_run(path))
        store.raw.mkdir(exist_ok=True)
        return store

    def read_meta(self) -> dict[str, Any]:
        return read_meta(self.path)

    def write_meta(self, meta: dict[str, Any]) -> None:
        tmp = self.path / "run.json.tmp"
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=False, default=str) + "\n")
        os.replace(tmp, self.path / "run.json")

    def update_meta(self, **changes: Any) -> None:
        meta = self.read_meta()
        meta.update(changes)
        self.write_meta(meta)

    def append(self, items: Iterable[Measurement]) -> None:
        with open(self.path / "measurements.jsonl", "a") as f:
            for m in items:
                if not m.run_id:
                    m = dataclasses.replace(m, run_id=self.run_id)
                if not m.ts:
                    m = dataclasses.replace(m, ts=now_iso())
                f.write(m.to_json() + "\n")
            f.flush()
            os.fsync(f.fileno())

    def save_raw(self, name: str, text: str) -> pathlib.Path:
        p = self.raw / name
        p.write_text(text)
        return p

    def records(self) -> list[dict[str, Any]]:
        return read_records(self.path)

    def done_cases(self) -> set[str]:
        """Case keys that already have a line (ok or failed): what --resume skips."""
        return {r["case"] for r in self.records()}


def resolve_run(path: pathlib.Path | str, root: pathlib.Path | str = "results") -> pathlib.Path:
    """A run directory from its path or its id under `root`; a clear error otherwise."""
    p = pathlib.Path(path)
    for cand in (p, pathlib.Path(root) / p):
        if (cand / "run.json").is_file():
            return cand
    raise HarnessError(f"{path}: not a run directory (no run.json)")


def read_meta(run_dir: pathlib.Path | str) -> dict[str, Any]:
    p = resolve_run(run_dir) / "run.json"
    try:
        meta = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise HarnessError(f"{p}: not valid JSON ({e.msg} at line {e.lineno})") from e
    v = meta.get("schema_version")
    if v != SCHEMA_VERSION:
        raise HarnessError(f"{p}: schema_version {v!r}, this overlaybench reads {SCHEMA_VERSION}")
    return meta


def read_records(run_dir: pathlib.Path | str) -> list[dict[str, Any]]:
    p = resolve_run(run_dir) / "measurements.jsonl"
    if not p.exists():
        return []
    out = []
    lines = p.read_text().splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            # A run killed mid-write leaves at most one torn last line; keep the rest.
            if n != len(lines):
                raise HarnessError(f"{p}:{n}: not valid JSON") from None
    return out


def load(run_dir: pathlib.Path | str):
    """The run's measurements as a pandas DataFrame (one row per metric)."""
    import pandas as pd

    recs = read_records(run_dir)
    df = pd.DataFrame.from_records(recs, columns=None if recs else FIELDS)
    for col in FIELDS:
        if col not in df.columns:
            df[col] = None
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return df
