"""hexbuild deploy against real adbd phones (through the real adb server), real sshd and local
directories: incremental, atomic under cut-offs, space checks, models, launch scripts, many
devices, JSON output."""

from __future__ import annotations

import hashlib
import json
import os

from pathlib import Path

import pytest

from hexbuild import deploy as deploy_mod
from hexbuild.deploy import DeployOptions, deploy, load_package
from hexbuild.errors import DeployFailed
from hexbuild.source import read_source
from hexbuild.targets import parse_target
from tests import elf_factory as ef

DEST = "/data/local/tmp/llama.cpp"
RESULT_KEYS = {"target": str, "serial": (str, type(None)), "soc": (str, type(None)), "htp_arch": (str, type(None)),
               "files_total": int, "files_pushed": int, "files_removed": int, "bytes_total": int,
               "bytes_pushed": int, "duration_s": float, "push_s": float, "status": str, "error": (str, type(None))}


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    test_cache = os.environ.get("HEXBUILD_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hexbuild-tests")
    monkeypatch.setenv("HEXBUILD_TEST_CACHE", test_cache)  # compiled ELF files stay shared
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))  # hexbuild's hash cache stays in the test
    yield
    deploy_mod.FAULT_HOOK = None


@pytest.fixture
def pkg(tmp_path) -> Path:
    """A realistic install prefix (genuine AArch64/Hexagon ELF files) plus two larger libraries."""
    p = ef.make_package(tmp_path / "build", os="android", htp=["v68", "v73"])
    (p / "lib" / "libggml-cpu.so").write_bytes(os.urandom(700_000))
    (p / "lib" / "libggml-opencl.so").write_bytes(os.urandom(500_000))
    return p


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree(root: Path) -> dict[str, str]:
    """rel path → sha256 of every regular file (through symlinks at the root), .hexbuild excluded."""
    root = root.resolve()
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not rel.startswith(".hexbuild/") and rel not in ("manifest.json", "SHA256SUMS"):
            out[rel] = sha(p)
    return out


def on_device(dev, dest: str = DEST) -> Path:
    return dev.tmp / Path(dest).relative_to("/data/local/tmp")


def run(pkg, targets, **kw):
    return deploy(pkg, targets, DeployOptions(**kw))


def one(pkg, target, **kw):
    (res,) = run(pkg, [target], **kw)
    return res


def t_adb(dev):
    return parse_target(f"adb:{dev.serial}", None)


# -- incremental -------------------------------------------------------------------------------------
def test_first_deploy_installs_every_file_with_its_mode_behind_a_symlink(make_device, pkg):
    dev = make_device("SM8650")
    res = one(pkg, t_adb(dev))
    assert res.status == "ok", res.error
    assert (res.serial, res.soc, res.htp_arch) == (dev.serial, "SM8650", "v75")
    installed = on_device(dev)
    assert installed.is_symlink() and os.readlink(installed) == res.release
    assert tree(installed) == tree(pkg)
    assert res.files_pushed == res.files_total == len(tree(pkg))
    assert res.bytes_pushed == res.bytes_total == sum(p.stat().st_size for p in pkg.rglob("*") if p.is_file())
    for rel in ("bin/llama-cli", "bin/test-backend-ops", "bin/convert_hf_to_gguf.py"):
        assert (installed / rel).stat().st_mode & 0o777 == 0o755, rel
    for rel in ("include/llama.h", "lib/pkgconfig/llama.pc"):
        assert (installed / rel).stat().st_mode & 0o777 == 0o644, rel
    # the device sees the same bytes (sha256sum runs on the phone)
    out = dev.shell(f"cd {DEST} && sha256sum lib/libggml-cpu.so bin/llama-cli").stdout
    assert sha(pkg / "lib/libggml-cpu.so") in out and sha(pkg / "bin/llama-cli") in out
    # llama.cpp's own scripts use $basedir/../gguf: the release is a sibling, so .. is unchanged
    assert dev.shell(f"cd {DEST}/.. && pwd -P").stdout.strip() == "/data/local/tmp"
    manifest = json.loads((installed / ".hexbuild/manifest.json").read_text())
    assert {f["path"] for f in manifest["files"]} == set(tree(pkg)) and manifest["previous"] is None
    # the probe reports what hexbuild installed there
    seen = t_adb(dev).probe(DEST).extra["installed"]
    assert seen["release"] == res.release.rsplit("-", 1)[1] and seen["files"] == res.files_total


