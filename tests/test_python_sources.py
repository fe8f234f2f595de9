"""Every Python file of the project compiles without a warning: an invalid escape in a string
(lab/joblog.py's docstring quoted PyYAML's \\_ and \\L) is a DeprecationWarning on 3.11, a
SyntaxWarning from 3.12, and an error to come."""

import subprocess
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_source_compiles_without_a_warning():
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.py"], capture_output=True, text=True,
                           check=True).stdout.split()
    assert len(files) > 100
    said = []
    for name in files:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compile((ROOT / name).read_text(encoding="utf-8"), name, "exec")
        said += [f"{name}:{w.lineno}: {w.message}" for w in caught]
    assert said == []
