"""Pulling the toolchain image from a real registry (tests/infra/registry.py: docker-registry on
loopback) into the real test engine, through hexbuild's own pull code and its CLI.

Small images made here (a few random layers, so every pull really downloads) cover the pull
mechanics; the fixture toolchain image, with one layer of its own on top, goes through the
registry once, for a build that runs on what was pulled (pushing its 650 MB base is most of
this file's time)."""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from hexbuild.errors import EnvironmentMissing
from hexbuild.toolchain.engine import DockerEngine
from tests.infra.registry import load_image, push
from tests.test_build import containers, fixture_copy, hexbuild, result_json

pytestmark = pytest.mark.docker


@dataclass
class Published:
    ref: str            # REGISTRY/REPO:TAG
    repo: str           # REGISTRY/REPO
    path: str           # REPO, as the registry's API names it
    digest: str         # the manifest digest the registry answered the push with
    layers: list[str]   # the layers' blob digests, in manifest order

    @property
    def pinned(self) -> str:
        return f"{self.repo}@{self.digest}"

    def short_ids(self) -> list[str]:
        """The layers as the engine's pull events name them."""
        return sorted(d.split(":", 1)[1][:12] for d in self.layers)


@pytest.fixture
def publish(docker_client, registry):
    """publish(name, arch=...) → an image that only the registry has: made and pushed here,
    then removed from the engine. Whatever the test pulled of it is removed afterwards."""
    made: list[Published] = []

    def make(name: str, *, arch: str = "amd64", sizes: tuple[int, ...] = (1_500_000, 60_000)) -> Published:
        path = f"snapdragon-test/{name}-{os.getpid()}"
        ref = f"{registry}/{path}:v1"
        image_id = load_image(docker_client, f"hexbuild.test/pull/{name}:v1",
                              [{f"layer{i}/data": os.urandom(n)} for i, n in enumerate(sizes)], arch=arch)
        digest = push(docker_client, image_id, ref)
        manifest, served = registry.manifest(path, "v1")
        assert served == digest
        docker_client.images.remove(image_id, force=True)
        pub = Published(ref=ref, repo=f"{registry}/{path}", path=path, digest=digest,
                        layers=[layer["digest"] for layer in manifest["layers"]])
        made.append(pub)
        return pub

    yield make
    import docker.errors

    for pub in made:
        for ref in (pub.ref, pub.pinned):
            try:
                docker_client.images.remove(ref, force=True)
            except docker.errors.ImageNotFound:
                pass


@pytest.fixture
def engine(docker_host):
    e = DockerEngine.connect(docker_host)
    yield e
    e.close()


def _lines(stderr: str) -> list[str]:
    """stderr's lines without the timestamps CI adds to them."""
    return [re.sub(r"^\[\d\d:\d\d:\d\d\] ", "", line) for line in stderr.splitlines()]


def _errors(stderr: str) -> list[str]:
    return [line for line in _lines(stderr) if line.startswith("hexbuild: error:")]


def _asked_for(requests: list[str], path: str) -> bool:
    """The engine checks a manifest with HEAD when it may already have it, else GETs it."""
    return f"HEAD {path}" in requests or f"GET {path}" in requests


def _layers_done(stderr: str) -> list[str]:
    """The layers the plain (no TTY) progress saw to the end: one ``layer ID: 100%`` line each."""
    return sorted(m.group(1) for line in _lines(stderr) if (m := re.fullmatch(r"layer ([0-9a-f]{12}): 100%", line)))


# -- the engine's pull, on small images --------------------------------------------------------------
def test_pull_tracks_each_layer_and_records_the_registry_digest(engine, publish, registry, capsys):
    pub = publish("layers", sizes=(3_000_000, 400_000, 20_000))
    capsys.readouterr()
    img = engine.ensure_image(pub.ref, "missing")
    err = capsys.readouterr().err
    assert img.pulled and (img.os, img.arch) == ("linux", "amd64")
    assert img.digest == pub.pinned  # what the registry answered the push with, as RepoDigests names it
    assert f"pulling {pub.ref} (linux/amd64)" in err
    assert _layers_done(err) == pub.short_ids()

    # present now: --pull missing asks the registry nothing
    mark = registry.mark()
    again = engine.ensure_image(pub.ref, "missing")
    assert not again.pulled and again.digest == pub.pinned and again.id == img.id
    assert "pulling" not in capsys.readouterr().err
    assert registry.requests(since=mark) == []

    # --pull always asks again, and finds the image up to date
    assert engine.ensure_image(pub.ref, "always").pulled
    assert _asked_for(registry.requests(since=mark), f"/v2/{pub.path}/manifests/v1")


