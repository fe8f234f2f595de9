"""Facts read from a llama.cpp checkout: what *that revision* says, never a table of versions.

Names changed often between revisions (docs dir, image tags, env vars, presets, HTP versions,
package folder), so everything here is read from the tree's own docs, CMake files, sources and
CI workflows. Where the tree says nothing, the fact is None or empty, never guessed.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError
from .plan_rules import read_rules

DOCS_DIRS = ("docs/backend/snapdragon", "docs/backend/hexagon")
HEXAGON_DIR = "ggml/src/ggml-hexagon"
OSES = ("android", "linux")

# `ghcr.io/snapdragon-toolchain/arm64-android:v0.7`, optionally `@sha256:…`; any registry.
_IMAGE_RE = re.compile(
    r"(?P<ref>(?:[a-z0-9][a-z0-9.\-]*(?::\d+)?/)?(?:[a-z0-9._\-]+/)*arm64-(?P<os>android|linux)"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.\-]*)?(?:@sha256:[0-9a-f]{64})?)")
_HTP_CALL_RE = re.compile(r"^\s*build_htp_skel\s*\(\s*(v\d+)\s*\)", re.M)
_FOREACH_RE = re.compile(r"foreach\s*\(\s*\w+\s+((?:v\d+\s*)+)\)", re.I)
_ENV_RE = re.compile(r'"(GGML_HEXAGON_[A-Z0-9_]+)"')
_INSTALL_RE = re.compile(r"cmake --install\s+(\S+)\s+--prefix\s+(\S+)")
_PRESET_CMD_RE = re.compile(r"cmake --preset\s+(arm64-(android|linux)-snapdragon-\w+)\s+-B\s*(\S+)")


@dataclass
class SourceFacts:
    path: str
    revision: str | None = None
    hexagon: bool = False
    docs_dir: str | None = None
    presets_file: str | None = None
    presets: list[str] = field(default_factory=list)
    images: dict[str, str | None] = field(default_factory=lambda: {o: None for o in OSES})
    image_sources: dict[str, str | None] = field(default_factory=lambda: {o: None for o in OSES})
    htp_versions: list[str] = field(default_factory=list)
    env_vars: list[str] = field(default_factory=list)
    device_selection: dict[str, str | None] = field(
        default_factory=lambda: {"ndev_var": None, "devices_var": None})
    device_names: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    conventions: dict[str, dict[str, str] | None] = field(default_factory=lambda: {o: None for o in OSES})
    plan_rules: dict[str, Any] | None = None  # what a session holds: hexbuild/plan_rules.py

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def preset_for(self, os_name: str, build_type: str) -> str | None:
        """The revision's Snapdragon configure preset for an OS and build type, if it has one."""
        name = f"arm64-{os_name}-snapdragon-{build_type}"
        if name in self.presets:
            return name
        if build_type == "relwithdebinfo" and f"arm64-{os_name}-snapdragon-release" in self.presets:
            return f"arm64-{os_name}-snapdragon-release"
        return None


def is_checkout(path: Path) -> bool:
    return (path / "ggml").is_dir() and ((path / "include" / "llama.h").is_file() or (path / "src").is_dir()) \
        and (path / "CMakeLists.txt").is_file()


def read_source(path: Path | str) -> SourceFacts:
    root = Path(path).expanduser()
    if not root.exists():
        raise UsageError(f"no such directory: {path}")
    if not root.is_dir():
        raise UsageError(f"not a directory: {path}")
    if not is_checkout(root):
        raise UsageError(f"{path} is not a llama.cpp checkout (no ggml/, include/llama.h and CMakeLists.txt)",
                         hint="point --source at the root of a llama.cpp clone")
    root = root.resolve()
    facts = SourceFacts(path=str(root), revision=_revision(root))
    facts.hexagon = (root / HEXAGON_DIR).is_dir()
    facts.docs_dir = next((d for d in DOCS_DIRS if (root / d).is_dir()), None)
    facts.tools = _tools(root)
    if not facts.hexagon:
        return facts
    if facts.docs_dir and (root / facts.docs_dir / "CMakeUserPresets.json").is_file():
        facts.presets_file = f"{facts.docs_dir}/CMakeUserPresets.json"
        facts.presets = _preset_names(root / facts.presets_file)
    facts.images, facts.image_sources = _images(root, facts.docs_dir)
    facts.htp_versions = _htp_versions(root / HEXAGON_DIR / "CMakeLists.txt")
    facts.env_vars = _env_vars(root / HEXAGON_DIR)
    facts.device_selection = {
        "ndev_var": "GGML_HEXAGON_NDEV" if "GGML_HEXAGON_NDEV" in facts.env_vars else None,
        "devices_var": "GGML_HEXAGON_DEVICES" if "GGML_HEXAGON_DEVICES" in facts.env_vars else None,
    }
    facts.device_names = _device_names(root / HEXAGON_DIR)
    facts.scripts = _scripts(root)
    facts.conventions = _conventions(root, facts.docs_dir)
    rules = read_rules(root, facts.revision)
    facts.plan_rules = rules.manifest_json() if rules else None
    return facts


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _revision(root: Path) -> str | None:
    if not (root / ".git").exists():
        return None
    try:
        cp = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(root), "describe", "--tags", "--always",
                             "--dirty"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = cp.stdout.strip()
    return out if cp.returncode == 0 and out else None


