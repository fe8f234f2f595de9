"""Every module in tests/infra/ is a pytest plugin: the fixtures that start real daemons
(Docker engine, adbd devices, sshd) and fetch real llama.cpp trees. Each daemon is started
once per session on first use and stopped by its PID at the end."""

import os
import pkgutil
from pathlib import Path

# One test cache for the whole run, fixed before any test isolates XDG_CACHE_HOME: the compiled
# ELF files, trees and images live there, and a test that points XDG_CACHE_HOME at its own
# tmp_path (for hexbuild's caches) would otherwise compile every ELF file again (2-3 s a test).
os.environ["HEXBUILD_TEST_CACHE"] = str(Path(os.environ.get("HEXBUILD_TEST_CACHE") or Path(
    os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hexbuild-tests").resolve())

pytest_plugins = [f"tests.infra.{m.name}" for m in pkgutil.iter_modules([str(Path(__file__).parent / "infra")])]

import signal  # noqa: E402

import pytest  # noqa: E402

# A suite started in the background by a shell without job control (`cmd &` in a script, some CI
# runners) inherits SIGINT ignored, and so would every hexbuild it spawns: Python then installs
# no KeyboardInterrupt handler, and the Ctrl-C tests would wait for an exit that never comes.
# A handler here (not SIG_IGN) makes children start with SIGINT at its default again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def fresh_ui(monkeypatch):
    """``hexbuild.ui.ui`` and the CLI's global-flag state are process-wide: every test starts
    from what a new process has, and whatever it changes is put back afterwards."""
    from hexbuild.cli.common import state
    from hexbuild.ui import _ci_provider, ui

    for name, value in (("json", False), ("verbose", 0), ("quiet", False), ("result_emitted", False),
                        ("warnings", []), ("ci", _ci_provider())):
        monkeypatch.setattr(ui, name, value)
    monkeypatch.setattr(state, "config_file", None)
    return ui


# The files that take longest go first. scripts/test.sh runs the suite on one pytest-xdist worker
# per core (`--dist loadfile --no-loadscope-reorder`: a file stays on one worker, in this order),
# so a long file started last would leave one worker busy alone at the end. From --durations of
# a warm run; a file not named here keeps its place after these.
FIRST = ("test_release_real", "test_build", "test_release", "test_serve", "test_bisect_real", "test_bisect", "test_deploy",
         "test_real_hexagon", "test_deploy_rollback", "test_deploy_lock", "test_serve_real", "test_doctor_device",
         "test_pull", "test_inspect_real", "test_run_device", "test_wire", "test_real_hexagon_board",
         "test_real_linux", "test_build_open", "test_packaging", "test_board")
# The files that need the two real builds of the 0.3.28 tree (real_linux_package,
# real_hexagon_build): one unit of work, so one worker runs them all. On a new machine that worker
# spends minutes in the builds (one at a time: they share a ccache) and the other runs the rest,
# instead of both waiting on the same build.
REAL_BUILDS = {"test_release_real", "test_bisect_real", "test_real_hexagon", "test_serve_real", "test_real_hexagon_board",
               "test_real_linux", "test_build_open", "test_npu_rule", "test_lab", "test_checks"}
# the session fixtures that make those builds: a file whose tests ask for one (directly or
# through another fixture) and is not in REAL_BUILDS would wait on the other worker's build
BUILD_FIXTURES = {"real_linux_package", "real_hexagon_build"}


def pytest_collection_modifyitems(config, items):
    outside = sorted({item.path.name for item in items
                      if BUILD_FIXTURES & set(getattr(item, "fixturenames", ())) and item.path.stem not in REAL_BUILDS})
    if outside:
        raise pytest.UsageError(f"not in REAL_BUILDS (tests/conftest.py) but asking for the real 0.3.28 builds "
                                f"({', '.join(sorted(BUILD_FIXTURES))}): {', '.join(outside)}")
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: a file's own order stays


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class RealBuildsOnOneWorker(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "the real builds" if Path(scope).stem in REAL_BUILDS else scope

    return RealBuildsOnOneWorker(config, log)
