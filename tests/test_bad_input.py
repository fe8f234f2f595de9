"""Bad input users really type, one row per kind: each gives exactly one ``hexbuild: error:``
line (an optional ``hint:`` after it), the documented exit code, no traceback (and for usage
errors nothing on stdout), and nothing half-written — the working directory and the phone's /data/local/tmp are the same
before and after. docs/bad-input.md's table has a row per case here (the last test below)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from hexbuild import deploy as deploy_mod
from hexbuild import errors
from hexbuild.source import read_source
from hexbuild.targets import parse_target
from tests import elf_factory as ef

DEST = "/data/local/tmp/llama.cpp"


@dataclass
class Ctx:
    tmp: Path
    request: pytest.FixtureRequest
    env: dict[str, str] = field(default_factory=dict)
    watched: list[Path] = field(default_factory=list)
    ignore: set[str] = field(default_factory=set)  # names the case itself puts there on purpose
    keeps: str | None = None  # a directory of the working dir that is *meant* to be written
    _phone: object = None

    @property
    def work(self) -> Path:
        return self.tmp / "work"

    def phone(self, **kw):
        if self._phone is None:
            self._phone = self.request.getfixturevalue("make_device")("SM8750", **kw)
            self.watched.append(self._phone.tmp)
        return self._phone

    def pkg(self, tag: str = "p") -> Path:
        p = self.tmp / "pkgs" / tag / "llama.cpp"
        if not p.exists():
            ef.make_package(self.tmp / "pkgs" / tag, os="android", htp=["v68", "v73"])
        return p

    def linux_pkg(self) -> Path:
        p = self.tmp / "pkgs" / "linux" / "llama.cpp"
        if not p.exists():
            ef.make_package(self.tmp / "pkgs" / "linux", os="linux", htp=["v73"])
        return p

    def local_install(self) -> str:
        """local:DIR with llama-completion (argv_echo) installed; DIR is watched too."""
        dest = self.tmp / "local-inst" / "llama.cpp"
        if not dest.exists():
            from tests.test_run_device import populate

            populate(f"local:{dest}", str(dest), {"llama-completion": self.request.getfixturevalue("argv_echo")})
            self.watched.append(dest.parent)
        return f"local:{dest}"

    def installed_phone(self, tools: dict[str, str] | None = None, tree: str = "tree_0_3_36"):
        """A phone with an install whose manifest says the vocabulary of ``tree``'s revision."""
        dev = self.phone()
        facts = read_source(self.request.getfixturevalue(tree)).to_json()
        echo = self.request.getfixturevalue("argv_echo")
        with parse_target(f"adb:{dev.serial}") as t:
            for name in ("llama-cli", "llama-completion"):
                t.push(Path(echo), f"{DEST}/bin/{name}", mode=0o755)
            for name, text in (tools or {}).items():
                t.write_file(f"{DEST}/bin/{name}", text.encode(), mode=0o755)
            t.write_file(f"{DEST}/lib/.keep", b"")
            t.write_file(f"{DEST}/.hexbuild/manifest.json", json.dumps({"llama_cpp": facts}).encode())
        return dev


@dataclass
class Case:
    kind: str
    code: int
    words: str
    make: Callable[[Ctx], list[str]]


CASES: list[Case] = []


def case(kind: str, code: int, words: str):
    def deco(fn: Callable[[Ctx], list[str]]) -> Callable[[Ctx], list[str]]:
        CASES.append(Case(kind, code, words, fn))
        return fn
    return deco


U, E, D, R = errors.USAGE, errors.ENVIRONMENT, errors.DEPLOY_FAILED, errors.REMOTE_FAILED


# -- paths and the checkout ------------------------------------------------------------------------
@case("source-missing", U, "no such directory")
def _(c):
    return ["source", "info", "--source", str(c.tmp / "missing")]


@case("source-not-a-checkout", U, "not a llama.cpp checkout")
def _(c):
    return ["source", "info", "--source", str(c.work)]


@case("source-is-a-file", U, "not a directory")
def _(c):
    (c.tmp / "afile").write_text("x")
    return ["source", "info", "--source", str(c.tmp / "afile")]


