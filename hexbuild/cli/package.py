"""hexbuild package: a reproducible release tarball with manifest.json and SHA256SUMS."""

from __future__ import annotations

from typing import Optional

import typer

from . import common


def package(
    pkg: str = typer.Argument(..., metavar="PKG", help="The install prefix, e.g. pkg-snapdragon/llama.cpp."),
    output: Optional[str] = typer.Option(None, "--output", "-o", metavar="FILE",
                                         help="Tarball to write, or a directory for the default name "
                                              "(llama.cpp-<os>-<revision>-hexagon.tar.gz in the current directory; -cpu.tar.gz for a package without the Hexagon backend)."),
    os_name: Optional[str] = typer.Option(None, "--os", metavar="android|linux",
                                          help="OS recorded in the manifest (default: the package's manifest, else build.os)."),
) -> None:
    """Pack PKG under llama.cpp/ with manifest.json and SHA256SUMS, byte-for-byte reproducibly."""
    import os
    from pathlib import Path

    from ..artifacts import default_name, is_cpu_only, load_meta, package_os, require_llama_package, write_package
    from ..artifacts.tarball import check_package
    from ..ui import human_size, ui

    s = common.settings(**{"build.os": os_name})
    path = require_llama_package(Path(pkg))
    meta = load_meta(path)
    meta["os"] = package_os(path, os_name, s["build.os"])
    revision = (meta.get("llama_cpp") or {}).get("revision")
    name = default_name(meta["os"], revision, cpu_only=is_cpu_only(path, meta))
    out = Path(output) if output else Path(name)
    if output and output.endswith(("/", os.sep)) and not out.exists():
        out.mkdir(parents=True)  # "dist/": a directory to make, as pip wheel -w makes its own
    if out.is_dir():
        out = out / name
    entries = check_package(path, out)  # what it would refuse, before it says it packs
    ui.info(f"packing {path} -> {out}")
    result = write_package(path, out, meta, entries=entries)
    ui.result(result.to_json(),
              f"{result.path}  {human_size(result.size)}  {len(result.manifest['files'])} files\n"
              f"sha256 {result.sha256}")


def register(app: typer.Typer) -> None:
    app.command("package")(package)
