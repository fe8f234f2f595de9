"""Run the real CLI in-process: ``cli("source", "info", "--json")`` → Result(rc, out, err, json)."""

import json
from dataclasses import dataclass

import pytest


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def json(self):
        return json.loads(self.out)


@pytest.fixture
def cli(capsys, monkeypatch):
    from hexbuild.cli.common import state
    from hexbuild.ui import _ci_provider, ui

    def invoke(*argv: str, env: dict | None = None) -> Result:
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        ui.json, ui.verbose, ui.quiet, ui.result_emitted, ui.warnings, ui.notes = False, 0, False, False, [], []
        ui.fidelity = {}
        ui.ci = _ci_provider()
        state.config_file = None
        capsys.readouterr()
        from hexbuild.cli.main import main

        rc = main(list(argv))
        captured = capsys.readouterr()
        return Result(rc, captured.out, captured.err)

    return invoke  # conftest's fresh_ui puts the process-wide state back afterwards
