"""Reading what `hexbuild deploy` left on a target: where it is and its manifest."""

from __future__ import annotations

import json
from typing import Any, Mapping

from ..artifacts.npu import CPU, npu_support
from ..ui import ui

MANIFEST = ".hexbuild/manifest.json"
PROMPTS_DIR = ".hexbuild/prompts"
DEFAULT_DEST = {"android": "/data/local/tmp/llama.cpp", "linux": "~/llama.cpp"}
DEFAULT_MODELS = {"android": "/data/local/tmp/gguf", "linux": "~/gguf"}


def read_manifest(target, dest: str) -> dict | None:
    raw = target.read_file(f"{dest.rstrip('/')}/{MANIFEST}")
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        ui.warn(f"{dest}/{MANIFEST} is not valid JSON; using forms every revision understands")
        return None
    return data if isinstance(data, dict) else None


def installed_tools(manifest: Mapping[str, Any] | None) -> set[str] | None:
    """The bin/ entries a deployed manifest lists (None when it lists no files)."""
    files = (manifest or {}).get("files")
    if not isinstance(files, list):
        return None
    return {f["path"][4:] for f in files if isinstance(f, dict) and str(f.get("path", "")).startswith("bin/")}


def default_models_dir(target) -> str:
    """Where models go when --models-dir and deploy.models_dir say nothing: beside a qemu:
    install (it lives in hexbuild's cache, not the user's home), else the OS's convention."""
    caps = getattr(target, "caps", None)
    if getattr(caps, "emulator", False) and getattr(target, "root", None):
        import posixpath

        return posixpath.join(posixpath.dirname(target.root.rstrip("/")), "gguf")
    return DEFAULT_MODELS.get(getattr(target, "os", None) or "android", DEFAULT_MODELS["android"])


def cpu_only(manifest: Mapping[str, Any] | None) -> bool:
    """No Hexagon host library in the deployed package (artifacts/npu.py: the one rule)."""
    return npu_support(manifest) == CPU


def default_dest(target) -> str:
    """Where the install is when --dest and deploy.dest say nothing: a local:/qemu: target's own
    directory, else the convention of the target's OS."""
    if getattr(getattr(target, "caps", None), "this_machine", False) and getattr(target, "root", None):
        return target.root
    return DEFAULT_DEST.get(getattr(target, "os", None) or "android", DEFAULT_DEST["android"])


def loader_of(runtime: Any, dest: str) -> dict[str, str] | None:
    """{"path", "library_path"} of the bundled glibc loader a deployed manifest's ``runtime``
    record names (deploy --bundle-runtime), else None."""
    if not isinstance(runtime, dict) or not isinstance(runtime.get("loader"), str):
        return None
    base = dest.rstrip("/")
    libdir = str(runtime.get("library_dir") or "runtime")
    return {"path": f"{base}/{runtime['loader']}", "library_path": f"{base}/lib:{base}/{libdir}"}


def through_loader(argv: list[str], loader: dict[str, str] | None) -> list[str]:
    """``argv`` started by the bundled loader: the board's own glibc is never consulted."""
    if not loader:
        return argv
    return [loader["path"], "--library-path", loader["library_path"], *argv]
