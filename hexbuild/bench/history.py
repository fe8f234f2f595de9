"""Benchmark history: every `hexbuild bench` result row appended to a SQLite database, keyed by
what was measured (revision, package, toolchain, device, model, configuration, time), so that
`hexbuild bench compare` can set two builds side by side later.

One table, one row per llama-bench record (each repeat kept, never a median: the spread of the
repeats is what tells a regression from noise). The schema version is SQLite's user_version;
WAL mode and ``BEGIN IMMEDIATE`` with a long busy timeout let several benches append at once
without losing a row (a writer waits for the other's short transaction).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .. import __version__
from ..errors import UsageError

SCHEMA_VERSION = 1
DB_NAME = "bench.sqlite"
BUSY_TIMEOUT_S = 60.0
MODEL_HASH_TIMEOUT = 1800.0  # sha256 of a multi-GB model on a phone

# Columns in the order they are stored; the keys of a row dict (bench.py's rows + context).
COLUMNS = (
    ("time", "TEXT NOT NULL"),            # when the bench ran (UTC, ISO 8601)
    ("bench_id", "TEXT NOT NULL"),        # one `hexbuild bench` invocation
    ("revision", "TEXT"),                 # llama.cpp revision (device manifest, else llama-bench's build_commit)
    ("package_sha256", "TEXT"),           # the deployed files: sha256 over (path, sha256) of each
    ("toolchain", "TEXT"),                # the build image (digest, else reference) or "local"
    ("target", "TEXT NOT NULL"),
    ("device_serial", "TEXT"),
    ("device_soc", "TEXT"),
    ("htp_arch", "TEXT"),
    ("model", "TEXT NOT NULL"),
    ("model_sha256", "TEXT"),
    ("sessions", "INTEGER"),              # HTP sessions
    ("devices", "TEXT"),                  # the device selection (HTP0,HTP1), when given as a list
    ("batch", "INTEGER"),
    ("ubatch", "INTEGER"),
    ("threads", "INTEGER"),
    ("test", "TEXT NOT NULL"),            # pp512, tg128, ...
    ("kind", "TEXT"),                     # prompt | eval | mixed
    ("rep", "INTEGER"),
    ("avg_ts", "REAL NOT NULL"),          # tokens/s
    ("stddev_ts", "REAL"),
    ("hexbuild_version", "TEXT"),
    # added in place (ADDED_COLUMNS): the memory roofline of an eval row (bench/roofline.py)
    ("bytes_per_token", "INTEGER"),       # weights + KV cache one decode token reads
    ("peak_gbs", "REAL"),                 # the device's peak DRAM bandwidth used for the bound
    ("roofline_pct", "REAL"),             # avg_ts as a percentage of peak_gbs / bytes_per_token
    # added in place: the virtual NPU's mark (hexbuild/fidelity.py); NULL on every real device
    ("emulated", "INTEGER"),              # 1: measured on an emulated NPU (qemu+npu:), an emulator's wall time
    ("npu_model", "TEXT"),                # what it emulated: "v73 (emulated cDSP: qemu-hexagon ...)"
)
NAMES = tuple(c for c, _ in COLUMNS)
# Columns and tables added after schema 1 without changing what older readers find: they name
# their columns, so a column or table they do not know is invisible to them. user_version only
# counts changes that would break them.
ADDED_COLUMNS = COLUMNS[-5:]
ADDED_TABLES = (
    # one `hexbuild bisect` (bisect/record.py): what was asked and how it ended
    "CREATE TABLE IF NOT EXISTS bisects (id TEXT PRIMARY KEY, time TEXT NOT NULL, source TEXT NOT NULL, "
    "status TEXT NOT NULL, request TEXT NOT NULL, result TEXT)",
    # each step: a revision's verdict, its figures and where its bench rows are (bench_id)
    "CREATE TABLE IF NOT EXISTS bisect_steps (bisect_id TEXT NOT NULL, step INTEGER NOT NULL, commit_sha TEXT NOT NULL, "
    "verdict TEXT NOT NULL, reason TEXT, data TEXT NOT NULL, time TEXT NOT NULL, PRIMARY KEY (bisect_id, commit_sha))",
)


def default_path(results_dir: str | Path) -> Path:
    return Path(results_dir) / DB_NAME


def connect(path: str | Path, *, create: bool = True) -> sqlite3.Connection:
    """Open (and create or migrate) the history database."""
    p = Path(path).expanduser()
    if not create and not p.is_file():
        raise UsageError(f"no benchmark database at {p}", hint="run hexbuild bench first, or give --db FILE")
    if create:
        p.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn = sqlite3.connect(str(p), timeout=BUSY_TIMEOUT_S, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            _migrate(conn, p)
            return conn
        except sqlite3.OperationalError as e:
            # Switching to WAL (or a first writer's recovery) answers "locked" at once, without
            # the busy handler, while another process opens the same new database: wait for it.
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise UsageError(f"{p}: cannot open the benchmark database ({e})") from None
            conn.close()
            time.sleep(0.05)
        except sqlite3.DatabaseError as e:
            raise UsageError(f"{p}: not a hexbuild benchmark database ({e})") from None


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise UsageError(f"{path} has benchmark schema {version}; this hexbuild knows up to {SCHEMA_VERSION}",
                         hint="upgrade hexbuild")
    if version == SCHEMA_VERSION and not _additions_missing(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] == 0:  # re-read under the write lock
            cols = ", ".join(f"{n} {t}" for n, t in COLUMNS)
            conn.execute(f"CREATE TABLE IF NOT EXISTS results (id INTEGER PRIMARY KEY, {cols})")
            conn.execute("CREATE INDEX IF NOT EXISTS results_revision ON results (revision)")
            conn.execute("CREATE INDEX IF NOT EXISTS results_package ON results (package_sha256)")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        have = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
        for name, kind in ADDED_COLUMNS:
            if name not in have:
                conn.execute(f"ALTER TABLE results ADD COLUMN {name} {kind}")
        for statement in ADDED_TABLES:
            conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _additions_missing(conn: sqlite3.Connection) -> bool:
    have = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return any(n not in have for n, _ in ADDED_COLUMNS) or not {"bisects", "bisect_steps"} <= tables


def append(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Append rows in one transaction; returns how many."""
    values = [tuple(r.get(n) for n in NAMES) for r in rows]
    if not values:
        return 0
    conn = connect(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(f"INSERT INTO results ({', '.join(NAMES)}) VALUES ({', '.join('?' * len(NAMES))})", values)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return len(values)


def select(path: str | Path, where: str = "", params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    conn = connect(path, create=False)
    try:
        conn.row_factory = sqlite3.Row
        cur = conn.execute(f"SELECT {', '.join(NAMES)} FROM results {where} ORDER BY id", tuple(params))
        return [dict(r) for r in cur]
    finally:
        conn.close()


# -- what a bench measured: read once per target ------------------------------------------------

def package_digest(manifest: Mapping[str, Any] | None) -> str | None:
    files = (manifest or {}).get("files")
    if not isinstance(files, list) or not files:
        return None
    h = hashlib.sha256()
    for f in sorted((f for f in files if isinstance(f, dict)), key=lambda f: str(f.get("path"))):
        h.update(f"{f.get('path')}\0{f.get('sha256')}\n".encode("utf-8"))
    return h.hexdigest()


def target_context(target: Any, dest: str) -> dict[str, Any]:
    """Revision, package, toolchain and device of what is deployed at ``dest`` on ``target``."""
    from ..errors import HexbuildError
    from ..runner import default_dest, read_manifest

    where = dest or default_dest(target)
    where = target.expand(where) if hasattr(target, "expand") else where
    manifest = read_manifest(target, where) or {}
    image = manifest.get("image") or {}
    llama = manifest.get("llama_cpp") or {}
    ctx: dict[str, Any] = {
        "revision": llama.get("revision") or (llama.get("plan_rules") or {}).get("revision"),
        "package_sha256": package_digest(manifest),
        "toolchain": image.get("digest") or image.get("reference") or (manifest.get("engine") if manifest else None),
        "device_serial": None, "device_soc": None, "htp_arch": manifest.get("htp_arch"),
    }
    try:
        info = target.probe(where)
        ctx.update(device_serial=info.serial, device_soc=info.soc, htp_arch=info.htp_arch or ctx["htp_arch"])
    except HexbuildError:
        pass  # the results still count; the device columns stay empty
    kind = getattr(target, "kind", None)
    if not ctx["device_serial"] and getattr(getattr(target, "caps", None), "this_machine", False):
        import socket

        # this machine, whichever directory the install is in; its emulator is a device of its own
        ctx["device_serial"] = socket.gethostname() + ("" if kind == "local" else f" ({kind})")
    return ctx


def model_sha256(target: Any, path: str | None) -> str | None:
    """The model file's sha256: the one deploy recorded while the file is unchanged, else computed
    where it lives (toybox and coreutils have sha256sum), since a model can be gigabytes."""
    if not path:
        return None
    from ..deploy.models import recorded_sha256

    try:
        recorded = recorded_sha256(target, path)
        if recorded:
            return recorded
        res = target.capture(["sh", "-c", f"sha256sum {shlex.quote(path)}"], timeout=MODEL_HASH_TIMEOUT)
    except Exception:  # the hash is a label: a target that cannot compute it still benchmarks
        return None
    word = res.out.split()[0] if res.rc == 0 and res.out.split() else ""
    return word if len(word) == 64 else None


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def new_bench_id() -> str:
    return hashlib.sha256(f"{time.time_ns()}-{id(object())}".encode()).hexdigest()[:12]


def rows_for_db(rows: Sequence[Mapping[str, Any]], *, bench_id: str, when: str) -> list[dict[str, Any]]:
    """bench.py's result rows (with the target context merged in) as database rows."""
    out = []
    for r in rows:
        out.append({**{n: r.get(n) for n in NAMES}, "time": when, "bench_id": bench_id, "sessions": r.get("ndev"),
                    "devices": r.get("select"), "batch": r.get("n_batch"), "ubatch": r.get("n_ubatch"),
                    "threads": r.get("n_threads"), "hexbuild_version": __version__})
    return out


def rows_from_results_json(path: Path) -> list[dict[str, Any]]:
    """The records of a bench's results.json as database rows (a FILE for compare)."""
    try:
        doc = json.loads(path.read_text("utf-8"))
        records = doc["records"]
        if not isinstance(records, list):
            raise ValueError("records is not a list")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a hexbuild bench results.json ({e})") from None
    return rows_for_db(records, bench_id=str(doc.get("bench_id") or path), when=str(doc.get("time") or ""))


class Recorder:
    """What one `hexbuild bench` adds to the history: the context of each target, the model
    hashes (once per target and file), and the rows, appended when the bench ends."""

    def __init__(self, db: str | None, results_dir: str) -> None:
        self.path = None if db == "" else Path(db).expanduser() if db else default_path(results_dir)
        self.bench_id = new_bench_id()
        self.time = now()
        self._ctx: dict[str, dict[str, Any]] = {}
        self._models: dict[tuple[str, str], str | None] = {}

    def open_target(self, target: Any, dest: str) -> dict[str, Any]:
        """What is deployed and which device it is, read once per target (bench also reads it
        without a database when the roofline needs the SoC)."""
        if target.spec not in self._ctx:
            self._ctx[target.spec] = target_context(target, dest)
        return self._ctx[target.spec]

    def add_context(self, spec: str, context: dict[str, Any], models: dict[str, str | None] | None = None) -> None:
        """What was measured on a target hexbuild does not reach itself (a board in a device lab):
        its context, and the model hashes by the path the runs name them with."""
        if self.path is not None:
            self._ctx[spec] = dict(context)
            for path, digest in (models or {}).items():
                self._models[(spec, path)] = digest

    def label(self, target: Any, invocation: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows with what was measured: revision, package, toolchain, device, model hash."""
        if self.path is None or not rows:
            return rows
        argv = list(invocation.argv)
        model = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else None
        key = (target.spec, model or "")
        if key not in self._models:
            self._models[key] = model_sha256(target, model)
        extra = {**self._ctx.get(target.spec, {}), "model_sha256": self._models[key]}
        if not extra.get("revision"):
            extra["revision"] = rows[0].get("build_commit")
        return [{**r, **extra} for r in rows]

    def save(self, rows: Sequence[Mapping[str, Any]]) -> int:
        if self.path is None:
            return 0
        return append(self.path, rows_for_db(rows, bench_id=self.bench_id, when=self.time))
