"""`hexbuild inspect`: what a Hexagon NPU library's code does, read from the binary alone with
open LLVM's disassembler (no SDK, no hardware).

- ``find_objdump(explicit=None) -> Objdump`` (objdump.py): llvm-objdump 17+, or exit 3
- ``inspect_library(path, objdump, func=None) -> LibraryReport`` (report.py): one pass over the
  disassembly as it is written, in one address window per CPU (scan.py, windows.py), giving
  every function's report (analysis.py: loops, spills in-loop and in frame set-up, soft-float
  and divide helpers, calls in loops); PLT slots named from .rela.plt (elfmeta.py)
- ``compare(report, baseline) -> [Finding]`` and ``write_baseline`` (baseline.py): the gate
- ``gate_checks(pkg, baseline=...)`` / ``add_to_report`` (gate.py): the gate in verify and release
- ``resolve(path, addrs)`` and ``crash_offsets(text)`` (addr2line.py): crash offsets → function+
  offset and source line (DWARF); DSP crash offsets found in device logs
- ``render_disasm`` (disasm.py): annotated disassembly of one function, from the model
  (model.py: functions → packets → instructions) that analysis.analyze reads
"""

from .addr2line import CrashSite, crash_offsets, resolve
from .baseline import compare, load_baseline, write_baseline
from .objdump import Objdump, find_objdump
from .report import LibraryReport, inspect_library, libraries
from .requests import Gate, addr2line_request, disasm_request, gate_baseline

__all__ = ["CrashSite", "Gate", "LibraryReport", "addr2line_request", "disasm_request", "gate_baseline", "Objdump", "compare", "crash_offsets", "find_objdump",
           "inspect_library", "libraries", "load_baseline", "resolve", "write_baseline"]
