"""The kernel check's op families: one module per family, each declaring the ops it covers and
making their cases (inputs, a float64 reference that does not share the code under test, the
tolerance). A new family is one module and one line in FAMILIES."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..cases import KernelCase
from ..tree import KernelTree


@dataclass(frozen=True)
class Family:
    ops: tuple[str, ...]                       # the HTP op names it makes cases for
    types: tuple[str, ...]                     # the types it can vary (--types picks among them)
    default_types: tuple[str, ...]             # what it runs when --types is not given
    make: Callable[[KernelTree, str, str, np.random.Generator], list[KernelCase]]  # (tree, op, type, rng)


FAMILIES = (
    "matmul",           # MUL_MAT
    "matmul_id",        # MUL_MAT_ID
    "binary",           # ADD, SUB, MUL, DIV, ADD_ID
    "unary",            # RMS_NORM, RMS_NORM_MUL, NORM, L2_NORM, SCALE, SQR, SQRT, NEG, EXP, SIGMOID, SOFTPLUS, TANH
    "act",              # SILU, GELU, SWIGLU, SWIGLU_OAI, GEGLU
    "softmax",          # SOFTMAX
    "rope",             # ROPE
    "flash_attn",       # FLASH_ATTN_EXT
    "rows",             # GET_ROWS, SET_ROWS
    "cpy",              # CPY (and CONT)
    "shape",            # REPEAT, FILL, DIAG, TRI, PAD, CONCAT
    "reduce",           # SUM_ROWS, CUMSUM
    "argsort",          # ARGSORT
    "solve_tri",        # SOLVE_TRI
    "ssm_conv",         # SSM_CONV
    "gated_delta_net",  # GATED_DELTA_NET
)


def families() -> dict[str, Family]:
    """op name -> the family that makes its cases (a module declares FAMILY, or FAMILIES when its
    ops vary different types)."""
    out: dict[str, Family] = {}
    for name in FAMILIES:
        module = importlib.import_module(f"{__name__}.{name}")
        for fam in getattr(module, "FAMILIES", None) or (module.FAMILY,):
            for op in fam.ops:
                out[op] = fam
    return out