def _preset_names(path: Path) -> list[str]:
    try:
        data = json.loads(_read(path))
    except json.JSONDecodeError:
        return []
    return [p["name"] for p in data.get("configurePresets", [])
            if isinstance(p, dict) and "name" in p and not p.get("hidden")]


def _images(root: Path, docs_dir: str | None) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """The image pinned per OS: the docs first, then the Snapdragon CI workflow, then the release
    workflow, then build.py's defaults. Other workflows (a CPU-only NDK job) may pin older tags."""
    sources: list[Path] = []
    if docs_dir:
        docs = root / docs_dir
        sources += [docs / "README.md"] + sorted(p for p in docs.glob("*.md") if p.name != "README.md")
    workflows = root / ".github" / "workflows"
    sources += sorted(workflows.glob("*snapdragon*.yml")) + sorted(workflows.glob("*hexagon*.yml"))
    sources += [workflows / "release.yml"]
    images: dict[str, str | None] = {o: None for o in OSES}
    origin: dict[str, str | None] = {o: None for o in OSES}
    for src in sources:
        text = _read(src)
        for m in _IMAGE_RE.finditer(text):
            os_name, ref = m.group("os"), m.group("ref")
            if images[os_name] is None and (":" in ref.rsplit("/", 1)[-1] or "@" in ref) and "/" in ref:
                images[os_name] = ref
                origin[os_name] = str(src.relative_to(root))
    build_py = root / "scripts" / "snapdragon" / "build.py"
    if any(v is None for v in images.values()) and build_py.is_file():
        text = _read(build_py)
        url = re.search(r'"--toolchain-url"[^)]*default="([^"]+)"', text)
        ver = re.search(r'"--toolchain-version"[^)]*default="([^"]+)"', text)
        if url and ver:
            for os_name in OSES:
                if images[os_name] is None and f"arm64-{os_name}" in text:
                    images[os_name] = f"{url.group(1)}/arm64-{os_name}:{ver.group(1)}"
                    origin[os_name] = str(build_py.relative_to(root))
    return images, origin


def _htp_versions(cmake: Path) -> list[str]:
    text = _read(cmake)
    versions = _HTP_CALL_RE.findall(text)
    if not versions:
        for m in _FOREACH_RE.finditer(text):
            versions += m.group(1).split()
    seen: list[str] = []
    for v in versions:
        if v not in seen:
            seen.append(v)
    return sorted(seen, key=lambda v: int(v[1:]))


def _env_vars(hexagon_dir: Path) -> list[str]:
    """GGML_HEXAGON_* names the host side reads (the NPU side has no environment)."""
    found: set[str] = set()
    for f in sorted(hexagon_dir.glob("*")):
        if f.suffix in (".cpp", ".c", ".h", ".hpp") and f.is_file():
            found.update(_ENV_RE.findall(_read(f)))
    return sorted(found)


def _device_names(hexagon_dir: Path) -> list[str]:
    text = "".join(_read(f) for f in hexagon_dir.glob("*.cpp"))
    if '"HTP"' not in text and "\"HTP\" +" not in text and "std::string(\"HTP\")" not in text:
        return []
    forms = ["HTP<n>"]
    if re.search(r'"HTP"\s*\+\s*std::to_string\([^)]*\)\s*\+\s*":"', text):
        forms.append("HTP<n>:<m>")
    return forms


def _scripts(root: Path) -> list[str]:
    base = root / "scripts" / "snapdragon"
    found = sorted(str(p.relative_to(root)) for p in (base / "adb").glob("*.sh"))
    found += [str((base / n).relative_to(root)) for n in ("build.py", "run.py") if (base / n).is_file()]
    return found


def _tools(root: Path) -> list[str]:
    """Executables the tree builds under tools/, plus test-backend-ops."""
    names: list[str] = []
    for cm in sorted((root / "tools").glob("**/CMakeLists.txt")):
        target = None
        for line in _read(cm).splitlines():
            line = line.split("#", 1)[0]
            m = re.search(r"set\s*\(\s*TARGET\s+([\w.\-]+)\s*\)", line)
            if m:
                target = m.group(1)
            m = re.search(r"add_executable\s*\(\s*([^\s)]+)", line)
            if m:
                name = target if m.group(1) == "${TARGET}" else m.group(1)
                if name and "$" not in name and name not in names:
                    names.append(name)
    if (root / "tests" / "test-backend-ops.cpp").is_file():
        names.append("test-backend-ops")
    return sorted(names)


def _conventions(root: Path, docs_dir: str | None) -> dict[str, dict[str, str] | None]:
    """Build dir and install prefix per OS, as the revision's docs write them."""
    out: dict[str, dict[str, str] | None] = {o: None for o in OSES}
    if not docs_dir:
        return out
    for doc in sorted((root / docs_dir).glob("*.md")):
        text = _read(doc)
        for m in _PRESET_CMD_RE.finditer(text):
            os_name, build_dir = m.group(2), m.group(3)
            if out[os_name] is not None:
                continue
            install = next((i for i in _INSTALL_RE.finditer(text) if i.group(1) == build_dir), None)
            if install:
                out[os_name] = {"build_dir": build_dir, "install_dir": install.group(2),
                                "preset": m.group(1), "doc": str(doc.relative_to(root))}
    return out
