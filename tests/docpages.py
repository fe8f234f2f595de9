"""The command reference under docs/commands/ against the real command tree: every command has a
page with a heading naming it, and the options table in that command's section lists exactly
the options the command has. Also the relative links of the docs (files and #anchors).

The command tree is the real one (hexbuild.cli.main.build_cli()), walked without running it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from tests.doccheck import fenced_blocks

GLOBAL_OPTIONS = {"--json", "--verbose", "-v", "--quiet", "-q", "--config", "--version",
                  "--install-completion", "--show-completion", "--help", "-h"}
TABLE_HEADER = re.compile(r"^\|\s*option\s*\|")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"`([^`]*)`")
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


@dataclass
class Section:
    level: int
    title: str
    start: int  # index of the heading line
    end: int = 0  # index past the section's last line (nested sections included)
    command: tuple[str, ...] | None = None  # the command path its heading names


@dataclass
class Page:
    path: Path
    lines: list[str]
    sections: list[Section] = field(default_factory=list)


# -- the command tree ----------------------------------------------------------------------------
def commands(root: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, command) for every command a user types: groups too, hidden delegates under the
    name they are typed by (`bench compare`, not `bench-compare`)."""
    delegated = {v: (k, parent) for parent, c in getattr(root, "commands", {}).items()
                 for k, v in getattr(c, "delegates", {}).items()}

    def walk(cmd: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
        if path:
            yield path, cmd
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            if name in delegated and not path:
                word, parent = delegated[name]
                yield (parent, word), sub
            elif not getattr(sub, "hidden", False):
                yield from walk(sub, path + (name,))
    yield from walk(root, ())


def options(cmd: Any) -> set[str]:
    """Every option name of a command but the global ones (--no-X forms included)."""
    out: set[str] = set()
    for p in cmd.params:
        if p.param_type_name == "option" and not getattr(p, "hidden", False):
            names = set(p.opts) | set(p.secondary_opts)
            if not names & GLOBAL_OPTIONS:
                out |= names
    return out


def is_group(cmd: Any) -> bool:
    return isinstance(getattr(cmd, "commands", None), dict)


def command_path(root: Any, words: list[str]) -> tuple[str, ...] | None:
    """The command a `hexbuild WORD…` line names: the longest run of words that are commands."""
    cmd, path = root, []
    for w in words:
        delegates = getattr(cmd, "delegates", {})
        if w in delegates:
            return (*path, w)
        sub = getattr(cmd, "commands", {}).get(w) if is_group(cmd) else None
        if sub is None:
            break
        cmd, path = sub, path + [w]
    return tuple(path) or None


# -- pages ---------------------------------------------------------------------------------------
def read_page(path: Path, root: Any) -> Page:
    lines = path.read_text(encoding="utf-8").splitlines()
    in_code = [False] * len(lines)
    for b in fenced_blocks("\n".join(lines)):
        for i in range(b.line - 2, b.line - 1 + b.text.count("\n") + 1):
            if 0 <= i < len(lines):
                in_code[i] = True
    page = Page(path, lines)
    for i, line in enumerate(lines):
        m = _HEADING.match(line)
        if m and not in_code[i]:
            page.sections.append(Section(len(m.group(1)), m.group(2), i))
    for n, s in enumerate(page.sections):
        s.end = next((t.start for t in page.sections[n + 1:] if t.level <= s.level), len(lines))
        for span in _CODE_SPAN.findall(s.title):
            words = span.split()
            if words[:1] == ["hexbuild"]:
                s.command = command_path(root, words[1:])
                break
    return page


def own_lines(page: Page, section: Section) -> list[str]:
    """A section's lines without the nested sections that name another command."""
    skip: set[int] = set()
    for s in page.sections:
        if section.start < s.start < section.end and s.command and s.command != section.command:
            skip |= set(range(s.start, s.end))
    return [page.lines[i] for i in range(section.start, section.end) if i not in skip]


def option_tables(lines: list[str]) -> list[set[str]]:
    """The option names in each `| option | … |` table, from the first cell's code spans."""
    tables: list[set[str]] = []
    i = 0
    while i < len(lines):
        if TABLE_HEADER.match(lines[i]):
            names: set[str] = set()
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                first = re.split(r"(?<!\\)\|", lines[i].strip().strip("|"))[0]
                for span in _CODE_SPAN.findall(first):
                    names |= set(_OPTION.findall(span.split()[0] if span.split() else ""))
                i += 1
            tables.append(names)
        i += 1
    return tables


def check_page_options(pages: list[Page], root: Any) -> list[str]:
    """Problems: a command without a heading naming it, a command's section without exactly one
    options table (when it has options), a table that lists an option the command lacks or
    leaves one out."""
    problems: list[str] = []
    for path, cmd in commands(root):
        want = options(cmd)
        where = [(p, s) for p in pages for s in p.sections if s.command == path]
        name = "hexbuild " + " ".join(path)
        if not where:
            if want or not is_group(cmd):
                problems.append(f"{name}: no page has a heading naming it")
            continue
        page, section = where[0]
        tables = option_tables(own_lines(page, section))
        if not want:
            if tables and tables != [set()]:
                problems.append(f"{page.path.name}: {name} has no options, its section lists {sorted(tables[0])}")
            continue
        if len(tables) != 1:
            problems.append(f"{page.path.name}: {name}: {len(tables)} options tables in its section, want 1")
            continue
        if missing := sorted(want - tables[0]):
            problems.append(f"{page.path.name}: {name}: options not on its page: {', '.join(missing)}")
        if extra := sorted(tables[0] - want):
            problems.append(f"{page.path.name}: {name}: the page lists options it does not have: {', '.join(extra)}")
    return problems


# -- links -----------------------------------------------------------------------------------------
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def anchor(title: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation but - and _ dropped, spaces to -."""
    text = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower())
    return text.replace(" ", "-")


def check_links(path: Path, root: Any) -> list[str]:
    """Relative links that name no file, or an anchor the page lacks."""
    problems = []
    text = path.read_text(encoding="utf-8")
    code = {i for b in fenced_blocks(text) for i in range(b.line - 1, b.line + b.text.count("\n"))}
    for n, line in enumerate(text.splitlines(), 1):
        if n in code:
            continue
        for target in _LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, frag = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                problems.append(f"{path.name}:{n}: {target}: no such file")
            elif frag and dest.suffix == ".md":
                anchors = {anchor(s.title) for s in read_page(dest, root).sections}
                if frag not in anchors:
                    problems.append(f"{path.name}:{n}: {target}: no heading #{frag}")
    return problems
