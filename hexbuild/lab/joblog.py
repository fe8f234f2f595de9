r"""Reading a LAVA job's log (``GET /jobs/N/logs/``, or what ``lava-run`` prints): one entry per
line, each a flow mapping ``{"dt": TIME, "lvl": LEVEL, "msg": …}``. The board's output is the ``target`` lines;
the job script (job.py) frames each step's output between markers, and prints the job's
directory and its request first.

No YAML library: each line is a YAML flow mapping of double-quoted scalars (lava_common's
``dump``), which JSON reads once LAVA's ``! "…"`` tags on the numbers of ``results`` entries are
undone and YAML's own escapes are made JSON's. The board's output can hold any character: PyYAML
writes a no-break space as ``\_``, a bell as ``\a``, U+2028 as ``\L``, a control byte as
``\x01``, none of which JSON knows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterator

from .board import JOB_DIR

_BEGIN = re.compile(r"^<<hexbuild-step (\S+) begin>>$")
_END = re.compile(r"^<<hexbuild-step (\S+) end (\d+)>>$")
_DIR = re.compile(r"^<<hexbuild-job-dir (.+)>>$")
_REQUEST = re.compile(r"^<<hexbuild-request (\{.*\})>>$")
# a YAML double-quoted escape: \xXX, \uXXXX, \UXXXXXXXX, or one character (YAML 1.1, 5.7)
_YAML_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", re.DOTALL)
_YAML_SINGLE = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
                "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
                "_": "\xa0", "L": "\u2028", "P": "\u2029"}


@dataclass
class StepOutput:
    name: str
    lines: list[str] = field(default_factory=list)
    exit_code: int | None = None  # None: the step did not end (the job stopped first)
    started: datetime | None = None
    ended: datetime | None = None

    @property
    def output(self) -> bytes:
        return "".join(line + "\n" for line in self.lines).encode("utf-8")

    @property
    def duration_s(self) -> float:
        if self.started and self.ended:
            return max(0.0, (self.ended - self.started).total_seconds())
        return 0.0


@dataclass
class JobLog:
    job_dir: str | None = None
    request: dict[str, Any] | None = None
    steps: dict[str, StepOutput] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # LAVA's own error lines (why a job was incomplete)

    def real_path(self, text: str) -> str:
        """A rendered string with the job directory marker as the path the job had on the board."""
        return text.replace(JOB_DIR, self.job_dir) if self.job_dir else text


def entries(text: str) -> Iterator[dict[str, Any]]:
    for raw in text.splitlines():
        if raw.startswith("- {"):  # the server's log: a YAML list
            body = raw[2:]
        elif raw.startswith("{"):  # lava-run's, on its stderr: one object a line
            body = raw
        else:
            continue
        try:
            entry = json.loads(body)
        except ValueError:
            try:
                entry = json.loads(_as_json(body.replace(': ! "', ': "')))
            except ValueError:
                continue
        if isinstance(entry, dict):
            yield entry


def _as_json(body: str) -> str:
    """A line of double-quoted YAML scalars as JSON: each escape as the character it stands for,
    written the way JSON escapes it."""
    def one(m: re.Match) -> str:
        code = m.group(1)
        if len(code) > 1:  # \xXX, \uXXXX, \UXXXXXXXX
            return json.dumps(chr(int(code[1:], 16)))[1:-1]
        if code not in _YAML_SINGLE:
            raise ValueError(f"no YAML escape \\{code}")
        return json.dumps(_YAML_SINGLE[code])[1:-1]

    return _YAML_ESCAPE.sub(one, body)


def _when(entry: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(entry.get("dt")))
    except ValueError:
        return None


def parse(text: str) -> JobLog:
    log = JobLog()
    current: StepOutput | None = None
    for entry in entries(text):
        lvl, msg = entry.get("lvl"), entry.get("msg")
        if lvl == "error" and isinstance(msg, str):
            log.errors.append(msg)
        if lvl != "target" or not isinstance(msg, str):
            continue
        if current is not None:
            m = _END.match(msg)
            if m and m.group(1) == current.name:
                current.exit_code, current.ended = int(m.group(2)), _when(entry)
                current = None
            else:
                current.lines.append(msg)
            continue
        if m := _BEGIN.match(msg):
            current = log.steps[m.group(1)] = StepOutput(m.group(1), started=_when(entry))
        elif m := _DIR.match(msg):
            log.job_dir = m.group(1)
        elif (m := _REQUEST.match(msg)) and log.request is None:
            try:
                log.request = json.loads(m.group(1))
            except ValueError:
                pass
    return log
