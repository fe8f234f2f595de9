"""Where `plan` reads a revision's rules from: a checkout (--source), a package's manifest
(--package) or the manifest deployed on a target (--target). Apart from hexbuild/plan_rules.py,
which only reads rules, because these readers need the checkout reader, the runner and the
targets, which themselves carry the rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..plan_rules import ASSUMED, BACKEND_FILE, PlanRules, rules_from_manifest


def resolve_rules(*, source: str | None = None, package: str | None = None, target: str | None = None,
                  settings: Any = None, dest: str | None = None) -> PlanRules:
    """The rules of a checkout (--source), a package (--package: its manifest) or what is
    deployed on a target (--target: its device manifest); ASSUMED when none is given."""
    from ..errors import UsageError

    given = [n for n, v in (("--source", source), ("--package", package), ("--target", target)) if v]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: give one place to read the revision's rules from")
    if source:
        return _source_rules(Path(source).expanduser())
    if package:
        return _package_rules(Path(package).expanduser())
    if target:
        return _target_rules(target, settings, dest)
    return ASSUMED


def _source_rules(root: Path) -> PlanRules:
    """The checkout's facts, read as a build records them in the manifest: the same rules and
    the same device selection (one scan of the backend's sources) a package would carry."""
    from ..errors import UsageError
    from ..source import read_source

    rules = rules_from_manifest(read_source(root).to_json(), "source")
    if rules is None:
        raise UsageError(f"{root}: no Hexagon backend the plan can read ({BACKEND_FILE} has no repacked types)")
    return rules


def _package_rules(path: Path) -> PlanRules:
    import tarfile

    from ..artifacts.manifest import parse_manifest, read_package_manifest
    from ..errors import UsageError

    meta: Any = None
    try:
        if path.is_dir():
            meta = read_package_manifest(path)  # the one rule for a damaged or newer manifest
        elif path.is_file():
            with tarfile.open(path, "r:*") as tar:
                member = next((m for m in tar.getmembers() if m.isfile()
                               and m.name.lstrip("./").count("/") <= 1 and m.name.endswith("manifest.json")), None)
                f = tar.extractfile(member) if member is not None else None
                meta = parse_manifest(f.read(), path) if f is not None else None
        else:
            raise UsageError(f"package not found: {path}")
    except (OSError, tarfile.TarError, EOFError) as e:
        raise UsageError(f"cannot read package {path}: {e}") from None
    rules = rules_from_manifest(meta.get("llama_cpp") if isinstance(meta, dict) else None, "package")
    if rules is None:
        raise UsageError(f"package {path}: its manifest carries no plan rules (built before hexbuild recorded them)",
                         hint="rebuild it, or pass --source with the checkout it was built from")
    return rules


def _target_rules(spec: str, settings: Any, dest: str | None) -> PlanRules:
    from ..errors import UsageError
    from ..runner.install import MANIFEST, default_dest, read_manifest
    from ..targets import parse_target

    target = parse_target(spec, settings)
    try:
        where = dest or default_dest(target)
        where = target.expand(where) if hasattr(target, "expand") else where
        manifest = read_manifest(target, where)
    finally:
        target.close()
    if manifest is None:
        raise UsageError(f"nothing deployed at {spec}:{where} ({MANIFEST} not found)",
                         hint="run hexbuild deploy first, give --dest, or pass --source/--package")
    rules = rules_from_manifest(manifest.get("llama_cpp"), "target")
    if rules is None:
        raise UsageError(f"{spec}:{where}: the deployed manifest carries no plan rules (deployed before hexbuild recorded them)",
                         hint="redeploy a package built by this hexbuild, or pass --source")
    return rules