# -- configuration -------------------------------------------------------------------------------------
@case("config-unknown-key", U, "unknown key 'build.flavour'")
def _(c):
    (c.tmp / "hexbuild.toml").write_text('[build]\nflavour = "x"\n')
    return ["config", "show", "--config", str(c.tmp / "hexbuild.toml")]


@case("config-wrong-type", U, "build.jobs must be an integer")
def _(c):
    (c.tmp / "hexbuild.toml").write_text('[build]\njobs = "lots"\n')
    return ["config", "show", "--config", str(c.tmp / "hexbuild.toml")]


@case("config-not-toml", U, "not valid TOML")
def _(c):
    (c.tmp / "hexbuild.toml").write_text("build:\n  os: android   # YAML, not TOML\n")
    return ["config", "show", "--config", str(c.tmp / "hexbuild.toml")]


@case("config-file-missing", U, "config file not found")
def _(c):
    return ["config", "show", "--config", str(c.tmp / "nope.toml")]


@case("env-bad-choice", U, "build.os must be one of android, linux")
def _(c):
    c.env["HEXBUILD_BUILD_OS"] = "ios"
    return ["config", "show"]


@case("env-out-of-range", U, "at most 16")
def _(c):
    c.env["HEXBUILD_DEPLOY_NDEV"] = "99"
    return ["config", "show"]


@case("env-unknown-key", U, "unknown environment variable HEXBUILD_DEPLOY_DESTINATION")
def _(c):
    c.env["HEXBUILD_DEPLOY_DESTINATION"] = "/data/local/tmp/x"
    return ["config", "show"]


# -- the command line ------------------------------------------------------------------------------
@case("unknown-option", U, "No such option: --bogus")
def _(c):
    return ["source", "info", "--bogus"]


@case("unknown-command", U, "No such command")
def _(c):
    return ["frobnicate"]


@case("doctor-unknown-purpose", U, "not a kind of work")
def _(c):
    return ["doctor", "--for", "juggling"]


@case("ndev-0", U, "--ndev must be from 1 to 16, got 0")
def _(c):
    return ["deploy", str(c.pkg()), "--target", "adb:nowhere", "--ndev", "0"]


@case("ndev-17", U, "17 is not in the range 1<=x<=16")
def _(c):
    return ["run", "cli", "--target", "adb:nowhere", "--ndev", "17"]


@case("wait-negative", U, "deploy.wait must be at least 0")
def _(c):
    return ["deploy", str(c.pkg()), "--target", "adb:nowhere", "--wait", "-5"]


@case("target-given-twice", U, "the same target is given twice")
def _(c):
    return ["deploy", str(c.pkg()), "--target", "adb:x", "--target", "adb:x"]


# -- targets -------------------------------------------------------------------------------------------
@case("target-port-out-of-range", U, "the port must be a number from 1 to 65535")
def _(c):
    return ["deploy", str(c.pkg()), "--target", "ssh://root@board.local:70000"]


@case("target-ipv6-without-brackets", U, "an IPv6 address needs brackets: ssh://root@[fe80::1]:22")
def _(c):
    return ["deploy", str(c.pkg()), "--target", "ssh://root@fe80::1:22"]


@case("serial-not-connected", E, "not found")
def _(c):
    c.phone()  # a device is attached, just not this one
    return ["run", "cli", "--target", "adb:R5CT0000NOPE", "--results-dir", str(c.work / "results")]


@case("ssh-key-readable-by-others", E, "readable by others")
def _(c):
    host = c.request.getfixturevalue("sshd_host")
    key = c.tmp / "id_open"
    key.write_bytes(Path(host.identity).read_bytes())
    key.chmod(0o644)
    c.env.update(host.env)
    c.env["HEXBUILD_SSH_IDENTITY"] = str(key)
    return ["run", "cli", "--target", f"ssh://root@127.0.0.1:{host.port}", "--dest", str(c.tmp / "board")]


@case("ssh-key-passphrase-without-agent", E, "protected by a passphrase")
def _(c):
    host = c.request.getfixturevalue("sshd_host")
    key = c.tmp / "id_locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "sekrit", "-f", str(key)], check=True)
    c.env.update(host.env)
    c.env["HEXBUILD_SSH_IDENTITY"] = str(key)
    c.env["SSH_AUTH_SOCK"] = ""
    return ["run", "cli", "--target", f"ssh://root@127.0.0.1:{host.port}", "--dest", str(c.tmp / "board")]


