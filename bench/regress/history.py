"""The history store: every result ever ingested, in one SQLite file (no server).

Results are ingested from sweep directories. Each stored result keeps its whole
JSON document plus indexed columns (hardware identity ``machine_id``, software
stack ``software_id``, git commit, TensorFlow version, spec key, time) to select
by. ``machine_id`` is recomputed from the stored fingerprint
(``bench.env.stored_machine_id``), so results written before the hardware/software
split share their machine's id with today's. Ingest is idempotent: a result is
identified by the SHA-256 of its file's bytes (result files are never
overwritten), so ingesting a directory again adds only what is new. A file that
cannot be read or does not match the result schema is named and skipped.

The A/B nightly also stores each configuration's session (``ab_sessions``: the
candidate/baseline ratio with its interval, pairs and verdict, and both sides'
identities), one row per night of a drift-free ratio series that
``bench.regress.changes`` searches for steps.

The store's own layout carries a version (``PRAGMA user_version``); older stores are
migrated in place (version 1: software_id added, machine ids recomputed; version 2:
the ``ab_sessions`` table added), any other version is refused with a message saying
what to do.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.env import now_iso, software_id, stored_machine_id
from bench.errors import BenchError, SchemaError
from bench.results.schema import RunResult
from bench.results.store import DEFAULT_ROOT, parse

STORE_VERSION = 3
DEFAULT_PATH = DEFAULT_ROOT / "history.sqlite"  # beside the sweeps it indexes
BUSY_TIMEOUT_S = 30.0  # another process ingesting: wait this long for its lock, then fail

_SCHEMA = """
CREATE TABLE sweeps (
    id          INTEGER PRIMARY KEY,
    path        TEXT NOT NULL UNIQUE,   -- resolved sweep directory
    tag         TEXT,                   -- e.g. "nightly"
    ingested_at TEXT NOT NULL
);
CREATE TABLE results (
    id                INTEGER PRIMARY KEY,
    digest            TEXT NOT NULL UNIQUE,  -- sha256 of the file bytes: idempotent ingest
    sweep_id          INTEGER NOT NULL REFERENCES sweeps(id),
    file              TEXT NOT NULL,
    spec_key          TEXT NOT NULL,  -- RunSpec.key() recomputed (what compare matches on)
    label             TEXT NOT NULL,
    workload          TEXT NOT NULL,
    strategy          TEXT NOT NULL,
    devices           INTEGER NOT NULL,
    global_batch      INTEGER NOT NULL,
    status            TEXT NOT NULL,
    machine_id        TEXT,            -- hardware identity (bench.env.machine_id)
    software_id       TEXT,            -- software stack (bench.env.software_id)
    git_commit        TEXT,
    tf_version        TEXT,
    host              TEXT,
    started_at        TEXT NOT NULL,
    global_throughput REAL,            -- examples/s (median over windows)
    throughput_cv     REAL,            -- std/mean over windows
    step_median_s     REAL,            -- s
    document          TEXT NOT NULL    -- the result file as stored
);
CREATE INDEX results_machine ON results(machine_id);
CREATE INDEX results_software ON results(software_id);
CREATE INDEX results_commit ON results(git_commit);
CREATE INDEX results_tf ON results(tf_version);
CREATE INDEX results_key ON results(spec_key);
CREATE INDEX results_time ON results(started_at);
"""
# Version 3: one row per configuration of an A/B session (a night of a ratio series).
_AB_SCHEMA = """
CREATE TABLE ab_sessions (
    id          INTEGER PRIMARY KEY,
    session     TEXT NOT NULL,   -- the session's directory (resolved)
    tag         TEXT,            -- e.g. "nightly"
    started_at  TEXT NOT NULL,
    spec_key    TEXT NOT NULL,   -- the configuration (RunSpec.key(), before the sides' params)
    label       TEXT NOT NULL,
    machine_id  TEXT,            -- hardware identity of the runs (bench.env.machine_id)
    verdict     TEXT NOT NULL,   -- same, improved, regressed, unknown, or failed (runs)
    ratio       REAL,            -- candidate / baseline throughput, exp(mean log ratio)
    low         REAL,            -- its interval at the deciding look
    high        REAL,
    pairs       INTEGER NOT NULL,
    sd_log      REAL,            -- SD of the pairs' log ratios
    threshold   REAL NOT NULL,
    alpha       REAL NOT NULL,
    baseline    TEXT NOT NULL,   -- JSON: the side (python, env, params) and its runs' identity
    candidate   TEXT NOT NULL,
    UNIQUE (session, spec_key)
);
CREATE INDEX ab_sessions_series ON ab_sessions(spec_key, machine_id, started_at);
"""


class HistoryError(BenchError):
    """The store cannot be opened or a selection is invalid (usage error at the CLI)."""


@dataclass
class IngestReport:
    sweep_dir: Path
    added: int = 0
    already: int = 0
    skipped: list[str] = field(default_factory=list)  # "<file>: <why>"


@dataclass(frozen=True)
class Row:
    """One stored result's indexed columns (the document is loaded on demand)."""

    id: int
    sweep_id: int
    sweep_path: str
    tag: str | None
    spec_key: str
    label: str
    status: str
    machine_id: str | None
    software_id: str | None
    git_commit: str | None
    tf_version: str | None
    started_at: str
    global_throughput: float | None
    throughput_cv: float | None
    step_median_s: float | None


@dataclass(frozen=True)
class AbRecord:
    """One configuration's A/B session as the history keeps it: a night of its ratio
    series. ``ratio``/``low``/``high``/``sd_log`` are None when runs failed;
    ``baseline``/``candidate`` say what each side was (interpreter, TensorFlow, env,
    params, software and machine ids)."""

    session: str
    started_at: str
    spec_key: str
    label: str
    machine_id: str | None
    verdict: str
    pairs: int
    threshold: float
    alpha: float
    baseline: Mapping[str, Any]
    candidate: Mapping[str, Any]
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    sd_log: float | None = None
    tag: str | None = None


_AB_COLUMNS = ("session", "tag", "started_at", "spec_key", "label", "machine_id", "verdict",
               "ratio", "low", "high", "pairs", "sd_log", "threshold", "alpha", "baseline",
               "candidate")


@dataclass(frozen=True)
class Sweep:
    id: int
    path: str
    tag: str | None
    started_at: str  # earliest result start in it
    results: int
    machine_ids: tuple[str, ...]


def default_path() -> Path:
    return DEFAULT_PATH


class History:
    """An open history store. Use as a context manager."""

    def __init__(self, path: Path, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():  # a typo must not leave an empty store
            raise HistoryError(f"no history store at {self.path}; create one with "
                               f"`python -m bench history ingest SWEEP_DIR --history "
                               f"{self.path}`")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"{self.path}: not a stratbench history store ({exc})") from exc
        if version == 0 and tables == 0:
            with self.db:
                self.db.executescript(_SCHEMA + _AB_SCHEMA)
                self.db.execute(f"PRAGMA user_version = {STORE_VERSION}")
        elif version in (1, 2):
            if version == 1:
                self._migrate_from_1()
            self._migrate_from_2()
        elif version != STORE_VERSION:
            self.db.close()
            raise HistoryError(
                f"{self.path}: history store version {version} is not supported by this "
                f"stratbench (expects {STORE_VERSION}); use a matching stratbench or start a "
                f"new store with --history NEW_PATH and re-ingest the sweep directories")
        self.db.execute("PRAGMA foreign_keys = ON")

    def _migrate_from_1(self) -> None:
        """Version 1 had no software_id and a machine_id that hashed the GPU driver."""
        with self.db:  # the version is set last: an interrupted migration is redone
            columns = {row[1] for row in self.db.execute("PRAGMA table_info(results)")}
            if "software_id" not in columns:
                self.db.execute("ALTER TABLE results ADD COLUMN software_id TEXT")
            self.db.execute("CREATE INDEX IF NOT EXISTS results_software "
                            "ON results(software_id)")
            for rid, doc in self.db.execute("SELECT id, document FROM results").fetchall():
                try:
                    env = json.loads(doc).get("environment") or {}
                except ValueError:
                    continue
                self.db.execute("UPDATE results SET machine_id = ?, software_id = ? WHERE id = ?",
                                (stored_machine_id(env), software_id(env), rid))
            self.db.execute("PRAGMA user_version = 2")

    def _migrate_from_2(self) -> None:
        """Version 2 had no A/B sessions."""
        with self.db:
            # sqlite3 opens no implicit transaction for DDL, so a migration cut short may
            # have left the table without the version: start again from scratch.
            self.db.execute("DROP TABLE IF EXISTS ab_sessions")
            # Statement by statement (executescript would commit first); the schema's
            # comments hold no ';' for that reason.
            for statement in _AB_SCHEMA.split(";"):
                if statement.strip():
                    self.db.execute(statement)
            self.db.execute(f"PRAGMA user_version = {STORE_VERSION}")

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # -- ingest ----------------------------------------------------------------------
    def ingest(self, sweep_dir: Path, tag: str | None = None) -> IngestReport:
        """Store every new result file of ``sweep_dir``; bad files are named and skipped."""
        from bench.results.store import SweepStore

        sweep_dir = Path(sweep_dir)
        if not sweep_dir.is_dir():
            raise HistoryError(f"no sweep directory at {sweep_dir}")
        report = IngestReport(sweep_dir)
        with self.db:  # one transaction: a crash leaves the store as it was
            sweep_id = self._sweep_id(sweep_dir.resolve(), tag)
            for path in SweepStore(sweep_dir).result_files():
                try:
                    data = path.read_bytes()
                    result = parse(path, data)
                except SchemaError as exc:
                    report.skipped.append(str(exc))
                    continue
                if (result.environment or {}).get("simulated"):
                    # A simulated GPU server's figures are its model's, not a machine's:
                    # never a baseline, never compared with a night's real runs.
                    report.skipped.append(f"{path}: a run on the simulated server "
                                          f"{result.environment['simulated']} (bench.sim)")
                    continue
                digest = hashlib.sha256(data).hexdigest()
                if self.db.execute("SELECT 1 FROM results WHERE digest = ?",
                                   (digest,)).fetchone():
                    report.already += 1
                    continue
                self._insert(sweep_id, path, digest, result, data.decode("utf-8"))
                report.added += 1
        return report

    def _sweep_id(self, path: Path, tag: str | None) -> int:
        row = self.db.execute("SELECT id, tag FROM sweeps WHERE path = ?",
                              (str(path),)).fetchone()
        if row:
            if tag and row[1] != tag:
                self.db.execute("UPDATE sweeps SET tag = ? WHERE id = ?", (tag, row[0]))
            return int(row[0])
        cur = self.db.execute("INSERT INTO sweeps (path, tag, ingested_at) VALUES (?, ?, ?)",
                              (str(path), tag, now_iso()))
        return int(cur.lastrowid or 0)

    def _insert(self, sweep_id: int, path: Path, digest: str, r: RunResult,
                document: str) -> None:
        # Here, not at the top: the comparison brings scipy.stats, which reading the store
        # (bench history list, the parser's SELECTION_KEYS) does without.
        from bench.regress.compare import identity

        env, f = r.environment or {}, r.figures
        self.db.execute(
            "INSERT INTO results (digest, sweep_id, file, spec_key, label, workload, strategy,"
            " devices, global_batch, status, machine_id, software_id, git_commit, tf_version,"
            " host, started_at, global_throughput, throughput_cv, step_median_s, document)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (digest, sweep_id, path.name, identity(r), r.spec.label(), r.spec.workload,
             r.spec.strategy, r.spec.devices, r.global_batch, r.status,
             stored_machine_id(env), software_id(env), (env.get("git") or {}).get("commit"),
             env.get("tensorflow"), env.get("host"),
             r.started_at, f.global_throughput if f else None,
             f.throughput_cv if f else None, f.step_time.median_s if f else None, document))

    # -- A/B sessions ----------------------------------------------------------------
    def add_ab(self, records: list[AbRecord]) -> int:
        """Store A/B sessions; one already stored (same session and configuration) is
        kept as it was. Returns how many were added."""
        added = 0
        with self.db:
            for r in records:
                row = {**asdict(r), "baseline": json.dumps(dict(r.baseline), sort_keys=True),
                       "candidate": json.dumps(dict(r.candidate), sort_keys=True)}
                cur = self.db.execute(
                    f"INSERT OR IGNORE INTO ab_sessions ({', '.join(_AB_COLUMNS)}) VALUES "
                    f"({', '.join('?' for _ in _AB_COLUMNS)})", [row[c] for c in _AB_COLUMNS])
                added += cur.rowcount
        return added

    def ab_records(self, spec_key: str | None = None,
                   machine_id: str | None = None) -> list[AbRecord]:
        """Stored A/B sessions, oldest first; ``spec_key`` matches a prefix."""
        conds, args = ["1"], []
        if spec_key is not None:
            conds.append("spec_key LIKE ?")
            args.append(spec_key + "%")
        if machine_id is not None:
            conds.append("machine_id = ?")
            args.append(machine_id)
        cur = self.db.execute(f"SELECT {', '.join(_AB_COLUMNS)} FROM ab_sessions WHERE "
                              f"{' AND '.join(conds)} ORDER BY started_at, id", args)
        out = []
        for values in cur.fetchall():
            row = dict(zip(_AB_COLUMNS, values, strict=True))
            row["baseline"] = json.loads(row["baseline"])
            row["candidate"] = json.loads(row["candidate"])
            out.append(AbRecord(**row))
        return out

    # -- queries ---------------------------------------------------------------------
    def rows(self, selection: Selection | None = None) -> list[Row]:
        """Stored results matching ``selection``, oldest first."""
        where, args = (selection or Selection()).sql(self)
        cur = self.db.execute(
            "SELECT r.id, r.sweep_id, s.path, s.tag, r.spec_key, r.label, r.status,"
            " r.machine_id, r.software_id, r.git_commit, r.tf_version, r.started_at,"
            " r.global_throughput, r.throughput_cv, r.step_median_s"
            " FROM results r JOIN sweeps s ON s.id = r.sweep_id"
            f" WHERE {where} ORDER BY r.started_at, r.id", args)
        return [Row(*row) for row in cur.fetchall()]

    def results(self, selection: Selection | None = None) -> tuple[list[RunResult], list[str]]:
        """The full results matching ``selection`` and warnings for undecodable ones."""
        results, _, warnings = self.results_by_sweep(selection)
        return results, warnings

    def results_by_sweep(self, selection: Selection | None = None
                         ) -> tuple[list[RunResult], list[int], list[str]]:
        """Like ``results``, with the sweep id of each result (the group it was run in)."""
        out, sweeps, warnings = [], [], []
        for row in self.rows(selection):
            (doc,) = self.db.execute("SELECT document FROM results WHERE id = ?",
                                     (row.id,)).fetchone()
            try:
                out.append(RunResult.from_dict(json.loads(doc)))
                sweeps.append(row.sweep_id)
            except (SchemaError, ValueError) as exc:
                warnings.append(f"history result {row.id} skipped: {exc}")
        return out, sweeps, warnings

    def sweeps(self, selection: Selection | None = None) -> list[Sweep]:
        """Sweeps with at least one result matching ``selection``, oldest first."""
        by_sweep: dict[int, list[Row]] = {}
        for row in self.rows(selection):
            by_sweep.setdefault(row.sweep_id, []).append(row)
        out = [Sweep(id=sid, path=rows[0].sweep_path, tag=rows[0].tag,
                     started_at=min(r.started_at for r in rows), results=len(rows),
                     machine_ids=tuple(sorted({r.machine_id or "?" for r in rows})))
               for sid, rows in by_sweep.items()]
        return sorted(out, key=lambda s: (s.started_at, s.id))

    def sweep_of(self, sweep_dir: Path) -> int | None:
        row = self.db.execute("SELECT id FROM sweeps WHERE path = ?",
                              (str(Path(sweep_dir).resolve()),)).fetchone()
        return None if row is None else int(row[0])


