"""The search: which revision to test next, and what the verdicts so far conclude.

Revisions are indexed oldest first: 0 is the good revision (measured first, as the baseline),
n - 1 the bad one. The first bad commit is the lowest index whose verdict is bad with every
lower index good. The ends are confirmed before the search, as ``git bisect`` users do by hand:
the bad revision is measured right after the good one (a bad end that measures good ends the
search: there is no regression to find), then each step halves the candidates between the
highest good and the lowest bad, so n revisions take 2 + ceil(log2(n - 1)) measured steps, and
the figures of both sides of the first bad commit are always measured. Skipped revisions (did
not build, did not run, or the noise did not settle) are stepped around, as ``git bisect skip``
does; when only skipped ones are left between a good and a bad, the result names them all. A
bad end that is skipped leaves the bad end the user's word: a step then settles more than the
midpoint would (the side that comes back bad has its bad end measured: 2^(t-1) candidates
there and 2^(t-1) - 1 on the other side, t = ceil(log2(candidates + 1))).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

GOOD, BAD, SKIP = "good", "bad", "skip"


@dataclass
class Search:
    n: int
    verdicts: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.n < 2:
            raise ValueError("a search needs a good and a bad revision")

    def set(self, index: int, verdict: str) -> None:
        if verdict not in (GOOD, BAD, SKIP):
            raise ValueError(verdict)
        self.verdicts[index] = verdict

    @property
    def lo(self) -> int:
        """The highest good index below the lowest bad one."""
        hi = self.hi
        goods = [i for i, v in self.verdicts.items() if v == GOOD and i < hi]
        return max(goods, default=0)

    @property
    def hi(self) -> int:
        """The lowest measured bad index, or n - 1 (bad by the user's word)."""
        return min((i for i, v in self.verdicts.items() if v == BAD), default=self.n - 1)

    @property
    def hi_measured(self) -> bool:
        return self.verdicts.get(self.hi) == BAD

    def candidates(self) -> list[int]:
        """Indices still to test: untested ones between lo and hi, and hi while unmeasured."""
        lo, hi = self.lo, self.hi
        out = [i for i in range(lo + 1, hi) if i not in self.verdicts]
        if not self.hi_measured and hi not in self.verdicts:
            out.append(hi)
        return out

    def next(self) -> int | None:
        """The next index to measure (the baseline first), or None when the search is done."""
        if 0 not in self.verdicts:
            return 0
        if self.verdicts[0] != GOOD:
            return None
        if self.n - 1 not in self.verdicts:
            return self.n - 1  # the bad end, confirmed before the search
        if self.verdicts[self.n - 1] == GOOD:
            return None  # the bad revision measured good: no regression to find
        left = self.candidates()
        if not left:
            return None
        lo, hi = self.lo, self.hi
        if self.hi_measured:
            ideal = (lo + hi) // 2
        else:
            span = hi - lo  # candidates lo+1..hi
            ideal = lo + 2 ** (max(1, math.ceil(math.log2(span + 1))) - 1)
        return min(left, key=lambda i: (abs(i - ideal), i))

    def done(self) -> bool:
        return self.next() is None

    def first_bad(self) -> int | None:
        """The first bad index, when the verdicts name exactly one: a measured bad right after
        a good (the baseline counts)."""
        return self.hi if self.hi_measured and self.hi == self.lo + 1 else None

    def suspects(self) -> list[int]:
        """The indices the first bad commit may be: the measured bad end and the skipped ones
        just below it."""
        return list(range(self.lo + 1, self.hi + 1))


def expected_steps(n: int) -> int:
    """Measured steps of a search over n revisions with nothing skipped: the two ends, then
    ceil(log2(n - 1)) halvings of the revisions between them."""
    return 2 + math.ceil(math.log2(n - 1))
