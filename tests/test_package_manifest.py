"""One reader, one rule for a package's manifest.json (artifacts/manifest.py): every command that
reads one answers a damaged manifest and one from a newer hexbuild alike, with docs/bad-input.md's
bad-input rows (package-manifest-truncated, package-manifest-newer: exit 2), and writes nothing.
And the model rows for ``plan --model``: a directory, a file that is not GGUF (exit 2)."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest

from tests import elf_factory as ef
from tests.infra.tiny_model import write_tiny_gguf

MANIFESTS = {
    "truncated": ('{"schema": 1, "hexbuild_version": "0.1.0", "files": [{"path": "li', "manifest.json is damaged"),
    "not-an-object": ("[1, 2, 3]\n", "manifest.json is damaged"),
    "newer": (json.dumps({"schema": 7, "hexbuild_version": "9.4.0", "os": "android", "files": []}),
              "written by a newer hexbuild"),
}


@pytest.fixture(autouse=True)
def _clean(monkeypatch, tmp_path):
    for var in [v for v in os.environ if v.startswith("HEXBUILD_") and v != "HEXBUILD_TEST_CACHE"]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")


def commands(pkg: Path, tmp: Path) -> dict[str, list[str]]:
    return {
        "verify": ["verify", str(pkg)],
        "package": ["package", str(pkg), "-o", str(tmp / "work" / "out.tar.gz")],
        "deploy": ["deploy", str(pkg), "--target", f"local:{tmp / 'work' / 'dest' / 'llama.cpp'}"],
        "deploy --dry-run": ["deploy", str(pkg), "--target", f"local:{tmp / 'work' / 'dest' / 'llama.cpp'}",
                             "--dry-run"],
        "plan --package": ["plan", "-m", str(write_tiny_gguf(tmp / "tiny.gguf")), "--package", str(pkg)],
        "doctor --package": ["doctor", "--target", f"local:{tmp / 'work' / 'dest' / 'llama.cpp'}", "--package",
                             str(pkg)],
        "release --prebuilt": ["release", "--prebuilt", f"android={pkg}", "--dist", str(tmp / "work" / "dist")],
    }


@pytest.mark.parametrize("damage", sorted(MANIFESTS))
@pytest.mark.parametrize("command", ["verify", "package", "deploy", "deploy --dry-run", "plan --package",
                                     "doctor --package", "release --prebuilt"])
def test_every_command_answers_a_bad_manifest_the_same(cli, tmp_path, command, damage):
    pkg = ef.make_package(tmp_path / "pkg", os="android", htp=["v73"])
    text, words = MANIFESTS[damage]
    (pkg / "manifest.json").write_text(text)
    r = cli(*commands(pkg, tmp_path)[command])
    errors = [ln for ln in r.err.splitlines() if ln.startswith("hexbuild: error:")]
    assert r.rc == 2, (command, r.rc, r.err)
    assert len(errors) == 1 and words in errors[0] and str(pkg) in errors[0], r.err
    assert "Traceback" not in r.err
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == []  # nothing written: no tarball, dist, install


@pytest.mark.parametrize("damage", sorted(MANIFESTS))
def test_a_tarball_carries_the_same_rule(cli, tmp_path, damage):
    pkg = ef.make_package(tmp_path / "pkg", os="android", htp=["v73"])
    text, words = MANIFESTS[damage]
    (pkg / "manifest.json").write_text(text)
    tarball = tmp_path / "pkg.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(pkg, arcname="llama.cpp")
    for argv in (["deploy", str(tarball), "--target", f"local:{tmp_path / 'work' / 'd'}", "--dry-run"],
                 ["plan", "-m", str(write_tiny_gguf(tmp_path / "tiny.gguf")), "--package", str(tarball)]):
        r = cli(*argv)
        assert r.rc == 2 and words in r.err, (argv, r.err)


def test_a_manifest_without_a_schema_is_read_as_before(cli, tmp_path):
    """Hand-written metadata ({"os": ...}) and manifests from before the schema field stay valid."""
    pkg = ef.make_package(tmp_path / "pkg", os="linux", htp=[])
    (pkg / "manifest.json").write_text(json.dumps({"os": "linux"}))
    r = cli("package", str(pkg), "-o", str(tmp_path / "out.tar.gz"), "--json")
    assert r.rc == 0, r.err


def test_plan_model_rows(cli, tmp_path):
    (tmp_path / "models.gguf").mkdir()
    r = cli("plan", "-m", str(tmp_path / "models.gguf"))
    assert r.rc == 2 and "is a directory, not a model file" in r.err, r.err
    (tmp_path / "page.gguf").write_bytes(b"<html>404 Not Found</html>\n")
    r = cli("plan", "-m", str(tmp_path / "page.gguf"))
    assert r.rc == 2 and "is not a GGUF file (it starts with b'<htm'" in r.err, r.err
    r = cli("plan", "-m", str(tmp_path / "none.gguf"))
    assert r.rc == 2 and "model file not found" in r.err, r.err
    # a GGUF cut short is a model file with nothing recognizable after its magic: exit 9
    (tmp_path / "cut.gguf").write_bytes(write_tiny_gguf(tmp_path / "whole.gguf").read_bytes()[:40])
    r = cli("plan", "-m", str(tmp_path / "cut.gguf"))
    assert r.rc == 9 and "truncated" in r.err, r.err
