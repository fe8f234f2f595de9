"""CPY (cpy-ops.c), which the backend also sends for CONT: f32 <-> f16 of one shape, and any copy
of one type (ggml_hexagon_supported_cpy: a conversion cannot reshape at the same time).

ggml's copy writes the source's elements, read in its logical order (dim 0 fastest), to the
destination's elements in its own logical order. The kernel's paths, each taken: same type and
shape (row copies, through views), f32 -> f16 and f16 -> f32 of one shape (into a destination
view too), same type reshaped with both contiguous (one flat copy), a view flattened into
[ne00*ne01, ne02] (the flat fast path), and a permuted source (CONT of a permute: element by
element). Tolerances as test-backend-ops: 0 for a copy of one type, 1e-7 for a conversion."""

from __future__ import annotations

import numpy as np

from ..tree import KernelTree
from . import Family
from .tensors import case, contiguous_nb, dst, grown_nb, label, rounded, src

TOLERANCE = 1e-7


def _swapped_nb(t: str, base_ne: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """The strides of ggml_permute(x, 1, 0, 2, 3) of a contiguous tensor of base_ne."""
    nb = contiguous_nb(t, base_ne)
    return (nb[1], nb[0], nb[2], nb[3])


def make(tree: KernelTree, op: str, t: str, rng: np.random.Generator) -> list:
    cases = []
    conv = {"f32": "f16", "f16": "f32"}[t]
    # one type, one shape: contiguous, and from a view
    for ne, grow in (((100, 6, 3, 1), None), ((64, 5, 2, 2), (2, 2, 1, 1))):
        x = rounded(rng.uniform(-150, 150, tuple(reversed(ne))), t)
        s = src(t, x, grown_nb(t, ne, grow) if grow else None)
        cases.append(case(op, t, label(ne=ne) + (" view" if grow else "") + f" {t}->{t}", [s], dst(t, ne), x, 0.0))
    # conversion, one shape: contiguous, from a view, into a view
    for ne, grow, into_view in (((4096, 3, 1, 1), None, False), ((33, 7, 2, 1), (2, 1, 1, 1), False),
                                ((128, 6, 1, 1), None, True)):
        x = rounded(rng.uniform(-150, 150, tuple(reversed(ne))), t)
        s = src(t, x, grown_nb(t, ne, grow) if grow else None)
        out = dst(conv, ne, grown_nb(conv, ne, (3, 1, 1, 1)) if into_view else None)
        shape = label(ne=ne) + (" view" if grow else "") + (" into view" if into_view else "") + f" {t}->{conv}"
        cases.append(case(op, t, shape, [s], out, rounded(x, conv), TOLERANCE))
    # one type, reshaped: both contiguous; a view flattened; a permuted source
    x = rounded(rng.uniform(-150, 150, (1, 3, 8, 30)), t)
    cases.append(case(op, t, label(src=(30, 8, 3, 1), dst=(60, 12, 1, 1)), [src(t, x)], dst(t, (60, 12, 1, 1)),
                      x.reshape(-1), 0.0))
    ne = (40, 6, 5, 1)
    x = rounded(rng.uniform(-150, 150, tuple(reversed(ne))), t)
    cases.append(case(op, t, label(src=ne, dst=(240, 5, 1, 1)) + " view", [src(t, x, grown_nb(t, ne, (2, 1, 1, 1)))],
                      dst(t, (240, 5, 1, 1)), x.reshape(-1), 0.0))
    base = (24, 10, 3, 1)
    y = rounded(rng.uniform(-150, 150, tuple(reversed(base))), t)
    view = np.swapaxes(y, 2, 3)                        # ggml dims 0 and 1 swapped: ne (10, 24, 3, 1)
    cases.append(case(op, t, label(src=(10, 24, 3, 1)) + " permuted", [src(t, view, _swapped_nb(t, base))],
                      dst(t, (10, 24, 3, 1)),
                      view.reshape(-1), 0.0))
    return cases


FAMILY = Family(ops=("CPY",), types=("f32", "f16"), default_types=("f32", "f16"), make=make)