# -- selections -------------------------------------------------------------------------
# KEY=VALUE filters; each maps to an SQL condition. `sweep` also takes latest/previous.
_COLUMNS = {"tag": ("s.tag = ?", False), "machine": ("r.machine_id = ?", False),
            "software": ("r.software_id = ?", False),
            "commit": ("r.git_commit LIKE ?", True), "tf": ("r.tf_version = ?", False),
            "key": ("r.spec_key LIKE ?", True), "workload": ("r.workload = ?", False),
            "strategy": ("r.strategy = ?", False), "status": ("r.status = ?", False),
            "since": ("r.started_at >= ?", False), "until": ("r.started_at < ?", False)}
SELECTION_KEYS = (*_COLUMNS, "sweep")


@dataclass(frozen=True)
class Selection:
    """Filters over the store, e.g. ``Selection.parse("tag=nightly,sweep=latest")``.

    ``commit`` and ``key`` match prefixes; ``since``/``until`` compare ISO times
    (``since=2026-11-01``); ``sweep`` is an id, a sweep directory, ``latest`` or
    ``previous`` (the newest / second-newest sweep among those the other filters match).
    """

    filters: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Selection:
        filters: dict[str, str] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            key, sep, value = part.partition("=")
            if not sep or not value:
                raise HistoryError(f"a history selection is KEY=VALUE[,KEY=VALUE...] with KEY "
                                   f"one of {', '.join(SELECTION_KEYS)}. Received: {text!r}")
            if key not in SELECTION_KEYS:
                raise HistoryError(f"unknown selection key {key!r}; valid: "
                                   f"{', '.join(SELECTION_KEYS)}. Received: {text!r}")
            filters[key] = value
        return cls(filters)

    def without(self, key: str) -> Selection:
        return Selection({k: v for k, v in self.filters.items() if k != key})

    def sql(self, history: History) -> tuple[str, list[Any]]:
        conds: list[str] = ["1"]
        args: list[Any] = []
        for key, value in self.filters.items():
            if key == "sweep":
                conds.append("r.sweep_id = ?")
                args.append(self._sweep_id(history, value))
                continue
            cond, prefix = _COLUMNS[key]
            conds.append(cond)
            args.append(value + "%" if prefix else value)
        return " AND ".join(conds), args

    def _sweep_id(self, history: History, value: str) -> int:
        if value in ("latest", "previous"):
            sweeps = history.sweeps(self.without("sweep"))
            need = 1 if value == "latest" else 2
            if len(sweeps) < need:
                raise HistoryError(f"sweep={value}: the history holds {len(sweeps)} matching "
                                   f"sweep(s). Received: {self.describe()}")
            return sweeps[-need].id
        if value.isdigit():
            return int(value)
        found = history.sweep_of(Path(value))
        if found is None:
            raise HistoryError(f"sweep={value}: no such sweep in the history (ingest it "
                               f"first). Received: {self.describe()}")
        return found

    def describe(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.filters.items()) or "(everything)"


@contextlib.contextmanager
def open_history(path: Path | None, create: bool = True) -> Iterator[History]:
    """Open the store at ``path`` (default results/history.sqlite) and close it after.

    ``create=False`` (readers) refuses a store that does not exist yet.
    """
    h = History(path or default_path(), create=create)
    try:
        yield h
    finally:
        h.close()