def test_redeploy_of_the_same_package_pushes_nothing(make_device, pkg):
    t = t_adb(make_device("SM8650"))
    assert one(pkg, t).status == "ok"
    again = one(pkg, t)
    assert (again.status, again.files_pushed, again.bytes_pushed, again.files_removed) == ("unchanged", 0, 0, 0)


def test_one_changed_library_travels_alone_and_the_rest_is_hard_linked(make_device, pkg, userland):
    dev = make_device("SM8550", userland=userland)
    t = t_adb(dev)
    first = one(pkg, t)
    (pkg / "lib" / "libggml-cpu.so").write_bytes(os.urandom(650_000))
    res = one(pkg, t)
    assert (res.status, res.files_pushed, res.bytes_pushed) == ("ok", 1, 650_000)
    assert res.previous == first.release and res.release != first.release
    installed = on_device(dev)
    assert tree(installed) == tree(pkg)
    assert (installed / "lib/libggml-opencl.so").stat().st_nlink == 2  # shared with the previous release
    assert (installed / "lib/libggml-cpu.so").stat().st_nlink == 1
    old = dev.tmp / first.release / "lib/libggml-cpu.so"
    assert old.exists() and sha(old) != sha(installed / "lib/libggml-cpu.so")  # the old release untouched


def test_a_removed_file_is_gone_and_counted(make_device, pkg, userland):
    dev = make_device("SM8650", userland=userland)
    t = t_adb(dev)
    one(pkg, t)
    (pkg / "bin" / "convert_hf_to_gguf.py").unlink()
    res = one(pkg, t)
    assert (res.status, res.files_removed, res.files_pushed, res.bytes_pushed) == ("ok", 1, 0, 0)
    assert not (on_device(dev) / "bin/convert_hf_to_gguf.py").exists()
    assert tree(on_device(dev)) == tree(pkg)


def test_verify_rehashes_on_the_device_and_repairs_drift(make_device, pkg, userland):
    dev = make_device("SM8650", userland=userland)
    t = t_adb(dev)
    one(pkg, t)
    victim = on_device(dev) / "lib" / "libggml-opencl.so"
    data = bytearray(victim.read_bytes())
    data[1000] ^= 0xFF  # same size: only a hash can tell
    victim.write_bytes(bytes(data))
    assert one(pkg, t).status == "unchanged"  # sizes and modes match: a plain deploy trusts the manifest
    res = one(pkg, t, verify=True)
    assert (res.status, res.repaired, res.verified, res.files_pushed) == ("ok", 1, len(tree(pkg)), 1)
    assert tree(on_device(dev)) == tree(pkg)
    assert one(pkg, t, verify=True).status == "unchanged"


def test_missing_or_truncated_files_are_repaired_without_verify(make_device, pkg):
    dev = make_device("SM8650")
    t = t_adb(dev)
    one(pkg, t)
    (on_device(dev) / "bin" / "llama-bench").unlink()
    (on_device(dev) / "lib" / "libggml-cpu.so").write_bytes(b"short")
    (on_device(dev) / "bin" / "llama-cli").chmod(0o644)
    res = one(pkg, t)
    assert (res.status, res.files_pushed, res.repaired) == ("ok", 3, 3)
    assert tree(on_device(dev)) == tree(pkg)
    assert (on_device(dev) / "bin/llama-cli").stat().st_mode & 0o777 == 0o755


def test_a_repair_cut_off_midway_is_finished_and_cleaned_up_by_the_next_run(make_device, pkg, userland):
    dev = make_device("SM8650", userland=userland)
    t = t_adb(dev)
    one(pkg, t)
    for rel in ("lib/libggml-cpu.so", "lib/libggml-opencl.so"):
        (on_device(dev) / rel).write_bytes(b"damaged")

    def cut(spec, checkpoint):
        if checkpoint == "pushed:1":
            raise DeployFailed("cut")

    deploy_mod.FAULT_HOOK = cut
    assert one(pkg, t).status == "failed"
    deploy_mod.FAULT_HOOK = None
    leftovers = [p.name for p in (on_device(dev) / "lib").iterdir() if ".hexbuild-" in p.name]
    assert leftovers  # the first replacement arrived under a temporary name and was not renamed yet
    res = one(pkg, t)
    assert res.status == "ok" and tree(on_device(dev)) == tree(pkg)
    assert not [p.name for p in (on_device(dev) / "lib").iterdir() if ".hexbuild-" in p.name]


