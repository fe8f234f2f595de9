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


FAMILIES = ("matmul", "binary", "unary", "act", "softmax", "rope", "rows", "cpy", "shape", "reduce", "argsort", "solve_tri", "matmul_id", "flash_attn", "ssm_conv", "gated_delta_net")


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
