"""Stand-ins for llama.cpp tools, for run/bench/launch-script tests: ``argv_echo`` (a C program
built here with the system cc that reports its argv, cwd and GGML_* environment hex-encoded;
``argv_echo_aarch64`` is the same for AArch64 Linux) and
``fake_llama_bench`` (a POSIX sh script printing genuine llama-bench JSONL records)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def build_c_tool(source: str, out: Path, *flags: str) -> Path:
    """tests/tools/<source> compiled for this machine with the system C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang-19")
    if not cc:
        pytest.fail(f"no C compiler (cc) to build tests/tools/{source}: run scripts/setup-test-env.sh")
    subprocess.run([cc, "-O2", "-Wall", "-Werror", *flags, "-o", str(out), str(TOOLS / source)], check=True)
    return out


@pytest.fixture(scope="session")
def argv_echo(tmp_path_factory) -> Path:
    return build_c_tool("argv_echo.c", tmp_path_factory.mktemp("argv-echo") / "argv_echo")


@pytest.fixture(scope="session")
def argv_echo_aarch64(tmp_path_factory) -> Path:
    """argv_echo for AArch64 Linux, linked by Debian's cross gcc against glibc 2.36 (so it needs
    GLIBC_2.34: a bullseye board cannot load it without a bundled runtime)."""
    cc = shutil.which("aarch64-linux-gnu-gcc")
    if not cc:
        pytest.fail("aarch64-linux-gnu-gcc is missing: run scripts/setup-test-env.sh (installs g++-aarch64-linux-gnu)")
    out = tmp_path_factory.mktemp("argv-echo-aarch64") / "argv_echo"
    subprocess.run([cc, "-O2", "-Wall", "-Werror", "-o", str(out), str(TOOLS / "argv_echo.c")], check=True)
    return out


def echo_linux_package(root: Path, echo: Path) -> Path:
    """A Linux package (CPU only) at ``root`` whose programs are ``echo`` (argv_echo for AArch64)."""
    for d in ("bin", "lib"):
        (root / d).mkdir(parents=True)
    for name in ("llama-completion", "llama-cli", "test-backend-ops"):
        (root / "bin" / name).write_bytes(echo.read_bytes())
        (root / "bin" / name).chmod(0o755)
    (root / "manifest.json").write_text(json.dumps({"os": "linux"}))
    return root


@pytest.fixture(scope="session")
def fake_llama_bench() -> Path:
    return TOOLS / "fake_llama_bench.sh"


def decode_echo(stdout: bytes | str) -> dict:
    """argv_echo's report → {"argv": [str...], "cwd": str, "env": {name: str}}."""
    if isinstance(stdout, bytes):
        stdout = stdout.decode()
    line = next(l for l in stdout.splitlines() if l.startswith('{"argv"'))
    raw = json.loads(line)
    text = lambda h: bytes.fromhex(h).decode("utf-8", "surrogateescape")  # noqa: E731
    return {"argv": [text(a) for a in raw["argv"]], "cwd": text(raw["cwd"]),
            "env": {k: text(v) for k, v in raw["env"].items()}}


def make_install(root: Path, tools: dict[str, Path], *, manifest: dict | None = None) -> Path:
    """A minimal llama.cpp install: bin/<name> for each tool, an empty lib/, and optionally
    .hexbuild/manifest.json (what hexbuild deploy leaves there)."""
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "lib").mkdir(exist_ok=True)
    for name, src in tools.items():
        dst = root / "bin" / name
        shutil.copyfile(src, dst)
        dst.chmod(0o755)
    if manifest is not None:
        (root / ".hexbuild").mkdir(exist_ok=True)
        (root / ".hexbuild" / "manifest.json").write_text(json.dumps(manifest))
    return root
