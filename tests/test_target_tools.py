"""The device-tools probe (hexbuild/targets/tools.py) on real phones: what it reports for mksh +
toybox, for a Debian userland, and the one-line deploy refusal naming what a phone lacks."""

from __future__ import annotations

import pytest

from hexbuild.errors import DEPLOY_FAILED
from hexbuild.targets import parse_target
from hexbuild.targets.tools import REQUIRED, probe_tools
from tests import elf_factory as ef


def test_a_toybox_phone_has_everything_and_says_so(phones):
    with parse_target(f"adb:{phones['SM8650'].serial}") as t:
        tools = probe_tools(t)
    assert tools.missing == [] and tools.broken == [] and tools.problem is None
    assert tools.userland == "toybox" and tools.toybox.startswith("0.")
    assert "MIRBSD KSH" in tools.shell and tools.coreutils is None


def test_a_debian_userland_is_gnu(debian_phone, tmp_path):
    with parse_target(f"adb:{debian_phone.serial}") as t:
        tools = probe_tools(t)
    assert tools.problem is None and tools.userland == "gnu" and "GNU coreutils" in tools.coreutils
    with parse_target(f"local:{tmp_path}") as t:
        assert probe_tools(t).problem is None


def test_missing_tools_are_named(make_device):
    dev = make_device("SM8650", without=("sha256sum", "readlink"))
    with parse_target(f"adb:{dev.serial}") as t:
        tools = probe_tools(t)
    assert tools.missing == ["sha256sum", "readlink"] and tools.broken == []
    assert tools.problem == "none of sha256sum, readlink"


def test_a_tool_without_a_needed_flag_is_named(make_device):
    dev = make_device("SM8650")
    # a stat that ignores -c FORMAT, as some trimmed builds have
    assert "Read-only" in dev.shell("rm /system/bin/stat").stderr  # as on a phone
    stat = dev.root / "sysroot/system/bin/stat"
    stat.unlink()
    stat.write_text("#!/system/bin/sh\necho 'stat: unknown option c' >&2; exit 1\n")
    stat.chmod(0o755)
    with parse_target(f"adb:{dev.serial}") as t:
        tools = probe_tools(t)
    assert tools.missing == [] and tools.broken == ["stat -c FORMAT"]


def test_every_required_tool_is_on_the_android_phone(phones):
    out = phones["SM8750"].shell("for t in " + " ".join(REQUIRED) + "; do command -v $t; done").stdout.split()
    assert len(out) == len(REQUIRED)


@pytest.mark.parametrize("missing", ["sha256sum", "find"])
def test_deploy_refuses_a_phone_lacking_a_tool_in_one_line(make_device, cli, tmp_path, missing):
    dev = make_device("SM8650", without=(missing,))
    pkg = ef.make_package(tmp_path / "build", os="android", htp=["v73"])
    r = cli("deploy", str(pkg), "--target", f"adb:{dev.serial}")
    assert r.rc == DEPLOY_FAILED, r.err
    first = r.err.strip().splitlines()[-2] if r.err.strip().splitlines()[-1].startswith("hint:") else r.err.strip().splitlines()[-1]
    assert first.startswith("hexbuild: error: ") and f"no {missing}" in first, r.err
    assert "Traceback" not in r.err
    assert list((dev.tmp).iterdir()) == []  # nothing written


def test_the_probe_reads_the_installed_manifest_in_its_own_call(phones, cli, tmp_path):
    """The install's manifest comes back in the probe's output (one device call, not two), and
    reads as the same facts a separate read of the file gives."""
    from hexbuild.targets.tools import split_installed

    dev = phones["SM8650"]
    dest = "/data/local/tmp/probe-manifest/llama.cpp"
    pkg = ef.make_package(tmp_path, os="android", htp=("v73",))
    assert cli("deploy", str(pkg), "--target", f"adb:{dev.serial}", "--dest", dest).rc == 0
    with parse_target(f"adb:{dev.serial}") as t:
        info = t.probe(dest)
        alone = t.installed(dest)  # the separate read, as before
        none = t.probe(dest + "-not-there").extra["installed"]
    assert info.extra["installed"] == alone and alone["files"] == len(list(p for p in pkg.rglob("*") if p.is_file() or p.is_symlink()))
    assert none is None and info.soc == "SM8650"
    assert split_installed(b"prop a=b\ndf 1 2\n") == ("prop a=b\ndf 1 2\n", None)
    assert split_installed(b"df 1\nmanifest-follows\n{\n}\n") == ("df 1", b"{\n}\n")
