"""Every module in tests/infra/ is a pytest plugin: the fixtures that start real daemons
(Docker engine, adbd devices, sshd) and fetch real llama.cpp trees. Each daemon is started
once per session on first use and stopped by its PID at the end."""

import pkgutil
from pathlib import Path

pytest_plugins = [f"tests.infra.{m.name}" for m in pkgutil.iter_modules([str(Path(__file__).parent / "infra")])]

import pytest  # noqa: E402


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
