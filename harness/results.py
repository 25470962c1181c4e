"""Run directories: run.json, measurements.jsonl (appended and flushed), raw/.

Schema of one measurements.jsonl line (SCHEMA_VERSION 1):

    run_id, case, mode, datapath, underlay_mtu, overlay_mtu, placement, test,
    streams, repeat, metric, value, unit, ok, error, ts
    (+ rate: the underlay rate cap or null; intervals: optional list of [t, bps];
       lines: how many lines the line's batch has (one case's, or the cases of a set measured
       at once), so a batch cut short is recognised)

A failed case is one line with metric "failed", value NaN, ok=false and the reason
in `error`, so it is never silently missing.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import fcntl
import json
import logging
import math
import os
import pathlib
import secrets
from typing import Any, Iterable

from harness.core import failpoints
from harness.core.errors import HarnessError, read_text
from harness.core.looks import Looks
from harness.tools.base import PER_STREAM_METRIC

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
REQUIRED = ("case", "repeat", "metric")


class ResultsError(HarnessError):
    """The results directory cannot be written (full, read-only): what was measured stays."""

FIELDS = ["run_id", "case", "mode", "datapath", "underlay_mtu", "overlay_mtu", "placement",
          "test", "streams", "pair", "src_host", "dst_host", "repeat", "metric", "value", "unit", "ok", "error",
          "ts"]
# The columns load() adds from run.json's `modes`: each row's mode's place and colour
MODE_ORDER, MODE_COLOUR = "mode_order", "mode_colour"


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
    lines: int | None = None
    # the client's and the server's host; `pair` ("SRC→DST") only where the run has a pair
    # dimension (harness/core/pairs.py), so a run of one pair keys its cases as before
    src_host: str | None = None
    dst_host: str | None = None
    pair: str | None = None

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        for k in ("intervals", "lines", "pair"):
            if d[k] is None:
                del d[k]
        v = d["value"]
        d["value"] = None if (isinstance(v, float) and math.isnan(v)) else v
        return json.dumps(d, sort_keys=False)


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(2)}"


def _torn(data: bytes) -> int:
    """Where the append failpoint cuts a batch: halfway through its last line, so that the
    lines before it are whole and the last one is always torn (half of the whole batch
    can fall on a line's end, depending on the lengths the measured numbers print at)."""
    last = data.rfind(b"\n", 0, len(data) - 1) + 1
    return last + (len(data) - last) // 2


class RunStore:
    """One run directory. Appends are flushed and fsynced line by line: a killed run keeps
    everything measured before the kill."""

    def __init__(self, path: pathlib.Path):
        self.path = pathlib.Path(path)
        self.raw = self.path / "raw"
        self.run_id = self.path.name
        self._lock_fd: int | None = None

    @classmethod
    def create(cls, root: pathlib.Path | str, meta: dict[str, Any], run_id: str | None = None) -> "RunStore":
        root = pathlib.Path(root)
        run_id = run_id or new_run_id()
        store = cls(root / run_id)
        try:
            store.raw.mkdir(parents=True)
        except OSError as e:
            raise ResultsError(f"{root}: cannot create the run directory ({e.strerror})") from e
        store.lock()
        store.write_meta({"schema_version": SCHEMA_VERSION, "run_id": run_id,
                          "start": now_iso(), "end": None, **meta})
        return store

    @classmethod
    def open(cls, path: pathlib.Path | str) -> "RunStore":
        store = cls(resolve_run(path))
        store.raw.mkdir(exist_ok=True)
        return store

    def lock(self) -> None:
        """Become the run's one writer: an flock on <run>/.lock held while this process lives.
        A second writer (a --resume while the run goes on) is refused with the owner's pid."""
        if self._lock_fd is not None:
            return
        fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise HarnessError(f"{self.path}: run is being written by pid {owner}, which is still running; "
                               f"wait for it to end (or stop it) before resuming") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def repair(self) -> int:
        """Cut what a writer killed mid-batch left at the end: a torn last line, and the lines
        of a batch cut short (fewer than its `lines`), so its cases are measured again and
        appends start on a fresh line. Every batch before the last is whole, so the trailing
        lines that share the last one's `lines` (L) are whole batches of L but for the last
        count % L. Returns the bytes removed. Only the lock holder calls this."""
        p = self.path / "measurements.jsonl"
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            return 0
        keep = data.rfind(b"\n") + 1                 # drop a torn last line
        lines = data[:keep].splitlines(keepends=True)
        tail: list[bytes] = []
        want = None
        for raw in reversed(lines):                  # the trailing lines of one batch size
            try:
                rec = json.loads(raw)
            except ValueError:
                break
            if not isinstance(rec, dict) or (tail and rec.get("lines") != want):
                break
            want = rec.get("lines")
            tail.append(raw)
        if tail and isinstance(want, int) and want > 0 and len(tail) % want:
            keep -= sum(len(x) for x in tail[:len(tail) % want])
        if keep == len(data):
            return 0
        with open(p, "r+b") as f:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        log.warning("%s: dropped %d bytes a killed writer left unfinished; its cases are measured again",
                    p, len(data) - keep)
        return len(data) - keep

    def read_meta(self) -> dict[str, Any]:
        return read_meta(self.path)

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Atomically: a reader (or a kill) sees the old run.json or the new one, never half."""
        tmp = self.path / "run.json.tmp"
        try:
            with open(tmp, "w") as f:
                f.write(json.dumps(meta, indent=2, sort_keys=False, default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())
            if meta.get("datapaths"):        # a kill mid-run, not while the run starts
                failpoints.reached("run-json")
            os.replace(tmp, self.path / "run.json")
        except OSError as e:
            raise ResultsError(f"{self.path}: cannot write run.json ({e.strerror}); "
                               f"the measurements so far are kept") from e

    def update_meta(self, **changes: Any) -> None:
        meta = self.read_meta()
        meta.update(changes)
        self.write_meta(meta)

    def append(self, items: Iterable[Measurement]) -> None:
        """One batch, in one write and fsynced: one case's lines, or those of every case of a
        set measured at once (so a kill keeps all of a set or none of it, and `--resume`
        measures the set again as a whole). A write that fails (a full disk) is cut back, so
        the file never ends in a partial batch that this process made."""
        items = list(items)
        ts = now_iso()
        data = "".join(dataclasses.replace(m, run_id=m.run_id or self.run_id, ts=m.ts or ts,
                                           lines=len(items)).to_json() + "\n" for m in items).encode()
        path = self.path / "measurements.jsonl"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            raise ResultsError(f"{path}: cannot write measurements ({e.strerror})") from e
        try:
            start = os.fstat(fd).st_size
            if failpoints.armed("append"):          # a writer cut off mid-batch (power loss)
                os.write(fd, data[:_torn(data)])
            failpoints.reached("append")
            try:
                done = os.write(fd, data)
                if done != len(data):
                    raise OSError(28, "short write")
                os.fsync(fd)
            except OSError as e:
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    pass
                raise ResultsError(f"{self.path}: cannot write measurements ({e.strerror}); "
                                   f"the lines written before are kept") from e
        finally:
            os.close(fd)

    def save_raw(self, name: str, text: str) -> pathlib.Path:
        p = self.raw / name
        try:
            p.write_text(text)
        except OSError as e:
            raise ResultsError(f"{p}: cannot write ({e.strerror}); the measurements so far are kept") from e
        return p

    def records(self) -> list[dict[str, Any]]:
        return read_records(self.path)


def default_roots() -> list[pathlib.Path]:
    """Where a run id is looked for when no results directory is named: the current
    directory's results/, then the checkout's (harness/core/paths.py), each once."""
    from harness.core.paths import PROJECT
    roots: list[pathlib.Path] = []
    for r in (pathlib.Path("results"), PROJECT / "results"):
        if all(os.path.abspath(r) != os.path.abspath(x) for x in roots):
            roots.append(r)
    return roots


def resolve_run(path: pathlib.Path | str,
                root: pathlib.Path | str | Iterable[pathlib.Path | str] | None = None) -> pathlib.Path:
    """A run directory from its path, or its id (or a path relative to a results directory)
    under `root`: one directory or several, in order; None is default_roots(). The one-line
    error names every directory tried."""
    p = pathlib.Path(path)
    if root is None:
        roots = default_roots()
    elif isinstance(root, (str, os.PathLike)):
        roots = [pathlib.Path(root)]
    else:
        roots = [pathlib.Path(r) for r in root]
    tried: list[pathlib.Path] = []
    for cand in [p] + ([] if p.is_absolute() else [r / p for r in roots]):
        if any(os.path.abspath(cand) == os.path.abspath(t) for t in tried):
            continue
        if (cand / "run.json").is_file():
            return cand
        tried.append(cand)
    raise HarnessError(f"{path}: not a run directory (no run.json in "
                       f"{', '.join(os.path.abspath(t) for t in tried)})")


def read_meta(run_dir: pathlib.Path | str) -> dict[str, Any]:
    p = resolve_run(run_dir) / "run.json"
    try:
        meta = json.loads(read_text(p))
    except json.JSONDecodeError as e:
        raise HarnessError(f"{p}: not valid JSON ({e.msg} at line {e.lineno})") from e
    if not isinstance(meta, dict):
        raise HarnessError(f"{p}: not a run.json (a JSON object expected)")
    v = meta.get("schema_version")
    if isinstance(v, int) and not isinstance(v, bool) and v > SCHEMA_VERSION:
        raise HarnessError(f"{p}: schema_version {v} was written by a newer overlaybench; "
                           f"this one reads {SCHEMA_VERSION}: upgrade overlaybench")
    if v != SCHEMA_VERSION:
        raise HarnessError(f"{p}: schema_version {v!r}, this overlaybench reads {SCHEMA_VERSION}")
    return meta


def read_records(run_dir: pathlib.Path | str) -> list[dict[str, Any]]:
    """Every measurement line. A torn last line (no newline: its writer was killed mid-line)
    is dropped; any other line that is not a measurement is an error naming file and line."""
    p = resolve_run(run_dir) / "measurements.jsonl"
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise HarnessError(f"{p}: cannot read ({e.strerror})") from e
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    torn = lines[-1]            # "" when the file ends with a newline
    out = []
    for n, line in enumerate(lines[:-1], 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise HarnessError(f"{p}:{n}: not valid JSON") from None
        if not isinstance(rec, dict) or any(k not in rec for k in REQUIRED):
            raise HarnessError(f"{p}:{n}: not a measurement (needs {', '.join(REQUIRED)})")
        out.append(rec)
    if torn.strip():
        log.warning("%s: the last line is torn (its writer was killed mid-line); ignored", p)
    return out


def duplicates(recs: list[dict[str, Any]]) -> int:
    """How many lines repeat an earlier (case, repeat, metric): two writers wrote one run.
    The per-stream metric has a line per stream by design and is not counted."""
    seen: set[tuple] = set()
    dup = 0
    for r in recs:
        if r.get("metric") == PER_STREAM_METRIC:
            continue
        key = (r.get("case"), r.get("repeat"), r.get("metric"))
        dup += key in seen
        seen.add(key)
    return dup


def load(run_dir: pathlib.Path | str):
    """The run's measurements as a pandas DataFrame (one row per metric). Every row also
    carries what run.json says of its run: the CPUs behind its CPU shares (`cpus`,
    `host_cpus`) and how its mode looks (MODE_ORDER, MODE_COLOUR: null for a mode run.json
    did not describe), so the run's looks travel with its data (analysis/stats.py looks_of)."""
    import pandas as pd

    meta = read_meta(run_dir)       # a run.json that is not ours is refused, not shown as empty
    recs = read_records(run_dir)
    dup = duplicates(recs)
    if dup:
        log.warning("%s: %d measurement line(s) repeat an earlier (case, repeat, metric): two writers "
                    "wrote this run; every copy is kept in the data", run_dir, dup)
    df = pd.DataFrame.from_records(recs, columns=None if recs else FIELDS)
    df.attrs["duplicates"] = dup
    for col in FIELDS:
        if col not in df.columns:
            df[col] = None
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    df["cpus"], df["host_cpus"] = cpu_counts(meta)
    looks = run_looks(meta)
    known = df["mode"].map(lambda m: looks.get(m) if isinstance(m, str) else None)
    df[MODE_ORDER] = pd.array([None if k is None else k.order for k in known], dtype="Int64")
    df[MODE_COLOUR] = [None if k is None or not k.colour else k.colour for k in known]
    return df


def run_looks(meta: dict[str, Any]) -> Looks:
    """How the run's modes look in tables and plots, as its run.json recorded them."""
    return Looks.recorded(meta.get("modes"))


def cpu_counts(meta: dict) -> tuple[float | None, float | None]:
    """The CPUs a run's CPU shares are of: (the machine's, behind cpu_total_pct; each host's,
    behind cpu_client_pct and cpu_server_pct under per-host accounting), None where unknown.
    Hosts of different sizes count as their mean."""
    def number(v: Any) -> float | None:
        try:
            x = float(v)
        except (TypeError, ValueError):
            return None
        return x if x > 0 else None

    machine = meta.get("machine") if isinstance(meta.get("machine"), dict) else {}
    hosts = meta.get("hosts") if isinstance(meta.get("hosts"), dict) else {}
    per_host = [n for h in hosts.values() if isinstance(h, dict) and (n := number(h.get("cpus")))]
    accounting = str(meta.get("cpu_accounting") or "")
    host_cpus = sum(per_host) / len(per_host) if per_host and accounting.startswith("per-host") else None
    return number(machine.get("cpus")), host_cpus
