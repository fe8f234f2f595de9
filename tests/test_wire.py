"""How files cross an adb link (hexbuild/targets/wire.py, adbproto's sync v2 SEND): zstd where the
device speaks ``sendrecv_v2_zstd`` and it pays, v1 SEND for older devices and for bytes that do
not compress, measured against a real adbd with the wire watched between the adb server and adbd
(tests/infra/adbwire.py); every pushed file is compared with the package's sha256."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from hexbuild.targets import parse_target
from hexbuild.targets.wire import LINK_MEMORY_S, PROBE_BYTES, PROBE_FROM, LinkMemory, WirePolicy
from tests import elf_factory as ef
from tests.infra.adbwire import V2_FEATURES

DEST = "/data/local/tmp/llama.cpp"
# real AArch64 shared libraries (Debian's cross toolchain, installed by setup-test-env.sh)
AARCH64_LIB = Path("/usr/aarch64-linux-gnu/lib")
REAL_LIBS = ("libstdc++.so.6", "libasan.so.8", "libtsan.so.2", "libc.so.6")


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def real_lib(name: str) -> Path:
    path = (AARCH64_LIB / name).resolve()
    if not path.is_file():
        pytest.fail(f"{path} is missing: run scripts/setup-test-env.sh (g++-aarch64-linux-gnu)")
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def pkg(tmp_path) -> Path:
    """A package of genuine ELF files, two real AArch64 libraries (they compress to about a
    third) and one incompressible library."""
    p = ef.make_package(tmp_path / "build", os="android", htp=["v73"])
    for name in REAL_LIBS[:2]:
        shutil.copyfile(real_lib(name), p / "lib" / name)
    (p / "lib" / "libggml-opencl.so").write_bytes(os.urandom(300_000))
    return p


def target(spec: str, **settings):
    return parse_target(spec, {"deploy.timeout": 120.0, **settings})


def on_device_matches_manifest(dev, release_root: Path) -> int:
    """Every file the device's manifest lists has that sha256 on the device; how many."""
    manifest = json.loads((release_root / ".hexbuild" / "manifest.json").read_text())
    for f in manifest["files"]:
        assert sha(release_root / f["path"]) == f["sha256"], f["path"]
    return len(manifest["files"])


# -- the choice ------------------------------------------------------------------------------------
def test_compressible_files_are_zstd_and_the_rest_raw(tmp_path):
    lib = tmp_path / "libstdc++.so"
    shutil.copyfile(real_lib("libstdc++.so.6"), lib)
    noise = tmp_path / "libnoise.so"
    noise.write_bytes(os.urandom(400_000))
    model = tmp_path / "weights.bin"
    model.write_bytes(b"GGUF" + bytes(200_000))  # compresses to nothing, but is a GGUF: raw
    tiny = tmp_path / "run.sh"
    tiny.write_text("#!/bin/sh\nexec ./llama-cli \"$@\"\n" * 10)

    policy = WirePolicy.for_features({"shell_v2", "sendrecv_v2", "sendrecv_v2_zstd"}, probe=None)
    chosen = policy.choose(lib)
    assert (chosen.level, chosen.reason) == (1, "zstd") and chosen.ratio < 0.6
    assert policy.choose(noise).reason == "raw:incompressible"
    assert policy.choose(model).reason == "raw:gguf"
    assert policy.choose(tiny).reason == "raw:small"
    old = WirePolicy.for_features({"shell_v2", "sendrecv_v2"}, probe=None)
    assert old.choose(lib).reason == "raw:feature"


