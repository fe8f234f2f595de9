"""The wheel carries what an installed hexbuild needs: every template and data file."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_templates_and_data(tmp_path):
    # Built from a copy: a build/ left in the checkout would leak stale modules into later wheels.
    src = tmp_path / "src"
    # (only the top-level build/ and dist/: hexbuild/build/ is a package)
    anywhere = shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", ".venv")

    def ignore(directory: str, names: list[str]) -> set[str]:
        top = {"build", "dist", "tests"} & set(names) if Path(directory) == ROOT else set()
        return set(anywhere(directory, names)) | top

    shutil.copytree(ROOT, src, ignore=ignore)
    cp = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                         "-w", str(tmp_path), str(src)], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr[-2000:]
    wheel = next(tmp_path.glob("hexbuild-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = [p.relative_to(ROOT / "templates") for p in (ROOT / "templates").rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts]
    data = [p.relative_to(ROOT / "hexbuild" / "data") for p in (ROOT / "hexbuild" / "data").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts]
    for rel in templates:
        assert f"hexbuild/templates/{rel.as_posix()}" in names
    for rel in data:
        assert f"hexbuild/data/{rel.as_posix()}" in names
    assert "hexbuild/cli/main.py" in names
    # every Python module of the package, so a new subpackage left out of pyproject.toml fails here
    for module in (ROOT / "hexbuild").rglob("*.py"):
        if "__pycache__" not in module.parts:
            assert module.relative_to(ROOT).as_posix() in names, f"{module} is not in the wheel"
    assert "hexbuild/build/run.py" in names
