"""Check what documentation and CI examples show against the real hexbuild.

- every fenced ```toml block must load with hexbuild's own config reader (unknown keys fail);
- every `hexbuild ...` command line (in ```sh/```bash/```console blocks, or in a CI file's
  run:/script: steps) must name real commands and options, give every option that takes a value
  a value, and pass a number where the option takes one.

The command tree is the real one (hexbuild.cli.main.build_cli()), walked without running
anything: no callbacks fire, so the process-wide UI state is untouched.
"""

from __future__ import annotations

import re
import shlex
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

SHELL_LANGS = {"sh", "bash", "console", "shell", "shell-session", "zsh"}
CI_SCRIPT_KEYS = {"run", "script", "before_script", "after_script"}
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = {";", "&&", "||", "|", "&", "|&", ";;", "(", ")"}
_REDIRECTS = {">", ">>", "<", "<<", ">&", "<&", "&>", ">|", "<>", "&>>"}


@dataclass
class Block:
    path: str
    line: int  # 1-based line of the block's first content line
    lang: str
    text: str


@dataclass
class Invocation:
    where: str  # "README.md:42"
    text: str   # the command line as written
    argv: list[str]  # the arguments after `hexbuild`


# -- finding things -----------------------------------------------------------------------------
def fenced_blocks(text: str, path: str = "") -> list[Block]:
    """Fenced code blocks with their language (the info string's first word, lowercased)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m.group("fence"), len(m.group("indent"))
        lang = (m.group("info").split() or [""])[0].lower().strip("{}.")
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            close = _FENCE.match(lines[j])
            if close and close.group("fence")[0] == fence[0] and len(close.group("fence")) >= len(fence) \
                    and not close.group("info").strip():
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        blocks.append(Block(path, i + 2, lang, "\n".join(body) + ("\n" if body else "")))
        i = j + 1
    return blocks


def _logical_lines(text: str, *, console: bool) -> Iterator[tuple[int, str]]:
    """(offset, line) with backslash continuations joined; in console blocks only `$ ` lines
    (the prompt) are commands, the rest is output."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start, line = i, lines[i]
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        stripped = line.strip()
        if console:
            if not stripped.startswith("$ "):
                continue
            stripped = stripped[2:]
        elif stripped.startswith("$ "):
            stripped = stripped[2:]
        yield start, stripped