def test_a_link_faster_than_compression_gets_raw_and_a_slow_one_zstd(tmp_path):
    lib = tmp_path / "lib.so"
    shutil.copyfile(real_lib("libstdc++.so.6"), lib)
    big = [lib] * (PROBE_FROM // lib.stat().st_size + 1)
    probes: list[int] = []

    def link(rate: float):
        def probe(data: bytes) -> float:
            probes.append(len(data))
            return 0.001 + len(data) / rate
        return probe

    feats = {"sendrecv_v2", "sendrecv_v2_zstd", "sendrecv_v2_dry_run_send"}
    slow = WirePolicy.for_features(feats, link(40e6))  # USB 2: a third of the bytes wins
    slow.expect(big)
    assert probes == [PROBE_BYTES]  # the start of the largest file (the target runs it twice)
    assert 35e6 < slow.link_rate < 45e6 and slow.choose(lib).reason == "zstd"
    fast = WirePolicy.for_features(feats, link(300e6))  # USB 3: compressing is the bottleneck
    fast.expect(big)
    assert fast.choose(lib).reason == "raw:fast-link"

    probes.clear()
    small = WirePolicy.for_features(feats, link(300e6))
    small.expect([lib])  # a few MB: the probes would cost more than they can save
    assert probes == [] and small.link_rate is None and small.choose(lib).reason == "zstd"
    no_dry_run = WirePolicy.for_features({"sendrecv_v2", "sendrecv_v2_zstd"}, link(300e6))
    no_dry_run.expect(big)
    assert probes == [] and no_dry_run.choose(lib).reason == "zstd"


def test_the_level_follows_the_link_and_a_measured_link_is_remembered(tmp_path, monkeypatch):
    lib = tmp_path / "lib.so"
    shutil.copyfile(real_lib("libstdc++.so.6"), lib)
    levels = {rate: WirePolicy(zstd=True, link_rate=rate).choose(lib).level for rate in (15e6, 35e6, 300e6)}
    assert levels == {15e6: 3, 35e6: 2, 300e6: None}  # USB 2 on a shared bus, USB 2, USB 3
    assert WirePolicy(zstd=True).choose(lib).level == 1  # not measured: what adb push does

    memory = LinkMemory("adb:SERIAL", file=tmp_path / "links.json")
    probes = []
    feats = {"sendrecv_v2", "sendrecv_v2_zstd", "sendrecv_v2_dry_run_send"}
    big = [lib] * (PROBE_FROM // lib.stat().st_size + 1)
    first = WirePolicy.for_features(feats, lambda d: probes.append(d) or len(d) / 20e6, memory)
    first.expect(big)
    assert len(probes) == 1 and 19e6 < first.link_rate < 21e6
    second = WirePolicy.for_features(feats, lambda d: probes.append(d) or 1.0, memory)
    second.expect(big)
    assert len(probes) == 1 and second.link_rate == round(first.link_rate)  # no dry run: remembered
    assert LinkMemory("adb:OTHER", file=memory.file).recall() is None
    stored = json.loads(memory.file.read_text())
    stored["adb:SERIAL"][1] -= LINK_MEMORY_S + 1  # older than the memory keeps
    memory.file.write_text(json.dumps(stored))
    assert memory.recall() is None


def test_what_whole_files_of_both_kinds_achieved_decides_over_the_estimates(tmp_path):
    lib = tmp_path / "lib.so"
    shutil.copyfile(real_lib("libstdc++.so.6"), lib)
    policy = WirePolicy(zstd=True, link_rate=200e6)
    big = 64 << 20
    assert policy.choose(lib).reason == "raw:fast-link"  # the estimates: raw
    policy.observe(big, big / 90e6, compressed=False)  # but raw files went at 90 MB/s
    assert policy.choose(lib).reason == "raw:fast-link"  # one kind alone compares with nothing
    policy.observe(big, big / 150e6, compressed=True)  # and a compressed one at 150
    assert policy.choose(lib).reason == "zstd"
    policy.observe(1 << 20, 1.0, compressed=True)  # a small file's time is mostly latency: ignored
    assert policy.choose(lib).reason == "zstd"
    policy.observe(big, big / 50e6, compressed=True)
    assert policy.choose(lib).reason == "raw:fast-link"
    assert policy.lanes() == 2 and policy.order([lib, tmp_path]) == [0, 1]  # raw on two lanes: largest first


# -- against the real adbd ------------------------------------------------------------------------------
def test_zstd_push_is_one_frame_in_small_data_packets_and_lands_byte_identical(wire_device, tmp_path):
    dev, wire = wire_device()
    lib = real_lib("libasan.so.8")
    with target(f"adb:{wire.serial}") as t:
        assert "sendrecv_v2_zstd" in t.features()
        got: list[tuple[int, int]] = []
        sent = t.send_file(lib, "/data/local/tmp/x/libasan.so", lambda n, w=None: got.append((n, w)))
    [send] = wire.file_sends()
    assert (send.version, send.flags, send.path) == (2, 4, "/data/local/tmp/x/libasan.so")
    assert sent.compressed and send.data_bytes == sent.wire_bytes < 0.6 * lib.stat().st_size
    assert send.max_data <= 64 * 1024
    assert sum(n for n, _ in got) == lib.stat().st_size and sum(w for _, w in got) == sent.wire_bytes
    assert sha(dev.tmp / "x" / "libasan.so") == sha(lib)


def test_the_link_is_timed_by_two_dry_runs_that_write_nothing(wire_device):
    from hexbuild.targets import adbsync

    dev, wire = wire_device()
    data = real_lib("libasan.so.8").read_bytes()[:PROBE_BYTES]
    with target(f"adb:{wire.serial}") as t:
        times = adbsync.dry_runs(t.client, t.resolve_serial(), "/data/local/tmp/.probe", data, runs=2, timeout=60)
    assert len(times) == 2 and all(0 < s < 60 for s in times)
    assert [(d.version, d.flags, d.data_bytes) for d in wire.dry_runs()] == [(2, 0x8000_0000, PROBE_BYTES)] * 2
    assert wire.file_sends() == [] and not (dev.tmp / ".probe").exists()  # the device read them, wrote nothing


def test_a_device_without_sendrecv_v2_gets_v1_send(wire_device):
    dev, wire = wire_device(drop_features=V2_FEATURES)
    lib = real_lib("libstdc++.so.6")
    with target(f"adb:{wire.serial}") as t:
        assert "shell_v2" in t.features() and not {"sendrecv_v2", "sendrecv_v2_zstd"} & t.features()
        sent = t.send_file(lib, "/data/local/tmp/libstdc++.so")
    [send] = wire.file_sends()
    assert (send.version, send.data_bytes) == (1, lib.stat().st_size) and not sent.compressed
    assert sha(dev.tmp / "libstdc++.so") == sha(lib)


def test_bytes_that_do_not_compress_go_raw_on_a_zstd_device(wire_device, tmp_path):
    from tests.infra.tiny_model import write_tiny_gguf

    dev, wire = wire_device()
    noise = tmp_path / "libnoise.so"
    noise.write_bytes(os.urandom(700_000))
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    with target(f"adb:{wire.serial}") as t:
        for f in (noise, model):
            assert not t.send_file(f, f"/data/local/tmp/{f.name}").compressed
    sends = wire.file_sends()
    assert [(s.version, s.data_bytes) for s in sends] == [(1, noise.stat().st_size), (1, model.stat().st_size)]
    assert sha(dev.tmp / noise.name) == sha(noise) and sha(dev.tmp / model.name) == sha(model)


@pytest.mark.parametrize("device", ["zstd", "v1"])
def test_deploy_json_reports_wire_bytes_and_every_file_matches_the_manifest(wire_device, pkg, cli, device):
    dev, wire = wire_device(drop_features=V2_FEATURES if device == "v1" else ())
    r = cli("deploy", str(pkg), "--target", f"adb:{wire.serial}", "--dest", DEST, "--json")
    assert r.rc == 0, r.err
    [res] = r.json
    files = [p for p in pkg.rglob("*") if p.is_file() and p.name != "manifest.json"]
    assert res["bytes_pushed"] == sum(p.stat().st_size for p in files)
    sends = [s for s in wire.file_sends() if "/.hexbuild/" not in s.path]  # not the manifest
    assert res["wire_bytes"] == sum(s.data_bytes for s in sends)  # what the wire carried, seen on it
    if device == "zstd":
        compressed = [s for s in sends if s.version == 2]
        assert res["files_compressed"] == len(compressed) >= 2
        assert all(s.flags == 4 for s in compressed)
        assert res["wire_bytes"] < 0.7 * res["bytes_pushed"]
        assert "on the wire" in r.err  # the progress lines say it too
    else:
        assert res["files_compressed"] == 0 and res["wire_bytes"] == res["bytes_pushed"]
        assert {s.version for s in sends} == {1}
    release = dev.tmp / "llama.cpp"
    assert on_device_matches_manifest(dev, release.resolve()) == len(files)


def test_a_large_push_measures_the_link_first_and_compresses_on_a_slow_one(wire_device, pkg, cli, tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # no link remembered from another run
    dev, wire = wire_device(link_mbit=320)  # 40 MB/s, a USB 2 phone
    for name in REAL_LIBS[2:]:
        shutil.copyfile(real_lib(name), pkg / "lib" / name)
    r = cli("deploy", str(pkg), "--target", f"adb:{wire.serial}", "--dest", DEST, "--json")
    assert r.rc == 0, r.err
    [res] = r.json
    # two raw dry runs went first (the device read and discarded them); what they measure
    # depends on the load here (this proxy is Python too): the link's 40 MB/s at most
    runs = wire.dry_runs()
    assert [(d.version, d.flags, d.data_bytes) for d in runs] == [(2, 0x8000_0000, PROBE_BYTES)] * 2
    assert 5 < res["link_mb_s"] < 60, res
    assert res["files_compressed"] >= 4 and res["wire_bytes"] < 0.7 * res["bytes_pushed"]
    assert on_device_matches_manifest(dev, (dev.tmp / "llama.cpp").resolve()) > 4
    # the next deploy (a rebuild changed the large libraries) remembers the link: no dry run
    for name in REAL_LIBS[2:]:
        with open(pkg / "lib" / name, "ab") as f:
            f.write(b"\0" * 16)
    r = cli("deploy", str(pkg), "--target", f"adb:{wire.serial}", "--dest", DEST, "--json")
    assert r.rc == 0, r.err
    [again] = r.json
    assert len(wire.dry_runs()) == 2 and abs(again["link_mb_s"] - res["link_mb_s"]) <= 0.1
    assert again["files_compressed"] >= 2 and on_device_matches_manifest(dev, (dev.tmp / "llama.cpp").resolve()) > 4


@pytest.mark.parametrize("kind", ["adb://", "adb+ssh://", "adb+tcp://"])
def test_every_adb_kind_sends_zstd_the_same_way(wire_device, adb_server, sshd_host, kind):
    dev, wire = wire_device()
    spec = {"adb://": f"adb://127.0.0.1:{adb_server.port}/{wire.serial}",
            "adb+ssh://": f"adb+ssh://root@127.0.0.1:{sshd_host.port}/{wire.serial}",
            "adb+tcp://": f"adb+tcp://127.0.0.1:{wire.port}"}[kind]
    lib = real_lib("libstdc++.so.6")
    with target(spec, **sshd_host.settings) as t:
        assert t.send_file(lib, "/data/local/tmp/lib.so").compressed
    [send] = wire.file_sends()
    assert (send.version, send.flags) == (2, 4) and send.data_bytes < 0.6 * lib.stat().st_size
    assert sha(dev.tmp / "lib.so") == sha(lib)


def test_ssh_board_with_zstd_gets_a_zstd_stream_for_large_files_and_sftp_for_small_ones(sshd_host, tmp_path):
    """sshd_host's userland (this machine's) has zstd; the virtual board (test_board.py) has
    not, and gets SFTP."""
    from hexbuild.targets.wire import MIN_SIZE, ZSTD_LEVEL

    lib = real_lib("libasan.so.8")
    with target(f"ssh://root@127.0.0.1:{sshd_host.port}", **sshd_host.settings) as t:
        policy = t.wire()
        assert policy.zstd
        # one remote command per zstd file: a file smaller than the command's cost in saved
        # time (8 ms per MB) goes by SFTP; here a command takes tenths of a second
        assert policy.min_size > MIN_SIZE and policy.choose(lib).reason == "raw:small"
        got: list[tuple[int, int | None]] = []
        sent = t.send_file(lib, str(tmp_path / "sftp" / "libasan.so"))
        assert not sent.compressed and sent.wire_bytes == lib.stat().st_size
        policy.min_size = MIN_SIZE  # as on a board that starts a command in a few ms
        assert policy.choose(lib).level == ZSTD_LEVEL
        sent = t.send_file(lib, str(tmp_path / "zstd" / "libasan.so"), lambda n, w=None: got.append((n, w)))
    assert sent.compressed and sent.wire_bytes < 0.6 * lib.stat().st_size
    assert sum(n for n, _ in got) == lib.stat().st_size and sum(w for _, w in got) == sent.wire_bytes
    assert sha(tmp_path / "zstd" / "libasan.so") == sha(tmp_path / "sftp" / "libasan.so") == sha(lib)


def test_a_library_and_its_symlinked_names_travel_once(wire_device, pkg, cli):
    dev, wire = wire_device()
    lib = pkg / "lib" / "libstdc++.so.6"
    lib.rename(pkg / "lib" / "libstdc++.so.6.0.30")
    (pkg / "lib" / "libstdc++.so.6").symlink_to("libstdc++.so.6.0.30")
    (pkg / "lib" / "libstdc++.so").symlink_to("libstdc++.so.6")
    r = cli("deploy", str(pkg), "--target", f"adb:{wire.serial}", "--dest", DEST, "--json")
    assert r.rc == 0, r.err
    sends = [s.path.rsplit("/", 1)[1] for s in wire.file_sends() if "libstdc++" in s.path]
    assert sends == ["libstdc++.so"]  # the first name; the others are hard links to it
    release = (dev.tmp / "llama.cpp").resolve()
    names = [release / "lib" / n for n in ("libstdc++.so", "libstdc++.so.6", "libstdc++.so.6.0.30")]
    assert {sha(n) for n in names} == {sha(pkg / "lib" / "libstdc++.so.6.0.30")}
    assert len({n.stat().st_ino for n in names}) == 1
    assert on_device_matches_manifest(dev, release) == r.json[0]["files_total"]


def test_a_zstd_push_that_the_board_cannot_write_fails_in_one_line(sshd_host):
    from hexbuild.errors import RemoteFailed

    from hexbuild.targets.wire import MIN_SIZE

    with target(f"ssh://root@127.0.0.1:{sshd_host.port}", **sshd_host.settings) as t:
        t.wire().min_size = MIN_SIZE
        with pytest.raises(RemoteFailed) as e:
            t.send_file(real_lib("libstdc++.so.6"), "/proc/hexbuild-none/lib.so")
    assert "sending /proc/hexbuild-none/lib.so failed: mkdir" in e.value.message and "\n" not in e.value.message


def test_frames_are_compressed_ahead_in_order_and_a_failure_reaches_the_reader(tmp_path):
    """adbsync.Ahead: each zstd upload's frame, whole and in order, raw uploads left to the reader;
    the compressing thread's error is raised where the frames are read, and a reader that stops
    early stops the thread."""
    import threading

    import zstandard

    from hexbuild.targets.adbsync import Ahead, Upload

    files = []
    for i, size in enumerate((3 << 20, 100_000, 5 << 20)):
        p = tmp_path / f"f{i}"
        p.write_bytes((b"hexbuild %d " % i) * (size // 11) + os.urandom(1000))
        files.append(p)
    ups = [Upload(files[0], "/a", zstd_level=1), Upload(files[1], "/b"), Upload(files[2], "/c", zstd_level=3)]
    got = []
    with Ahead(ups) as ahead:
        for up, frame in ahead:
            data = None if frame is None else b"".join(b"".join(pieces) for _, pieces in frame)
            got.append((up.remote, data))
    assert [r for r, _ in got] == ["/a", "/b", "/c"] and got[1][1] is None
    for (remote, data), path in ((got[0], files[0]), (got[2], files[2])):
        assert zstandard.ZstdDecompressor().decompress(data) == path.read_bytes(), remote

    gone = tmp_path / "gone"
    with pytest.raises(FileNotFoundError):
        with Ahead([Upload(files[0], "/a", zstd_level=1), Upload(gone, "/x", zstd_level=1)]) as ahead:
            for _, frame in ahead:
                for _ in frame:
                    pass

    before = threading.active_count()
    many = [Upload(files[2], f"/{i}", zstd_level=1) for i in range(50)]
    with Ahead(many) as ahead:
        up, frame = next(iter(ahead))
        next(frame)  # the reader stops here: the link broke
    assert threading.active_count() == before