# -- packages and models -------------------------------------------------------------------------------
@case("package-missing", U, "package not found")
def _(c):
    return ["deploy", str(c.tmp / "no-such-pkg"), "--target", "adb:x"]


@case("package-not-a-package", U, "is not a llama.cpp package (no lib/ or bin/)")
def _(c):
    (c.tmp / "empty").mkdir()
    return ["package", str(c.tmp / "empty"), "-o", str(c.work)]


@case("package-without-files", U, "has no files")
def _(c):
    (c.tmp / "hollow" / "lib").mkdir(parents=True)
    return ["package", str(c.tmp / "hollow"), "-o", str(c.work)]


@case("package-manifest-truncated", U, "manifest.json is damaged")
def _(c):
    pkg = c.pkg()
    (pkg / "manifest.json").write_text('{"schema": 1, "hexbuild_version": "0.1.0", "files": [{"path": "li')
    return ["deploy", str(pkg), "--target", f"adb:{c.phone().serial}"]


@case("package-manifest-newer", U, "written by a newer hexbuild")
def _(c):
    pkg = c.pkg()
    (pkg / "manifest.json").write_text(json.dumps({"schema": 7, "hexbuild_version": "9.4.0", "files": []}))
    return ["deploy", str(pkg), "--target", f"adb:{c.phone().serial}"]


@case("release-target-malformed", U, "the port must be a number from 1 to 65535")
def _(c):
    """Refused before the dist directory is made: it was left behind, empty."""
    return ["release", "--prebuilt", str(c.pkg()), "--target", "ssh://root@board.local:70000",
            "--dist", str(c.work / "dist")]


@case("release-prebuilt-of-another-os", U, "the package's manifest says os: linux, not android")
def _(c):
    """It was verified as an Android package: two dozen verify failures, none saying why."""
    from hexbuild.artifacts import write_manifest

    pkg = c.linux_pkg()
    write_manifest(pkg, {"os": "linux"})
    return ["release", "--prebuilt", f"android={pkg}", "--dist", str(c.work / "dist")]


@case("model-is-a-directory", U, "is a directory, not a model file")
def _(c):
    (c.tmp / "models.gguf").mkdir()
    return ["deploy", str(c.pkg()), "--target", f"adb:{c.phone().serial}", "--model", str(c.tmp / "models.gguf")]


@case("model-not-gguf", U, "not a GGUF file")
def _(c):
    (c.tmp / "model.gguf").write_bytes(b"<html>404 Not Found</html>\n")
    return ["deploy", str(c.pkg()), "--target", f"adb:{c.phone().serial}", "--model", str(c.tmp / "model.gguf")]


def _noise(c) -> str:
    """A model file that is not one: an HTML error page saved under the model's name."""
    (c.tmp / "noise.gguf").write_bytes(b"<html>404 Not Found</html>\n")
    return str(c.tmp / "noise.gguf")


@case("chat-model-not-gguf", U, "noise.gguf is not a GGUF file")
def _(c):
    return ["chat", "--target", f"local:{c.work}/inst", "--model", _noise(c), "--package", str(c.pkg()), "-p", "hi"]


@case("bench-model-not-gguf", U, "noise.gguf is not a GGUF file")
def _(c):
    return ["bench", "--target", f"local:{c.work}/inst", "--model", _noise(c), "--out", str(c.work / "bench")]


def _bench_rows(revision: str, *, emulated: bool) -> list[dict]:
    """Rows as `hexbuild bench` records them: on the virtual NPU (qemu+npu:) with its mark, or on a phone."""
    mark = {"emulated": True, "npu_model": "v73 (emulated cDSP: qemu-hexagon with hexbuild's HVX patches)"}
    return [{"time": "2025-01-01T00:00:00Z", "bench_id": revision, "revision": revision, "model": "m.gguf",
             "target": "qemu+npu" if emulated else "adb:R5CT0000", "test": "tg128", "kind": "eval", "rep": rep,
             "avg_ts": 10.0 + rep, **(mark if emulated else {})} for rep in (1, 2)]


