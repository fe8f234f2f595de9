"""CMakeUserPresets.json: the revision ships the Snapdragon presets under docs/backend/<dir>/ and
its docs say to copy the file to the checkout root, the only place CMake reads it from.

hexbuild never overwrites a user's own file:

- no CMakeUserPresets.json at the root: the docs file is copied there for the build and
  removed afterwards (only if it is still that copy), so the checkout is left as it was found;
- an identical file is already there: it is used as is;
- a different file: used if it (or a file it includes, or CMakePresets.json) defines the
  preset, with a note; otherwise the build stops with a UsageError saying how to resolve it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..ui import ui

USER_PRESETS = "CMakeUserPresets.json"
PROJECT_PRESETS = "CMakePresets.json"


@dataclass
class PresetsPlan:
    action: str             # copy | same | user | project
    docs_file: str | None   # docs/backend/<dir>/CMakeUserPresets.json, relative to the checkout
    note: str

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "docs_file": self.docs_file, "note": self.note}


def preset_names(path: Path, _seen: set[Path] | None = None) -> set[str]:
    """Configure preset names a presets file defines, following its "include" list."""
    seen = _seen if _seen is not None else set()
    path = path.resolve()
    if path in seen or not path.is_file():
        return set()
    seen.add(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{path}: not valid JSON ({e})", hint="fix or remove the file") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a CMake presets file (not a JSON object)")
    names = {p["name"] for p in data.get("configurePresets", []) if isinstance(p, dict) and isinstance(p.get("name"), str)}
    for inc in data.get("include", []) or []:
        if isinstance(inc, str):
            names |= preset_names(path.parent / inc, seen)
    return names


def plan_presets(root: Path, docs_file: str | None, preset: str) -> PresetsPlan:
    user = root / USER_PRESETS
    project_names = preset_names(root / PROJECT_PRESETS) if (root / PROJECT_PRESETS).is_file() else set()
    docs = root / docs_file if docs_file else None
    docs_names = preset_names(docs) if docs is not None and docs.is_file() else set()

    if not user.exists():
        if preset in docs_names:
            return PresetsPlan("copy", docs_file, f"copying {docs_file} to {USER_PRESETS} for the build "
                                                  "(removed afterwards)")
        if preset in project_names:
            return PresetsPlan("project", docs_file, f"preset {preset} is in {PROJECT_PRESETS}")
        known = sorted(docs_names | project_names)
        where = docs_file or PROJECT_PRESETS
        raise UsageError(f"preset {preset!r} is not defined in {where}"
                         + (f" (it has: {', '.join(known)})" if known else ""),
                         hint="pass --preset with one of those, or --os/--build-type for the revision's own")

    if docs is not None and docs.is_file() and user.read_bytes() == docs.read_bytes():
        return PresetsPlan("same", docs_file, f"{USER_PRESETS} at the root is the same as {docs_file}")
    user_names = preset_names(user)
    if preset in user_names or preset in project_names:
        note = f"using your {USER_PRESETS}" + (f", which differs from {docs_file}" if docs_file else "")
        return PresetsPlan("user", docs_file, note)
    raise UsageError(
        f"your {USER_PRESETS} differs from {docs_file or 'the revision'} and does not define preset {preset!r}",
        hint=(f"copy {docs_file} over it (cp {docs_file} {USER_PRESETS}), merge its presets into yours, "
              f"or pass --preset with one of yours: {', '.join(sorted(user_names)) or '(none)'}"))


class PresetsCopy:
    """Puts the docs file in place for a build (action "copy") and takes it away after."""

    def __init__(self, root: Path, plan: PresetsPlan):
        self.root = root
        self.plan = plan
        self.copied: bytes | None = None

    def __enter__(self) -> "PresetsCopy":
        if self.plan.action == "copy" and self.plan.docs_file:
            data = (self.root / self.plan.docs_file).read_bytes()
            dst = self.root / USER_PRESETS
            tmp = dst.with_name(f".{USER_PRESETS}.hexbuild-tmp")
            tmp.write_bytes(data)
            tmp.chmod(0o644)
            # link(2) fails if the file appeared meanwhile: never replace a user's file.
            try:
                os.link(tmp, dst)
            except FileExistsError:
                raise UsageError(f"{USER_PRESETS} appeared at the checkout root while preparing the build",
                                 hint="run the build again") from None
            finally:
                tmp.unlink(missing_ok=True)
            self.copied = data
            ui.detail(self.plan.note)
        elif self.plan.action == "user":
            ui.info(self.plan.note)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.copied is None:
            return
        dst = self.root / USER_PRESETS
        try:
            if dst.read_bytes() == self.copied:
                dst.unlink()
        except FileNotFoundError:
            pass
        self.copied = None
