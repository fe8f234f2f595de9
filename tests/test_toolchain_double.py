"""The toolchain double's SDK headers are hexbuild's own (tests/infra/toolchain_double.py): one copy,
hexbuild/dsp/include, placed where the vendor's SDK keeps each header, in the image (through the
build context it is built from) and in the SDK laid out for --engine local; a change to one of
them rebuilds the image."""

from __future__ import annotations

import hashlib
import shutil

from tests.infra import toolchain_double
from tests.infra.toolchain_double import FIXTURE, HEADERS, build_context, context_hash, fixture_tree, header_places

IN_IMAGE = {"hexagon-sdk": "/opt/hexagon/6.6.0.0",  # where the Dockerfile copies the fixture's two trees
            "hexagon-tools": "/opt/hexagon/6.6.0.0/tools/HEXAGON_Tools/21.1.8/Tools"}


def opening_comment_off(text: str) -> str:
    return text.split("*/", 1)[1]


def test_every_header_has_its_place_in_the_sdk(tmp_path):
    places = header_places()
    assert sorted(places.values()) == sorted(HEADERS.rglob("*.h"))  # each of them, once
    # where the vendor's SDK keeps them: incs/ (hexagon_fun.cmake's include path), QuRT's tree,
    # the Hexagon tools' target headers (the driver's own)
    assert places["hexagon-sdk/incs/remote.h"] == HEADERS / "remote.h"
    assert places["hexagon-sdk/rtos/qurt/compute/include/qurt/qurt.h"] == HEADERS / "qurt" / "qurt.h"
    assert places["hexagon-tools/target/hexagon/include/string.h"] == HEADERS / "string.h"
    tree = fixture_tree(tmp_path / "fixture")
    for rel, src in places.items():
        if (FIXTURE / rel).exists():  # the double's own: it must differ by more than its first comment
            assert (tree / rel).read_bytes() == (FIXTURE / rel).read_bytes()
            assert opening_comment_off((FIXTURE / rel).read_text()) != opening_comment_off(src.read_text()), rel
        else:
            assert (tree / rel).read_bytes() == src.read_bytes(), rel


def test_a_changed_header_changes_the_context_hash(tmp_path, monkeypatch):
    headers = tmp_path / "include"
    shutil.copytree(HEADERS, headers)
    monkeypatch.setattr(toolchain_double, "HEADERS", headers)
    before = context_hash(build_context(tmp_path / "before"), "base")
    assert context_hash(build_context(tmp_path / "again"), "base") == before
    (headers / "qurt" / "qurt_hvx.h").write_text((headers / "qurt" / "qurt_hvx.h").read_text() + "/* changed */\n")
    assert context_hash(build_context(tmp_path / "after"), "base") != before


def test_the_image_carries_the_headers(docker_client, toolchain_images):
    places = header_places()
    paths = {}
    for rel in places:
        top, _, rest = rel.partition("/")
        paths[f"{IN_IMAGE[top]}/{rest}"] = rel
    out = docker_client.containers.run(toolchain_images["linux"], ["sha256sum", *paths], network_mode="none",
                                       remove=True).decode()
    got = {path: digest for digest, path in (line.split() for line in out.splitlines())}
    for path, rel in paths.items():
        src = FIXTURE / rel if (FIXTURE / rel).exists() else places[rel]  # the double's own, if it has one
        assert got[path] == hashlib.sha256(src.read_bytes()).hexdigest(), path