@case("bench-compare-emulator-with-a-phone", U, "was measured on an emulated NPU")
def _(c):
    for name, emulated in (("emu", True), ("phone", False)):
        (c.work / name).mkdir()
        (c.work / name / "results.json").write_text(json.dumps({"schema": "hexbuild.bench/1", "bench_id": name,
                                                                 "records": _bench_rows(name, emulated=emulated)}))
    return ["bench", "compare", "--baseline", str(c.work / "phone"), "--candidate", str(c.work / "emu" / "results.json")]


@case("bench-compare-emulated-revision-with-a-phones", U, "an emulator's timings are not compared with a phone's")
def _(c):
    from hexbuild.bench import history

    db = c.work / "bench.sqlite"
    history.append(db, _bench_rows("b7000", emulated=True) + _bench_rows("b7001", emulated=False))
    return ["bench", "compare", "--db", str(db), "--baseline", "b7000", "--candidate", "b7001"]


@case("bisect-model-not-gguf", U, "noise.gguf is not a GGUF file")
def _(c):
    from tests import bisect_repo as br

    repo = br.new_repo(c.tmp)
    good, bad = br.git(repo, "rev-parse", "HEAD"), br.touch_readme(repo, "one")
    c.watched.append(repo)
    return ["bisect", "--source", str(repo), "--good", good, "--bad", bad, "-t", f"qemu:{c.work}/dev",
            "--model", _noise(c), "--os", "linux", "--db", str(c.work / "bench.sqlite")]


@case("rollback-with-model", U, "--rollback switches installs only")
def _(c):
    return ["deploy", "--target", "adb:x", "--rollback", "--model", "m.gguf"]


# -- run -------------------------------------------------------------------------------------------------
@case("devices-duplicate", U, "HTP0 is listed twice")
def _(c):
    dev = c.installed_phone()
    return ["run", "cli", "--target", f"adb:{dev.serial}", "--devices", "HTP0,HTP1,HTP0"]


@case("devices-name-the-revision-lacks", U, "'GPU0' is not an HTP device")
def _(c):
    dev = c.installed_phone()
    return ["run", "cli", "--target", f"adb:{dev.serial}", "--devices", "HTP0,GPU0"]


@case("devices-sub-session-on-an-old-revision", U, "does not read GGML_HEXAGON_DEVICES")
def _(c):
    dev = c.installed_phone(tree="tree_0_3_20")
    return ["run", "cli", "--target", f"adb:{dev.serial}", "--devices", "HTP0:0,HTP0:1"]


@case("prompt-file-not-utf8", U, "is not UTF-8 text")
def _(c):
    dev = c.installed_phone()
    (c.tmp / "prompt.txt").write_bytes("caf\u00e9 au lait\n".encode("latin-1"))
    return ["run", "completion", "--target", f"adb:{dev.serial}", "--prompt-file", str(c.tmp / "prompt.txt"),
            "--results-dir", str(c.work / "results")]


@case("prompt-file-is-a-directory", U, "prompt file is a directory, not a prompt file")
def _(c):
    """On a target that is this machine (local:, qemu:) the path is checked here: it was passed
    to the program (-f DIR), which ran and left a run log."""
    (c.tmp / "prompts").mkdir()
    return ["run", "completion", "--target", c.local_install(), "--prompt-file", str(c.tmp / "prompts"),
            "--results-dir", str(c.work / "results")]


@case("prompt-file-missing", U, "prompt file not found")
def _(c):
    return ["run", "completion", "--target", c.local_install(), "--prompt-file", str(c.tmp / "no-such-prompt.txt"),
            "--results-dir", str(c.work / "results")]


@case("program-of-another-architecture", U, "is an AArch64 program and this machine is")
def _(c):
    import platform

    if platform.machine() in ("aarch64", "arm64"):
        pytest.skip("the package's AArch64 programs are this machine's own")
    dest = c.tmp / "local" / "llama.cpp"
    pkg = ef.make_package(c.tmp / "pkgs" / "linux", os="linux", htp=[])
    from hexbuild.deploy import DeployOptions, deploy

    (res,) = deploy(pkg, [parse_target(f"local:{dest}")], DeployOptions())
    assert res.status == "ok", res.error
    c.watched.append(dest.parent)
    return ["run", "cli", "--target", f"local:{dest}", "--results-dir", str(c.work / "results")]