# -- atomic ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("step", ["stage", "linked", "pushed:1", "pushed:2", "bytes:300000", "pushed", "manifest"])
def test_a_deploy_cut_at_any_step_leaves_the_old_install_and_a_rerun_converges(make_device, pkg, step, userland):
    dev = make_device("SM8650", userland=userland)
    t = t_adb(dev)
    one(pkg, t)
    before = tree(on_device(dev))
    (pkg / "lib" / "libggml-cpu.so").write_bytes(os.urandom(900_000))
    (pkg / "lib" / "libggml-opencl.so").write_bytes(os.urandom(400_000))
    (pkg / "bin" / "llama-bench").unlink()

    def cut(spec: str, checkpoint: str) -> None:
        if checkpoint == step or (step.startswith("bytes:") and checkpoint.startswith("bytes:")
                                  and int(checkpoint[6:]) >= int(step[6:])):
            raise DeployFailed(f"link cut at {checkpoint}")

    deploy_mod.FAULT_HOOK = cut
    res = one(pkg, t)
    assert res.status == "failed" and "link cut" in res.error
    assert tree(on_device(dev)) == before  # the old install, whole and live
    deploy_mod.FAULT_HOOK = None
    again = one(pkg, t)
    assert again.status == "ok", again.error
    assert tree(on_device(dev)) == tree(pkg)
    # what the cut run already sent is kept (pushes go in path order: libggml-cpu.so, then -opencl.so;
    # the second may be on its way, and so whole on the device, when the first one's OKAY comes;
    # over adb the staging call runs beside the push, so "linked" comes once the push is over)
    kept = {"pushed:1": (0, 400_000), "pushed:2": (0,), "pushed": (0,), "manifest": (0,),
            "linked": (0,)}.get(step, (1_300_000,))
    assert again.bytes_pushed in kept
    assert sorted(p.name for p in dev.tmp.iterdir() if p.name.startswith(".llama.cpp.hexbuild-")) == \
        sorted([again.previous, again.release])  # no leftovers


def test_over_adb_the_staging_call_runs_beside_the_push_and_its_failure_fails_the_deploy(make_device, pkg):
    """A new release's links are made while its changed files travel (adb's SEND makes their
    directories); staging that fails fails the deploy after the push, the old install live."""
    dev = make_device("SM8650")
    t = t_adb(dev)
    one(pkg, t)
    before = tree(on_device(dev))
    (pkg / "lib" / "libggml-cpu.so").write_bytes(os.urandom(700_000))
    seen: list[str] = []
    deploy_mod.FAULT_HOOK = lambda spec, checkpoint: seen.append(checkpoint)
    try:
        assert one(pkg, t).status == "ok"
    finally:
        deploy_mod.FAULT_HOOK = None
    assert seen.index("stage") < seen.index("pushed:1") < seen.index("linked") < seen.index("swapped")
    assert tree(on_device(dev)) == tree(pkg)

    before = tree(on_device(dev))
    (pkg / "lib" / "libggml-cpu.so").write_bytes(os.urandom(700_000))
    real = t.sh_chain

    def staging_fails(steps, *, what: str, **kw):
        if what.startswith("staging"):
            steps = [("echo 'ln: cannot link' >&2; exit 1", [])]
        return real(steps, what=what, **kw)

    t.sh_chain = staging_fails  # the device's own shell fails the staging step
    try:
        res = one(pkg, t)
    finally:
        del t.sh_chain
    assert res.status == "failed" and "staging the new release" in res.error, res.error
    assert tree(on_device(dev)) == before
    assert one(pkg, t).status == "ok" and tree(on_device(dev)) == tree(pkg)


def test_an_error_beside_the_block_is_raised_on_leaving_it_and_the_blocks_own_error_first():
    from hexbuild.deploy.beside import Beside

    def fail(what):
        raise DeployFailed(what)

    with pytest.raises(DeployFailed, match="beside"):
        with Beside(fail, "beside"):
            pass
    with pytest.raises(KeyError):
        with Beside(fail, "beside"):
            raise KeyError("the block's own")
    ran = []
    with Beside(ran.append, 1):
        pass
    assert ran == [1]


