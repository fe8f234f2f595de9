"""Results from the virtual NPU (``qemu+npu:``) say they are emulated, in every document and once on
stderr; nothing else says so. The targets are the real ones: the package's AArch64 programs run
under qemu-aarch64 on the qemu+npu: board whose parts hexbuild's own code made (tests/infra/qemu_npu.py),
a phone's stand-in (a local: or qemu: install) beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexbuild.fidelity import VIRTUAL_DSP
from hexbuild.targets import parse_target
from hexbuild.ui import ui
from tests import elf_factory as ef
from tests.infra.runner_tools import echo_linux_package

SYSROOT = "/usr/aarch64-linux-gnu"
MODEL = f"v73 ({VIRTUAL_DSP})"


def human_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "emulated NPU (" in line]


@pytest.fixture
def linux_pkg(tmp_path, argv_echo_aarch64) -> Path:
    """A Linux package (CPU only) whose programs are the AArch64 argv_echo."""
    return echo_linux_package(tmp_path / "pkg" / "llama.cpp", argv_echo_aarch64)


@pytest.fixture
def npu_env(qemu_npu_env, monkeypatch):
    monkeypatch.setenv("HEXBUILD_LINUX_SYSROOT", SYSROOT)
    return qemu_npu_env


# -- the mark itself (no target is contacted) ---------------------------------------------------
def test_only_the_virtual_npu_has_a_mark_and_a_line_is_said_once(fresh_ui, tmp_path):
    assert parse_target(f"local:{tmp_path}/a").fidelity() == {} and parse_target("adb").fidelity() == {}
    assert parse_target(f"qemu:{tmp_path}/q").fidelity() == {}
    assert fresh_ui.notes == []
    spec = f"qemu+npu:{tmp_path}/n"
    t = parse_target(spec, {"qemu.npu": "v75"})
    assert t.fidelity() == {"emulated": True, "npu_model": f"v75 ({VIRTUAL_DSP})"}
    parse_target(spec, {"qemu.npu": "v75"})  # the same target made again: said once
    assert fresh_ui.notes == [f"emulated NPU ({spec}, v75): results are the emulator's, timings are not a phone's"]


def test_every_json_document_of_the_command_gets_its_targets_mark(fresh_ui, tmp_path):
    phone, npu = "adb:R5CT0000", f"qemu+npu:{tmp_path}/n"
    parse_target(phone)
    assert ui.with_said({"target": phone, "ok": True}) == {"target": phone, "ok": True, "warnings": []}
    parse_target(npu)
    per_target = ui.with_said([{"target": phone, "warnings": []}, {"target": npu, "warnings": []}])
    assert "emulated" not in per_target[0] and per_target[1]["emulated"] is True
    assert per_target[1]["npu_model"] == MODEL
    # a document that names no target is the emulator's only when every target was
    assert "emulated" not in ui.with_said({"ok": True})
    fresh_ui.fidelity.pop(phone)
    assert ui.with_said({"ok": True})["npu_model"] == MODEL
    # a document that already says what it is keeps it
    assert ui.with_said({"target": npu, "emulated": False})["emulated"] is False


# -- run, deploy, test ops, doctor on the qemu+npu: board ---------------------------------------
def test_run_and_deploy_documents_say_emulated_npu(cli, tmp_path, npu_env, linux_pkg):
    spec = f"qemu+npu:{tmp_path}/inst"
    r = cli("--json", "deploy", str(linux_pkg), "--target", spec)
    assert r.rc == 0, r.err
    assert r.json[0]["emulated"] is True and r.json[0]["npu_model"] == MODEL
    assert len(human_lines(r.err)) == 1

    r = cli("--json", "run", "completion", "-t", spec, "--results-dir", str(tmp_path / "res"), "--", "-n", "4")
    assert r.rc == 0, r.err
    doc = r.json
    assert doc["emulated"] is True and doc["npu_model"] == MODEL
    saved = json.loads(Path(doc["log"]).with_suffix(".json").read_text())
    assert saved["emulated"] is True and saved["npu_model"] == MODEL
    (line,) = human_lines(r.err)
    assert line.endswith(f"note: emulated NPU ({spec}, v73): results are the emulator's, timings are not a phone's")

    r = cli("run", "completion", "-t", spec, "--results-dir", str(tmp_path / "res"), "--", "-n", "4")
    assert r.rc == 0, r.err
    assert len(human_lines(r.err)) == 1  # the human output says it too, once

    # the same package on the qemu: board (no NPU) says nothing of the kind
    spec = f"qemu:{tmp_path}/cpu"
    r = cli("--json", "deploy", str(linux_pkg), "--target", spec)
    assert r.rc == 0 and "emulated" not in r.json[0], r.err
    r = cli("--json", "run", "completion", "-t", spec, "--results-dir", str(tmp_path / "res"))
    assert r.rc == 0, r.err
    assert "emulated" not in r.json and "npu_model" not in r.json and not human_lines(r.err)
    assert "emulated" not in json.loads(Path(r.json["log"]).with_suffix(".json").read_text())


def test_test_ops_documents_say_emulated_npu(cli, tmp_path, npu_env, linux_pkg):
    (linux_pkg / "lib" / "libggml-hexagon.so").write_bytes(b"the Hexagon backend stand-in\n")  # an NPU package
    ef.hexagon_so(linux_pkg / "lib" / "libggml-htp-v73.so", "v73")  # with the skel the virtual NPU needs
    spec = f"qemu+npu:{tmp_path}/inst"
    assert cli("deploy", str(linux_pkg), "--target", spec).rc == 0
    out = tmp_path / "ops"
    r = cli("--json", "test", "ops", "-t", spec, "--out", str(out))
    assert r.rc == 13, r.err  # argv_echo tests nothing: a failure, and still the emulator's
    doc = r.json
    assert doc["devices"] and doc["emulated"] is True and doc["npu_model"] == MODEL
    saved = json.loads((out / "results.json").read_text())
    assert saved["emulated"] is True and saved["npu_model"] == MODEL
    assert len(human_lines(r.err)) == 1


def test_doctor_document_of_the_virtual_npu(cli, tmp_path, npu_env, linux_pkg):
    spec = f"qemu+npu:{tmp_path}/inst"
    assert cli("deploy", str(linux_pkg), "--target", spec).rc == 0
    r = cli("--json", "doctor", "--target", spec)
    assert r.json["emulated"] is True and r.json["npu_model"] == MODEL, r.err
    assert len(human_lines(r.err)) == 1


# -- serve and chat ------------------------------------------------------------------------------
def test_serve_and_chat_documents_say_emulated_npu(cli, tmp_path, npu_env, serve_state, http_stand_in, tiny_gguf):
    """The server (the native stand-in: the qemu+npu: board runs this machine's programs as they
    are) started detached, so its record is written by the supervisor, another process."""
    from tests.infra.devices import free_port
    from tests.test_run_device import populate

    dest = str(tmp_path / "inst" / "llama.cpp")
    populate(f"local:{dest}", dest, {"llama-server": http_stand_in})
    spec, port = f"qemu+npu:{dest}", free_port()
    models = str(tmp_path / "models")
    r = cli("--json", "serve", "-t", spec, "--model", str(tiny_gguf), "--port", str(port), "--detach",
            "--models-dir", models)
    assert r.rc == 0, r.err
    assert r.json["emulated"] is True and r.json["npu_model"] == MODEL and len(human_lines(r.err)) == 1
    (row,) = cli("--json", "serve", "status").json
    assert row["emulated"] is True and row["npu_model"] == MODEL
    r = cli("--json", "chat", "-t", spec, "--model", tiny_gguf.name, "-p", "hi")  # the running server
    assert r.rc == 0, r.err
    assert r.json["answer"] and r.json["emulated"] is True and r.json["npu_model"] == MODEL
    assert len(human_lines(r.err)) == 1
    r = cli("--json", "serve", "stop", "--all")
    assert r.rc == 0 and r.json[0]["emulated"] is True, r.err