def test_digest_pinned_pull_and_a_digest_the_registry_lacks(engine, publish, registry):
    pub = publish("pinned")
    img = engine.ensure_image(pub.pinned, "missing")
    assert img.pulled and img.digest == pub.pinned and img.reference == pub.pinned
    mark = registry.mark()
    assert not engine.ensure_image(pub.pinned, "missing").pulled
    assert registry.requests(since=mark) == []

    wrong = f"{pub.repo}@sha256:{'0' * 64}"
    with pytest.raises(EnvironmentMissing) as e:
        engine.ensure_image(wrong, "missing")
    assert wrong in e.value.message and "manifest unknown" in e.value.message
    assert "\n" not in e.value.message


def test_pull_always_that_fails_does_not_use_the_engines_copy(engine, publish, registry, docker_client):
    """--pull always means this run gets what the registry has now: when that pull fails, the
    older copy the engine has is not used, and the error says the engine has one."""
    old = publish("moved")
    first = engine.ensure_image(old.ref, "missing")
    new = publish("moved")  # the tag moves on in the registry, to an image whose layer is damaged
    blob = registry.blob_path(new.layers[0])
    blob.write_bytes(os.urandom(blob.stat().st_size))
    docker_client.api.tag(first.id, old.repo, "v1")  # the engine still has the old image under the tag
    with pytest.raises(EnvironmentMissing) as e:
        engine.ensure_image(old.ref, "always")
    assert e.value.message == (f"image {old.ref} is on the Docker engine, but --pull always needs a fresh pull and "
                               f"pulling it failed: filesystem layer verification failed for digest {new.layers[0]}")
    assert "--pull missing" in e.value.hint
    kept = engine.ensure_image(old.ref, "missing")
    assert kept.id == first.id and not kept.pulled


# -- the same through hexbuild build -------------------------------------------------------------------
def test_pull_never_with_the_image_only_in_the_registry_is_exit_3(tmp_path, docker_host, docker_client, publish,
                                                                   registry):
    pub = publish("never")
    src = fixture_copy(tmp_path)
    mark = registry.mark()
    cp = hexbuild("build", "-s", str(src), "--image", pub.ref, "--pull", "never", docker_host=docker_host)
    assert cp.returncode == 3, cp.stderr
    assert _errors(cp.stderr) == [f"hexbuild: error: image {pub.ref} is not on the Docker engine and "
                                  "--pull never forbids pulling it"]
    assert registry.requests(since=mark) == [] and not docker_client.images.list(name=pub.repo)
    assert not (src / "build-snapdragon").exists() and not containers(docker_client)


def test_wrong_digest_is_exit_3_in_one_line(tmp_path, docker_host, docker_client, publish):
    pub = publish("wrongdigest")
    src = fixture_copy(tmp_path)
    wrong = f"{pub.repo}@sha256:{'e' * 64}"
    cp = hexbuild("build", "-s", str(src), "--image", wrong, "--json", docker_host=docker_host)
    assert cp.returncode == 3, cp.stderr
    err = result_json(cp)["error"]
    assert wrong in err["message"] and "pulling it failed" in err["message"] and "\n" not in err["message"]
    assert len(_errors(cp.stderr)) == 1 and "Traceback" not in cp.stderr
    assert not containers(docker_client)


def test_error_inside_the_pull_stream_stops_the_build_before_any_container(tmp_path, docker_host, docker_client,
                                                                           publish, registry):
    """The registry answers, the engine starts streaming (HTTP 200), and a layer's bytes turn out
    not to be the layer: the engine reports that as an ``error`` event inside the stream."""
    pub = publish("corrupt")
    blob = registry.blob_path(pub.layers[0])
    blob.write_bytes(os.urandom(blob.stat().st_size))
    src = fixture_copy(tmp_path)
    expected = (f"image {pub.ref} is not on the Docker engine and pulling it failed: "
                f"filesystem layer verification failed for digest {pub.layers[0]}")
    cp = hexbuild("build", "-s", str(src), "--image", pub.ref, "--pull", "always", "--json", docker_host=docker_host)
    assert cp.returncode == 3, cp.stderr
    assert result_json(cp)["error"]["message"] == expected
    assert _errors(cp.stderr) == [f"hexbuild: error: {expected}"] and "Traceback" not in cp.stderr
    assert not containers(docker_client) and not docker_client.images.list(name=pub.repo)
    assert not (src / "build-snapdragon").exists()

    # with -v: the stream's first event was shown before the error (-v adds the traceback too)
    cp = hexbuild("build", "-s", str(src), "--image", pub.ref, "--pull", "always", "-v", docker_host=docker_host)
    assert cp.returncode == 3
    lines = _lines(cp.stderr)
    assert lines.index(f"Pulling from {pub.path}") < lines.index(f"hexbuild: error: {expected}")
    assert "+ docker run" not in cp.stderr and not containers(docker_client)


