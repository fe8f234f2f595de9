"""What `hexbuild test` writes: results.json, a JUnit XML file (CI systems show it natively),
results.md, and the same markdown appended to $GITHUB_STEP_SUMMARY when that is set."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import fidelity
from ..paths import atomic_write


@dataclass
class Case:
    """One JUnit test case: ``failure`` (a message and detail lines) fails it; ``skipped`` skips it."""

    suite: str
    name: str
    failure: str | None = None
    details: list[str] = field(default_factory=list)
    skipped: str | None = None
    time_s: float = 0.0


def junit_xml(title: str, cases: list[Case]) -> str:
    suites: dict[str, list[Case]] = {}
    for c in cases:
        suites.setdefault(c.suite, []).append(c)
    root = ET.Element("testsuites", name=title, tests=str(len(cases)),
                      failures=str(sum(c.failure is not None for c in cases)))
    for name, items in suites.items():
        suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(items)),
                              failures=str(sum(c.failure is not None for c in items)),
                              skipped=str(sum(c.skipped is not None and c.failure is None for c in items)),
                              time=f"{sum(c.time_s for c in items):.3f}")
        for c in items:
            tc = ET.SubElement(suite, "testcase", classname=name, name=c.name, time=f"{c.time_s:.3f}")
            if c.failure is not None:
                f = ET.SubElement(tc, "failure", message=c.failure)
                f.text = "\n".join(c.details) or c.failure
            elif c.skipped is not None:
                ET.SubElement(tc, "skipped", message=c.skipped)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(out: Path, *, title: str, doc: dict[str, Any], cases: list[Case], markdown: str) -> dict[str, str]:
    """Write the three files (each whole or not at all) and append to the step summary. A test on
    the virtual NPU says so in its document (``emulated``, ``npu_model``: hexbuild/fidelity.py)."""
    fidelity.mark(doc)
    files = {"json": out / "results.json", "junit": out / "junit.xml", "markdown": out / "results.md"}
    doc["files"] = {k: str(v) for k, v in files.items()}
    atomic_write(files["json"], json.dumps(doc, indent=2) + "\n", mode=0o644)
    atomic_write(files["junit"], junit_xml(title, cases), mode=0o644)
    atomic_write(files["markdown"], markdown, mode=0o644)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as f:
            f.write(markdown + "\n")
    return doc["files"]
