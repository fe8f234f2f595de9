"""``--ndev`` launch scripts: made by the runner for this device and install, shipped in the
release under ``scripts/`` like any package file."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..errors import DeployFailed
from ..targets.base import DeviceInfo, Target
from .options import DeployOptions
from .package import Package, PackageFile

SCRIPTS_DIR = "scripts"


def launch_scripts_for(target: Target, info: DeviceInfo, pkg: Package, dest: str, models_dir: str,
                       opts: DeployOptions) -> dict[str, str]:
    """{file name: text}; empty without --ndev."""
    if not opts.ndev:
        return {}
    from ..runner import launch_scripts
    from ..runner.defaults import run_defaults

    facts = opts.facts if opts.facts is not None else (pkg.meta.get("llama_cpp") or {})
    scripts = launch_scripts(facts=facts, dest=dest, models_dir=models_dir, ndev=opts.ndev, os=target.os,
                             htp_arch=info.htp_arch, runtime=opts.runtime if opts.runtime_files else None,
                             launcher=target.launcher(), defaults=run_defaults(target, pkg.listing()))
    for name in scripts:
        if "/" in name or name.startswith("."):
            raise DeployFailed(f"launch script name not allowed: {name!r}")
    return scripts


def script_files(scripts: dict[str, str], into: Path) -> dict[str, PackageFile]:
    """Write ``scripts`` under ``into`` (a temporary directory the caller owns); the package
    files they become, at ``scripts/<name>``."""
    files = {}
    for name, text in scripts.items():
        local = into / name
        data = text.encode("utf-8")
        local.write_bytes(data)
        rel = f"{SCRIPTS_DIR}/{name}"
        files[rel] = PackageFile(rel, len(data), hashlib.sha256(data).hexdigest(), 0o755, local)
    return files