def test_an_arm64_image_from_the_registry_is_refused(tmp_path, docker_host, docker_client, publish):
    pub = publish("arm64", arch="arm64", sizes=(10_000,))
    src = fixture_copy(tmp_path)
    cp = hexbuild("build", "-s", str(src), "--image", pub.ref, "--json", docker_host=docker_host)
    assert cp.returncode == 3, cp.stderr
    assert result_json(cp)["error"]["message"] == f"image {pub.ref} is linux/arm64; the toolchain needs linux/amd64"
    assert len(_errors(cp.stderr)) == 1 and not containers(docker_client)
    assert not (src / "build-snapdragon").exists()


# -- the toolchain image through the registry, and a build on it ------------------------------------
@pytest.fixture
def registry_toolchain(docker_client, toolchain_registry, toolchain_images):
    """The fixture toolchain image with one layer of its own on top, pushed to the registry under
    the vendor's repository name and removed from the engine again: a pull downloads that layer
    and finds the others on the engine (they are the local toolchain image's)."""
    import docker.errors

    path = "snapdragon-toolchain/arm64-android"
    registry = toolchain_registry
    ref = f"{registry}/{path}:v0.7"
    dockerfile = (f"FROM {toolchain_images['android']}\n"
                  "RUN head -c 300000 /dev/urandom > /opt/hexbuild-pull-test\n")
    image, _ = docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), network_mode="none", rm=True,
                                          forcerm=True, pull=False, nocache=True)
    try:
        digest = push(docker_client, image.id, ref)
    finally:
        docker_client.images.remove(image.id, force=True)
    manifest, _ = registry.manifest(path, "v0.7")
    tc = Published(ref=ref, repo=f"{registry}/{path}", path=path, digest=digest,
                   layers=[layer["digest"] for layer in manifest["layers"]])
    yield tc
    for r in (tc.ref, tc.pinned):
        try:
            docker_client.images.remove(r, force=True)
        except docker.errors.ImageNotFound:
            pass


def test_build_on_a_pulled_toolchain_records_the_registry_digest(tmp_path, docker_host, docker_client,
                                                                  registry_toolchain, toolchain_registry):
    tc, registry = registry_toolchain, toolchain_registry
    src = fixture_copy(tmp_path)
    cp = hexbuild("build", "-s", str(src), "--image", tc.ref, "--pull", "always", "--user", "1000:1000", "--json",
                  docker_host=docker_host)
    assert cp.returncode == 0, cp.stderr
    data = result_json(cp)
    assert data["image"] == tc.ref and data["digest"] == tc.pinned and data["verify"]["ok"]
    assert f"pulling {tc.ref} (linux/amd64)" in cp.stderr
    assert _layers_done(cp.stderr) == tc.short_ids()  # downloaded, or found on the engine: each one seen
    manifest = json.loads((Path(data["package"]) / "manifest.json").read_text())
    assert manifest["image"] == {"reference": tc.ref, "digest": tc.pinned}
    assert docker_client.containers.run(tc.ref, ["test", "-s", "/opt/hexbuild-pull-test"], remove=True,
                                        network_mode="none") == b""  # the pulled layer is in the image

    # pinned to that digest, the image is there: no pull, the same digest recorded
    mark = registry.mark()
    cp = hexbuild("build", "-s", str(src), "--image", tc.pinned, "--pull", "missing", "--user", "1000:1000",
                  "--json", docker_host=docker_host)
    assert cp.returncode == 0, cp.stderr
    data = result_json(cp)
    assert data["image"] == tc.pinned and data["digest"] == tc.pinned
    assert "pulling" not in cp.stderr and registry.requests(since=mark) == []
    assert not containers(docker_client)


def test_a_registry_that_does_not_start_names_its_address(tmp_path):
    """The test infrastructure's own error: the address it was asked for, and the log's end."""
    from tests.infra.registry import RegistryError, start_registry

    with pytest.raises(RegistryError, match=r"did not answer on 256\.0\.0\.1:5000 within 5s"):
        start_registry(tmp_path, timeout=5, address="256.0.0.1:5000")
