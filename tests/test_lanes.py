"""Pushing on several sync connections at once (hexbuild/targets/adbsync.py ``push_lanes``,
wire.py ``WirePolicy.lanes``): on a link faster than compression the files go raw, largest
first, on two connections, each taking the next file when it is free; against a real adbd with
the wire watched between the adb server and adbd (tests/infra/adbwire.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from hexbuild.targets import adbsync, parse_target
from hexbuild.targets.adbproto import AdbError
from hexbuild.targets.wire import FAST_LINK, LANES, LinkMemory, WirePolicy
from tests import elf_factory as ef

AARCH64_LIB = Path("/usr/aarch64-linux-gnu/lib")  # Debian's cross toolchain (setup-test-env.sh)
REAL_LIBS = ("libasan.so.8", "libtsan.so.2", "libstdc++.so.6", "libc.so.6")
DEST = "/data/local/tmp/llama.cpp"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


def real_libs(into: Path) -> list[Path]:
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for name in REAL_LIBS:
        src = (AARCH64_LIB / name).resolve()
        if not src.is_file():
            pytest.fail(f"{src} is missing: run scripts/setup-test-env.sh (g++-aarch64-linux-gnu)")
        out.append(Path(shutil.copyfile(src, into / name)))
    return out


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def by_stream(sends) -> dict[int, list[str]]:
    streams: dict[int, list[str]] = {}
    for s in sends:
        streams.setdefault(s.stream, []).append(s.path)
    return streams


def test_a_fast_link_gets_two_lanes_largest_first_and_a_slow_or_unmeasured_one_one(tmp_path):
    small, large = tmp_path / "small.so", tmp_path / "large.so"
    small.write_bytes(b"\1" * 100_000)
    large.write_bytes(b"\1" * 300_000)
    fast = WirePolicy(zstd=True, link_rate=300e6)
    assert fast.lanes() == LANES == 2 and fast.order([small, large]) == [1, 0]
    assert fast.choose(large).reason == "raw:fast-link" and fast.choose(large).ratio is None  # no sample taken
    slow = WirePolicy(zstd=True, link_rate=FAST_LINK / 2)
    assert slow.lanes() == 1 and slow.order([large, small]) == [1, 0]  # smallest first, one lane
    assert WirePolicy(zstd=True).lanes() == 1  # not measured: one connection, as adb push
    assert WirePolicy(zstd=False, link_rate=300e6).lanes() == 1  # an old adbd: v1 SEND, one connection
    seen = WirePolicy(zstd=True, link_rate=300e6)
    seen.observe(64 << 20, 0.5, compressed=False)
    seen.observe(64 << 20, 0.2, compressed=True)  # whole compressed files went faster
    assert seen.lanes() == 1 and seen.choose(large).reason == "zstd"


def test_on_lanes_every_file_goes_once_raw_and_the_largest_leads_a_lane(wire_device, tmp_path):
    dev, wire = wire_device(link_mbit=160)  # 20 MB/s: one lane cannot take every file before the other starts
    libs = real_libs(tmp_path / "libs")
    largest = max(libs, key=lambda p: p.stat().st_size)
    got = {}
    with parse_target(f"adb:{wire.serial}", {"deploy.timeout": 120.0}) as t:
        t.wire().link_rate = 300e6  # a USB 3 link, as the probe reads one
        t.send_files([(p, f"/data/local/tmp/lanes/{p.name}", 0o644) for p in libs], None,
                     lambda i, how: got.__setitem__(i, how))
    sends = wire.file_sends()
    assert sorted(s.path for s in sends) == sorted(f"/data/local/tmp/lanes/{p.name}" for p in libs)
    assert {s.version for s in sends} == {1}  # v1 SEND: raw
    streams = by_stream(sends)
    assert len(streams) == 2, streams  # two sync connections at once
    assert f"/data/local/tmp/lanes/{largest.name}" in [paths[0] for paths in streams.values()]
    assert sorted(got) == list(range(len(libs))) and not any(h.compressed for h in got.values())
    for p in libs:
        assert sha(dev.tmp / "lanes" / p.name) == sha(p)


def test_a_zstd_upload_on_a_lane_is_compressed_there_and_lands_byte_identical(wire_device, tmp_path):
    dev, wire = wire_device()
    libs = real_libs(tmp_path / "libs")
    uploads = [adbsync.Upload(p, f"/data/local/tmp/z/{p.name}", 0o644, 1) for p in libs]
    with parse_target(f"adb:{wire.serial}", {"deploy.timeout": 120.0}) as t:
        adbsync.push_lanes(t.client, t.resolve_serial(), iter(uploads), lanes=2, timeout=60)
    sends = wire.file_sends()
    assert {(s.version, s.flags) for s in sends} == {(2, 4)} and len(sends) == len(libs)
    assert sum(s.data_bytes for s in sends) < 0.6 * sum(p.stat().st_size for p in libs)
    for p in libs:
        assert sha(dev.tmp / "z" / p.name) == sha(p)


def test_when_a_lane_fails_the_other_stops_and_the_first_error_is_raised(wire_device, tmp_path):
    dev, wire = wire_device(link_mbit=80)  # 10 MB/s: the large file is still going when the other lane fails
    libs = real_libs(tmp_path / "libs")
    big = tmp_path / "big.bin"
    big.write_bytes(b"".join(p.read_bytes() for p in libs) * 2)
    (dev.tmp / "blocker").write_bytes(b"a file, not a directory")
    uploads = [adbsync.Upload(big, "/data/local/tmp/big.bin"),
               adbsync.Upload(libs[0], "/data/local/tmp/blocker/lib.so"),  # its parent is a file
               *[adbsync.Upload(p, f"/data/local/tmp/after/{p.name}") for p in libs[1:]]]
    seen: list[str] = []
    with parse_target(f"adb:{wire.serial}", {"deploy.timeout": 120.0}) as t:
        with pytest.raises(AdbError):
            adbsync.push_lanes(t.client, t.resolve_serial(), iter(uploads), lanes=2, timeout=60,
                               sent=lambda up, wire: seen.append(up.remote))
    assert seen == []  # the large file was cut off, and nothing after the failure was taken
    assert [s.path for s in wire.file_sends()] == []
    assert not (dev.tmp / "after").exists()


def test_a_deploy_on_a_remembered_fast_link_uses_two_lanes_and_matches_the_manifest(wire_device, tmp_path, cli):
    dev, wire = wire_device()
    pkg = ef.make_package(tmp_path / "build", os="android", htp=["v73"])
    for p in real_libs(pkg / "lib"):
        assert p.parent == pkg / "lib"
    LinkMemory(f"adb:{wire.serial}").store(300e6)  # the last deploy measured a USB 3 link
    r = cli("deploy", str(pkg), "--target", f"adb:{wire.serial}", "--dest", DEST, "--json")
    assert r.rc == 0, r.err
    [res] = r.json
    assert res["link_mb_s"] == 300.0 and res["files_compressed"] == 0 and res["wire_bytes"] == res["bytes_pushed"]
    assert wire.dry_runs() == []  # remembered: not measured again
    sends = [s for s in wire.file_sends() if "/.hexbuild/" not in s.path]
    assert len(by_stream(sends)) == 2
    release = (dev.tmp / "llama.cpp").resolve()
    manifest = json.loads((release / ".hexbuild" / "manifest.json").read_text())
    files = manifest["files"]
    assert len(files) > len(REAL_LIBS)
    for f in files:
        assert sha(release / f["path"]) == f["sha256"], f["path"]


@pytest.mark.parametrize("step", ["pushed:1", "bytes:2000000"])
def test_a_deploy_cut_on_its_lanes_leaves_the_old_install_and_a_rerun_converges(wire_device, tmp_path, step):
    import hexbuild.deploy as deploy_mod
    from hexbuild.deploy import DeployOptions, deploy
    from hexbuild.errors import DeployFailed

    dev, wire = wire_device(link_mbit=160)  # 20 MB/s: a file takes long enough for both lanes to start
    pkg = ef.make_package(tmp_path / "build", os="android", htp=["v73"])
    libs = real_libs(pkg / "lib")
    LinkMemory(f"adb:{wire.serial}").store(300e6)  # a USB 3 link: the files go on two lanes
    t = parse_target(f"adb:{wire.serial}", None)
    [first] = deploy(pkg, [t], DeployOptions(dest=DEST))
    assert first.status == "ok", first.error
    live = dev.tmp / "llama.cpp"
    before = {p.name: sha(p) for p in (live / "lib").iterdir() if p.is_file()}
    for p in libs:  # a rebuild: every large library changes
        with open(p, "ab") as f:
            f.write(b"\1" * 4096)
    wire.begun.clear()

    def cut(spec: str, checkpoint: str) -> None:
        if checkpoint == step or (step.startswith("bytes:") and checkpoint.startswith("bytes:")
                                  and int(checkpoint[6:]) >= int(step[6:])):
            raise DeployFailed(f"link cut at {checkpoint}")

    deploy_mod.FAULT_HOOK = cut
    try:
        [res] = deploy(pkg, [t], DeployOptions(dest=DEST))
    finally:
        deploy_mod.FAULT_HOOK = None
    assert res.status == "failed" and "link cut" in res.error
    assert {p.name: sha(p) for p in (live / "lib").iterdir() if p.is_file()} == before  # the old install, live
    if step == "pushed:1":  # a whole file took longer than the other lane's start (a byte count
        # may be reached in the adb server's buffers before it)
        assert len(by_stream(wire.begun)) == 2, wire.begun
    [again] = deploy(pkg, [t], DeployOptions(dest=DEST))
    assert again.status == "ok", again.error
    for p in libs:
        assert sha(live.resolve() / "lib" / p.name) == sha(p)
    assert sorted(p.name for p in dev.tmp.iterdir() if p.name.startswith(".llama.cpp.hexbuild-")) == \
        sorted([again.previous, again.release])  # no leftovers
