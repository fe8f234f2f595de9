"""Many targets at once: each deployed in its own thread (``deploy.parallel``), a TargetResult
for every one, failures included."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from ..errors import UsageError
from ..targets.base import Target
from .checkpoints import cancel
from .models import local_model
from .one import deploy_one
from .options import DeployOptions
from .package import Package, load_package
from .result import TargetResult
from .runtime import bundle, check_package_os, package_os


def deploy(package: Path | Package | None, targets: list[Target], options: DeployOptions | None = None) -> list[TargetResult]:
    """Deploy to every target (in parallel threads); a result per target, failures included."""
    opts = options or DeployOptions()
    if package is None and not opts.rollback:
        raise UsageError("no package to deploy")
    owned = package is not None and not isinstance(package, Package)
    pkg = load_package(Path(package)) if owned else package
    try:
        if pkg is not None and not opts.rollback:
            _check_npu(pkg, opts)
        for t in targets:
            if pkg is not None:
                check_package_os(pkg, t)
            t.preflight()
        if pkg is not None and opts.bundle_runtime and package_os(pkg) != "android":
            from ..toolchain.sysroot import resolve_sysroot

            files, record = bundle(pkg, resolve_sysroot(opts.sysroot))
            opts = replace(opts, runtime_files=files, runtime=record)  # this package's, not the caller's object
        models = [local_model(Path(m)) for m in opts.models]
        results: list[TargetResult | None] = [None] * len(targets)

        def one(i: int) -> None:
            results[i] = deploy_one(targets[i], pkg, models, opts)

        cancel.clear()
        workers = max(1, min(opts.parallel, len(targets)))
        if workers == 1:
            for i in range(len(targets)):
                one(i)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deploy") as pool:
                futures = [pool.submit(one, i) for i in range(len(targets))]
                try:
                    for f in futures:
                        f.result()
                except BaseException:
                    cancel.set()  # stops transfers at their next chunk; installs stay whole
                    raise
        return [r for r in results if r is not None]
    finally:
        if owned:
            pkg.close()


def _check_npu(pkg: Package, opts: DeployOptions) -> None:
    """The one rule (artifacts/npu.py) before any target is touched: a CPU-only package is said
    once; launch scripts for HTP sessions (--ndev, deploy.ndev) of one are exit 12."""
    from ..artifacts.npu import cpu_only_note, sessions_refused
    from ..errors import CpuFallback

    note = cpu_only_note(pkg.listing())
    if note is None:
        return
    if opts.ndev:
        message, hint = sessions_refused(str(pkg.root), "--ndev")
        raise CpuFallback(message, hint=hint)
    note.say()  # once per command (CpuOnly.say): bisect deploys the good revision beside every step's
