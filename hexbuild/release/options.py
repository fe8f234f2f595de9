"""What a release is asked to do: the OSes, dist/, targets, smoke command, prebuilt packages."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import UsageError

REPORT = "release-report.json"
MANIFEST = "manifest.json"
SUMS = "SHA256SUMS"
SCHEMA = 1
OSES = ("android", "linux")


@dataclass
class ReleaseOptions:
    oses: list[str]
    dist: Path
    targets: list[str] = field(default_factory=list)
    smoke: str | None = None
    strict: bool = False
    prebuilt: list[Path] = field(default_factory=list)  # install prefixes to release instead of building
    os_given: bool = False  # --os was on the command line (it then labels a single --prebuilt)
    allow_cpu_fallback: bool = False  # a smoke run whose HTP sessions did not open still passes
    tests: list[str] = field(default_factory=list)  # `hexbuild test` kinds run after deploy: ops, ppl
    test_model: str | None = None  # the GGUF (and text) `--test ppl` measures on
    test_text: str | None = None
    force: bool = False  # build even when the build is up to date (build --force)
    lab: Any = None  # lab.session.LabOptions: the --test gates run as jobs on a LAVA lab's boards

    @classmethod
    def from_settings(cls, settings: Settings, *, oses: list[str] | None = None, targets: list[str] | None = None,
                      smoke: str | None = None, prebuilt: list[str] | None = None,
                      strict: bool | None = None) -> "ReleaseOptions":
        from ..config import is_strict

        chosen = _parse_oses(oses) if oses else [settings["build.os"]]
        dist = Path(settings["release.dist_dir"]).expanduser()
        if not dist.is_absolute() and settings.origin("release.dist_dir") == "file" and settings.config_file:
            dist = settings.config_file.parent / dist  # relative to the file that says so
        smoke = smoke.strip() if smoke is not None else None
        if smoke == "":
            raise UsageError("--smoke needs a command, e.g. --smoke 'llama-cli --version'")
        wanted = list(targets) if targets else list(settings["deploy.targets"])
        if smoke and not wanted:
            raise UsageError("--smoke runs on the deploy targets, and none were given",
                             hint="add --target adb:SERIAL (or set deploy.targets)")
        return cls(oses=chosen, dist=dist, targets=wanted, smoke=smoke,
                   strict=is_strict(settings) if strict is None else strict,
                   prebuilt=[Path(p) for p in prebuilt or []], os_given=bool(oses))


def _parse_oses(values: list[str]) -> list[str]:
    out: list[str] = []
    for value in values:
        for item in value.split(","):
            item = item.strip().lower()
            if not item:
                continue
            if item not in OSES:
                raise UsageError(f"--os must be one of {', '.join(OSES)} (comma-separated), got {item!r}")
            if item not in out:
                out.append(item)
    if not out:
        raise UsageError("--os names no OS")
    return out