@pytest.mark.parametrize("when", ["bytes:2000000", "pushed"])
def test_killing_adbd_mid_deploy_keeps_the_old_install_and_a_rerun_resumes(make_device, pkg, adb_server, when, userland):
    dev = make_device("SM8650", userland=userland)
    t = t_adb(dev)
    one(pkg, t)
    before = tree(on_device(dev))
    for i in range(6):
        (pkg / "lib" / f"libextra{i}.so").write_bytes(os.urandom(600_000))
    killed = []

    def pull_the_plug(spec: str, checkpoint: str) -> None:
        due = checkpoint == when or (when.startswith("bytes:") and checkpoint.startswith("bytes:")
                                     and int(checkpoint[6:]) > int(when[6:]))
        if due and not killed:
            killed.append(checkpoint)
            dev.kill()  # adbd dies by PID: the next transfer or command breaks for real

    deploy_mod.FAULT_HOOK = pull_the_plug
    res = one(pkg, t)
    deploy_mod.FAULT_HOOK = None
    assert killed and res.status == "failed"
    assert res.error and ("offline" in res.error or "closed" in res.error or "broke" in res.error or "not" in res.error)
    dev.start()  # the phone comes back
    assert tree(on_device(dev)) == before
    again = one(pkg, t)
    assert again.status == "ok", again.error
    assert tree(on_device(dev)) == tree(pkg)
    # what was sent before the cut is kept: all of it when the plug was pulled after the pushes,
    # else every acknowledged file (one more may have been on its way: adbsync.IN_FLIGHT)
    assert again.bytes_pushed < (1 if when == "pushed" else 3_600_000 - 1_500_000 + 600_000)


# -- space ------------------------------------------------------------------------------------------------
def test_a_full_destination_is_refused_before_anything_is_sent(make_device, pkg, cli):
    dev = make_device("SM8650", disk_kb=1024)  # /data/local/tmp is a 1 MiB tmpfs on this phone
    res = one(pkg, t_adb(dev))
    assert res.status == "failed" and "not enough space" in res.error
    assert "MiB needed" in res.error and "free" in res.error
    assert res.bytes_pushed == 0 and list(dev.tmp.iterdir()) == []
    r = cli("deploy", str(pkg), "--target", f"adb:{dev.serial}")
    assert r.rc == 7 and "not enough space" in r.err


# -- device states ----------------------------------------------------------------------------------------
def test_unauthorized_and_offline_devices_fail_with_the_fix(make_locked_phone, make_device, adb_server, pkg, cli):
    locked = make_locked_phone()
    dead = make_device("SM8650")
    dead.kill()
    adb_server.wait_state(dead.serial, "offline")
    r = cli("deploy", str(pkg), "--target", f"adb:{locked.serial}", "--target", f"adb:{dead.serial}", "--json")
    assert r.rc == 7
    got = {x["serial"]: x for x in r.json}
    assert got[locked.serial]["status"] == "failed" and "unauthorized" in got[locked.serial]["error"]
    assert "accept the RSA key prompt" in got[locked.serial]["hint"]
    assert got[dead.serial]["status"] == "failed" and "offline" in got[dead.serial]["error"]
    assert "adb reconnect" in got[dead.serial]["hint"]
    assert locked.serial in r.err and dead.serial in r.err


def test_an_unknown_ssh_host_key_fails_that_target_with_the_fingerprint(sshd_host, pkg, tmp_path, cli):
    empty = tmp_path / "kh"
    empty.write_text("")
    r = cli("deploy", str(pkg), "--target", f"ssh://root@127.0.0.1:{sshd_host.port}", "--dest", str(tmp_path / "d"),
            env={**sshd_host.env, "HEXBUILD_SSH_KNOWN_HOSTS": str(empty)})
    assert r.rc == 7 and "SHA256:" in r.err and "ssh-keyscan" in r.err
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("spec", ["adb:", "adb://:5037", "ssh://h/x", "nonsense"])
def test_malformed_targets_exit_2_before_any_work(cli, pkg, spec):
    r = cli("deploy", str(pkg), "--target", "adb", "--target", spec)
    assert r.rc == 2 and ("malformed target" in r.err or "unknown target" in r.err)


# -- launch scripts ------------------------------------------------------------------------------------------
def test_a_rebuild_of_another_revision_with_the_same_bytes_is_a_new_release(make_device, pkg):
    """Same files, another revision in the manifest: the device's manifest must say the new one
    (run, plan and bench read the revision from it)."""
    t = t_adb(dev := make_device("SM8650"))
    (pkg / "manifest.json").write_text(json.dumps({"os": "android", "llama_cpp": {"revision": "b7000-aaa"}}))
    assert one(pkg, t).status == "ok"
    (pkg / "manifest.json").write_text(json.dumps({"os": "android", "llama_cpp": {"revision": "b7001-bbb"}}))
    again = one(pkg, t)
    assert (again.status, again.files_pushed) == ("ok", 0)  # a new release of hard links, nothing sent
    manifest = json.loads((on_device(dev) / ".hexbuild/manifest.json").read_text())
    assert manifest["llama_cpp"]["revision"] == "b7001-bbb"


