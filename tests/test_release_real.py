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