# -- the device side ---------------------------------------------------------------------------------------
@case("disk-fills-during-push", D, "no space left on the device")
def _(c):
    dev = c.phone(disk_kb=4096)
    pkg = c.pkg()
    (pkg / "lib" / "libggml-cpu.so").write_bytes(os.urandom(1_500_000))
    filler = "someone-elses-download.bin"
    c.ignore.add(filler)

    def fill(spec, step):  # the space check has passed; another app fills the disk
        if step == "linked":
            (dev.tmp / filler).write_bytes(b"\0" * 3_000_000)

    deploy_mod.FAULT_HOOK = fill
    return ["deploy", str(pkg), "--target", f"adb:{dev.serial}"]


@case("device-reboots-mid-run", R, "lost the connection to the device")
def _(c):
    dev = c.installed_phone({"llama-slow": "#!/system/bin/sh\necho started\nsleep 30\n"})
    threading.Timer(1.5, dev.kill).start()  # adbd killed by PID: the phone rebooted
    c.keeps = "results"  # the log so far is kept on purpose, and named in the error
    return ["run", "tool", "--target", f"adb:{dev.serial}", "--results-dir", str(c.work / "results"),
            "--", "llama-slow"]


def _files(root: Path, ignore: set[str]) -> dict[str, str]:
    out = {}
    if root.is_dir():
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root).as_posix()
            if set(rel.split("/")) & ignore:
                continue
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else \
                ("-> " + os.readlink(p) if p.is_symlink() else "dir")
    return out


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    test_cache = os.environ.get("HEXBUILD_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hexbuild-tests")
    for k in list(os.environ):
        if k.startswith("HEXBUILD_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HEXBUILD_TEST_CACHE", test_cache)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    yield
    deploy_mod.FAULT_HOOK = None


# -- device labs ---------------------------------------------------------------------------------------
def _lab_run(c, *opts: str, pkg: Path | None = None) -> list[str]:
    return ["lab", "run", str(pkg or c.linux_pkg()), "--device-type", "rb3gen2", "--serve-artifacts", "127.0.0.1:0",
            *opts]


@case("lab-no-token", U, "no lab token: set HEXBUILD_LAB_TOKEN")
def _(c):
    return _lab_run(c, "--lab", "http://127.0.0.1:9", "--", "completion", "-n", "4")


@case("lab-url-not-http", U, "the lab URL must be http(s)://HOST[:PORT]")
def _(c):
    c.env["HEXBUILD_LAB_TOKEN"] = "0123456789abcdef"
    return _lab_run(c, "--lab", "ftp://lava.example.org", "--", "completion")


@case("lab-unreachable", errors.LAB_FAILED, "cannot reach the lab at http://127.0.0.1:")
def _(c):
    from tests.infra.devices import free_port

    c.env["HEXBUILD_LAB_TOKEN"] = "0123456789abcdef"
    return _lab_run(c, "--lab", f"http://127.0.0.1:{free_port()}", "--", "completion")


@case("lab-android-package", U, "is an Android package: a lab job runs a Linux package's programs")
def _(c):
    """Checked before the lab is contacted: with the lab down this was 16 (cannot reach the lab),
    and its hint named an option lab run does not have (--docker-image)."""
    from tests.infra.devices import free_port

    c.env["HEXBUILD_LAB_TOKEN"] = "0123456789abcdef"
    return _lab_run(c, "--lab", f"http://127.0.0.1:{free_port()}", "--", "completion", pkg=c.pkg())


@case("lab-runs-what", U, "a lab job runs completion, bench, test ops or test ppl")
def _(c):
    c.env["HEXBUILD_LAB_TOKEN"] = "0123456789abcdef"
    return _lab_run(c, "--lab", "http://127.0.0.1:9", "--", "frobnicate")