def split_commands(line: str) -> list[list[str]]:
    """A shell line as its simple commands (split at ; && || | &), comments and redirections
    dropped. Quoting follows POSIX shell rules (shlex)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError as e:
        raise ValueError(f"cannot split {line!r}: {e}") from None
    commands: list[list[str]] = [[]]
    skip_next = False
    for tok in tokens:
        if skip_next:
            skip_next = False
            continue
        if tok in _SEPARATORS:
            commands.append([])
        elif tok in _REDIRECTS:
            if commands[-1] and commands[-1][-1].isdigit():
                commands[-1].pop()  # the fd number of 2>file
            skip_next = True
        else:
            commands[-1].append(tok)
    return [c for c in commands if c]


def hexbuild_argv(words: list[str]) -> list[str] | None:
    """The arguments after `hexbuild` (or `python -m hexbuild`) when ``words`` runs hexbuild."""
    i = 0
    while i < len(words) and _ASSIGNMENT.match(words[i]):
        i += 1  # CI=true hexbuild ...
    rest = words[i:]
    if rest and rest[0] in ("hexbuild", "./hexbuild") or (rest and rest[0].endswith("/hexbuild")):
        return rest[1:]
    if len(rest) >= 3 and re.fullmatch(r"(.*/)?python[0-9.]*", rest[0]) and rest[1:3] == ["-m", "hexbuild"]:
        return rest[3:]
    return None


# GitHub Actions expressions are substituted before the shell sees the line: one word each.
_GH_EXPRESSION = re.compile(r"\$\{\{.*?\}\}")


def invocations_in_shell(text: str, where: str, first_line: int = 1, *, console: bool = False) -> list[Invocation]:
    out: list[Invocation] = []
    text = _GH_EXPRESSION.sub("EXPRESSION", text)
    for offset, line in _logical_lines(text, console=console):
        if "hexbuild" not in line:
            continue
        for words in split_commands(line):
            argv = hexbuild_argv(words)
            if argv is not None:
                out.append(Invocation(f"{where}:{first_line + offset}", line, argv))
    return out


def markdown_invocations(text: str, path: str) -> list[Invocation]:
    out: list[Invocation] = []
    for b in fenced_blocks(text, path):
        if b.lang in SHELL_LANGS:
            out += invocations_in_shell(b.text, path, b.line, console=b.lang in ("console", "shell-session"))
    return out


def ci_scripts(data: Any, trail: str = "") -> Iterator[tuple[str, str]]:
    """(where, shell text) for every run:/script: step in a parsed CI file."""
    if isinstance(data, dict):
        for k, v in data.items():
            here = f"{trail}.{k}" if trail else str(k)
            if k in CI_SCRIPT_KEYS:
                if isinstance(v, str):
                    yield here, v
                elif isinstance(v, list):
                    for n, item in enumerate(v):
                        if isinstance(item, str):
                            yield f"{here}[{n}]", item
                        else:
                            yield from ci_scripts(item, f"{here}[{n}]")
            else:
                yield from ci_scripts(v, here)
    elif isinstance(data, list):
        for n, item in enumerate(data):
            yield from ci_scripts(item, f"{trail}[{n}]")


def ci_env_vars(data: Any, trail: str = "") -> Iterator[tuple[str, str]]:
    """(where, name) for every variable a CI file sets (GitHub env:, GitLab variables:)."""
    if isinstance(data, dict):
        for k, v in data.items():
            here = f"{trail}.{k}" if trail else str(k)
            if k in ("env", "variables") and isinstance(v, dict):
                for name in v:
                    yield here, str(name)
            else:
                yield from ci_env_vars(v, here)
    elif isinstance(data, list):
        for n, item in enumerate(data):
            yield from ci_env_vars(item, f"{trail}[{n}]")


def yaml_invocations(data: Any, path: str) -> list[Invocation]:
    out: list[Invocation] = []
    for where, script in ci_scripts(data):
        out += invocations_in_shell(script, f"{path}:{where}", 0)
    return out


# -- checking commands --------------------------------------------------------------------------
def _is_group(cmd: Any) -> bool:
    return isinstance(getattr(cmd, "commands", None), dict)


def _options(cmd: Any) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for p in cmd.params:
        if p.param_type_name == "option":
            for name in [*p.opts, *p.secondary_opts]:
                table[name] = p
    return table


def _takes_value(p: Any) -> bool:
    return not (getattr(p, "is_flag", False) or getattr(p, "count", False))


def _number_kind(p: Any) -> type | None:
    desc = getattr(p, "type_descriptor", None)  # typer >= 0.29
    ann = getattr(desc, "annotation", None)
    for t in (ann, *typing.get_args(ann)):
        if t in (int, float):
            return t
    name = getattr(getattr(p, "type", None), "name", "")  # click's INT, IntRange, FLOAT, FloatRange
    if name.startswith(("integer", "int")):
        return int
    if name.startswith("float"):
        return float
    return None


def _free_prefix(cmd: Any) -> str | None:
    """The option prefix a command accepts with any name (``hexbuild run``'s ``--hex-KNOB``)."""
    try:
        from hexbuild.cli.run import PassthroughCommand
    except ImportError:
        return None
    return "--hex-" if isinstance(cmd, PassthroughCommand) else None


def check_argv(root: Any, argv: list[str]) -> list[str]:
    """Problems with one hexbuild command line (argv after `hexbuild`); [] when it is valid."""
    problems: list[str] = []
    cmd, path = root, ["hexbuild"]
    positional: list[str] = []
    wants_help = any(a in ("-h", "--help") for a in argv)
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            if not _free_prefix(cmd):  # `hexbuild run` hands what follows -- to the device program
                positional += argv[i + 1:]
            break
        if tok in ("-h", "--help"):
            i += 1
            continue
        if tok.startswith("-") and tok != "-":
            name, eq, value = tok.partition("=") if tok.startswith("--") else (tok, "", "")
            opts = _options(cmd)
            p = opts.get(name)
            if p is None and not tok.startswith("--") and len(tok) > 2:
                # -vv, -vq: a cluster of flags; or -j8: a short option with its value attached
                first = opts.get(tok[:2])
                if first is not None and _takes_value(first):
                    p, value, eq = first, tok[2:], "="
                elif all((q := opts.get("-" + c)) is not None and not _takes_value(q) for c in tok[1:]):
                    i += 1
                    continue
            if p is None and name.startswith(_free_prefix(cmd) or "\0"):
                if not eq:  # --hex-KNOB VALUE: `hexbuild run` takes any knob name
                    i += 1
                i += 1
                continue
            if p is None:
                problems.append(f"{' '.join(path)}: no such option {name}")
                i += 1
                continue
            if _takes_value(p):
                if not eq:
                    if i + 1 >= len(argv):
                        problems.append(f"{' '.join(path)}: {name} needs a value")
                        break
                    value = argv[i + 1]
                    i += 1
                kind = _number_kind(p)
                if kind is not None:
                    try:
                        kind(value)
                    except ValueError:
                        problems.append(f"{' '.join(path)}: {name} takes a number, got {value!r}")
            elif eq:
                problems.append(f"{' '.join(path)}: {name} takes no value")
            i += 1
            continue
        delegates = getattr(cmd, "delegates", {})  # `bench compare`: a command handing over to another
        if not positional and tok in delegates:
            cmd, path = root.commands[delegates[tok]], path + [tok]
            i += 1
            continue
        if _is_group(cmd) and not positional:
            sub = cmd.commands.get(tok)
            if sub is None:
                problems.append(f"{' '.join(path)}: no such command {tok!r} "
                                f"(have: {', '.join(sorted(cmd.commands))})")
                return problems
            cmd, path = sub, path + [tok]
            i += 1
            continue
        positional.append(tok)
        i += 1
    if wants_help:
        return problems
    if _is_group(cmd):
        problems.append(f"{' '.join(path)}: needs a subcommand ({', '.join(sorted(cmd.commands))})")
        return problems
    args = [p for p in cmd.params if p.param_type_name == "argument"]
    unlimited = any(p.nargs < 0 for p in args)
    most = sum(max(p.nargs, 0) for p in args)
    least = sum(max(p.nargs, 1) for p in args if p.required)
    if not unlimited and len(positional) > most:
        problems.append(f"{' '.join(path)}: unexpected argument(s) {positional[most:]}")
    if len(positional) < least:
        problems.append(f"{' '.join(path)}: missing argument(s) "
                        + ", ".join((p.metavar or p.name).upper() for p in args if p.required))
    return problems


def check_invocations(invocations: Iterable[Invocation], root: Any = None) -> list[str]:
    if root is None:
        from hexbuild.cli.main import build_cli

        root = build_cli()
    out = []
    for inv in invocations:
        for problem in check_argv(root, inv.argv):
            out.append(f"{inv.where}: `{inv.text}`: {problem}")
    return out


# -- checking TOML --------------------------------------------------------------------------------
def check_toml(block: Block, workdir: Path) -> str | None:
    """Load a ```toml block with hexbuild's config reader; the error text, or None when it loads.
    A block with [tool.hexbuild] is read as a pyproject.toml, anything else as hexbuild.toml."""
    from hexbuild.config import read_file
    from hexbuild.errors import HexbuildError

    name = "pyproject.toml" if re.search(r"^\s*\[\s*tool\.hexbuild\b", block.text, re.M) else "hexbuild.toml"
    d = workdir / f"block-{block.line}"
    d.mkdir(parents=True, exist_ok=True)
    f = d / name
    f.write_text(block.text, encoding="utf-8")
    try:
        values = read_file(f)
    except HexbuildError as e:
        return f"{block.path}:{block.line}: {e.message.replace(str(f), name)}"
    if name == "pyproject.toml" and not values:
        return f"{block.path}:{block.line}: [tool.hexbuild] sets nothing"
    return None


def toml_blocks(text: str, path: str) -> list[Block]:
    return [b for b in fenced_blocks(text, path) if b.lang == "toml"]
