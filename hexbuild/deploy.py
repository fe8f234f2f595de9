"""hexbuild deploy: put a package on one or many targets, incrementally and atomically.

Layout on the target (``<dest>`` = /data/local/tmp/llama.cpp by default on Android)::

    <parent>/<name>                        symlink -> .<name>.hexbuild-<id>  (the live install)
    <parent>/.<name>.hexbuild-<id>/        one complete release: the package files, scripts/,
                                           .hexbuild/manifest.json (written last = "complete")
    <parent>/.<name>.hexbuild-<older>/     the previous release, kept for --rollback
    <models_dir>/<file>.gguf               models; .hexbuild/models.json caches their hashes

Releases are *siblings* of ``<dest>`` on purpose: ``<dest>/..`` then still resolves to
``<parent>``, so llama.cpp's own scripts (``$basedir/../gguf/$M``) keep working.
``<id>`` is a hash of the release's content (paths, sha256, modes), so deploying the same
package again finds the same release.

Incremental: the device's manifest (what hexbuild installed) is compared with the package's.
A new release is staged beside the live one: unchanged files are *hard links* to the live
release's files (no bytes sent, no space used), files with the same bytes but another mode are
copied on the device, new or changed files are pushed, stale files are simply not carried over.
A release already live is repaired in place instead (missing, resized or re-moded files; with
--verify also files whose on-device sha256 differs), each file replaced by a rename. Nothing is ever written through an existing inode: every pushed
path is removed first or written under a temporary name, so the live release (which shares
inodes with the staged one) never changes under a running process.

Atomic: the switch is one rename(2) of a symlink (``ln -s`` to a temporary name, then
``mv -fT`` over ``<dest>``), so a deploy cut off at any point leaves the previous install whole
and live; the half-staged release is found again on the next run (same content id), its
good files are kept (re-hashed on the device) and the job finishes. A plain directory at
``<dest>`` (e.g. from ``adb push``) is adopted: its files are hashed on the device and linked
into the first release, and it is renamed aside as the rollback release (the one moment without
``<dest>`` is between that rename and the symlink rename, in a single device shell command).
``--rollback`` points ``<dest>`` back at the release recorded as previous.
Not guarded: two hexbuild processes deploying to the same device directory at the same time.

Space: before any byte is sent, the bytes to push (package and models) are compared with the
free space where they go; too little is a per-target failure, "not enough space", with the
amount needed — reported, like every per-target failure, as DeployFailed (exit 7).

Many targets run in parallel threads (``deploy.parallel``); each yields a TargetResult; any
failure makes the whole command exit 7 after every target has finished.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from . import __version__
from .errors import DeployFailed, EnvironmentMissing, HexbuildError, Interrupted, UsageError
from .deploy_models import TEMP_NAME, Model, ModelPlan, local_model, plan_models, push_models
from .deploy_package import Package, PackageFile, default_package, load_package
from .hashcache import HashCache
from .targets.base import DeviceInfo, RemoteFile, Target
from .targets.posix import batches, not_ready_message
from .ui import human_size, ui

MANIFEST = ".hexbuild/manifest.json"
SCRIPTS_DIR = "scripts"
RESERVE = 1 << 20  # room for manifests and directory entries beyond the file bytes

__all__ = ["DeployOptions", "TargetResult", "deploy", "deploy_one", "raise_for_failures", "release_id",
           "Package", "PackageFile", "load_package", "default_package", "HashCache"]

# Tests set this to a callable(target_spec, checkpoint) that raises to cut a deploy at a step.
FAULT_HOOK: Callable[[str, str], None] | None = None
_cancel = threading.Event()


# -- options and results ---------------------------------------------------------------------------
@dataclass
class DeployOptions:
    dest: str | None = None  # None: the target's default (runner.default_dest)
    models: list[Path] = field(default_factory=list)
    models_dir: str | None = None
    ndev: int = 0
    verify: bool = False
    rollback: bool = False
    dry_run: bool = False
    parallel: int = 4
    facts: dict[str, Any] | None = None  # source facts for launch scripts (default: the package's)
    progress: Any = None  # a ui.progress() object, or None


@dataclass
class TargetResult:
    target: str
    serial: str | None = None
    soc: str | None = None
    htp_arch: str | None = None
    files_total: int = 0
    files_pushed: int = 0
    files_removed: int = 0
    bytes_total: int = 0
    bytes_pushed: int = 0
    duration_s: float = 0.0
    status: str = "failed"  # ok | failed | unchanged
    error: str | None = None
    hint: str | None = None
    dest: str | None = None
    release: str | None = None
    previous: str | None = None
    verified: int | None = None
    repaired: int | None = None
    models: list[dict[str, Any]] = field(default_factory=list)
    plan: dict[str, Any] | None = None  # with --dry-run: what would be pushed and removed

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def raise_for_failures(results: Sequence[TargetResult]) -> None:
    failed = [r for r in results if r.status == "failed"]
    if failed:
        names = "; ".join(f"{r.serial or r.target}: {r.error}" for r in failed)
        raise DeployFailed(f"deploy failed on {len(failed)} of {len(results)} target(s): {names}",
                           hint=failed[0].hint)


# -- the driver ------------------------------------------------------------------------------------
def deploy(package: Path | Package | None, targets: list[Target], options: DeployOptions | None = None) -> list[TargetResult]:
    """Deploy to every target (in parallel threads); a result per target, failures included."""
    opts = options or DeployOptions()
    if package is None and not opts.rollback:
        raise UsageError("no package to deploy")
    owned = package is not None and not isinstance(package, Package)
    pkg = load_package(Path(package)) if owned else package
    try:
        models = [local_model(Path(m)) for m in opts.models]
        results: list[TargetResult | None] = [None] * len(targets)

        def one(i: int) -> None:
            results[i] = deploy_one(targets[i], pkg, models, opts)

        _cancel.clear()
        workers = max(1, min(opts.parallel, len(targets)))
        if workers == 1:
            for i in range(len(targets)):
                one(i)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deploy") as pool:
                futures = [pool.submit(one, i) for i in range(len(targets))]
                try:
                    for f in futures:
                        f.result()
                except BaseException:
                    _cancel.set()  # stops transfers at their next chunk; installs stay whole
                    raise
        return [r for r in results if r is not None]
    finally:
        if owned:
            pkg.close()


def _checkpoint(target: Target, name: str) -> None:
    if _cancel.is_set():
        raise Interrupted("interrupted")
    if FAULT_HOOK is not None:
        FAULT_HOOK(target.spec, name)


# -- one target ------------------------------------------------------------------------------------
@dataclass
class _Layout:
    dest: str

    @property
    def parent(self) -> str:
        return posixpath.dirname(self.dest)

    @property
    def name(self) -> str:
        return posixpath.basename(self.dest)

    @property
    def prefix(self) -> str:
        return f".{self.name}.hexbuild-"

    def release(self, rid: str) -> str:
        return posixpath.join(self.parent, self.prefix + rid)

    @property
    def link_tmp(self) -> str:
        return self.prefix + "link"


@dataclass
class _Live:
    kind: str  # missing | link | dir
    release: str | None  # directory name (in parent) of the live release
    root: str | None  # real path of the live tree
    manifest: dict[str, Any] | None
    files: dict[str, RemoteFile]


def deploy_one(target: Target, pkg: Package | None, models: list[Model], opts: DeployOptions) -> TargetResult:
    res = TargetResult(target=target.spec)
    t0 = time.monotonic()
    task = None
    tmpdir: tempfile.TemporaryDirectory | None = None
    try:
        from .runner import DEFAULT_MODELS, default_dest

        dest = _absolute(target, opts.dest or default_dest(target), "--dest")
        res.dest = dest
        info = target.probe(dest)
        res.serial, res.soc, res.htp_arch = info.serial, info.soc, info.htp_arch
        _require_ready(target, info)
        lay = _Layout(dest)
        if opts.rollback:
            _rollback(target, lay, res, opts)
            return res
        models_dir = _absolute(target, opts.models_dir or DEFAULT_MODELS.get(target.os, DEFAULT_MODELS["android"]),
                               "models directory")
        want = dict(pkg.files)
        scripts = _launch_scripts(target, info, pkg, dest, models_dir, opts)
        if scripts:
            tmpdir = tempfile.TemporaryDirectory(prefix="hexbuild-scripts-")
            for name, text in scripts.items():
                local = Path(tmpdir.name) / name
                data = text.encode("utf-8")
                local.write_bytes(data)
                rel = f"{SCRIPTS_DIR}/{name}"
                want[rel] = PackageFile(rel, len(data), hashlib.sha256(data).hexdigest(), 0o755, local)
        rid = release_id(want)
        res.release = lay.prefix + rid
        res.files_total = len(want) + len(models)
        res.bytes_total = sum(f.size for f in want.values()) + sum(m.size for m in models)

        live, staged = _read_live(target, lay, rid, verify=opts.verify)
        plan = _plan(target, lay, live, staged, want, rid, opts)
        model_plan = plan_models(target, models_dir, models)
        res.files_removed = len(plan.stale)
        res.previous = plan.previous
        _check_space(target, info, dest, models_dir, plan, model_plan)
        if opts.dry_run:
            res.plan = {"push": sorted(plan.push), "link": len(plan.link), "copy": len(plan.copy), "keep": len(plan.keep),
                        "remove": sorted(plan.stale), "repair": sorted(plan.repair),
                        "models_push": [m.name for m in model_plan.push], "release": res.release,
                        "swap": plan.swap, "bytes_to_push": plan.push_bytes + model_plan.push_bytes}
            res.files_pushed = len(plan.push) + len(plan.repair) + len(model_plan.push)
            res.bytes_pushed = 0
            res.status = "unchanged" if not res.files_pushed and not plan.swap else "ok"
            return res

        total = plan.push_bytes + model_plan.push_bytes
        label = info.serial or target.spec
        if opts.progress is not None and total:
            task = opts.progress.add_task(f"{label}", total=total)

        def progress(n: int) -> None:
            if _cancel.is_set():
                raise Interrupted("interrupted")
            res.bytes_pushed += n
            if task is not None:
                opts.progress.update(task, advance=n)
            if FAULT_HOOK is not None:
                FAULT_HOOK(target.spec, f"bytes:{res.bytes_pushed}")

        _apply(target, lay, live, plan, want, pkg, opts, progress, res)
        if opts.verify:
            _verify(target, lay, want, progress, res, checked_live=plan.in_place, repaired=plan.repair)
        done = push_models(target, models_dir, model_plan, progress, lambda name: _checkpoint(target, name))
        res.models = done
        res.files_pushed += sum(1 for m in done if m["status"] == "pushed")
        changed = plan.swap or res.files_pushed or res.files_removed
        res.status = "ok" if changed else "unchanged"
    except HexbuildError as e:
        res.status, res.error, res.hint = "failed", e.message, e.hint
    except Exception as e:  # one target's bug must not take the others down
        if ui.verbose:
            import traceback

            traceback.print_exc()
        res.status, res.error = "failed", f"internal error: {type(e).__name__}: {e}"
    finally:
        res.duration_s = round(time.monotonic() - t0, 3)
        if tmpdir is not None:
            tmpdir.cleanup()
        if task is not None:
            opts.progress.update(task, description=f"{info_label(res)} {res.status}")
    return res


def info_label(res: TargetResult) -> str:
    return res.serial or res.target


def _absolute(target: Target, path: str, what: str) -> str:
    expanded = target.expand(path) if hasattr(target, "expand") else path
    norm = posixpath.normpath(expanded)
    if not norm.startswith("/") or norm == "/":
        raise UsageError(f"{what} must be an absolute directory other than /: {path!r}")
    return norm


def _require_ready(target: Target, info: DeviceInfo) -> None:
    if info.state in ("device", "ready"):
        return
    what, fix = not_ready_message(info.state)
    raise EnvironmentMissing(f"{target.spec}: device {info.serial} {what}", hint=fix)


def release_id(files: dict[str, PackageFile]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        f = files[rel]
        h.update(f"{rel}\0{f.sha256}\0{f.mode:o}\n".encode("utf-8"))
    return h.hexdigest()[:16]


def _launch_scripts(target: Target, info: DeviceInfo, pkg: Package, dest: str, models_dir: str,
                    opts: DeployOptions) -> dict[str, str]:
    if not opts.ndev:
        return {}
    try:
        from .runner import launch_scripts
    except ImportError:
        raise EnvironmentMissing("--ndev needs hexbuild.runner.launch_scripts, which this hexbuild lacks") from None
    facts = opts.facts if opts.facts is not None else (pkg.meta.get("llama_cpp") or {})
    scripts = launch_scripts(facts=facts, dest=dest, models_dir=models_dir, ndev=opts.ndev, os=target.os,
                             htp_arch=info.htp_arch)
    for name in scripts:
        if "/" in name or name.startswith("."):
            raise DeployFailed(f"launch script name not allowed: {name!r}")
    return scripts


def _manifest_of(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files"), list) else None


def _user_files(listing: dict[str, RemoteFile]) -> dict[str, RemoteFile]:
    return {k: v for k, v in listing.items() if not k.startswith(".hexbuild/")}


def _read_live(target: Target, lay: _Layout, rid: str, *, verify: bool) -> tuple[_Live, Any]:
    """The live install and the staged release ``rid`` (from an earlier, cut-off run), read
    in one device call; hashes only where nothing else can tell them."""
    staging = lay.release(rid)
    snap = target.snapshot([lay.dest, staging])
    here, staged = snap[lay.dest], snap[staging]
    if here.kind == "file":
        raise DeployFailed(f"{lay.dest} on {target.spec} is a file, not an install directory",
                           hint="remove it or choose another --dest")
    if here.kind == "missing" or not here.is_dir:
        if here.kind == "link":
            _managed_release(target, lay, here.link or "")  # a dangling link must still be ours
        return _Live("missing", None, None, None, {}), staged
    release = None
    root = lay.dest
    if here.kind == "link":
        release = _managed_release(target, lay, here.link or "")
        root = posixpath.join(lay.parent, release)
    manifest = _manifest_of(target.read_file(posixpath.join(root, MANIFEST)))
    files = _user_files(here.files)
    # hash on the device only what cannot be known otherwise: an install without a manifest
    # (adopted), or the live release itself under --verify
    if manifest is None or (verify and manifest.get("release") == rid):
        for rel, digest in target.hash_tree(root).items():
            if rel in files:
                files[rel].sha256 = digest
    else:
        recorded = {f["path"]: f for f in manifest["files"] if isinstance(f, dict) and "path" in f}
        for rel, f in files.items():
            rec = recorded.get(rel)
            # the recorded hash stands for the file only while its size still matches
            if rec and int(rec.get("size", -1)) == f.size:
                f.sha256 = rec.get("sha256")
    return _Live(here.kind, release, root, manifest, files), staged


def _managed_release(target: Target, lay: _Layout, link: str) -> str:
    name = posixpath.basename(link.rstrip("/"))
    where = posixpath.dirname(link.rstrip("/"))
    if where not in ("", lay.parent) or not name.startswith(lay.prefix):
        raise DeployFailed(f"{lay.dest} on {target.spec} is a symlink hexbuild did not make (-> {link})",
                           hint="remove the symlink or choose another --dest")
    return name


@dataclass
class _Plan:
    release_dir: str
    in_place: bool  # the release is already live: repair only
    keep: set[str] = field(default_factory=set)  # already right in the staged release
    link: set[str] = field(default_factory=set)  # hard-linked from the live release
    copy: set[str] = field(default_factory=set)  # copied on the device from the live release
    push: set[str] = field(default_factory=set)  # sent over the wire
    repair: set[str] = field(default_factory=set)  # in-place: replaced one by one, atomically
    fix_mode: set[str] = field(default_factory=set)  # kept, but with the wrong mode
    junk: set[str] = field(default_factory=set)  # in the staged release, not wanted
    stale: set[str] = field(default_factory=set)  # in the live release, not in the new one
    staged_manifest: bool = False
    swap: bool = False
    previous: str | None = None
    push_bytes: int = 0
    sizes: dict[str, int] = field(default_factory=dict)  # of the files copied on the device


def _matches(f: RemoteFile | None, want: PackageFile, *, need_hash: bool = True, ignore_mode: bool = False) -> bool:
    if f is None or f.size != want.size or (not ignore_mode and (f.mode & 0o7777) != want.mode):
        return False
    return not need_hash or f.sha256 == want.sha256


def _plan(target: Target, lay: _Layout, live: _Live, staged_snap: Any, want: dict[str, PackageFile], rid: str,
          opts: DeployOptions) -> _Plan:
    release_name = lay.prefix + rid
    if live.release == release_name and live.manifest is not None and live.manifest.get("release") == rid:
        plan = _Plan(posixpath.join(lay.parent, release_name), in_place=True, previous=live.manifest.get("previous"))
        plan.junk = {rel for rel in live.files if rel not in want and TEMP_NAME.match(posixpath.basename(rel))}
        for rel, w in want.items():
            f = live.files.get(rel)
            if not _matches(f, w, need_hash=opts.verify):
                plan.repair.add(rel)
        plan.push_bytes = sum(want[r].size for r in plan.repair)
        return plan

    plan = _Plan(lay.release(rid), in_place=False, swap=True, previous=live.release)
    if live.kind == "dir":
        plan.previous = lay.prefix + "legacy-" + time.strftime("%Y%m%d%H%M%S")
    staged: dict[str, RemoteFile] = {}
    if staged_snap.kind == "dir":
        listing = staged_snap.files
        plan.staged_manifest = MANIFEST in listing
        staged = _user_files(listing)
        # a half-staged release from a cut-off run: only what still hashes right is kept
        candidates = [r for r, f in staged.items() if r in want and f.size == want[r].size]
        digests = target.hash_files(plan.release_dir, candidates) if candidates else {}
        for rel, f in staged.items():
            f.sha256 = digests.get(rel)
    for rel, w in want.items():
        f = staged.get(rel)
        if f is not None and f.size == w.size and f.sha256 == w.sha256:
            plan.keep.add(rel)
            if (f.mode & 0o7777) != w.mode:
                plan.fix_mode.add(rel)  # pushed before a cut-off run reached its chmod
        elif _matches(live.files.get(rel), w):
            plan.link.add(rel)
        elif _matches(live.files.get(rel), w, ignore_mode=True):
            plan.copy.add(rel)  # same bytes, other mode: copied on the device, never re-sent
            plan.fix_mode.add(rel)
        else:
            plan.push.add(rel)
    plan.junk = set(staged) - plan.keep
    plan.stale = set(live.files) - set(want)
    plan.push_bytes = sum(want[r].size for r in plan.push)
    plan.sizes = {r: want[r].size for r in plan.copy}
    return plan


def _check_space(target: Target, info: DeviceInfo, dest: str, models_dir: str, plan: _Plan,
                 model_plan: ModelPlan) -> None:
    copied = sum(plan.sizes.get(r, 0) for r in plan.copy)
    need_dest = plan.push_bytes + copied + RESERVE if (plan.push or plan.repair or plan.copy) else 0
    need_models = model_plan.push_bytes + RESERVE if model_plan.push else 0
    if not need_dest and not need_models:
        return
    free_dest = info.free_bytes
    where_dest = info.extra.get("free_at") or dest
    checks = []
    if need_models:
        where_m, free_m = target.free_bytes(models_dir)
        if free_m == free_dest and where_m and free_dest is not None and _same_fs(target, where_dest, where_m):
            checks.append((need_dest + need_models, free_dest, where_dest))
        else:
            checks.append((need_dest, free_dest, where_dest))
            checks.append((need_models, free_m, where_m))
    else:
        checks.append((need_dest, free_dest, where_dest))
    for need, free, where in checks:
        if need and free is not None and need > free:
            raise DeployFailed(
                f"not enough space on {info.serial or target.spec} at {where}: {human_size(need)} needed, "
                f"{human_size(free)} free",
                hint="free space on the device (remove old models or installs) or deploy to another --dest")


def _same_fs(target: Target, a: str, b: str) -> bool:
    res = target.capture(["stat", "-c", "%d", a, b])
    ids = res.out.split()
    return res.rc == 0 and len(ids) == 2 and ids[0] == ids[1]


_SWAP = r'''set -e
cd "$1"
name=$2; rel=$3; tmp=$4; legacy=$5; prefix=$6
shift 6
rm -f "$tmp"
ln -s "$rel" "$tmp"
if [ -d "$name" ] && [ ! -L "$name" ]; then mv "$name" "$legacy"; fi
mv -fT "$tmp" "$name"
[ -n "$prefix" ] || exit 0
# the switch is done: drop every release but the kept ones ("$@")
for d in "$prefix"*; do
  [ -e "$d" ] || [ -L "$d" ] || continue
  keep=0
  for k in "$@"; do [ "$d" = "$k" ] && keep=1; done
  [ $keep = 1 ] || rm -rf "$d"
done'''
_STAGE = r'''set -e
R=$1; L=$2; shift 2
mkdir -p "$R"
cd "$R"
while [ $# -gt 0 ]; do
  case $1 in
    rm) rm -f "$2";;
    dir) mkdir -p "$2";;
    ln) ln -f "$L/$2" "$2";;
    cp) cp "$L/$2" "$2";;
    *) echo "unknown staging step $1" >&2; exit 2;;
  esac
  shift 2
done'''
_RENAME_PAIRS = r'''set -e
cd "$1"
shift
while [ $# -gt 0 ]; do mv -f "$1" "$2"; shift 2; done'''


def _device_manifest(want: dict[str, PackageFile], pkg: Package, rid: str, previous: str | None,
                     opts: DeployOptions) -> bytes:
    doc = {
        "schema": 1,
        "hexbuild_version": __version__,
        "release": rid,
        "previous": previous,
        "deployed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **{k: v for k, v in pkg.meta.items() if k not in ("schema", "hexbuild_version", "files")},
        "ndev": opts.ndev or None,
        "scripts": sorted(r[len(SCRIPTS_DIR) + 1:] for r in want if r.startswith(SCRIPTS_DIR + "/")),
        "files": [{"path": r, "size": want[r].size, "sha256": want[r].sha256, "mode": f"{want[r].mode:04o}"}
                  for r in sorted(want)],
    }
    return (json.dumps(doc, indent=1, sort_keys=False) + "\n").encode("utf-8")


def _send(target: Target, root: str, rels: Sequence[str], want: dict[str, PackageFile],
          progress: Callable[[int], None], res: TargetResult, *, temp: bool) -> dict[str, str]:
    """Push ``rels`` under ``root`` (to temporary names when ``temp``); {rel: remote name}."""
    sent: dict[str, str] = {}
    for i, rel in enumerate(sorted(rels)):
        remote = posixpath.join(root, rel)
        name = target.temp_name(remote) if temp else remote
        target.send_file(want[rel].local, name, progress)
        sent[rel] = name
        res.files_pushed += 1
        _checkpoint(target, f"pushed:{i + 1}")
    by_mode: dict[int, list[str]] = {}
    for rel, name in sent.items():
        by_mode.setdefault(want[rel].mode, []).append(posixpath.relpath(name, root))
    target.chmod_in(root, by_mode)
    return sent


def _apply(target: Target, lay: _Layout, live: _Live, plan: _Plan, want: dict[str, PackageFile], pkg: Package,
           opts: DeployOptions, progress: Callable[[int], None], res: TargetResult) -> None:
    rid = plan.release_dir.rsplit("-", 1)[-1]
    if plan.in_place:
        if plan.junk:  # temporary files of a repair that was cut off
            target.remove_in(plan.release_dir, sorted(plan.junk))
        if plan.repair:
            _repair(target, plan.release_dir, plan.repair, want, progress, res)
        return
    R = plan.release_dir
    _checkpoint(target, "stage")
    ops: list[str] = []
    if plan.staged_manifest:
        ops += ["rm", MANIFEST]  # the release is being changed: no longer complete
    for rel in sorted(plan.junk):
        ops += ["rm", rel]
    for d in sorted({posixpath.dirname(r) for r in plan.push | plan.link | plan.copy} - {""} | {".hexbuild"}):
        ops += ["dir", d]
    for rel in sorted(plan.link):
        ops += ["ln", rel]
    for rel in sorted(plan.copy):
        ops += ["cp", rel]
    for chunk in batches(ops, group=2):
        target.sh(_STAGE, R, live.root or R, *chunk, what="staging the new release")
    _checkpoint(target, "linked")
    if plan.push:
        _send(target, R, sorted(plan.push), want, progress, res, temp=False)
    if plan.fix_mode:
        by_mode: dict[int, list[str]] = {}
        for rel in sorted(plan.fix_mode):
            by_mode.setdefault(want[rel].mode, []).append(rel)
        target.chmod_in(R, by_mode)
    _checkpoint(target, "pushed")
    target.write_file(posixpath.join(R, MANIFEST), _device_manifest(want, pkg, rid, plan.previous, opts))
    _checkpoint(target, "manifest")
    legacy = posixpath.basename(plan.previous) if live.kind == "dir" and plan.previous else lay.prefix + "legacy"
    keep = [lay.prefix + rid] + ([plan.previous] if plan.previous else [])
    target.sh(_SWAP, lay.parent, lay.name, lay.prefix + rid, lay.link_tmp, legacy, lay.prefix, *keep,
              what="switching to the new release")
    _checkpoint(target, "swapped")


def _repair(target: Target, root: str, rels: set[str], want: dict[str, PackageFile],
            progress: Callable[[int], None], res: TargetResult) -> None:
    """Replace drifted files of the *live* release one by one: each arrives under a temporary
    name and is renamed over the old one, so every file is always whole."""
    sent = _send(target, root, sorted(rels), want, progress, res, temp=True)
    pairs = [p for rel, name in sorted(sent.items())
             for p in (posixpath.relpath(name, root), rel)]
    for chunk in batches(pairs, group=2):
        target.sh(_RENAME_PAIRS, root, *chunk, what="replacing drifted files")
    res.repaired = (res.repaired or 0) + len(rels)


def _verify(target: Target, lay: _Layout, want: dict[str, PackageFile], progress: Callable[[int], None],
            res: TargetResult, *, checked_live: bool, repaired: set[str]) -> None:
    """Re-hash the live install on the device; repair what drifted. ``checked_live``: the live
    release was hashed while planning and its drift already repaired — re-check only that."""
    root = posixpath.join(lay.parent, res.release) if res.release else lay.dest
    res.verified = len(want)
    if checked_live:
        if repaired:
            digests = target.hash_files(root, sorted(repaired))
            still = [r for r in sorted(repaired) if digests.get(r) != want[r].sha256]
            if still:
                raise DeployFailed(f"{len(still)} file(s) still differ after repair on {target.spec}: {', '.join(still[:5])}")
        res.repaired = res.repaired or 0
        return
    files = _user_files(target.list_files(root, hashes=True))
    bad = {rel for rel, w in want.items() if not _matches(files.get(rel), w)}
    if bad:
        _repair(target, root, bad, want, progress, res)
        again = _user_files(target.list_files(root, hashes=True))
        still = sorted(rel for rel in bad if not _matches(again.get(rel), want[rel]))
        if still:
            raise DeployFailed(f"{len(still)} file(s) still differ after repair on {target.spec}: {', '.join(still[:5])}")
    res.repaired = res.repaired or 0


def _rollback(target: Target, lay: _Layout, res: TargetResult, opts: DeployOptions) -> None:
    here = target.snapshot([lay.dest])[lay.dest]
    kind, link = here.kind, here.link or ""
    if kind != "link":
        raise DeployFailed(f"nothing to roll back on {target.spec}: {lay.dest} is not an install hexbuild made")
    current = posixpath.basename(link.rstrip("/"))
    manifest = _manifest_of(target.read_file(posixpath.join(lay.parent, current, MANIFEST)))
    previous = (manifest or {}).get("previous")
    if not previous or not str(previous).startswith(lay.prefix) or "/" in str(previous):
        raise DeployFailed(f"nothing to roll back to on {target.spec}: no previous install is recorded")
    if target.dest_kind(posixpath.join(lay.parent, previous))[0] != "dir":
        raise DeployFailed(f"the previous install {previous} on {target.spec} is gone")
    res.release, res.previous = previous, current
    if opts.dry_run:
        res.plan = {"swap": True, "release": previous, "push": [], "remove": []}
        res.status = "ok"
        return
    target.sh(_SWAP, lay.parent, lay.name, previous, lay.link_tmp, lay.prefix + "legacy", "",
              what="switching back to the previous release")
    res.status = "ok"

