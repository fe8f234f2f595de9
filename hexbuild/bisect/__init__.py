"""`hexbuild bisect`: the commit that made a figure slower, or a result wrong, found by building,
deploying and measuring revisions of the checkout in a worktree of its own.

Modules: gitrepo (the git it needs, the checkout left as it was), workspace (the worktree and
the build directory kept between bisects), search (which revision next, what the verdicts
conclude), measure (llama-bench until the noise decides, or `hexbuild test`'s gates), record
(the bisect in the bench history, for --resume), report (JSON, markdown, chart), run (the steps).
"""

from .run import METRICS, BisectRequest, raise_unless_found, run_bisect

__all__ = ["METRICS", "BisectRequest", "raise_unless_found", "run_bisect"]
