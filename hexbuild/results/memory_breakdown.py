"""The memory breakdown table llama.cpp prints at exit (llama_memory_breakdown_print)."""

from __future__ import annotations

import re

from .lines import LineFamily

# llama-context.cpp / common/fit.cpp memory breakdown templates:
#   header "%s: | %s | %s   %s    %s   %s   %s   %s    %s |"
#   device "%s: | %s | %s = %s + (%s = %s + %s + %s) + %s |"
#   other  "%s: | %s | %s   %s    %s = %s + %s + %s    %s |"
_MB_FN = r"_memory_breakdown_print: "
_MB_HEADER = re.compile(_MB_FN + r"\| memory breakdown \[MiB\] \|")
_MB_DEVICE = re.compile(_MB_FN + r"\|\s+- (.+?)\s+\|\s+(\d+) = (\d+) \+ \(\s*(\d+) =\s+(\d+) \+\s+(\d+) \+\s+(\d+)\) \+\s+(-?\d+) \|")
_MB_OTHER = re.compile(_MB_FN + r"\|\s+- (.+?)\s+\|\s+(\d+) =\s+(\d+) \+\s+(\d+) \+\s+(\d+)\s+\|")


class MemoryBreakdownLines(LineFamily):
    """Fills ``memory_breakdown``; a new header starts the table afresh."""

    def feed(self, line: str) -> bool:
        rows = self.out["memory_breakdown"]
        if _MB_HEADER.search(line):
            rows.clear()
        elif m := _MB_DEVICE.search(line):
            name, desc = m[1], None
            if dm := re.match(r"^(\S+) \((.*)\)$", name):
                name, desc = dm[1], dm[2]
            rows.append({"name": name, "description": desc, "kind": "device", "total": int(m[2]),
                         "free": int(m[3]), "self": int(m[4]), "model": int(m[5]), "context": int(m[6]),
                         "compute": int(m[7]), "unaccounted": int(m[8])})
        elif m := _MB_OTHER.search(line):
            rows.append({"name": m[1], "description": None, "kind": "host" if m[1] == "Host" else "buffer_type",
                         "total": None, "free": None, "self": int(m[2]), "model": int(m[3]),
                         "context": int(m[4]), "compute": int(m[5]), "unaccounted": None})
        else:
            return False
        return self.hit()
