"""hexbuild/toolchain/probe_cache.py: a local engine's /info facts remembered per daemon
instance, against the real test engine; a restart (a new socket file) or another /version
answer means asking again."""

import json
import os

import pytest

from hexbuild.toolchain import probe_cache
from hexbuild.toolchain.engine import DockerEngine


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "hexbuild" / "engines.json"


def test_the_second_connection_uses_what_the_first_learned(docker_host, own_cache):
    first = DockerEngine.connect(docker_host)
    first.close()
    data = json.loads(own_cache.read_text())
    (key, entry), = data.items()
    assert key == probe_cache.socket_key(docker_host) and entry["engine"] == first.info.to_json()
    assert own_cache.stat().st_mode & 0o777 == 0o600
    # a planted fact shows that the next connection reads the cache instead of /info
    entry["engine"]["ncpu"] = 999
    own_cache.write_text(json.dumps(data))
    second = DockerEngine.connect(docker_host)
    second.close()
    assert second.info.ncpu == 999 and second.info.version == first.info.version
    # another /version answer (an upgraded daemon) asks /info again and replaces the entry
    entry["version_digest"] = "0" * 64
    own_cache.write_text(json.dumps(data))
    third = DockerEngine.connect(docker_host)
    third.close()
    assert third.info.ncpu == first.info.ncpu != 999
    assert json.loads(own_cache.read_text())[key]["engine"]["ncpu"] == first.info.ncpu


def test_an_entry_of_another_shape_is_a_miss(docker_host, own_cache):
    """What an older or newer hexbuild remembered (a field EngineInfo no longer has, or none of
    the version digest) is asked for again, not a crash on every connection."""
    first = DockerEngine.connect(docker_host)
    first.close()
    data = json.loads(own_cache.read_text())
    (key, entry), = data.items()
    entry["engine"]["a_field_from_another_version"] = 1
    own_cache.write_text(json.dumps(data))
    second = DockerEngine.connect(docker_host)
    second.close()
    assert second.info == first.info
    del data[key]["version_digest"]
    own_cache.write_text(json.dumps(data))
    third = DockerEngine.connect(docker_host)
    third.close()
    assert third.info == first.info
    assert json.loads(own_cache.read_text())[key]["engine"] == first.info.to_json()  # rewritten whole


def test_a_restarted_daemon_is_a_new_key(tmp_path):
    import socket

    path = tmp_path / "d.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    before = probe_cache.socket_key(f"unix://{path}")
    s.close()
    os.unlink(path)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    try:
        assert probe_cache.socket_key(f"unix://{path}") != before
    finally:
        s.close()
    assert probe_cache.socket_key("tcp://127.0.0.1:2375") is None  # only local sockets are remembered
    assert probe_cache.socket_key(f"unix://{tmp_path}/missing.sock") is None