@case("lab-timeout-too-short", U, "--timeout 89 is too short for a lab job: the minimum is 90 s")
def _(c):
    from tests.infra.devices import free_port

    c.env["HEXBUILD_LAB_TOKEN"] = "0123456789abcdef"
    return _lab_run(c, "--lab", f"http://127.0.0.1:{free_port()}", "--timeout", "89", "--", "completion")


@case("lab-model-not-gguf", U, "noise.gguf is not a GGUF file")
def _(c):
    from tests.infra.devices import free_port

    c.env["HEXBUILD_LAB_TOKEN"] = "0123456789abcdef"
    return _lab_run(c, "--lab", f"http://127.0.0.1:{free_port()}", "--model", _noise(c), "--", "completion")


# -- the kernel check (hexbuild test kernels) ----------------------------------------------------
@case("kernels-not-a-checkout", U, "not a llama.cpp checkout")
def _(c):
    return ["test", "kernels", "--source", str(c.work)]


@case("kernels-no-hexagon-backend", U, "has no Hexagon backend")
def _(c):
    tree = c.tmp / "cpu-only-tree"
    (tree / "ggml" / "src").mkdir(parents=True)
    (tree / "include").mkdir()
    (tree / "include" / "llama.h").write_text("/* llama.h */\n")
    (tree / "CMakeLists.txt").write_text("project(llama.cpp)\n")
    return ["test", "kernels", "--source", str(tree)]


@case("kernels-unknown-htp-version", U, "--htp v99: not an HTP version the emulator runs")
def _(c):
    return ["test", "kernels", "--source", str(c.request.getfixturevalue("tree_0_3_28")), "--htp", "v99"]


@case("kernels-htp-v79", U, "qfloat rounding changed in v79")
def _(c):
    return ["test", "kernels", "--source", str(c.request.getfixturevalue("tree_0_3_28")), "--htp", "v73,v79"]


@case("kernels-unknown-op", U, "unknown op MUL_MATT")
def _(c):
    return ["test", "kernels", "--source", str(c.request.getfixturevalue("tree_0_3_28")), "--ops", "MUL_MATT"]


@case("kernels-unknown-type", U, "unknown type q5_k")
def _(c):
    return ["test", "kernels", "--source", str(c.request.getfixturevalue("tree_0_3_28")), "--ops", "MUL_MAT",
            "--types", "q4_0,q5_k"]


@case("kernels-no-docker-engine", E, "no Docker engine answers at")
def _(c):
    c.env["DOCKER_HOST"] = f"unix://{c.tmp}/no-engine.sock"
    return ["test", "kernels", "--source", str(c.request.getfixturevalue("tree_0_3_28")), "--ops", "MUL_MAT"]


@case("kernels-image-unknown-method", U, "--method must be one of auto, dockerfile, rootfs")
def _(c):
    c.env["DOCKER_HOST"] = f"unix://{c.tmp}/no-engine.sock"  # refused before the engine is asked
    return ["toolchain", "kernels", "--method", "debootstrap"]


# -- the virtual NPU (qemu+npu:) --------------------------------------------------------------------
def _npu_install(c, skel, *, name: str = "libggml-htp-v73.so") -> str:
    """qemu+npu:DIR with an install hexbuild could have deployed: llama-completion, the host
    library, ``skel`` as lib/NAME, and a manifest in the 0.3.28 tree's vocabulary (it reads
    GGML_HEXAGON_USE_HMX). DIR is watched: nothing may be written there."""
    dest = c.tmp / "npu-inst" / "llama.cpp"
    ef.aarch64_exe(dest / "bin" / "llama-completion", os="linux")
    ef.aarch64_so(dest / "lib" / "libggml-hexagon.so", os="linux", soname="libggml-hexagon.so")
    shutil.copyfile(skel, dest / "lib" / name)
    facts = read_source(c.request.getfixturevalue("tree_0_3_28")).to_json()
    files = [{"path": p} for p in ("bin/llama-completion", "lib/libggml-hexagon.so", f"lib/{name}")]
    (dest / ".hexbuild").mkdir()
    (dest / ".hexbuild" / "manifest.json").write_text(json.dumps({"os": "linux", "llama_cpp": facts, "files": files}))
    c.watched.append(dest.parent)
    return f"qemu+npu:{dest}"


