"""The console transcripts in the docs are replayed: every ```console block of README.md and
docs/**/*.md runs here, its `$ ` lines one after another in bash in one working directory, and
what they print (stdout and stderr together, as a terminal shows them) must match the text
under each line. A block that cannot run here says why in its info string
(```` ```console needs: a phone on adb ````), and is listed by the last test.

In the expected text `…` stands for any text within a line, and a line of only `…` for any
number of lines. The working directory holds what the examples name: `pkg-android/llama.cpp`
and `pkg-linux/llama.cpp` (real ELF packages, tests/elf_factory.py) and `tiny.gguf`; `hexbuild`
is this checkout's, on PATH."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import doccheck, elf_factory as ef

REPO = Path(__file__).resolve().parent.parent
MARKDOWN = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])


@dataclass
class Step:
    line: int
    command: str
    expected: list[str]


@dataclass
class Example:
    where: str
    needs: str  # why it cannot run here; "" when it runs
    steps: list[Step]


def examples(path: Path) -> list[Example]:
    text = path.read_text(encoding="utf-8")
    out = []
    for b in doccheck.fenced_blocks(text, str(path.relative_to(REPO))):
        if b.lang not in ("console", "shell-session"):
            continue
        info = text.splitlines()[b.line - 2].strip().strip("`~").strip()
        needs = info.split("needs:", 1)[1].strip() if "needs:" in info else ""
        steps: list[Step] = []
        lines = b.text.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("$ "):
                start, command = i, lines[i][2:]
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + "\n" + lines[i]
                steps.append(Step(b.line + start, command, []))
            elif steps:
                steps[-1].expected.append(lines[i])
            i += 1
        out.append(Example(f"{b.path}:{b.line}", needs, steps))
    return out


ALL = [e for p in MARKDOWN for e in examples(p)]
RUNNABLE = [e for e in ALL if not e.needs]


def _pattern(line: str) -> re.Pattern:
    return re.compile("".join(".*" if part == "…" else re.escape(part) for part in re.split("(…)", line.rstrip())))


def matches(expected: list[str], actual: list[str]) -> bool:
    """`…` alone on a line: any number of lines; `…` in a line: any text."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "…":
        return any(matches(rest, actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and bool(_pattern(head).fullmatch(actual[0].rstrip())) and matches(rest, actual[1:])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, tiny_gguf):
    root = tmp_path_factory.mktemp("doc-examples")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "hexbuild").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m hexbuild "$@"\n')
    (bin_dir / "hexbuild").chmod(0o755)
    ef.make_package(root / "work" / "pkg-android")
    ef.make_package(root / "work" / "pkg-linux", os="linux")
    shutil.copy(tiny_gguf, root / "work" / "tiny.gguf")
    (root / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HEXBUILD_", "CI", "GITHUB_"))}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", HOME=str(root / "home"),
               XDG_CACHE_HOME=str(root / "home" / ".cache"), XDG_STATE_HOME=str(root / "home" / ".state"),
               COLUMNS="100", LC_ALL="C.UTF-8")
    env["HEXBUILD_TEST_CACHE"] = os.environ["HEXBUILD_TEST_CACHE"]
    return root / "work", env


@pytest.mark.parametrize("example", RUNNABLE, ids=lambda e: e.where)
def test_console_example_runs_as_shown(example, workspace, tmp_path):
    template, env = workspace
    work = tmp_path / "work"
    shutil.copytree(template, work, symlinks=True)
    for step in example.steps:
        cp = subprocess.run(["bash", "-c", step.command], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=120)
        actual = cp.stdout.splitlines()
        assert matches(step.expected, actual), (
            f"{example.where}: `{step.command}` printed:\n{cp.stdout}\nthe docs show:\n" + "\n".join(step.expected))


def test_examples_are_found_and_every_skipped_one_says_why():
    assert len(RUNNABLE) >= 8, [e.where for e in RUNNABLE]
    assert all(e.steps for e in ALL), [e.where for e in ALL if not e.steps]
    skipped = {e.where: e.needs for e in ALL if e.needs}
    assert all(len(why) > 10 for why in skipped.values()), skipped


@pytest.mark.parametrize("expected,actual,ok", [
    (["a", "b"], ["a", "b"], True),
    (["a", "b"], ["a", "c"], False),
    (["a …"], ["a anything at all"], True),
    (["…", "z"], ["x", "y", "z"], True),
    (["…", "z"], ["x", "y"], False),
    (["a"], ["a", "extra"], False),
    (["a.b"], ["axb"], False),
])
def test_matching(expected, actual, ok):
    assert matches(expected, actual) is ok
