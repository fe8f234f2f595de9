"""A run's defaults for a target and a package, decided here and nowhere else. `run`, `bench`,
`serve`, `chat`, `test`, `release --smoke` and `lab` render through ``prepare_on``, which asks
``run_defaults``; the launch scripts `deploy --ndev` writes ask it too.

- threads (``-t``): what the user gave (``--threads``, ``run.threads`` set in a config or the
  environment), else the target's own (``local:`` and ``qemu:`` run the programs on this machine:
  its cores, since threads beyond them only contend), else the 6 of llama.cpp's own scripts (a
  phone's big cores);
- the CPU mask (``--cpu-mask 0xfc --cpu-strict 1`` of the older trees' adb scripts): the
  target's fit of it (none where the machine lacks those cores);
- the NPU (``--device HTP…``, ``-ngl 99``, ``--poll 1000``, the session variables): only for a
  package with the Hexagon backend (artifacts/npu.py), and not for a run kept on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..artifacts.npu import CPU, npu_support

PHONE_THREADS = 6  # llama.cpp's run-*.sh and run.py: -t 6
# The CPU mask the older trees' adb run scripts pin llama.cpp's threads with: a phone's cores
# 2-7 (the big ones). Targets fit it to their machine (Target.fit_cpu_mask).
REVISION_CPU_MASK = "0xfc"


@dataclass(frozen=True)
class RunDefaults:
    threads: str  # -t; a comma list is llama-bench's own matrix syntax ("2,4")
    cpu_mask: str | None  # None: neither --cpu-mask nor --cpu-strict
    npu: bool  # False: no HTP device selection, -ngl or --poll

    def to_json(self) -> dict[str, Any]:
        return {"threads": self.threads, "cpu_mask": self.cpu_mask, "npu": self.npu}


# What a phone gets: the revision's own scripts' defaults, for a package with the backend.
PHONE = RunDefaults(threads=str(PHONE_THREADS), cpu_mask=REVISION_CPU_MASK, npu=True)


def _threads_text(threads: int | str | Sequence[int] | None) -> str | None:
    if threads is None or threads == "" or (isinstance(threads, (list, tuple)) and not threads):
        return None
    if isinstance(threads, (list, tuple)):
        return ",".join(str(t) for t in threads)
    return str(threads)


def run_defaults(target: Any, manifest: Mapping[str, Any] | None, *,
                 threads: int | str | Sequence[int] | None = None, cpu: bool = False) -> RunDefaults:
    """The defaults of a run of the package described by ``manifest`` (an install's or a
    package's) on ``target``; ``threads`` is what the user gave (None: nothing), ``cpu`` keeps
    the run off the NPU whatever the package holds."""
    given = _threads_text(threads)
    return RunDefaults(threads=given or str(target.default_threads() or PHONE_THREADS),
                       cpu_mask=target.fit_cpu_mask(REVISION_CPU_MASK),
                       npu=not cpu and npu_support(manifest) != CPU)


def given_threads(settings: Any) -> int | None:
    """``run.threads`` when a config file, the environment or a flag set it; None when it is the
    built-in default, which then yields to the target's own."""
    return None if settings.origin("run.threads") == "default" else settings["run.threads"]
