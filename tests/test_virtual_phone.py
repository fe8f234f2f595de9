"""The virtual phone behaves like Android where hexbuild meets it: mksh at /system/bin/sh,
toybox applets in /system/bin, a phone's PATH, and no GNU tool reachable from the device side."""

from __future__ import annotations

import subprocess

import pytest


def _sh(dev, command: str) -> str:
    cp = dev.shell(command)
    return cp.stdout + cp.stderr


def test_the_shell_is_mksh_and_the_tools_are_toybox(make_device):
    dev = make_device("SM8650")
    assert "MIRBSD KSH" in _sh(dev, 'echo "$KSH_VERSION"')
    assert _sh(dev, "readlink /system/bin/sh").strip() == "mksh"
    assert _sh(dev, "readlink /bin").strip() == "system/bin"
    assert _sh(dev, "echo $PATH").strip().split(":")[0] == "/system/bin"
    for tool in ("ls", "mv", "stat", "sha256sum", "find", "df"):
        assert _sh(dev, f"command -v {tool}").strip() == f"/system/bin/{tool}", tool
        assert _sh(dev, f"readlink /system/bin/{tool}").strip() == "toybox", tool
    assert _sh(dev, "toybox --version").strip().startswith("toybox 0.")
    assert _sh(dev, "getprop ro.soc.model").strip() == "SM8650"
    assert _sh(dev, 'echo "$HOME $SHELL"').strip() == "/ /system/bin/sh"


def test_no_gnu_tool_is_reachable_from_the_device_side(make_device):
    dev = make_device("SM8550")
    out = _sh(dev, "sha256sum --version; mv --version; stat --version; ls --version")
    assert "GNU" not in out and "coreutils" not in out.lower(), out
    for prog in ("bash", "dash", "gawk", "perl", "python3", "busybox"):
        assert _sh(dev, f"command -v {prog} || echo none").strip() == "none", prog
    gnu = subprocess.run(["dpkg", "-L", "coreutils"], capture_output=True, text=True).stdout.split()
    paths = [p for p in gnu if "/bin/" in p][:40] or ["/usr/bin/sha256sum", "/bin/mv"]
    script = "for p in " + " ".join(paths) + '; do [ -e "$p" ] && [ ! -L "$p" ] && echo "$p"; done; true'
    reachable = [p for p in _sh(dev, script).split() if not p.startswith("/bin/")]
    # /bin is /system/bin: what is there is a toybox link (checked above), never coreutils
    assert reachable == [], reachable
    assert "GNU" not in _sh(dev, "/bin/mv --version 2>&1; /usr/bin/env --version 2>&1; awk --version 2>&1")


def test_the_debian_phone_keeps_a_full_linux_userland(make_device):
    dev = make_device("SM8650", userland="debian")
    assert "GNU coreutils" in _sh(dev, "sha256sum --version")
    assert _sh(dev, "getprop ro.soc.model").strip() == "SM8650"


def test_toybox_mv_refuses_to_replace_a_symlink_to_a_directory_with_T(make_device):
    """The difference that broke every redeploy: GNU ``mv -fT`` renames over the link, toybox's
    follows it and refuses. hexbuild's switch must not depend on it (see deploy.layout.SWAP)."""
    dev = make_device("SM8650")
    out = _sh(dev, "cd /data/local/tmp && mkdir A B && ln -s A cur && ln -s B new && mv -fT new cur; "
                   "echo rc=$?; readlink cur")
    assert "is a directory" in out and "rc=1\nA\n" in out, out


@pytest.mark.parametrize("userland", ["android", "debian"])
def test_a_phone_starts_again_after_a_reboot(make_device, adb_server, userland):
    dev = make_device("SM8750", userland=userland)
    dev.shell("echo kept > /data/local/tmp/f")
    dev.restart()
    assert _sh(dev, "cat /data/local/tmp/f").strip() == "kept"
