"""--rollback and --verify against a release changed in place (a library copied over the live
install with cp or scp writes through the inode it shares, by hard link, with the release kept
for rollback), and the releases older than the kept one: the real adbd phone, a real sshd and
local:, through the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import elf_factory as ef
from tests.test_deploy import tree

SHARED = "lib/libggml-opencl.so"  # the same in both releases: a hard link shared by them


@dataclass
class Site:
    spec: str
    here: Path  # <dest> as this machine sees it
    args: list[str]  # --dest for the CLI
    env: dict[str, str]


def make_site(request, kind: str, make_device, tmp_path) -> Site:
    if kind == "adb":
        dev = make_device("SM8650")
        return Site(f"adb:{dev.serial}", dev.tmp / "llama.cpp", [], {})
    if kind == "ssh":
        host = request.getfixturevalue("sshd_host")
        dest = tmp_path / "board" / "llama.cpp"
        dest.parent.mkdir()
        return Site(f"ssh://root@127.0.0.1:{host.port}", dest, ["--dest", str(dest)], host.env)
    dest = tmp_path / "local" / "llama.cpp"
    return Site(f"local:{dest}", dest, [], {})


@pytest.fixture(params=["adb", "ssh", "local"])
def site(request, make_device, tmp_path) -> Site:
    """The change in place and what rollback and --verify make of it, on every transport."""
    return make_site(request, request.param, make_device, tmp_path)


@pytest.fixture(params=["adb", "local"])
def near_site(request, make_device, tmp_path) -> Site:
    """The same code over the phone and local: (SSH's round trips cost seconds per deploy)."""
    return make_site(request, request.param, make_device, tmp_path)


@pytest.fixture
def pkg(tmp_path) -> Path:
    p = ef.make_package(tmp_path / "build", os="android", htp=["v73"])
    (p / "lib" / "libggml-opencl.so").write_bytes(os.urandom(300_000))
    return p


def deploy(cli, site: Site, *args: str):
    return cli("deploy", *args, "--target", site.spec, *site.args, "--json", env=site.env)


def two_releases(cli, site: Site, pkg: Path, tmp_path: Path) -> tuple[dict, dict, Path]:
    """v1 then v2 (one file changed): v2 is live and v1 kept for rollback. Returns both results
    and a copy of v1's package."""
    v1 = shutil.copytree(pkg, tmp_path / "v1")
    first = deploy(cli, site, str(pkg))
    assert first.rc == 0, first.err
    (pkg / "lib" / "libggml-cpu.so").write_bytes(b"v2 of the cpu backend")
    second = deploy(cli, site, str(pkg))
    assert second.rc == 0, second.err
    assert (site.here / SHARED).stat().st_nlink == 2  # shared with the kept release
    return first.json[0], second.json[0], v1


def change_in_place(path: Path) -> None:
    """What `cp new.so <dest>/lib/` does: truncate and write the existing inode."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0xFF  # same size: only a hash tells
        f.seek(0)
        f.write(data)


def test_rollback_refuses_a_release_whose_bytes_changed_in_place(cli, site, pkg, tmp_path):
    first, second, v1 = two_releases(cli, site, pkg, tmp_path)
    change_in_place(site.here / SHARED)
    r = deploy(cli, site, "--rollback")
    assert r.rc == 7
    assert SHARED in r.err and first["release"] in r.err and "changed" in r.err
    assert len([ln for ln in r.err.splitlines() if ln.startswith("hexbuild: error:")]) == 1
    assert os.readlink(site.here) == second["release"]  # the switch did not happen
    # nothing else: the kept release is not touched by the refusal
    assert (site.here.parent / first["release"] / SHARED).stat().st_nlink == 2


def test_verify_repairs_the_kept_release_too_and_rollback_then_restores_it(cli, site, pkg, tmp_path):
    first, second, v1 = two_releases(cli, site, pkg, tmp_path)
    change_in_place(site.here / SHARED)
    r = deploy(cli, site, str(pkg), "--verify")
    assert r.rc == 0, r.err
    res = r.json[0]
    assert res["repaired"] == 1 and res["kept_release"] == {"release": first["release"], "repaired": [SHARED],
                                                           "differs": []}
    back = deploy(cli, site, "--rollback")
    assert back.rc == 0, back.err
    assert os.readlink(site.here) == first["release"] and tree(site.here) == tree(v1)


def test_verify_names_kept_files_it_cannot_repair(cli, near_site, pkg, tmp_path):
    site = near_site
    first, second, v1 = two_releases(cli, site, pkg, tmp_path)
    # v1's own file (v2 has other bytes there): only v1's package could put it right
    own = site.here.parent / first["release"] / "lib/libggml-cpu.so"
    change_in_place(own)
    r = deploy(cli, site, str(pkg), "--verify")
    assert r.rc == 0, r.err
    res = r.json[0]
    assert res["kept_release"]["differs"] == ["lib/libggml-cpu.so"]
    assert any("lib/libggml-cpu.so" in w and first["release"] in w for w in res["warnings"])
    assert deploy(cli, site, "--rollback").rc == 7
    # deploying v1 again puts its release right (the release is found by its content id)
    again = deploy(cli, site, str(v1), "--verify")
    assert again.rc == 0, again.err
    assert again.json[0]["release"] == first["release"] and tree(site.here) == tree(v1)


def test_rollback_goes_back_and_forth_and_survives_a_repairing_redeploy(cli, near_site, pkg, tmp_path):
    site = near_site
    first, second, v1 = two_releases(cli, site, pkg, tmp_path)
    back = deploy(cli, site, "--rollback")
    assert back.rc == 0, back.err
    assert (back.json[0]["release"], back.json[0]["previous"]) == (first["release"], second["release"])
    # a drifted file of the live release (replaced, not written through: the kept release keeps
    # its bytes) re-pushed by a redeploy of its package, in place
    (site.here / "bin" / "llama-cli").unlink()
    (site.here / "bin" / "llama-cli").write_bytes(b"short")
    fixed = deploy(cli, site, str(v1))
    assert fixed.rc == 0 and fixed.json[0]["files_pushed"] == 1, fixed.err
    forward = deploy(cli, site, "--rollback")
    assert forward.rc == 0, forward.err
    assert os.readlink(site.here) == second["release"] and tree(site.here) == tree(pkg)
    manifest = json.loads((site.here / ".hexbuild/manifest.json").read_text())
    assert manifest["previous"] == first["release"]


def test_releases_older_than_the_kept_one_go_at_once_and_the_trash_empties_itself(cli, site, pkg):
    releases = []
    for i in range(3):
        (pkg / "lib" / "libggml-cpu.so").write_bytes(os.urandom(200_000 + i))
        r = deploy(cli, site, str(pkg))
        assert r.rc == 0, r.err
        releases.append(r.json[0]["release"])
    parent = site.here.parent
    # the first release is gone from the switch's own call: no plan can find it again
    assert sorted(p.name for p in parent.iterdir() if p.name.startswith(".llama.cpp.hexbuild-")) == \
        sorted(releases[1:])
    # and its bytes with the trash, removed by a process the switch did not wait for
    trash = parent / ".llama.cpp.hexbuild.trash"
    deadline = time.monotonic() + 30
    while trash.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not trash.exists()
    assert os.readlink(site.here) == releases[2]


def test_without_setsid_the_switch_empties_the_trash_itself(tmp_path):
    from hexbuild.deploy.layout import SWAP

    tools = tmp_path / "bin"  # the switch's tools, setsid left out
    tools.mkdir()
    for name in ("rm", "mkdir", "ln", "mv", "rmdir"):
        (tools / name).symlink_to(shutil.which(name))
    parent = tmp_path / "tmp"
    for name in (".x.hexbuild-old", ".x.hexbuild-cur", ".x.hexbuild-new"):
        (parent / name / "lib").mkdir(parents=True)
        (parent / name / "lib" / "libx.so").write_bytes(b"x" * 1000)
    (parent / "x").symlink_to(".x.hexbuild-cur")
    sh = shutil.which("sh")
    cp = subprocess.run([sh, "-c", SWAP, "sh", str(parent), "x", ".x.hexbuild-new", ".x.hexbuild-link",
                         ".x.hexbuild-legacy", ".x.hexbuild-", ".x.hexbuild-new", ".x.hexbuild-cur"],
                        env={"PATH": str(tools)}, capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    assert os.readlink(parent / "x") == ".x.hexbuild-new"
    assert sorted(p.name for p in parent.iterdir()) == [".x.hexbuild-cur", ".x.hexbuild-new", "x"]
