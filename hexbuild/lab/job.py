"""What a lab job runs on a Linux board: the steps (each a runner Invocation, rendered against
the package as the job will unpack it, see board.py), the job script that runs them
(templates/lab/job.sh.j2) and the LAVA test definition that starts the script.

Rendered paths name the job's directory by a marker (board.JOB_DIR); the script knows the real
directory only when it runs, so every shell word is quoted around the marker and the marker
becomes ``"$job"``. Nothing else of a word is left unquoted.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from .. import __version__
from ..errors import UsageError
from ..runner import Invocation, _slug, render_template
from .board import JOB_DIR

SCRIPT = "hexbuild-job.sh"
TESTDEF = "hexbuild.yaml"
TEST_NAME = "hexbuild"
REQUEST_SCHEMA = "hexbuild.lab-request/1"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class Step:
    """One command of the job: a test case named ``name`` on the lab's pages."""

    name: str
    invocation: Invocation
    title: str = ""
    role: str = "run"  # run | bench | ops | ppl-htp | ppl-cpu: what the result mapping does with it
    session: str | None = None  # test ops: the HTP session the step tests
    meta: dict[str, Any] = field(default_factory=dict)  # what the mapping needs again (bench: the config)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "session": self.session, "title": self.title,
                "meta": self.meta, **self.invocation.to_json(), "defaults": self.invocation.defaults,
                "cpu_only": self.invocation.cpu_only}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Step":
        inv = Invocation(d["kind"], d["tool"], list(d["argv"]), dict(d["env"]), d["cwd"],
                         [(g, list(a)) for g, a in d.get("defaults") or []], bool(d.get("cpu_only")))
        return cls(d["name"], inv, d.get("title") or "", d.get("role") or "run", d.get("session"),
                   dict(d.get("meta") or {}))


def step_name(*parts: str) -> str:
    """A test case name LAVA takes (letters, digits, '-', '_', '.')."""
    return "-".join(_slug(p) for p in parts if p)


def sh_word(value: str) -> str:
    """``value`` as one sh word, the job directory marker in it becoming "$job"."""
    pieces = value.split(JOB_DIR)
    return '"$job"'.join(shlex.quote(p) if p else "" for p in pieces) or "''"


def request_doc(kind: str, steps: list[Step], *, args: dict[str, Any]) -> dict[str, Any]:
    """What the job was asked to do, printed at its start: `hexbuild lab results` maps a job's
    results with it alone."""
    return {"schema": REQUEST_SCHEMA, "hexbuild_version": __version__, "kind": kind, "args": args,
            "steps": [s.to_json() for s in steps]}


def script(title: str, steps: list[Step], request: dict[str, Any], *, download: dict[str, str] | None = None) -> str:
    """The job script (POSIX sh)."""
    for s in steps:
        bad = next((k for k in s.invocation.env if not _ENV_NAME.match(k)), None)
        if bad is not None:
            raise UsageError(f"{bad!r} is not an environment variable name a shell can set")
    context = {
        "title": title,
        # ASCII JSON on one line: it passes through the quoted here-document unchanged
        "request_json": json.dumps(request, ensure_ascii=True, separators=(",", ":")),
        "bench_cases": any(s.role == "bench" for s in steps),
        "download": None if download is None else {
            "name": download["name"], "url": shlex.quote(download["url"]), "file": sh_word(download["file"]),
            "dir": sh_word(download["file"].rsplit("/", 1)[0])},
        "steps": [{"name": s.name, "title": s.title or s.invocation.tool, "cwd": sh_word(s.invocation.cwd),
                   "env": [(k, sh_word(v)) for k, v in s.invocation.env.items()],
                   "argv": " ".join(sh_word(a) for a in s.invocation.argv), "bench": s.role == "bench"}
                  for s in steps],
    }
    return render_template("lab/job.sh.j2", **context)


def test_definition(title: str) -> str:
    """The LAVA test definition in the job tarball (JSON is YAML too: no YAML writer needed)."""
    doc = {"metadata": {"format": "Lava-Test Test Definition 1.0", "name": TEST_NAME,
                        "description": f"hexbuild {__version__}: {title}"},
           "run": {"steps": [f"sh ./{SCRIPT}"]}}
    return json.dumps(doc, indent=2) + "\n"