@pytest.fixture(scope="module")
def facts_0_3_20(tree_0_3_20):
    return read_source(tree_0_3_20).to_json()


def with_facts(pkg: Path, facts: dict) -> Path:
    (pkg / "manifest.json").write_text(json.dumps({"os": "android", "llama_cpp": facts}))
    return pkg


def test_ndev_on_a_v73_phone_is_refused_without_touching_it(phones, pkg, facts_0_3_20):
    dev = phones["SM8550"]
    res = one(with_facts(pkg, facts_0_3_20), t_adb(dev), ndev=4, dest="/data/local/tmp/ndev-v73")
    assert res.status == "failed" and "v73" in res.error
    assert not (dev.tmp / "ndev-v73").exists()


def test_ndev_on_a_v79_phone_writes_launch_scripts_into_the_release(phones, pkg, facts_0_3_20):
    dev = phones["SM8750"]
    t = t_adb(dev)
    res = one(with_facts(pkg, facts_0_3_20), t, ndev=4, dest="/data/local/tmp/ndev-v79")
    assert res.status == "ok", res.error
    scripts = dev.tmp / "ndev-v79" / "scripts"
    names = sorted(p.name for p in scripts.iterdir())
    assert names and all((scripts / n).stat().st_mode & 0o777 == 0o755 for n in names)
    text = "".join((scripts / n).read_text() for n in names)
    assert "GGML_HEXAGON_NDEV" in text and "4" in text and "/data/local/tmp/ndev-v79" in text
    manifest = json.loads((dev.tmp / "ndev-v79/.hexbuild/manifest.json").read_text())
    assert manifest["ndev"] == 4 and sorted(manifest["scripts"]) == names
    # a script runs on the phone (sh -n: syntax) and the same --ndev again is a no-op
    assert dev.shell(f"sh -n /data/local/tmp/ndev-v79/scripts/{names[0]} && echo ok").stdout.strip() == "ok"
    assert one(pkg, t, ndev=4, dest="/data/local/tmp/ndev-v79").status == "unchanged"
    assert one(pkg, t, dest="/data/local/tmp/ndev-v79").files_removed == len(names)  # without --ndev: gone


# -- other transports --------------------------------------------------------------------------------------
def test_deploy_over_adb_ssh_and_ssh_and_local(sshd_host, make_device, pkg, tmp_path):
    dev = make_device("SM8750")
    s = sshd_host.settings
    via_ssh = parse_target(f"adb+ssh://root@127.0.0.1:{sshd_host.port}/{dev.serial}", s)
    board = parse_target(f"ssh://root@127.0.0.1:{sshd_host.port}", s)
    local = parse_target(f"local:{tmp_path / 'local-install'}", s)
    try:
        a = one(pkg, via_ssh)
        b = one(pkg, board, dest=str(tmp_path / "board-install"))
        c = one(pkg, local)
        assert [x.status for x in (a, b, c)] == ["ok", "ok", "ok"], [a.error, b.error, c.error]
        assert (a.htp_arch, a.serial) == ("v79", dev.serial)
        assert tree(on_device(dev)) == tree(pkg)
        assert tree(tmp_path / "board-install") == tree(pkg) == tree(tmp_path / "local-install")
        (pkg / "lib" / "libggml-cpu.so").write_bytes(b"new bytes")
        for t, dest in ((via_ssh, None), (board, str(tmp_path / "board-install")), (local, None)):
            r = one(pkg, t, dest=dest)
            assert (r.status, r.files_pushed, r.bytes_pushed) == ("ok", 1, 9), (t.spec, r.error)
        assert (tmp_path / "board-install").is_symlink()
        assert tree(tmp_path / "board-install") == tree(pkg) == tree(on_device(dev))
    finally:
        via_ssh.close()
        board.close()


