"""llama.cpp's layer placement for a --tensor-split, and the split that balances a model's
repacked bytes over k sessions."""

from __future__ import annotations

import bisect
from typing import Sequence


def llama_assign(ratios: Sequence[float], n_layer: int) -> list[int]:
    """The device index llama.cpp gives each of the n_layer + 1 layers (output last) for
    ``--tensor-split ratios`` and -ngl >= n_layer + 1; float32 like the C++ code."""
    import numpy as np

    f32 = np.float32
    if not ratios or all(r == 0 for r in ratios):
        ratios = [1.0] * max(1, len(ratios))  # default split: equal free memory on every session
    splits, total = [], f32(0)
    for r in ratios:
        total = f32(total + f32(r))
        splits.append(total)
    points = [float(f32(s / total)) for s in splits]
    act = n_layer + 1
    return [bisect.bisect_right(points, float(f32(f32(il) / f32(act)))) for il in range(act)]


def bytes_per_session(weights: Sequence[int], assignment: Sequence[int], ndev: int) -> list[int]:
    out = [0] * ndev
    for w, d in zip(weights, assignment):
        out[d] += w
    return out


def balance(per_session: Sequence[int]) -> float:
    total = sum(per_session)
    return max(per_session) * len(per_session) / total if total else 1.0


def min_max_cap(weights: Sequence[int], k: int) -> int:
    """The smallest possible largest-group sum over all splits of ``weights`` into at most k
    contiguous groups. Exact: sums are integers, and greedy filling tells whether a cap works."""
    lo, hi = max(weights, default=0), sum(weights)

    def groups_needed(cap: int) -> int:
        n, acc = 1, 0
        for w in weights:
            if acc + w > cap:
                n, acc = n + 1, w
            else:
                acc += w
        return n

    while lo < hi:
        mid = (lo + hi) // 2
        if groups_needed(mid) <= k:
            hi = mid
        else:
            lo = mid + 1
    return lo


def split_ends(weights: Sequence[int], k: int, cap: int) -> list[int]:
    """Exclusive end index of each of exactly k non-empty contiguous groups, none above cap
    (needs len(weights) >= k and cap >= min_max_cap(weights, k))."""
    n, ends, acc, start = len(weights), [], 0, 0
    for i, w in enumerate(weights):
        groups_left = k - len(ends)  # counting the open one
        # close the open group when w would overflow it, or when each remaining layer must
        # open a group of its own to reach exactly k
        if i > start and groups_left > 1 and (acc + w > cap or n - i == groups_left - 1):
            ends.append(i)
            start, acc = i, 0
        acc += w
    ends.append(n)
    return ends


def ratios_for(ends: Sequence[int], n_items: int) -> list[int]:
    """Integer ratios whose cumulative split points sit half a layer before each group end,
    so float32 rounding can never move a layer across a boundary."""
    points = [2 * e - 1 for e in ends[:-1]] + [2 * n_items]
    return [b - a for a, b in zip([0] + points[:-1], points)]


# -- the plan ---------------------------------------------------------------------------------
