"""ggml-hex lines: the Hexagon backend's registry, arch, sessions and failures."""

from __future__ import annotations

import re
from typing import Any

from .lines import LineFamily

# ggml-hexagon.cpp GGML_LOG_INFO lines (0.3.20 and 0.3.36 forms):
#   "ggml-hex: Hexagon backend (experimental) : allocating new registry : ndev %zu\n"
#   "ggml-hex: Hexagon Arch version v%d\n" / "ggml-hex: Hexagon Arch version v%d, DMA64 %s\n"
#   "ggml-hex: new session: %s : session-id %d domain-id %d uri %s handle 0x%lx\n"   (0.3.20)
#   "ggml-hex: %s new session : session-id %d domain-id %d uri %s handle 0x%lx\n"    (0.3.36)
#   "ggml-hex: allocating new session: %s\n"
_HEX_REGISTRY = re.compile(r"ggml-hex: Hexagon backend .*allocating new registry : ndev (\d+)")
_HEX_ARCH = re.compile(r"ggml-hex: Hexagon Arch version v(\d+)(?:, DMA64 (enabled|disabled))?")
_HEX_ALLOC = re.compile(r"ggml-hex: allocating new session: (\S+)")
_HEX_SESSION = re.compile(r"ggml-hex: (?:new session: (\S+) :|(\S+) new session :) session-id (-?\d+) domain-id (-?\d+) uri (\S+)")
_HEX_ERROR = re.compile(r"ggml-hex:.*\b(?:failed|error|exceeds)\b", re.IGNORECASE)
_SKEL = re.compile(r"file:///([^?]+)")


class HexagonLines(LineFamily):
    """Fills ``hexagon``."""

    def _hex(self) -> dict[str, Any]:
        if self.out["hexagon"] is None:
            self.out["hexagon"] = {"arch": None, "dma64": None, "ndev": None, "sessions": [], "errors": []}
        return self.out["hexagon"]

    def feed(self, line: str) -> bool:
        if m := _HEX_SESSION.search(line):
            name = m[1] or m[2]
            skel = _SKEL.match(m[5])
            sessions = self._hex()["sessions"]
            sessions[:] = [s for s in sessions if s["name"] != name]
            sessions.append({"name": name, "session_id": int(m[3]), "domain_id": int(m[4]), "uri": m[5],
                             "skel": skel[1] if skel else None})
        elif m := _HEX_ARCH.search(line):
            self._hex()["arch"] = int(m[1])
            self._hex()["dma64"] = None if m[2] is None else m[2] == "enabled"
        elif m := _HEX_REGISTRY.search(line):
            self._hex()["ndev"] = int(m[1])
        elif m := _HEX_ALLOC.search(line):
            sessions = self._hex()["sessions"]
            if not any(s["name"] == m[1] for s in sessions):
                sessions.append({"name": m[1], "session_id": None, "domain_id": None, "uri": None, "skel": None})
        elif _HEX_ERROR.search(line):
            self._hex()["errors"].append(line[line.index("ggml-hex"):].strip())
        else:
            return False
        return self.hit()
