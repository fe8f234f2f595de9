"""The emulator against silicon: ``hexbuild test kernels --compare-device RESULTS``.

A results directory holds ``results.json`` (the document, whose cases carry ``key``) and
``outputs.npz`` (each case's output, by key). ``hexbuild test kernels --out`` writes one, with the
``cases.bin`` it ran, so the same cases can run anywhere the harness runs; a run on a phone writes
the same two files with ``"emulated": false`` and a ``device`` object. Comparing shows, case by
case, how far the emulator's output is from the device's, against the op's tolerance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from .cases import nmse


def case_key(c: dict[str, Any]) -> str:
    return f"{c['htp']}|{c['op']}|{c['type']}|{c['shape']}"


def save_outputs(per_version: list[dict[str, Any]], out: Path) -> Path:
    arrays = {case_key(c): c["output"] for pv in per_version for c in pv["cases"] if c.get("output") is not None}
    path = out / "outputs.npz"
    part = out / "outputs.part.npz"
    np.savez_compressed(part, **arrays)
    part.replace(path)
    return path


def load(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A results directory (or its results.json): the document and the outputs by key."""
    d = path if path.is_dir() else path.parent
    doc_path = d / "results.json"
    npz = d / "outputs.npz"
    if not doc_path.is_file() or not npz.is_file():
        raise UsageError(f"{path} is not a kernel results directory: it needs results.json and outputs.npz",
                         hint="give the --out directory of a `hexbuild test kernels` run, or a device run's")
    try:
        doc = json.loads(doc_path.read_text())
        with np.load(npz) as z:
            outputs = {k: z[k] for k in z.files}
    except (ValueError, OSError) as e:
        raise UsageError(f"{path}: cannot read its results ({e})") from None
    if not isinstance(doc.get("cases"), list):
        raise UsageError(f"{doc_path} has no cases: not a kernel check's results")
    return doc, outputs


def compare(doc: dict[str, Any], outputs: dict[str, np.ndarray], other_path: Path) -> dict[str, Any]:
    """Case by case: the emulator's output against the other run's (a phone's), NMSE against the
    op's tolerance; cases only one side ran are listed."""
    other_doc, other_out = load(other_path)
    mine = {case_key(c): c for c in doc["cases"]}
    theirs = {case_key(c): c for c in other_doc["cases"]}
    rows = []
    for key in sorted(mine.keys() & theirs.keys()):
        a, b = outputs.get(key), other_out.get(key)
        if a is None or b is None:
            continue
        err = nmse(a.astype(np.float64), b.astype(np.float64))
        tol = mine[key]["tolerance"]
        rows.append({"key": key, "error": err, "tolerance": tol, "differ": bool(err > tol),
                     "emulator_passed": mine[key]["passed"], "other_passed": theirs[key]["passed"]})
    return {
        "other": str(other_path),
        "other_emulated": bool(other_doc.get("emulated", True)),
        "other_device": other_doc.get("device"),
        "compared": len(rows),
        "differ": sum(r["differ"] for r in rows),
        "only_here": sorted(mine.keys() - theirs.keys()),
        "only_there": sorted(theirs.keys() - mine.keys()),
        "cases": rows,
    }
