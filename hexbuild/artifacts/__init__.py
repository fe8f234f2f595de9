"""What a build produces, checked and shipped: `verify` (is this package runnable on the
target?), the manifest (every file's size, sha256, mode and ELF identity) and the
reproducible release tarball.

The build, deploy and release stages use this API:

- ``verify_package(pkg, os=..., htp_versions=[...]) -> VerifyReport`` (``.ok``, ``.checks``, ``.to_json()``)
- ``build_manifest(pkg, meta=None) -> dict`` and ``write_manifest(pkg, meta=None)`` (PKG/manifest.json)
- ``write_package(pkg, out, meta=None) -> PackageResult(path, sha256, size, manifest)``
- ``inspect`` (a subpackage, imported on demand): what the NPU code does, from the binary alone
"""

from .elf import ElfInfo, NotElf, hexagon_arch, read_elf
from .manifest import build_manifest, load_meta, package_os, require_package_dir, write_manifest
from .tarball import PackageResult, default_name, write_package
from .verify import Check, VerifyReport, parse_htp_versions, system_libs, verify_package

__all__ = ["Check", "ElfInfo", "NotElf", "PackageResult", "VerifyReport", "build_manifest", "default_name",
           "hexagon_arch", "load_meta", "package_os", "parse_htp_versions", "require_package_dir", "read_elf", "system_libs",
           "verify_package", "write_manifest", "write_package"]
