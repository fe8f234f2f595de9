"""The hash cache (hexbuild/artifacts/hashcache.py): a build's manifest leaves its hashes for the
deploy that follows, and a file modified within a timestamp tick of its hashing is never kept."""

from __future__ import annotations

import hashlib
import json
import os
import time
from types import SimpleNamespace

import pytest

from hexbuild.artifacts import hashcache, write_manifest
from hexbuild.artifacts.hashcache import HashCache
from hexbuild.deploy import load_package
from tests import elf_factory as ef


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture
def hashed(monkeypatch):
    """The files sha256_file reads, in order."""
    seen: list[str] = []
    real = hashcache.sha256_file

    def counting(path):
        seen.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(hashcache, "sha256_file", counting)
    return seen


def test_a_deploy_after_a_build_reads_the_hashes_its_manifest_took(tmp_path, hashed):
    pkg = ef.make_package(tmp_path / "build", os="android", htp=["v73"])
    time.sleep(HashCache.RACY_FINE_S + 0.05)  # as a build's verify step leaves between install and manifest
    written = write_manifest(pkg, {"os": "android"})
    assert len(hashed) == len({str((pkg / f["path"]).resolve()) for f in written["files"]}) > 3
    hashed.clear()
    loaded = load_package(pkg)
    try:
        digests = {rel: f.sha256 for rel, f in loaded.files.items()}
    finally:
        loaded.close()
    assert hashed == []  # not one file read again
    assert digests == {f["path"]: f["sha256"] for f in written["files"]}
    for rel, digest in digests.items():
        assert hashlib.sha256((pkg / rel).read_bytes()).hexdigest() == digest


def test_a_file_written_within_a_tick_of_its_hashing_is_hashed_again(tmp_path, hashed, monkeypatch):
    from hexbuild.artifacts import hashcache

    pkg = ef.make_package(tmp_path / "build", os="android", htp=["v73"])
    time.sleep(HashCache.RACY_FINE_S + 0.05)
    lib = pkg / "lib" / "libggml-cpu.so"
    lib.write_bytes(lib.read_bytes()[::-1])  # rewritten just before the manifest: racy
    written = lib.stat().st_ctime_ns

    def clock_at(ns: int) -> None:  # the hash cache's clock, whatever this machine's load
        monkeypatch.setattr(hashcache, "time", SimpleNamespace(time_ns=lambda: ns))

    clock_at(written + 50_000_000)  # the manifest 50 ms after the rewrite
    write_manifest(pkg, {"os": "android"})
    hashed.clear()
    with HashCache() as cache:
        cache.many([p for p in sorted((pkg / "lib").iterdir()) if p.is_file() and not p.is_symlink()])
    assert hashed == ["libggml-cpu.so"]  # the others were a tick old when the manifest hashed them
    cache_file = tmp_path / "xdg-cache" / "hexbuild" / "sha256.json"
    assert str(lib.resolve()) not in json.loads(cache_file.read_text())
    clock_at(written + 150_000_000)  # a tick later
    with HashCache() as cache:
        assert cache.one(lib)[1] == hashlib.sha256(lib.read_bytes()).hexdigest()
    assert str(lib.resolve()) in json.loads(cache_file.read_text())  # kept now


def test_the_tick_is_a_tenth_of_a_second_where_ctime_has_finer_parts_else_two_seconds():
    cache = HashCache()
    s = 1_800_000_000 * 10**9
    fine, whole = s + 123_456_789, s
    assert cache._racy([1, fine, fine, 7], fine + 50_000_000)
    assert not cache._racy([1, fine, fine, 7], fine + 150_000_000)
    assert cache._racy([1, whole, whole, 7], whole + 1_500_000_000)  # a filesystem of whole seconds
    assert not cache._racy([1, whole, whole, 7], whole + 2_500_000_000)
    # a tarball's whole-second mtime on a fine filesystem: the ctime says which
    assert not cache._racy([1, whole - 10**9, fine, 7], fine + 150_000_000)


def test_a_packages_hashes_are_read_before_the_cache_file_is_written(tmp_path, monkeypatch):
    """A deploy plans as soon as the hashes are known; merging and writing the cache file (tens
    of ms for a user's cache of thousands of files) goes on beside it, and is over at close()."""
    import threading

    pkg = ef.make_package(tmp_path / "build", os="android", htp=["v73"])
    time.sleep(HashCache.RACY_FINE_S + 0.05)  # old enough for their hashes to be kept
    saving, release = threading.Event(), threading.Event()
    real_save = HashCache.save

    def held_save(self):
        saving.set()
        assert release.wait(10), "the hashes were not read before the save went on"
        real_save(self)

    monkeypatch.setattr(HashCache, "save", held_save)
    loaded = load_package(pkg)
    try:
        assert saving.wait(30)
        digests = {rel: f.sha256 for rel, f in loaded.files.items()}  # while the save is held
        assert not (tmp_path / "xdg-cache" / "hexbuild" / "sha256.json").exists()
        release.set()
    finally:
        release.set()
        loaded.close()
    assert (tmp_path / "xdg-cache" / "hexbuild" / "sha256.json").exists()  # close() waited for it
    assert digests == {rel: hashlib.sha256((pkg / rel).resolve().read_bytes()).hexdigest() for rel in digests}
