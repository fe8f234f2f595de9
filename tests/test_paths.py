"""hexbuild/paths.py's atomic_write: a reader sees the old file or the new one, and no part is
left behind whatever interrupts it (a serve stop's SIGTERM reaches a starting supervisor as
KeyboardInterrupt, at any point of a record's write)."""

import os
import stat

import pytest

from hexbuild import paths


def parts(d):
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".part"))


def test_writes_replaces_and_sets_the_mode(tmp_path):
    target = tmp_path / "sub" / "rec.json"
    paths.atomic_write(target, "one")
    assert target.read_text() == "one" and stat.S_IMODE(target.stat().st_mode) == 0o600
    paths.atomic_write(target, b"two", mode=0o644)
    assert target.read_bytes() == b"two" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert parts(target.parent) == []


@pytest.mark.parametrize("where", ["open", "fdopen", "chmod", "replace"])
def test_an_interruption_at_any_step_leaves_the_old_file_and_no_part(tmp_path, monkeypatch, where):
    target = tmp_path / "rec.json"
    target.write_text("old")
    real = getattr(os, where)

    def interrupted(*a, **kw):
        if where == "open":
            real(*a, **kw)  # the part exists: the moment mkstemp's return used to lose it
        raise KeyboardInterrupt

    monkeypatch.setattr(paths.os, where, interrupted)
    with pytest.raises(KeyboardInterrupt):
        paths.atomic_write(target, "new", mode=0o644)
    monkeypatch.undo()
    assert target.read_text() == "old" and parts(tmp_path) == []


def test_another_writers_part_is_not_removed(tmp_path, monkeypatch):
    target = tmp_path / "rec.json"
    monkeypatch.setattr(paths.os, "urandom", lambda n: b"\0" * n)
    theirs = tmp_path / f".rec.json.{'00' * 6}.part"
    theirs.write_text("theirs")
    with pytest.raises(FileExistsError):
        paths.atomic_write(target, "mine")
    assert theirs.read_text() == "theirs" and not target.exists()