def test_all_deploys_to_every_ready_device_in_parallel(private_adb_server, make_device, pkg, cli, monkeypatch):
    devs = [make_device(soc, server=private_adb_server) for soc in ("SM8650", "SM8550", "SM8750")]
    from tests.infra.devices import LockedPhone

    locked = LockedPhone()
    try:
        private_adb_server("connect", locked.serial, check=False)
        private_adb_server.wait_state(locked.serial, "unauthorized")
        r = cli("deploy", str(pkg), "--all", "--json")
        assert r.rc == 0, r.err
        got = {x["serial"]: x for x in r.json}
        assert set(got) == {d.serial for d in devs}
        assert {x["htp_arch"] for x in got.values()} == {"v75", "v73", "v79"}
        assert all(x["status"] == "ok" for x in got.values())
        assert f"skipping {locked.serial}" in r.err and "RSA key" in r.err
        for d in devs:
            assert tree(on_device(d)) == tree(pkg)
    finally:
        private_adb_server("disconnect", locked.serial, check=False)
        locked.close()


def test_all_with_no_ready_device_is_an_environment_error(private_adb_server, cli, pkg):
    r = cli("deploy", str(pkg), "--all")
    assert r.rc == 3 and "no ready device" in r.err


# -- output ---------------------------------------------------------------------------------------------------
def test_json_gives_one_result_per_target_with_the_documented_keys(phones, pkg, cli):
    targets = [f"adb:{phones[s].serial}" for s in ("SM8650", "SM8750")]
    r = cli("deploy", str(pkg), "--target", targets[0], "--target", targets[1], "--dest", "/data/local/tmp/json-test",
            "--json")
    assert r.rc == 0, r.err
    data = r.json
    assert isinstance(data, list) and [x["target"] for x in data] == targets
    for item in data:
        for key, types in RESULT_KEYS.items():
            assert isinstance(item[key], types), (key, item[key])
        assert item["status"] in ("ok", "failed", "unchanged")
        assert 0 < item["push_s"] < item["duration_s"]  # the transfer's share of the deploy
    again = cli("deploy", str(pkg), "--target", targets[0], "--dest", "/data/local/tmp/json-test", "--json")
    assert again.json[0]["status"] == "unchanged" and again.json[0]["bytes_pushed"] == 0
    assert again.json[0]["push_s"] == 0.0  # nothing travelled


def test_dry_run_plans_against_the_device_and_changes_nothing(make_device, pkg, cli):
    dev = make_device("SM8650")
    one(pkg, t_adb(dev))
    before = sorted(p.name for p in dev.tmp.iterdir())
    (pkg / "lib" / "libggml-cpu.so").write_bytes(b"changed")
    (pkg / "bin" / "llama-bench").unlink()
    r = cli("deploy", str(pkg), "--target", f"adb:{dev.serial}", "--dry-run", "--json")
    assert r.rc == 0, r.err
    plan = r.json[0]["plan"]
    assert plan["push"] == ["lib/libggml-cpu.so"] and plan["remove"] == ["bin/llama-bench"]
    # what would travel is the plan's; what did travel (nothing) the result's
    assert (r.json[0]["files_pushed"], r.json[0]["bytes_pushed"]) == (0, 0)
    assert (plan["files_to_push"], plan["bytes_to_push"]) == (1, 7)
    assert sorted(p.name for p in dev.tmp.iterdir()) == before
    human = cli("deploy", str(pkg), "--target", f"adb:{dev.serial}", "--dry-run")
    assert "push   lib/libggml-cpu.so" in human.out and "remove bin/llama-bench" in human.out


