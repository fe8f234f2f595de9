"""What a tree's HTP sources say about running their kernels: the op context's layout, the ops its
enum has and the entry function of each, the units to compile, the group size of its activation
quantizer. Read from the tree's own files (htp/*.h, main.c, CMakeLists.txt), never from a table
of revisions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..source import HEXAGON_DIR, read_source

# Which entry function runs an op: the same names in every revision that has the op (main.c's
# dispatch calls these; the 0.3.20 tree through one proc_*_req per family, 0.3.28 through
# execute_op). An op is run only when the tree's enum has it and its header declares the entry.
ENTRY = {
    "MUL_MAT": "op_matmul", "MUL_MAT_ID": "op_matmul_id",
    "MUL": "op_binary", "ADD": "op_binary", "SUB": "op_binary", "DIV": "op_binary", "ADD_ID": "op_binary",
    "RMS_NORM": "op_unary", "RMS_NORM_MUL": "op_unary", "NORM": "op_unary", "L2_NORM": "op_unary",
    "SCALE": "op_unary", "SQR": "op_unary", "SQRT": "op_unary", "UNARY_NEG": "op_unary",
    "UNARY_EXP": "op_unary", "UNARY_SIGMOID": "op_unary", "UNARY_SOFTPLUS": "op_unary", "UNARY_TANH": "op_unary",
    "UNARY_SILU": "op_activations", "UNARY_GELU": "op_activations", "GLU_SWIGLU": "op_activations",
    "GLU_SWIGLU_OAI": "op_activations", "GLU_GEGLU": "op_activations",
    "SOFTMAX": "op_softmax", "ROPE": "op_rope", "FLASH_ATTN_EXT": "op_flash_attn_ext",
    "SET_ROWS": "op_set_rows", "GET_ROWS": "op_get_rows", "SUM_ROWS": "op_sum_rows", "CPY": "op_cpy",
    "REPEAT": "op_repeat", "ARGSORT": "op_argsort", "SSM_CONV": "op_ssm_conv", "CUMSUM": "op_cumsum",
    "FILL": "op_fill", "DIAG": "op_diag", "SOLVE_TRI": "op_solve_tri", "PAD": "op_pad", "CONCAT": "op_concat",
    "GATED_DELTA_NET": "op_gated_delta_net", "TRI": "op_tri",
}
# Units the harness does not compile: the DSP's session and queue code (main.c, the generated
# skel), the worker pool (the runtime's takes its place) and the HMX units (no open assembler).
SKIP_UNITS = {"main.c", "worker-pool.c", "htp_iface_skel.c", "htp_iface_stub.c"}

_ENUM_RE = re.compile(r"enum\s+htp_op(?:_code)?\s*\{(?P<body>.*?)\}", re.S)
_MEMBER_RE = re.compile(r"^\s*HTP_OP_([A-Z0-9_]+)\b", re.M)
_DECL_RE = re.compile(r"\bint\s+(op_[a-z0-9_]+)\s*\(\s*struct\s+htp_ops_context\s*\*")
_GROUP_RE = re.compile(r"FP32_QUANTIZE_GROUP_SIZE\s+(\d+)\s+CACHE")


@dataclass
class KernelTree:
    root: Path              # the checkout
    htp: Path               # ggml/src/ggml-hexagon/htp
    revision: str | None
    abi: int                # 1: tensors in the op context (htp-msg.h); 2: tensor pointers; 3: work queues and
                            # host-computed kernel parameters (0.3.32 on), which the harness does not model
    ops: dict[str, str]     # op name -> entry function, for the ops the tree has
    units: list[str]        # the .c files to compile (names in htp/)
    hmx_units: list[str]    # units that exist for HMX only
    htp_versions: list[str]
    group_size: int         # FP32_QUANTIZE_GROUP_SIZE, the activation quantizer's group
    defines: dict[str, str] = field(default_factory=dict)

    @property
    def runnable(self) -> bool:
        """Whether the harness can drive this revision's op entry points."""
        return self.abi in (1, 2)


def read_tree(path: Path | str) -> KernelTree:
    """The kernel facts of a checkout; a checkout without the Hexagon backend is bad input."""
    facts = read_source(path)
    root = Path(facts.path)
    htp = root / HEXAGON_DIR / "htp"
    if not facts.hexagon or not htp.is_dir():
        raise UsageError(f"{root} has no Hexagon backend ({HEXAGON_DIR}/htp): nothing to check",
                         hint="point --source at a llama.cpp checkout whose ggml has ggml-hexagon")
    headers = "\n".join(p.read_text(errors="replace") for p in sorted(htp.glob("*.h")))
    enum = _ENUM_RE.search(headers)
    if not enum:
        raise UsageError(f"{htp} declares no enum of HTP ops (htp_op or htp_op_code): an unknown layout")
    names = _MEMBER_RE.findall(enum.group("body"))
    declared = set(_DECL_RE.findall(headers))
    ops = {n: ENTRY[n] for n in names if n in ENTRY and ENTRY[n] in declared}
    units = sorted(p.name for p in htp.glob("*.c") if p.name not in SKIP_UNITS)
    hmx = [u for u in units if u.startswith("hmx-")]
    ctx_h = htp / "htp-ctx.h"
    # main.c's DDR scratchpad (MUL_MAT_ID's expert mappings) exists in some revisions only
    defines = {"HXK_DDR_SPAD": "1"} if ctx_h.is_file() and "ddr_spad_base" in ctx_h.read_text(errors="replace") else {}
    cmake = (root / HEXAGON_DIR / "CMakeLists.txt")
    m = _GROUP_RE.search(cmake.read_text(errors="replace")) if cmake.is_file() else None
    ctx = (htp / "htp-ctx.h").read_text(errors="replace") if (htp / "htp-ctx.h").is_file() else ""
    abi = 1 if (htp / "htp-msg.h").is_file() else 3 if ("kernel_params" in ctx or "work_queue" in ctx) else 2
    return KernelTree(root=root, htp=htp, revision=facts.revision, abi=abi, ops=ops,
                      units=[u for u in units if u not in hmx], hmx_units=hmx,
                      htp_versions=list(facts.htp_versions), group_size=int(m.group(1)) if m else 128,
                      defines=defines)