def _npu_run(c, target: str) -> list[str]:
    return ["run", "completion", "--target", target, "--results-dir", str(c.work / "results"), "--", "-n", "4"]


@case("qemu-npu-v79", U, "qemu.npu must be one of v68, v69, v73, v75, got 'v79'")
def _(c):
    c.env["HEXBUILD_QEMU_NPU"] = "v79"
    return _npu_run(c, _npu_install(c, ef.hexagon_so(c.tmp / "s.so", "v73"), name="libggml-htp-v79.so"))


@case("qemu-npu-no-skel-for-its-version", errors.CPU_FALLBACK, "has no skel for the virtual NPU's v73")
def _(c):
    return _npu_run(c, _npu_install(c, ef.hexagon_so(c.tmp / "s.so", "v73"), name="libggml-htp-v79.so"))


@case("qemu-npu-hmx-skel", errors.CPU_FALLBACK, "holds HMX code (hmx_mat_mul_qk_0_d16a32): its HMX matmul cannot be "
      "emulated")
def _(c):
    skel = ef.hexagon_so(c.tmp / "s.so", "v73", exports=(ef.SKEL_SYMBOL, "op_matmul", "hmx_mat_mul_qk_0_d16a32"))
    return _npu_run(c, _npu_install(c, skel))


@case("qemu-npu-without-qemu-aarch64", E, "qemu-aarch64 is not installed")
def _(c):
    target = _npu_install(c, ef.hexagon_so(c.tmp / "s.so", "v73"))
    (c.tmp / "path").mkdir()
    c.env["PATH"] = str(c.tmp / "path")  # no qemu-aarch64 on it
    return _npu_run(c, target)


@case("qemu-npu-no-docker-engine", E, "the virtual NPU's parts (qemu-hexagon, its DSP runtime, libcdsprpc.so) are "
      "found and made with the Docker engine: no Docker engine answers at")
def _(c):
    c.env["DOCKER_HOST"] = f"unix://{c.tmp}/no-engine.sock"
    return _npu_run(c, _npu_install(c, ef.hexagon_so(c.tmp / "s.so", "v73")))


def test_there_are_at_least_25_kinds():
    assert len(CASES) >= 25 and len({c.kind for c in CASES}) == len(CASES)


@pytest.mark.parametrize("c", CASES, ids=[c.kind for c in CASES])
def test_bad_input(c: Case, cli, tmp_path, monkeypatch, request):
    ctx = Ctx(tmp_path, request)
    ctx.work.mkdir()
    ctx.watched.append(ctx.work)
    monkeypatch.chdir(ctx.work)
    argv = c.make(ctx)
    before = {str(w): _files(w, ctx.ignore) for w in ctx.watched}
    t0 = time.monotonic()
    r = cli(*argv, env=ctx.env)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    errs = [i for i, ln in enumerate(lines) if ln.startswith("hexbuild: error:")]
    assert r.rc == c.code, (c.kind, r.rc, r.err)
    assert len(errs) == 1 and c.words in lines[errs[0]], (c.kind, r.err)
    assert all(ln.startswith("hint:") for ln in lines[errs[0] + 1:]), r.err
    assert "Traceback" not in r.err + r.out
    if c.code == U:  # refused before anything ran; later failures may have printed a result table or program output
        assert r.out == ""
        # checked before any work: its error and hint are all it prints (no progress, no summary)
        assert errs == [0], (c.kind, r.err)
    assert time.monotonic() - t0 < 60
    if ctx.keeps:
        kept = sorted((ctx.work / ctx.keeps).iterdir())
        assert any(p.suffix == ".log" and p.name in r.err for p in kept), (kept, r.err)
        assert not [p for p in kept if p.name.endswith(".part")]  # whole files, renamed into place
        ctx.ignore.add(ctx.keeps)
    after = {str(w): _files(w, ctx.ignore) for w in ctx.watched}
    assert after == before, f"{c.kind}: something was written"


def test_the_docs_table_has_a_row_per_case_with_its_exit_code():
    page = (Path(__file__).resolve().parent.parent / "docs" / "bad-input.md").read_text("utf-8")
    section = page.split("# Bad input", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = int(cells[2])
    assert rows == {c.kind: c.code for c in CASES}
