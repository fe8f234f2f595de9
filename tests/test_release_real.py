"""hexbuild release of the real 0.3.28 tree with the open toolchain: a file of its own, so that
it runs with the other tests of the real builds (tests/conftest.py REAL_BUILDS) while the rest of
the release tests run on the other worker."""

import json

from tests.test_release import release


def test_release_of_the_real_open_build(real_linux_package, docker_host, tmp_path):
    """release --toolchain open (and the build's --cache-volume) reaches the build (without it the
    build would want the vendor image the checkout pins): the session's real open build, rebuilt
    from its kept build directory in seconds, and its CPU-only tarball is named so."""
    from tests.infra.docker_engine import cache_dir
    from tests.infra.real_build import _lock, tree_copy

    cache = cache_dir()
    dist = tmp_path / "dist"
    with _lock(cache / "open-build.lock"):
        cp = release("--source", tree_copy(cache), "--os", "linux", "--toolchain", "open", "--cache-volume",
                     cache / "open-ccache", "--dist", dist, "--json", "--no-strict",
                     env={"DOCKER_HOST": docker_host}, cwd=tmp_path, timeout=1800)
    assert cp.returncode == 0, cp.stderr[-3000:]
    report = json.loads(cp.stdout)
    (build,) = [s for s in report["stages"] if s["name"] == "build"]
    assert build["build"]["toolchain"] == "open" and build["build"]["lacks"] == ["htp"], build
    assert [a["name"] for a in report["artifacts"]] == ["llama.cpp-linux-unknown-cpu.tar.gz"]


def _documented(pattern: str) -> list[str]:
    """The `hexbuild …` arguments of the one command line the README and docs/ show that matches
    ``pattern`` (so the test follows the docs wherever the line moves)."""
    import re
    from pathlib import Path

    from tests import doccheck

    repo = Path(__file__).resolve().parent.parent
    found = [inv.argv for path in [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
             for inv in doccheck.markdown_invocations(path.read_text(), str(path))
             if re.search(pattern, " ".join(inv.argv))]
    assert found, f"no documented command matches {pattern!r}"
    return found[0]


def test_the_readme_ci_smoke_release_passes_under_ci(real_linux_package, docker_host, tmp_path):
    """The README's no-phone smoke release for CI (`release --os linux --toolchain open --target
    qemu --smoke "llama-cli --version"`), run as GitHub Actions runs it (CI=true, so --strict):
    every stage passes and it exits 0. It exited 10: the CPU-only line of a package built with the
    open toolchain was a warning, which no such package could avoid; it is a note (the user chose
    it), in the report's notes, and warnings stay fatal."""
    from tests.infra.docker_engine import cache_dir
    from tests.infra.real_build import _lock, tree_copy
    from tests.test_release import github

    argv = _documented(r"^release .*--toolchain open.*--target qemu.*--smoke")
    assert argv[0] == "release"
    cache = cache_dir()
    dist = tmp_path / "dist"
    env = github(tmp_path, DOCKER_HOST=docker_host, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    # where this machine keeps the tree, its ccache and the assets; the rest exactly as documented
    with _lock(cache / "open-build.lock"):
        cp = release(*argv[1:], "--source", tree_copy(cache), "--cache-volume", cache / "open-ccache",
                     "--dist", dist, "--json", env=env, cwd=tmp_path, timeout=1800)
    assert cp.returncode == 0, cp.stderr[-3000:]
    report = json.loads(cp.stdout)
    assert report["strict"] is True and report["status"] == "ok" and report["warnings"] == []
    assert any("runs on the CPU only" in n for n in report["notes"])
    assert "::notice::this package was built with the open toolchain" in cp.stderr and "::warning::" not in cp.stderr
    (device,) = report["devices"]
    assert device["smoke"]["status"] == "ok" and device["target"] == "qemu"
    # the smoke command as it runs, through the emulator: pasted into a shell, it runs
    import re

    assert re.search(r"qemu: cd \S+ && .*qemu-aarch64 -L \S+ -- \./bin/llama-cli --version$", cp.stderr, re.M), cp.stderr
