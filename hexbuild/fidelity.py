"""What a result is worth: everything made on the virtual NPU (``qemu+npu:``) says it is emulated.

A target whose ``Target.fidelity()`` is not empty (only ``qemu+npu:`` has one) marks every
document made for it with the same two fields::

    "emulated": true,
    "npu_model": "v73 (emulated cDSP: qemu-hexagon with hexbuild's HVX patches)"

Every other document carries neither field (a phone's, a board's, and ``local:``/``qemu:`` runs,
which open no NPU session): a document without ``emulated`` is not the emulator's. ``bench
compare`` reads the mark to refuse setting an emulator's timings against a phone's.

The mark reaches a document one of two ways. Where the document is made with the target at hand
(a run's record, a bench row, a serve record) it takes ``target.fidelity()``. Everywhere else it
comes from what this command opened: ``parse_target`` calls ``opened``, which keeps each target's
fields in ``ui.fidelity`` and says the one human line (once per target and command);
``ui.with_said`` (every --json document) and the writers of saved documents call ``stamp``
(``mark``: in place).
"""

from __future__ import annotations

from typing import Any

from .ui import ui

VIRTUAL_DSP = "emulated cDSP: qemu-hexagon with hexbuild's HVX patches"
FIELDS = ("emulated", "npu_model")


def fields(htp: str) -> dict[str, Any]:
    """The mark of results from the virtual NPU emulating HTP version ``htp`` (v73)."""
    return {"emulated": True, "npu_model": f"{htp} ({VIRTUAL_DSP})"}


def carried(doc: Any) -> dict[str, Any]:
    """The mark a document (or a record, a row) already carries; {} when it is not the emulator's."""
    if not isinstance(doc, dict) or not doc.get("emulated"):
        return {}
    return {"emulated": True, **({"npu_model": doc["npu_model"]} if doc.get("npu_model") else {})}


def line(where: str, fid: dict[str, Any]) -> str:
    htp = str(fid.get("npu_model") or "").split(" ", 1)[0] or "unknown HTP"
    return f"emulated NPU ({where}, {htp}): results are the emulator's, timings are not a phone's"


def say(where: str, fid: dict[str, Any]) -> None:
    """Remember ``where``'s mark for this command's documents and, when it is emulated, say so
    on stderr: once per target and command (``ui.note``: -q keeps it off, --json lists it)."""
    ui.fidelity[where] = dict(fid)
    ui.stamp = stamp
    if fid and line(where, fid) not in ui.notes:
        ui.note(line(where, fid))


def opened(target: Any) -> None:
    """A target this command made (``parse_target``): its mark from now on, for every document."""
    say(target.spec, target.fidelity())


def of(doc: Any) -> dict[str, Any]:
    """The mark a document made by this command gets: its ``target``'s (a spec, as given), or,
    when it names none, the targets' this command opened if every one of them is emulated."""
    if isinstance(doc, str):
        return dict(ui.fidelity.get(doc.strip()) or {})
    if not isinstance(doc, dict):
        return {}
    if isinstance(doc.get("target"), str):
        return dict(ui.fidelity.get(doc["target"].strip()) or {})
    marks = list(ui.fidelity.values())
    if not marks or not all(marks):
        return {}
    models = sorted({str(m.get("npu_model")) for m in marks if m.get("npu_model")})
    return {"emulated": True, **({"npu_model": ", ".join(models)} if models else {})}


def mark(doc: dict[str, Any]) -> dict[str, Any]:
    """``stamp`` in place: for a document that is also written to a file and returned."""
    if "emulated" not in doc:
        doc.update(of(doc))
    return doc


def stamp(doc: Any) -> Any:
    """``doc`` with its mark (``of``) added when it has none yet; a list of documents (deploy's,
    one per target) each with its own."""
    if isinstance(doc, list):
        return [stamp(d) if isinstance(d, dict) else d for d in doc]
    if not isinstance(doc, dict) or "emulated" in doc:
        return doc
    fid = of(doc)
    return {**doc, **fid} if fid else doc
