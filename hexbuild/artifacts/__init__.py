"""What a build produces, checked and shipped: `verify` (is this package runnable on the
target?), the manifest (every file's size, sha256, mode and ELF identity) and the
reproducible release tarball.

The build, deploy and release stages use this API:

- ``verify_package(pkg, os=..., htp_versions=[...]) -> VerifyReport`` (``.ok``, ``.checks``, ``.to_json()``)
- ``build_manifest(pkg, meta=None) -> dict`` and ``write_manifest(pkg, meta=None)`` (PKG/manifest.json)
- ``write_package(pkg, out, meta=None) -> PackageResult(path, sha256, size, manifest)``
- ``inspect`` (a subpackage, imported on demand): what the NPU code does, from the binary alone

Each name is imported from its module on first use (PEP 562), so a command that needs one
function (the build plan reads the HTP versions) does not load the tarball writer and verify.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ElfInfo": "elf", "NotElf": "elf", "hexagon_arch": "elf", "read_elf": "elf",
    "build_manifest": "manifest", "load_meta": "manifest", "package_os": "manifest",
    "require_llama_package": "manifest", "require_package_dir": "manifest", "write_manifest": "manifest",
    "PackageResult": "tarball", "default_name": "tarball", "is_cpu_only": "tarball", "write_package": "tarball",
    "Check": "verify", "VerifyReport": "verify", "parse_htp_versions": "elf", "system_libs": "verify",
    "verify_package": "verify", "HashCache": "hashcache",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
