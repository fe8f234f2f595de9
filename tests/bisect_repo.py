"""Git histories for the bisect tests and benchmark, made from the llama-mini fixture tree: the
first commit gives the tree a stand-in llama-bench (tests/data/bisect/bench.c) that times ggml's
Q4_0 x Q8_0 dot product and a stand-in test-backend-ops (tests/data/bisect/test-backend-ops.c)
that checks it against a reference; later commits change a README, break the build, plant a
slowdown in that kernel (it does the work SLOWDOWN times over) or a wrong result."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "llama-mini"
BENCH_C = REPO / "tests" / "data" / "bisect" / "bench.c"
OPS_C = REPO / "tests" / "data" / "bisect" / "test-backend-ops.c"
SLOWDOWN = 4
KERNEL = "ggml/src/ggml.c"
GIT_ENV = {"GIT_AUTHOR_NAME": "hexbuild test", "GIT_AUTHOR_EMAIL": "test@hexbuild.invalid",
           "GIT_COMMITTER_NAME": "hexbuild test", "GIT_COMMITTER_EMAIL": "test@hexbuild.invalid"}


def git(repo: Path, *args: str) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **GIT_ENV}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def commit(repo: Path, subject: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", subject)
    return git(repo, "rev-parse", "HEAD")


def new_repo(root: Path) -> Path:
    repo = root / "llama-mini"
    shutil.copytree(FIXTURE, repo)
    shutil.copyfile(BENCH_C, repo / "tools" / "bench" / "bench.c")
    (repo / "tools" / "test-backend-ops").mkdir()
    shutil.copyfile(OPS_C, repo / "tools" / "test-backend-ops" / "test-backend-ops.c")
    with open(repo / "tools" / "CMakeLists.txt", "a") as f:
        f.write("llama_tool(test-backend-ops test-backend-ops/test-backend-ops.c)\n")
    (repo / ".gitignore").write_text("/build*\n/pkg*\n")
    git(repo, "init", "-q", "-b", "master")
    commit(repo, "llama-mini with a timed llama-bench")
    return repo


def touch_readme(repo: Path, words: str) -> str:
    with open(repo / "README.md", "a") as f:
        f.write(f"\n{words}\n")
    return commit(repo, f"docs: {words}")


def plant_slowdown(repo: Path) -> str:
    """The dot product's block loop runs SLOWDOWN times (the compiler may not fold it away)."""
    path = repo / KERNEL
    text = path.read_text()
    old = "    for (int b = 0; b < nb; b++) {\n        int32_t acc = 0;"
    assert old in text
    text = text.replace("    float sum = 0.0f;\n    for (int b = 0; b < nb; b++) {",
                        f"    float sum = 0.0f;\n    for (int again = 0; again < {SLOWDOWN}; again++) {{\n"
                        "    sum = 0.0f;\n    __asm__ volatile(\"\" ::: \"memory\");\n"
                        "    for (int b = 0; b < nb; b++) {")
    text = text.replace("        sum += ggml_fp16_to_fp32(x[b].d) * ggml_fp16_to_fp32(y[b].d) * (float) acc;\n    }",
                        "        sum += ggml_fp16_to_fp32(x[b].d) * ggml_fp16_to_fp32(y[b].d) * (float) acc;\n    }\n    }")
    path.write_text(text)
    return commit(repo, "ggml: recompute the Q4_0 x Q8_0 dot product (slow)")


def plant_wrong_result(repo: Path) -> str:
    """The dot product dequantizes the low nibbles with the wrong offset."""
    path = repo / KERNEL
    text = path.read_text()
    old = "const int w0 = (x[b].qs[i] & 0x0f) - 8;"
    assert old in text
    path.write_text(text.replace(old, "const int w0 = (x[b].qs[i] & 0x0f) - 7;"))
    return commit(repo, "ggml: an off-by-one in the Q4_0 dequantization")


def break_build(repo: Path) -> str:
    path = repo / "src" / "llama.c"
    path.write_text(path.read_text().replace("return ggml_backend_reg_count();", "return ggml_backend_reg_count() +;"))
    return commit(repo, "llama: a typo that does not compile")


def fix_build(repo: Path) -> str:
    path = repo / "src" / "llama.c"
    path.write_text(path.read_text().replace("return ggml_backend_reg_count() +;", "return ggml_backend_reg_count();"))
    return commit(repo, "llama: fix the typo")


def tree_digest(root: Path) -> str:
    """Every file under ``root``, .git included (HEAD, index, refs, objects, config, worktrees):
    path, type, mode and content."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, root)}\0{stat.S_IFMT(st.st_mode)}\0{st.st_mode & 0o7777:o}\0".encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(p).encode())
            else:
                with open(p, "rb") as f:
                    h.update(f.read())
        h.update(f"dirs {sorted(dirnames)}\n".encode())
    return h.hexdigest()
