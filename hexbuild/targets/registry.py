"""Every kind of target hexbuild knows, found the way Zephyr's west finds its runners: each
kind's module declares ``KIND`` (a base.TargetKind: scheme, form, example, parser, caps) and
this table names the module. A new kind is one module and one line here.

The table repeats each kind's scheme so that parsing a spec imports only the module of its
kind (the modules bring sockets, SSH and subprocess plumbing a ``run --print`` does not need);
``kind()`` checks that the module declares the scheme the table says.
"""

from __future__ import annotations

from importlib import import_module

from .base import TargetKind

# (scheme, module under hexbuild.targets), in the order specs are matched and forms are listed
REGISTRY: tuple[tuple[str, str], ...] = (
    ("adb", "adb"),
    ("adb://", "adbserver"),
    ("adb+ssh://", "adbssh"),
    ("adb+tcp://", "adbtcp"),
    ("ssh://", "ssh"),
    ("local", "local"),
    ("qemu", "qemu"),
    ("qemu+npu", "qemunpu"),
)


def kind(scheme: str) -> TargetKind:
    """The declaration of the kind registered under ``scheme`` (its module imported now)."""
    module = dict(REGISTRY)[scheme]
    declared: TargetKind = import_module(f"{__package__}.{module}").KIND
    if declared.scheme != scheme:
        raise RuntimeError(f"hexbuild.targets.{module} declares {declared.scheme!r}, the registry {scheme!r}")
    return declared


def find(spec: str) -> TargetKind | None:
    """The kind whose scheme ``spec`` starts with; None when no kind claims it."""
    for scheme, _ in REGISTRY:
        if TargetKind.matches_scheme(scheme, spec):
            return kind(scheme)
    return None


def all_kinds() -> list[TargetKind]:
    return [kind(scheme) for scheme, _ in REGISTRY]


def forms() -> list[str]:
    return [k.form for k in all_kinds()]
