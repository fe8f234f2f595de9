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
                        ("warnings", []), ("notes", []), ("fidelity", {}), ("ci", _ci_provider())):
        monkeypatch.setattr(ui, name, value)
    monkeypatch.setattr(state, "config_file", None)
    return ui


# The files that take longest go first. scripts/test.sh runs the suite on one pytest-xdist worker
# per core (`--dist loadfile --no-loadscope-reorder`: a file stays on one worker, in this order),
# so a long file started last would leave one worker busy alone at the end. From --durations of
# a warm run; a file not named here keeps its place after these, and LAST comes after them all.
FIRST = ("test_release_real", "test_build", "test_release", "test_docs_ci", "test_serve", "test_bisect_real", "test_bisect", "test_deploy",
         "test_deploy_rollback", "test_deploy_lock", "test_serve_real", "test_doctor_device",
         "test_pull", "test_inspect_real", "test_run_device", "test_wire",
         "test_real_linux", "test_build_open", "test_packaging", "test_board")
# The files that need one of the two real builds of the 0.3.28 tree, by build: each build's files
# are one unit of work for one worker. On a new machine the open build takes one worker's first
# 18 minutes (it goes first) while the other runs the rest; the real Hexagon build waits for it
# (they share a ccache, so it compiles only what GGML_HEXAGON changes) and goes last, taken by
# the worker that is done first, which already holds the toolchain double in its engine.
LAST = ("test_real_hexagon", "test_real_hexagon_board", "test_vnpu_dsp", "test_vnpu_host_real", "test_virtual_npu",
        "test_vnpu_faults", "test_doctor_vnpu")
REAL_BUILDS = {
    "the open build": {"test_release_real", "test_bisect_real", "test_serve_real", "test_real_linux",
                       "test_build_open", "test_npu_rule", "test_lab", "test_checks"},
    "the real Hexagon build": set(LAST),
}
# the session fixtures that make those builds: a file whose tests ask for one (directly or
# through another fixture) outside that build's unit would wait on the other worker's build
BUILD_FIXTURES = {"real_linux_package": "the open build", "real_hexagon_build": "the real Hexagon build"}
_UNIT = {stem: unit for unit, stems in REAL_BUILDS.items() for stem in stems}


def pytest_collection_modifyitems(config, items):
    outside = sorted({f"{item.path.name} ({fixture})" for item in items
                      for fixture in BUILD_FIXTURES.keys() & set(getattr(item, "fixturenames", ()))
                      if _UNIT.get(item.path.stem) != BUILD_FIXTURES[fixture]})
    if outside:
        raise pytest.UsageError("a test file asks for a real 0.3.28 build outside that build's files "
                                f"(REAL_BUILDS in tests/conftest.py): {', '.join(outside)}")
    rank = {name: i for i, name in enumerate(FIRST)}
    rank.update({name: len(FIRST) + 1 + i for i, name in enumerate(LAST)})
    items.sort(key=lambda item: rank.get(item.path.stem, len(FIRST)))  # stable: a file's own order stays


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class RealBuildsOnOneWorker(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return _UNIT.get(Path(scope).stem, scope)

    return RealBuildsOnOneWorker(config, log)
