"""The deploy lock (hexbuild/deploy/lock.py) on real phones: a second deploy to the same
destination waits or fails naming the holder, stale locks are broken, the lock goes away on
success, failure and Ctrl-C, separate devices never wait on each other, and two deploys racing
for one phone always leave exactly one whole package installed."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hexbuild import deploy as deploy_mod
from hexbuild.deploy import DeployOptions, deploy
from hexbuild.deploy.layout import Layout
from hexbuild.deploy.lock import DeployLock, lock_path
from hexbuild.errors import DEPLOY_FAILED, DeployFailed
from hexbuild.targets import parse_target
from tests import elf_factory as ef

DEST = "/data/local/tmp/llama.cpp"
LOCK = lock_path(Layout(DEST))


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    test_cache = os.environ.get("HEXBUILD_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hexbuild-tests")
    monkeypatch.setenv("HEXBUILD_TEST_CACHE", test_cache)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    yield
    deploy_mod.FAULT_HOOK = None


def package(root: Path, tag: str, size: int = 300_000) -> Path:
    p = ef.make_package(root / tag, os="android", htp=["v73"])
    (p / "lib" / "libggml-cpu.so").write_bytes(hashlib.sha256(tag.encode()).digest() * (size // 32))
    (p / "share.txt").write_text(f"package {tag}\n")
    return p


def files_of(root: Path) -> dict[str, str]:
    root = root.resolve()
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.relative_to(root).as_posix().startswith(
                (".hexbuild/", "scripts/"))}


def lock_on(dev) -> Path:
    return dev.tmp / Path(LOCK).relative_to("/data/local/tmp")


def fake_lock(dev, *, host: str, pid: int, age_s: int = 0) -> None:
    d = lock_on(dev)
    d.mkdir()
    (d / "owner").write_text(f"host={host}\npid={pid}\ntoken=feedbeef\nstarted={int(time.time()) - age_s}\n")


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.fixture
def phone(make_device):
    return make_device("SM8650")


def test_the_lock_is_gone_after_a_deploy_and_sits_beside_the_destination(phone, tmp_path, cli):
    r = cli("deploy", str(package(tmp_path, "a")), "--target", f"adb:{phone.serial}", "--json")
    assert r.rc == 0, r.err
    assert r.json[0]["lock_wait_s"] < 1
    assert not lock_on(phone).exists() and (phone.tmp / "llama.cpp").is_symlink()


def test_a_held_lock_fails_a_second_deploy_naming_the_holder(phone, tmp_path, cli):
    pkg = package(tmp_path, "a")
    with parse_target(f"adb:{phone.serial}") as t, DeployLock(t, Layout(DEST), wait=0, stale=3600):
        t0 = time.monotonic()
        r = cli("deploy", str(pkg), "--target", f"adb:{phone.serial}", "--wait", "1")
        took = time.monotonic() - t0
    assert r.rc == DEPLOY_FAILED, r.err
    line = next(ln for ln in r.err.splitlines() if ln.startswith("hexbuild: error:"))
    assert "another deploy holds" in line and f"host {socket.gethostname()} pid {os.getpid()}" in line, r.err
    assert line.count(phone.serial) == 1, line  # the target once (it was named twice: SERIAL: adb:SERIAL:)
    assert 1 <= took < 8 and "waiting for another deploy" in r.err
    assert not (phone.tmp / "llama.cpp").exists()  # nothing was written
    assert [p.name for p in phone.tmp.iterdir()] == []  # and the lock went with its holder


def test_a_second_deploy_waits_for_the_first_then_succeeds(phone, tmp_path, cli):
    pkg = package(tmp_path, "a")
    t = parse_target(f"adb:{phone.serial}")
    lock = DeployLock(t, Layout(DEST), wait=0, stale=3600)
    lock.acquire()
    threading.Timer(1.5, lock.release).start()
    r = cli("deploy", str(pkg), "--target", f"adb:{phone.serial}", "--wait", "30", "--json")
    t.close()
    assert r.rc == 0, r.err
    assert r.json[0]["lock_wait_s"] >= 1.0 and "waiting for another deploy" in r.err
    assert files_of(phone.tmp / "llama.cpp") == files_of(pkg)


def test_a_lock_whose_process_is_gone_is_broken_with_a_warning(phone, tmp_path, cli):
    fake_lock(phone, host=socket.gethostname(), pid=dead_pid())
    r = cli("deploy", str(package(tmp_path, "a")), "--target", f"adb:{phone.serial}", "--wait", "0")
    assert r.rc == 0, r.err
    assert "breaking the stale deploy lock" in r.err and "its process is gone" in r.err
    assert not lock_on(phone).exists()


def test_a_lock_from_another_host_is_kept_until_it_is_older_than_stale_lock(phone, tmp_path, cli):
    pkg = package(tmp_path, "a")
    fake_lock(phone, host="build-box-7", pid=4242, age_s=120)
    r = cli("deploy", str(pkg), "--target", f"adb:{phone.serial}", "--wait", "0")
    assert r.rc == DEPLOY_FAILED and "host build-box-7 pid 4242" in r.err, r.err
    assert lock_on(phone).exists()
    r = cli("deploy", str(pkg), "--target", f"adb:{phone.serial}", "--wait", "0", "--stale-lock", "60")
    assert r.rc == 0, r.err
    assert "older than --stale-lock 60s" in r.err and not lock_on(phone).exists()


def test_the_lock_is_released_on_failure(phone, tmp_path):
    pkg = package(tmp_path, "a")

    def cut(spec, step):
        if step == "pushed":
            raise DeployFailed("cut")

    deploy_mod.FAULT_HOOK = cut
    t = parse_target(f"adb:{phone.serial}")
    (res,) = deploy(pkg, [t], DeployOptions())
    assert res.status == "failed"
    t.close()
    assert not lock_on(phone).exists()


def children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def test_ctrl_c_of_a_real_deploy_mid_transfer_releases_the_lock_and_keeps_the_old_install(make_device, tmp_path):
    """Ctrl-C as a terminal sends it: SIGINT to the process group of a real `hexbuild deploy`
    while a library is on the wire (a shaped 8 Mbit/s link). It exits 130 in one line, the lock
    is gone, the old install is live and whole, nothing it started is left running, and a rerun
    finishes the job."""
    dev = make_device("SM8650", link_mbit=8)
    old, new = package(tmp_path, "old"), package(tmp_path, "new")
    (new / "lib" / "libggml-cpu.so").write_bytes(os.urandom(4_000_000))  # ~4 s on the wire, zstd or not
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "GITLAB_CI")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    argv = [sys.executable, "-m", "hexbuild", "deploy", "--target", f"adb:{dev.serial}"]
    assert subprocess.run([*argv, str(old)], env=env, capture_output=True, timeout=120).returncode == 0
    live = dev.tmp / "llama.cpp"
    link, before = os.readlink(live), files_of(live)

    p = subprocess.Popen([*argv, str(new)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:  # the new library arrives in the release being staged beside the live one
            staged = [d / "lib" / "libggml-cpu.so" for d in dev.tmp.glob(".llama.cpp.hexbuild-*") if d.name != link]
            size = max((f.stat().st_size for f in staged if f.exists()), default=0)
            if 200_000 < size < 3_000_000:
                break
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, f"the push never got under way ({size} bytes)"
            time.sleep(0.02)
        assert lock_on(dev).is_dir()  # held while it transfers
        started = children_of(p.pid)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, err
    assert [ln for ln in err.splitlines() if ln.startswith("hexbuild: error:")] == ["hexbuild: error: interrupted"], err
    assert "Traceback" not in err
    assert not lock_on(dev).exists()
    assert os.readlink(live) == link and files_of(live) == before  # the old install, whole and live
    assert not [c for c in started if Path(f"/proc/{c}").exists()], "a child of the deploy outlived it"
    rerun = subprocess.run([*argv, str(new)], env=env, capture_output=True, text=True, timeout=180)
    assert rerun.returncode == 0, rerun.stderr
    assert files_of(live) == files_of(new)


def test_devices_never_wait_on_each_other_and_dry_run_takes_no_lock(make_device, tmp_path, cli):
    a, b = make_device("SM8650"), make_device("SM8750")
    pkg = package(tmp_path, "a")
    with parse_target(f"adb:{a.serial}") as t, DeployLock(t, Layout(DEST), wait=0, stale=3600):
        r = cli("deploy", str(pkg), "--target", f"adb:{a.serial}", "--dry-run", "--wait", "0")
        assert r.rc == 0, r.err
        r = cli("--json", "deploy", str(pkg), "--target", f"adb:{a.serial}", "--target", f"adb:{b.serial}",
                "--wait", "0")
    assert r.rc == DEPLOY_FAILED
    status = {x["target"]: x["status"] for x in json.loads(r.out)}
    assert status == {f"adb:{a.serial}": "failed", f"adb:{b.serial}": "ok"}


def test_two_deploys_racing_for_one_phone_leave_exactly_one_whole_package(make_device, tmp_path):
    """Two processes deploy different packages to the same phone at the same moment, many
    times: the install is always exactly one of them, whole; each deploy either succeeded
    (waiting if it had to) or failed cleanly naming the holder."""
    dev = make_device("SM8650", link_mbit=40)  # a USB-like link: pushes take long enough to overlap
    pkgs = {tag: package(tmp_path, tag, size=8_000_000) for tag in ("a", "b")}  # ~1.6 s a push: wider than a loaded start
    want = {tag: files_of(p) for tag, p in pkgs.items()}
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    overlapped = 0
    for round_ in range(6):
        wait = "0" if round_ % 3 == 2 else "60"
        order = ("a", "b") if round_ % 2 == 0 else ("b", "a")
        procs = {tag: subprocess.Popen([sys.executable, "-m", "hexbuild", "--json", "deploy", str(pkgs[tag]),
                                        "--target", f"adb:{dev.serial}", "--wait", wait],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for tag in order}
        outs = {tag: p.communicate(timeout=180) for tag, p in procs.items()}
        rcs = {tag: p.returncode for tag, p in procs.items()}
        assert set(rcs.values()) <= {0, DEPLOY_FAILED} and 0 in rcs.values(), (rcs, outs)
        for tag, (out, err) in outs.items():
            assert "Traceback" not in err
            if rcs[tag] == DEPLOY_FAILED:
                assert wait == "0" and "another deploy holds" in err, err
                overlapped += 1
            elif json.loads(out)[0]["lock_wait_s"] > 0.2:
                overlapped += 1
        installed = files_of(dev.tmp / "llama.cpp")
        assert installed in (want["a"], want["b"]), f"round {round_}: a mixed install"
        if wait == "60":  # both ran: the one that went last is live
            assert rcs == {"a": 0, "b": 0}
        left = sorted(p.name for p in dev.tmp.iterdir())
        assert len(left) <= 3 and not lock_on(dev).exists(), left  # link, live and previous release
    assert overlapped >= 2, "the deploys never overlapped: the test proved nothing"


def test_directories_made_for_the_lock_go_when_the_deploy_is_refused(make_device, tmp_path, cli):
    dev = make_device("SM8650", disk_kb=1024)  # too small for the package: refused by the space check
    pkg = package(tmp_path, "a", size=2_000_000)
    r = cli("deploy", str(pkg), "--target", f"adb:{dev.serial}", "--dest", "/data/local/tmp/a/b/llama.cpp")
    assert r.rc == DEPLOY_FAILED and "not enough space" in r.err, r.err
    assert list(dev.tmp.iterdir()) == []


def test_the_lock_and_the_survey_of_the_destination_are_one_device_call(phone, tmp_path, monkeypatch):
    """The lock's device call lists <dest> and reads the live manifest too: a redeploy makes no
    call of its own for either, and still links every unchanged file."""
    pkg = package(tmp_path, "a")
    t = parse_target(f"adb:{phone.serial}")
    (first,) = deploy(pkg, [t], DeployOptions())
    assert first.status == "ok", first.error
    (pkg / "share.txt").write_text("changed\n")
    calls, reads = [], []
    sh = type(t).sh
    monkeypatch.setattr(type(t), "sh", lambda self, *a, **k: calls.append(k.get("what")) or sh(self, *a, **k))
    read = type(t).read_file
    monkeypatch.setattr(type(t), "read_file", lambda self, path: reads.append(path) or read(self, path))
    (res,) = deploy(pkg, [t], DeployOptions())
    t.close()
    assert res.status == "ok" and res.files_pushed == 1, (res.error, res.files_pushed)
    # the two calls before the plan, at once (the lock's beside the probe's)
    assert sorted(calls[:2]) == ["probing the device", f"taking the deploy lock {LOCK} and inspecting {DEST}"], calls
    assert not any(w.startswith("inspecting") for w in calls) and reads == [], (calls, reads)
    assert files_of(phone.tmp / "llama.cpp") == files_of(pkg)


def test_the_steps_after_the_lock_run_only_when_it_is_taken_and_their_failure_keeps_it_held(phone):
    marker = "/data/local/tmp/then-ran"
    touch = ('echo ran > "$1"', [marker])
    with parse_target(f"adb:{phone.serial}") as t:
        with DeployLock(t, Layout(DEST), wait=0, stale=3600):
            with pytest.raises(DeployFailed, match="another deploy holds"):
                DeployLock(t, Layout(DEST), wait=0, stale=3600).acquire([touch], "marking")
            assert not (phone.tmp / "then-ran").exists()  # held by another: the step did not run
        lock = DeployLock(t, Layout(DEST), wait=0, stale=3600)
        assert lock.acquire([touch, ('printf "%s" "$1"', ["out"])], "marking") == b"out"
        assert (phone.tmp / "then-ran").read_text() == "ran\n"
        lock.release()
        lock = DeployLock(t, Layout(DEST), wait=0, stale=3600)
        with pytest.raises(Exception, match="taking the deploy lock .* and failing .*: broken step"):
            lock.acquire([('echo "broken step" >&2; exit 5', [])], "failing")
        assert lock.held and lock_on(phone).exists()  # taken by that call: ours to remove
        lock.release()
    assert not lock_on(phone).exists()


def test_a_survey_that_fails_in_the_lock_call_leaves_no_lock(phone, tmp_path, monkeypatch):
    from hexbuild.deploy import layout

    pkg = package(tmp_path, "a")
    monkeypatch.setattr(layout, "snapshot_step", lambda paths, like="": ('echo "listing broke" >&2; exit 1', []))
    t = parse_target(f"adb:{phone.serial}")
    (res,) = deploy(pkg, [t], DeployOptions())
    t.close()
    assert res.status == "failed" and "listing broke" in res.error, res.error
    assert [p.name for p in phone.tmp.iterdir()] == []


def test_the_lock_is_taken_beside_the_probe_and_a_refusal_still_wins(make_device, tmp_path, monkeypatch):
    """The lock's call starts before the probe's has answered; a deploy the probe's facts refuse
    answers with the refusal (not with the lock's own trouble) and leaves no lock behind."""
    from hexbuild.targets.adb import AdbTarget

    dev = make_device("SM8650", without=("find",))  # the listing in the lock's call fails there
    pkg = package(tmp_path, "a")
    t = parse_target(f"adb:{dev.serial}")
    seen: list[str] = []
    probe, sh = AdbTarget.probe, AdbTarget.sh

    def slow_probe(self, dest):
        seen.append("probe starts")
        time.sleep(0.5)  # long enough for the lock's call to have run
        return probe(self, dest)

    def sh_seen(self, *a, **k):
        seen.append(k.get("what", ""))
        return sh(self, *a, **k)

    monkeypatch.setattr(AdbTarget, "probe", slow_probe)
    monkeypatch.setattr(AdbTarget, "sh", sh_seen)
    (res,) = deploy(pkg, [t], DeployOptions())
    t.close()
    assert res.status == "failed" and "no find" in res.error, res.error
    lock_call = f"taking the deploy lock {LOCK} and inspecting {DEST}"
    assert seen.index(lock_call) < seen.index("probing the device"), seen  # it ran during the probe
    assert list(dev.tmp.iterdir()) == []  # its lock went with the refusal
