"""hexbuild bisect on the real llama.cpp 0.3.36 tree: a git history made here from it (three commits,
one of which makes the Q4_0 decode kernels of ggml-cpu, ggml_gemv_q4_0_4x4/4x8_q8_0, run the
generic C version of themselves twelve times first), each revision built with the open toolchain
(`--toolchain open`), deployed to a qemu: target and measured with the real llama-bench on the
tiny real GGUF under qemu-aarch64.

Cost: the session's open build (tests/infra/real_build.py) is the checkout's own build directory
here, so the bisect starts from a copy of it and the same ccache: the good revision rebuilds
nothing, and the slow kernel's file is the only one compiled (then the libraries relinked)."""

from __future__ import annotations

import os
import shutil
import subprocess

from tests import bisect_repo as br
from tests.infra.docker_engine import cache_dir
from tests.infra.real_build import tree_copy

KERNEL = "ggml/src/ggml-cpu/arch/arm/repack.cpp"
# The Q4_0 decode (gemv) kernels of the AArch64 build: 4x4 with the dot-product extension (the
# Linux preset's -march), 4x8 with int8 matmul (the Android preset's).
GEMVS = ("ggml_gemv_q4_0_4x4_q8_0", "ggml_gemv_q4_0_4x8_q8_0")
SIGNATURE = ("void {name}(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, "
             "const void * GGML_RESTRICT vy, int nr, int nc) {{")


def plant_generic_kernel(repo) -> str:
    """Each Q4_0 gemv first runs the scalar generic version of itself twelve times (its result is
    then overwritten by the real one: right answers, a few times slower decode)."""
    path = repo / KERNEL
    text = path.read_text()
    for name in GEMVS:
        sig = SIGNATURE.format(name=name)
        assert text.count(sig) == 1, f"the 0.3.36 tree's {name} moved"
        text = text.replace(sig, sig + "\n    for (int again = 0; again < 12; again++) {\n"
                            f"        {name}_generic(n, s, bs, vx, vy, nr, nc);\n    }}")
    path.write_text(text)
    return br.commit(repo, "ggml-cpu: run the generic Q4_0 gemv first (slow)")


def test_bisect_finds_a_slowdown_in_a_real_ggml_cpu_kernel(cli, tmp_path, real_linux_package, tiny_gguf,
                                                           docker_host, monkeypatch):
    cache = cache_dir()
    tree = tree_copy(cache)
    repo = tmp_path / "llama.cpp"
    # the checkout: the tree as the open build saw it (mtimes kept), without its models' vocabularies and
    # the gitfile the source distribution kept from its submodule
    top = {".git", "build-open-linux", "pkg-open-linux", "models"}
    shutil.copytree(tree, repo, symlinks=True,
                    ignore=lambda d, names: [n for n in names if n in top] if d == str(tree) else [])
    br.git(repo, "init", "-q", "-b", "master")
    good = br.commit(repo, "llama.cpp 0.3.36")
    bad_first = plant_generic_kernel(repo)
    bad = br.touch_readme(repo, "a note")
    # and its build directory: a copy of the session's open build of this very tree, the checkout
    # back at the good revision with the mtimes that build saw (as a user's checkout and build are)
    br.git(repo, "checkout", "-q", "--detach", good)
    for path in br.git(repo, "diff", "--name-only", good, bad).splitlines():
        st = (tree / path).stat()
        os.utime(repo / path, ns=(st.st_atime_ns, st.st_mtime_ns))
    subprocess.run(["cp", "-a", str(tree / "build-open-linux"), str(repo / "build-open-linux")], check=True)
    assert not br.git(repo, "status", "--porcelain")  # the build tree is ignored (llama.cpp's .gitignore)
    before = br.tree_digest(repo)
    for k, v in {"DOCKER_HOST": docker_host, "HEXBUILD_LINUX_SYSROOT": "/usr/aarch64-linux-gnu",
                 "XDG_CACHE_HOME": str(tmp_path / "xdg"), "HEXBUILD_RUN_RESULTS_DIR": str(tmp_path / "results")}.items():
        monkeypatch.setenv(k, v)
    r = cli("--json", "bisect", "--source", str(repo), "--good", good, "--bad", bad, "-t", f"qemu:{tmp_path}/dev",
            "--model", str(tiny_gguf), "--models-dir", str(tmp_path / "models"), "--os", "linux",
            "--toolchain", "open", "--build-target", "llama-bench", "--cache-volume", str(cache / "open-ccache"),
            # a changed libggml-cpu.so does not relink the libraries and programs that load it
            "--cmake-arg", "-DCMAKE_LINK_DEPENDS_NO_SHARED=ON",
            "--db", str(tmp_path / "bench.sqlite"),
            "--", "-n", "8", "-t", "1")
    assert r.rc == 0, r.err
    doc = r.json
    assert doc["status"] == "found" and doc["first_bad"]["commit"] == bad_first, doc["steps"]
    assert doc["first_bad"]["subject"].startswith("ggml-cpu: run the generic")
    assert doc["last_good"]["commit"] == good and doc["steps_taken"] == 3 == doc["expected_steps"]
    steps = {s["commit"]: s for s in doc["steps"]}
    assert steps[good]["build_status"] == "ok" and steps[good]["median"] > 0
    # the good revision compiled nothing (the checkout's own build directory, its mtimes kept), the
    # bad end only the kernel's file, and the first bad one (the same code) nothing at all
    assert steps[good]["compiled"] == [] and steps[bad_first]["compiled"] == []
    assert steps[bad]["compiled"] == ["ggml/src/CMakeFiles/ggml-cpu.dir/ggml-cpu/arch/arm/repack.cpp.o"]
    # the threshold followed the measured ends (the bad one, measured second, a few times slower)
    assert doc["threshold_source"] == "measured" and doc["first_bad"]["interval"][1] < doc["threshold"] < 0.8
    assert [s["commit"] for s in doc["steps"]] == [good, bad, bad_first]
    # an open-toolchain package runs on the CPU only: said once, not twice per step (the good
    # revision is deployed beside each step's)
    assert r.err.count("it runs on the CPU only") == 1, r.err
    assert br.tree_digest(repo) == before
