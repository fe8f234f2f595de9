"""What each llama.cpp tool's flags are called, so that a flag the user gives replaces the
default of the same setting instead of being passed twice."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Mapping, Sequence


@dataclass(frozen=True)
class Flag:
    group: str  # the setting it controls; a default of the same group is dropped
    takes_value: bool


def _flags(spec: dict[str, tuple[tuple[str, ...], bool]]) -> dict[str, Flag]:
    return {alias: Flag(group, takes) for group, (aliases, takes) in spec.items() for alias in aliases}


# common/arg.cpp (llama-cli, llama-completion, llama-server, llama-mtmd-cli)
COMMON_FLAGS = _flags({
    "model": (("-m", "--model"), True),
    "threads": (("-t", "--threads"), True),
    "ngl": (("-ngl", "--gpu-layers", "--n-gpu-layers"), True),
    "fa": (("-fa", "--flash-attn"), True),
    "ubatch": (("-ub", "--ubatch-size"), True),
    "batch": (("-b", "--batch-size"), True),
    "ctx": (("-c", "--ctx-size"), True),
    "device": (("-dev", "--device"), True),
    "poll": (("--poll",), True),
    "cpu_mask": (("-C", "--cpu-mask"), True),
    "cpu_strict": (("--cpu-strict",), True),
    "mmap": (("--mmap", "--no-mmap"), False),
    "load_mode": (("-lm", "--load-mode"), True),
    "conversation": (("-cnv", "--conversation", "-no-cnv", "--no-conversation"), False),
    "file": (("-f", "--file"), True),
    "verbose": (("-v", "--verbose", "--log-verbose"), False),
})
# One load-mode setting, two spellings across revisions.
COMMON_SAME = {"load_mode": "mmap", "mmap": "load_mode"}

# tools/llama-bench/llama-bench.cpp
BENCH_FLAGS = _flags({
    "model": (("-m", "--model"), True),
    "threads": (("-t", "--threads"), True),
    "ngl": (("-ngl", "--n-gpu-layers"), True),
    "fa": (("-fa", "--flash-attn"), True),
    "ubatch": (("-ub", "--ubatch-size"), True),
    "batch": (("-b", "--batch-size"), True),
    "device": (("-dev", "--device"), True),
    "poll": (("--poll",), True),
    "cpu_mask": (("-C", "--cpu-mask"), True),
    "cpu_strict": (("--cpu-strict",), True),
    "mmap": (("-mmp", "--mmap"), True),
    "load_mode": (("-lm", "--load-mode"), True),
    "output": (("-o", "--output"), True),
    "repetitions": (("-r", "--repetitions"), True),
    "n_prompt": (("-p", "--n-prompt"), True),
    "n_gen": (("-n", "--n-gen"), True),
    "verbose": (("-v", "--verbose"), False),
})

# tests/test-backend-ops.cpp
BACKEND_OPS_FLAGS = _flags({
    "backend": (("-b",), True),
    "op": (("-o",), True),
    "params": (("-p",), True),
})

# Other value-taking options whose value must not be mistaken for a flag (a prompt "-t").
VALUE_OPTIONS = frozenset({
    "-p", "--prompt", "-sys", "--system-prompt", "-r", "--reverse-prompt", "-n", "--predict",
    "--n-predict", "--grammar", "--grammar-file", "-j", "--json-schema", "-ctk", "--cache-type-k",
    "-ctv", "--cache-type-v", "--mmproj", "--image", "--host", "--port", "-a", "--alias",
    "--temp", "--seed", "-s", "--chat-template", "-ot", "--override-tensor", "-ts", "--tensor-split",
    "-mg", "--main-gpu", "-sm", "--split-mode", "--lora", "-np", "--parallel", "-o", "--output",
})


def flag_table(kind: str, tool: str) -> dict[str, Flag]:
    if kind == "bench":
        return BENCH_FLAGS
    if kind == "tool" and PurePosixPath(tool).name == "test-backend-ops":
        return BACKEND_OPS_FLAGS
    return COMMON_FLAGS  # llama-* tools share common/arg.cpp


def given_groups(args: Sequence[str], table: Mapping[str, Flag]) -> set[str]:
    """The settings the user's own arguments already set."""
    groups: set[str] = set()
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        flag = table.get(arg)
        if flag is not None:
            groups.add(flag.group)
            if table is COMMON_FLAGS and flag.group in COMMON_SAME:
                groups.add(COMMON_SAME[flag.group])
            skip = flag.takes_value
        elif arg in VALUE_OPTIONS:
            skip = True
    return groups