# -- models, rollback, adoption, tarballs --------------------------------------------------------------------
def gguf_file(path: Path, seed: int = 0) -> Path:
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.random.default_rng(seed).random((256, 256), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_models_are_pushed_once_atomically_and_replaced_when_they_change(make_device, pkg, tmp_path, userland):
    dev = make_device("SM8650", userland=userland)
    t = t_adb(dev)
    model = gguf_file(tmp_path / "tiny.gguf")
    res = one(pkg, t, models=[model])
    assert res.status == "ok" and res.models == [{"name": "tiny.gguf", "size": model.stat().st_size, "status": "pushed"}]
    assert sha(dev.tmp / "gguf" / "tiny.gguf") == sha(model)
    again = one(pkg, t, models=[model])
    assert (again.status, again.bytes_pushed, again.models[0]["status"]) == ("unchanged", 0, "unchanged")
    # same size, different content (the record no longer matches): hashed on the device, re-pushed
    gguf_file(model, seed=1)
    third = one(pkg, t, models=[model])
    assert third.models[0]["status"] == "pushed" and sha(dev.tmp / "gguf" / "tiny.gguf") == sha(model)
    assert sorted(p.name for p in (dev.tmp / "gguf").iterdir()) == [".hexbuild", "tiny.gguf"]  # no temp files


def test_a_model_cut_mid_push_leaves_no_partial_model(make_device, pkg, tmp_path, userland):
    dev = make_device("SM8650", userland=userland)
    t = t_adb(dev)
    one(pkg, t)
    model = gguf_file(tmp_path / "m.gguf")

    def cut(spec, checkpoint):
        if checkpoint.startswith("bytes:") and int(checkpoint[6:]) > 100_000:
            raise DeployFailed("cut")

    deploy_mod.FAULT_HOOK = cut
    assert one(pkg, t, models=[model]).status == "failed"
    deploy_mod.FAULT_HOOK = None
    assert not (dev.tmp / "gguf" / "m.gguf").exists()
    assert one(pkg, t, models=[model]).models[0]["status"] == "pushed"
    assert sha(dev.tmp / "gguf" / "m.gguf") == sha(model)
    assert sorted(p.name for p in (dev.tmp / "gguf").iterdir()) == [".hexbuild", "m.gguf"]


def test_rollback_restores_the_previous_install(make_device, pkg, cli, userland):
    dev = make_device("SM8650", userland=userland)
    t = t_adb(dev)
    first = one(pkg, t)
    old = tree(on_device(dev))
    (pkg / "lib" / "libggml-cpu.so").write_bytes(b"v2")
    one(pkg, t)
    r = cli("deploy", "--target", f"adb:{dev.serial}", "--rollback", "--json")
    assert r.rc == 0, r.err
    assert r.json[0]["release"] == first.release
    assert tree(on_device(dev)) == old
    # deploying v2 again reuses its complete release: nothing travels
    back = one(pkg, t)
    assert (back.status, back.bytes_pushed) == ("ok", 0) and tree(on_device(dev)) == tree(pkg)


def test_rollback_without_history_fails_clearly(make_device, pkg):
    dev = make_device("SM8650")
    t = t_adb(dev)
    assert "nothing to roll back" in one(None, t, rollback=True).error
    one(pkg, t)
    assert "no previous install" in one(None, t, rollback=True).error


def test_a_plain_directory_from_adb_push_is_adopted_and_kept_for_rollback(make_device, pkg, adb_server, userland):
    dev = make_device("SM8650", userland=userland)
    adb_server("-s", dev.serial, "push", str(pkg), "/data/local/tmp/", timeout=60)  # the upstream way
    assert on_device(dev).is_dir() and not on_device(dev).is_symlink()
    (pkg / "lib" / "libggml-cpu.so").write_bytes(b"changed")
    res = one(pkg, t_adb(dev))
    assert res.status == "ok" and res.files_pushed == 1 and res.bytes_pushed == 7  # the rest was linked
    assert res.previous.startswith(".llama.cpp.hexbuild-legacy-")
    assert tree(on_device(dev)) == tree(pkg)
    back = one(None, t_adb(dev), rollback=True)
    assert back.status == "ok" and (on_device(dev) / "lib/libggml-cpu.so").stat().st_size == 700_000


def test_a_release_tarball_deploys_like_its_directory(make_device, pkg, tmp_path):
    from hexbuild.artifacts import write_package

    tarball = write_package(pkg, tmp_path / "dist" / "llama.tar.gz").path
    dev = make_device("SM8650")
    res = one(tarball, t_adb(dev))
    assert res.status == "ok", res.error
    assert tree(on_device(dev)) == tree(pkg)
    assert one(pkg, t_adb(dev)).status == "unchanged"  # same content, same release


def test_load_package_rejects_what_is_not_a_package(tmp_path):
    from hexbuild.errors import UsageError

    with pytest.raises(UsageError):
        load_package(tmp_path / "missing")
    (tmp_path / "x.zip").write_bytes(b"PK")
    with pytest.raises(UsageError):
        load_package(tmp_path / "x.zip")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError):
        load_package(tmp_path / "empty")


