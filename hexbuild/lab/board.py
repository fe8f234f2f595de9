"""A lab board as the job will find it, for rendering: the package unpacked in the job's own
directory, which exists only once LAVA has made it (``/lava-<id>/…/tests/0_hexbuild`` on an
SSH board). hexbuild renders every command against this view with the same runner as
`hexbuild run` (prepare_on), so the job runs the same argv, environment and defaults; the
paths hold a marker that the job script replaces with the real directory (see job.py).

The view answers what rendering reads (the OS, the install's manifest, the files it holds) and
refuses everything that would change a device: nothing is sent to a board from here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import UsageError
from ..targets.base import DeviceInfo, RemoteFile, Target, TargetCaps

# The job's directory on the board, as rendered paths name it: replaced by "$job" in the job
# script. Not a path a program could name by chance (the shell words around it are quoted).
JOB_DIR = "/@hexbuild-job@"
INSTALL = f"{JOB_DIR}/llama.cpp"
MODELS = f"{JOB_DIR}/gguf"


class PackageBoard(Target):
    """The install a lab job makes from ``manifest`` (the device manifest it ships)."""

    kind = "lab"
    caps = TargetCaps(package_oses=("linux",))

    def __init__(self, spec: str, manifest: Mapping[str, Any], *, os_name: str = "linux") -> None:
        self.spec = spec
        self.os = os_name
        self.manifest = dict(manifest)

    def expand(self, path: str) -> str:
        return path

    def read_file(self, remote: str) -> bytes | None:
        from ..runner import MANIFEST

        if remote.rstrip("/") == f"{INSTALL}/{MANIFEST}":
            return json.dumps(self.manifest).encode("utf-8")
        return None

    def list_files(self, root: str, *, hashes: bool = True) -> dict[str, RemoteFile]:
        files = self.manifest.get("files") or []
        prefix = root.rstrip("/") + "/"
        out = {}
        for f in files:
            full = f"{INSTALL}/{f['path']}"
            if full.startswith(prefix):
                out[full[len(prefix):]] = RemoteFile(full[len(prefix):], int(f["size"]), int(str(f["mode"]), 8),
                                                     f.get("sha256") if hashes else None)
        return out

    def probe(self, dest: str) -> DeviceInfo:
        # Which board of the type runs the job is the lab's choice: its SoC is not known here.
        return DeviceInfo(self.spec, self.kind, self.os, "unknown",
                          htp_arch=self.manifest.get("htp_arch"))

    def default_threads(self) -> int | None:
        return None  # llama.cpp's scripts' 6, as on a phone: the board's cores are not known here

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise UsageError("a lab board is reached through its lab's jobs only")

    def push(self, local: Path, remote: str, *, mode: int | None = None, progress=None) -> None:
        self._refuse()

    def remove(self, paths: Sequence[str], *, recursive: bool = False) -> None:
        self._refuse()

    def rename(self, src: str, dst: str) -> None:
        self._refuse()

    def write_file(self, remote: str, data: bytes, *, mode: int = 0o644) -> None:
        self._refuse()

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, on_output=None) -> int:
        return self._refuse()
