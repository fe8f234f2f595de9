"""test-backend-ops console output: per-case results, per-backend totals and failing cases."""

from __future__ import annotations

import re
from typing import Any

from .lines import LineFamily

# test-backend-ops.cpp console printer:
#   "  %s(%s): " then "OK" / "FAIL" / "not supported [%s]" (optional "[%s] NMSE = %.9f > %.9f " etc. before);
#   error details go to stderr, so with 2>&1 they can come first: "[MUL_MAT] ERR = 0.96 > 0.0005   MUL_MAT(...): FAIL"
#   "  %zu/%zu tests passed\n", "  Backend %s: OK|FAIL", "Backend %zu/%zu: %s\n", "%zu/%zu backends passed\n"
_OP_CASE = re.compile(r"^(.*?)(?<!\w)([A-Za-z][A-Za-z0-9_]*)\((.*)\): (.*)$")
_OPS_BACKEND = re.compile(r"^Backend (\d+)/(\d+): (\S+)\s*$")
_OPS_PASSED = re.compile(r"^\s*(\d+)/(\d+) tests passed\s*$")
_OPS_STATUS = re.compile(r"^\s*Backend (\S+): (OK|FAIL)\s*$")
_OPS_BACKENDS = re.compile(r"^\s*(\d+)/(\d+) backends passed\s*$")
_OPS_SKIP = re.compile(r"^\s+Skipping\b")  # print_backend_init: "  %s" with the skip reason


def parse_case(line: str) -> tuple[str, str, str, str | None] | None:
    """One test case's line → (op, params, passed|failed|not_supported|skipped, failure detail)."""
    m = _OP_CASE.match(line)
    if not m:
        return None
    op, params, rest = m[2], m[3], m[4].strip()
    if rest == "OK" or rest.endswith(" OK"):
        return op, params, "passed", None
    if rest == "FAIL" or rest.endswith(" FAIL"):
        return op, params, "failed", " ".join(x for x in (m[1].strip(), rest[:-4].strip()) if x) or None
    if rest.startswith("not supported"):
        return op, params, "not_supported", None
    if rest.startswith("skipping"):
        return op, params, "skipped", None
    return None


class BackendOpsLines(LineFamily):
    """Fills ``backend_ops``; cases accumulate, credited to the backend announced last."""

    def __init__(self, out: dict[str, Any]) -> None:
        super().__init__(out)
        self._backend: str | None = None

    def _ops(self) -> dict[str, Any]:
        if self.out["backend_ops"] is None:
            self.out["backend_ops"] = {"passed": 0, "failed": 0, "not_supported": 0, "skipped": 0,
                                       "backends": [], "backends_passed": None, "backends_total": None,
                                       "failures": []}
        return self.out["backend_ops"]

    def _backend_entry(self, name: str) -> dict[str, Any]:
        for b in self._ops()["backends"]:
            if b["name"] == name:
                return b
        entry = {"name": name, "tests_passed": None, "tests_total": None, "status": None}
        self._ops()["backends"].append(entry)
        return entry

    def feed(self, line: str) -> None:
        case = parse_case(line)
        if case is not None:
            op, params, status, detail = case
            ops = self._ops()
            ops[status] += 1
            if status == "failed":
                ops["failures"].append({"backend": self._backend, "op": op, "params": params,
                                        "case": f"{op}({params})", "detail": detail})
            self.matched += 1
            return
        if m := _OPS_BACKEND.match(line):
            self._backend = m[3]
            self._backend_entry(m[3])
        elif m := _OPS_PASSED.match(line):
            if self._backend is None:
                return
            entry = self._backend_entry(self._backend)
            entry["tests_passed"], entry["tests_total"] = int(m[1]), int(m[2])
        elif m := _OPS_STATUS.match(line):
            self._backend_entry(m[1])["status"] = m[2]
        elif _OPS_SKIP.match(line) and self._backend is not None:
            self._backend_entry(self._backend)["status"] = "SKIPPED"
        elif m := _OPS_BACKENDS.match(line):
            ops = self._ops()
            ops["backends_passed"], ops["backends_total"] = int(m[1]), int(m[2])
        else:
            return
        self.matched += 1
