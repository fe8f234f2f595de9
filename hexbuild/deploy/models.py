"""Models for ``deploy --model``: pushed to the models directory under a temporary name and renamed
into place, skipped when the device already has the same bytes (size, then a recorded or
on-device sha256 — never re-sent just to compare)."""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import UsageError
from ..artifacts.hashcache import HashCache
from ..targets.base import ByteProgress, Target

MODELS_INDEX = ".hexbuild/models.json"
TEMP_NAME = re.compile(r"^\..+\.hexbuild-([0-9a-f]{8}|part)$")  # posix.temp_name, model parts


@dataclass
class Model:
    local: Path
    name: str
    size: int
    sha256: str


def require_gguf(path: Path | str) -> Path:
    """A local model as deploy ships it: a GGUF file named .gguf, or one line (exit 2: the same
    rows as plan --model, a directory, nothing there, not GGUF). Cheap: a stat and four bytes."""
    from ..plan.gguf_layout import require_model_file

    path = require_model_file(path)
    if not path.name.endswith(".gguf"):
        raise UsageError(f"not a .gguf model file: {path}")
    return path


def check_local(models: list[str | None]) -> None:
    """Before any work: each model given as an existing local path is a GGUF (require_gguf); the
    others are names in the device's models directory, paths on it, or URLs, for later."""
    for m in models:
        if m and "://" not in m and Path(m).expanduser().exists():
            require_gguf(m)


def local_model(path: Path) -> Model:
    path = require_gguf(path)
    with HashCache() as cache:
        size, digest = cache.one(path)
    return Model(path, path.name, size, digest)


@dataclass
class ModelPlan:
    models_dir: str
    push: list[Model] = field(default_factory=list)
    skip: list[Model] = field(default_factory=list)
    index: dict[str, Any] = field(default_factory=dict)
    leftovers: list[str] = field(default_factory=list)  # parts of pushes that were cut off
    index_changed: bool = False

    @property
    def push_bytes(self) -> int:
        return sum(m.size for m in self.push)


def recorded_sha256(target: Target, path: str) -> str | None:
    """The sha256 deploy recorded for the model at ``path`` (its models directory's index), when
    the file is unchanged since (same size and mtime); None otherwise."""
    models_dir, name = posixpath.split(path)
    rec = _manifest_of_index(target.read_file(posixpath.join(models_dir, MODELS_INDEX))).get(name) or {}
    if not rec.get("sha256"):
        return None
    f = target.list_files(models_dir, hashes=False).get(name)
    return rec["sha256"] if f is not None and rec.get("size") == f.size and rec.get("mtime") == f.mtime else None


def plan_models(target: Target, models_dir: str, models: list[Model]) -> ModelPlan:
    plan = ModelPlan(models_dir)
    if not models:
        return plan
    present = target.list_files(models_dir, hashes=False)
    plan.leftovers = sorted(r for r in present if "/" not in r and TEMP_NAME.match(r))
    plan.index = (_manifest_of_index(target.read_file(posixpath.join(models_dir, MODELS_INDEX))))
    unsure = []
    for m in models:
        f = present.get(m.name)
        if f is None or f.size != m.size:
            plan.push.append(m)
            continue
        rec = plan.index.get(m.name) or {}
        if rec.get("size") == f.size and rec.get("mtime") == f.mtime and rec.get("sha256") == m.sha256:
            plan.skip.append(m)
        else:
            unsure.append((m, f))
    if unsure:
        # same size, no trustworthy record: hash on the device (cheaper than re-sending GBs)
        digests = target.hash_files(models_dir, [m.name for m, _ in unsure])
        for m, f in unsure:
            if digests.get(m.name) == m.sha256:
                plan.skip.append(m)
                plan.index[m.name] = {"size": f.size, "mtime": f.mtime, "sha256": m.sha256}
                plan.index_changed = True
            else:
                plan.push.append(m)
    return plan


def _manifest_of_index(raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def push_models(target: Target, models_dir: str, plan: ModelPlan, progress: ByteProgress,
                checkpoint: Callable[[str], None]) -> list[dict[str, Any]]:
    """Push what ``plan`` says; one {name, size, status} per model."""
    out = [{"name": m.name, "size": m.size, "status": "unchanged"} for m in plan.skip]
    if not plan.push:
        if plan.index_changed:
            _write_models_index(target, models_dir, plan.index)
        return out
    target.ensure_dirs([models_dir, posixpath.join(models_dir, ".hexbuild")])
    if plan.leftovers:
        target.remove_in(models_dir, plan.leftovers)
    for m in plan.push:
        final = posixpath.join(models_dir, m.name)
        part = posixpath.join(models_dir, f".{m.name}.hexbuild-part")
        target.send_file(m.local, part, progress)
        checkpoint(f"model:{m.name}")
        target.sh('chmod 644 "$1" && mv -f "$1" "$2"', part, final, what=f"installing {m.name}")
        out.append({"name": m.name, "size": m.size, "status": "pushed"})
    present = target.list_files(models_dir, hashes=False)
    for m in plan.push:
        f = present.get(m.name)
        if f is not None:
            plan.index[m.name] = {"size": f.size, "mtime": f.mtime, "sha256": m.sha256}
    _write_models_index(target, models_dir, plan.index)
    return out


def _write_models_index(target: Target, models_dir: str, index: dict[str, Any]) -> None:
    target.write_file(posixpath.join(models_dir, MODELS_INDEX), (json.dumps(index, indent=1) + "\n").encode("utf-8"))