def test_a_package_is_hashed_in_the_background_and_the_hash_cache_keeps_every_writer(tmp_path, monkeypatch):
    from hexbuild.artifacts.hashcache import HashCache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(HashCache, "RACY_S", 0.0)  # files written just now are cached too
    monkeypatch.setattr(HashCache, "RACY_FINE_S", 0.0)
    root = tmp_path / "pkg"
    (root / "lib").mkdir(parents=True)
    blobs = {f"lib/lib{i}.so": os.urandom(1 << 20) for i in range(3)}
    for rel, data in blobs.items():
        (root / rel).write_bytes(data)
    late = HashCache()  # a second writer that read the cache before the package's hashes were saved
    pkg = load_package(root)
    assert {rel: f.size for rel, f in pkg.files.items()} == {rel: len(d) for rel, d in blobs.items()}
    assert {rel: f.sha256 for rel, f in pkg.files.items()} == {rel: hashlib.sha256(d).hexdigest()
                                                              for rel, d in blobs.items()}
    pkg.close()
    # it saves after them (a deploy hashes its models while the package hashes): nothing is lost
    other = tmp_path / "model.gguf"
    other.write_bytes(b"GGUF" + os.urandom(1000))
    with late:
        late.one(other)
    cached = json.loads((tmp_path / "cache" / "hexbuild" / "sha256.json").read_text())
    assert {str((root / rel).resolve()) for rel in blobs} | {str(other.resolve())} <= set(cached)
    # a file that went away before it was hashed: one line at the first hash read, no traceback
    from hexbuild.deploy.package import Digests
    from hexbuild.errors import UsageError

    with pytest.raises(UsageError, match="cannot read a package file"):
        Digests([root / "lib" / "gone.so"]).get(0)


def test_a_library_and_its_symlinked_names_are_hashed_once(tmp_path, monkeypatch):
    from hexbuild.artifacts import hashcache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    lib = tmp_path / "pkg" / "lib"
    lib.mkdir(parents=True)
    data = os.urandom(1 << 20)
    (lib / "libllama.so.0.0.0").write_bytes(data)
    (lib / "libllama.so.0").symlink_to("libllama.so.0.0.0")
    (lib / "libllama.so").symlink_to("libllama.so.0")
    hashed = []
    real = hashcache.sha256_file
    monkeypatch.setattr(hashcache, "sha256_file", lambda p: hashed.append(p) or real(p))
    pkg = load_package(tmp_path / "pkg")
    assert {f.sha256 for f in pkg.files.values()} == {hashlib.sha256(data).hexdigest()} and len(pkg.files) == 3
    pkg.close()
    assert len(hashed) == 1, hashed


def test_one_failing_target_does_not_stop_the_others_and_is_named(phones, make_locked_phone, pkg, cli):
    locked = make_locked_phone()
    ok = phones["SM8650"]
    r = cli("deploy", str(pkg), "--target", f"adb:{ok.serial}", "--target", f"adb:{locked.serial}",
            "--dest", "/data/local/tmp/mixed")
    assert r.rc == 7
    assert f"deploy failed on 1 of 2 target(s): {locked.serial}" in r.err
    assert tree(on_device(ok, "/data/local/tmp/mixed")) == tree(pkg)





def test_cli_help_verbose_commands_and_configured_targets(phones, pkg, cli):
    h = cli("deploy", "--help")
    assert h.rc == 0 and "adb+ssh://" in h.out and "--rollback" in h.out
    assert cli("deploy", str(pkg)).rc == 2  # no target anywhere
    dev = phones["SM8650"]
    r = cli("deploy", str(pkg), "-v", "--dest", "/data/local/tmp/cfg-test",
            env={"HEXBUILD_DEPLOY_TARGETS": f"adb:{dev.serial}"})
    assert r.rc == 0, r.err
    assert f"+ adb -s {dev.serial} shell" in r.err and f"+ adb -s {dev.serial} push" in r.err
    assert tree(on_device(dev, "/data/local/tmp/cfg-test")) == tree(pkg)


def test_without_pkg_the_last_build_in_the_checkout_is_deployed(phones, tmp_path, cli):
    src = tmp_path / "llama.cpp-src"
    older = ef.make_package(src / "pkg-adb", os="android", htp=["v73"])
    newer = ef.make_package(src / "pkg-snapdragon", os="android", htp=["v68"])
    os.utime(older, (1_000_000_000, 1_000_000_000))
    (newer / "manifest.json").write_text(json.dumps({"os": "android"}))
    dev = phones["SM8650"]
    r = cli("deploy", "--source", str(src), "--target", f"adb:{dev.serial}", "--dest", "/data/local/tmp/lastbuild")
    assert r.rc == 0, r.err
    assert str(newer) in r.err and tree(on_device(dev, "/data/local/tmp/lastbuild")) == tree(newer)
    assert cli("deploy", "--source", str(tmp_path / "empty"), "--target", "adb").rc == 2
