"""Targets against the real thing: the adb client/server with real adbd phones, real sshd,
this machine's shell. The target grammar and the SoC table are checked as data."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hexbuild.errors import EnvironmentMissing, RemoteFailed, UsageError
from hexbuild.targets import parse_target, socs
from hexbuild.targets.adb import AdbTarget
from hexbuild.targets.adbproto import parse_devices_l
from hexbuild.targets.adbssh import AdbSshTarget
from hexbuild.targets.adbtcp import AdbTcpTarget
from hexbuild.targets.local import LocalTarget
from hexbuild.targets.qemu import QemuTarget
from hexbuild.targets.posix import parse_df_available, shell_command
from hexbuild.targets.ssh import SshTarget

NASTY = ["plain", "with space", "it's", 'say "hi"', "$(touch /tmp/pwned)", "`id`", "a;b", "x && y", "line1\nline2",
         "tab\there", "naïve ünïcödé ✓", "*", "~", "-n", "", "\\", "$HOME", "'", "%s%d"]


# -- grammar ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, cls, attrs", [
    ("adb", AdbTarget, {"serial": None}),
    ("adb:R5CT1234ABC", AdbTarget, {"serial": "R5CT1234ABC"}),
    ("adb:127.0.0.1:6123", AdbTarget, {"serial": "127.0.0.1:6123"}),
    ("adb://10.0.0.5:5037/R5CT1234ABC", AdbTarget, {"serial": "R5CT1234ABC"}),
    ("adb://lab-host", AdbTarget, {"serial": None}),
    ("adb+ssh://me@lab-host:2222/R5CT", AdbSshTarget, {"serial": "R5CT"}),
    ("adb+ssh://lab-host", AdbSshTarget, {"serial": None}),
    ("ssh://root@rb3gen2.local:22", SshTarget, {}),
    ("ssh://board", SshTarget, {}),
    ("local:/tmp/llama.cpp", LocalTarget, {"root": "/tmp/llama.cpp"}),
    ("adb+tcp://192.168.1.42", AdbTcpTarget, {"serial": "192.168.1.42:5555"}),
    ("adb+tcp://[fe80::1]:37099", AdbTcpTarget, {"serial": "[fe80::1]:37099"}),
    ("qemu:/tmp/q", QemuTarget, {"root": "/tmp/q"}),
])
def test_target_grammar_accepts_every_documented_form(spec, cls, attrs):
    t = parse_target(spec, None)
    assert isinstance(t, cls) and t.spec == spec
    for k, v in attrs.items():
        assert getattr(t, k) == v


def test_target_grammar_reads_user_host_and_port():
    t = parse_target("adb+ssh://me@lab-host:2222/R5CT", None)
    assert (t.session.user, t.session.host, t.session.port) == ("me", "lab-host", 2222)
    remote = parse_target("adb://10.0.0.5:6000/X", None)
    assert remote.server == "the adb server at 10.0.0.5:6000"
    assert parse_target("adb://10.0.0.5", None).server == "the adb server at 10.0.0.5:5037"


@pytest.mark.parametrize("spec, example", [
    ("adb:", "adb:R5CT1234ABC"),
    ("adb://", "adb://192.168.1.20:5037/R5CT1234ABC"),
    ("adb://:5037", "adb://192.168.1.20:5037/R5CT1234ABC"),
    ("adb://host:notaport", "adb://192.168.1.20:5037/R5CT1234ABC"),
    ("adb://host:70000", "adb://192.168.1.20:5037/R5CT1234ABC"),
    ("adb://user@host/X", "adb://192.168.1.20:5037/R5CT1234ABC"),
    ("adb://host/a/b", "adb://192.168.1.20:5037/R5CT1234ABC"),
    ("adb+ssh://", "adb+ssh://me@lab-host/R5CT1234ABC"),
    ("adb+ssh://me:secret@host", "adb+ssh://me@lab-host/R5CT1234ABC"),
    ("ssh://host/some/dir", "ssh://root@rb3gen2.local:22"),
    ("ssh://host?x=1", "ssh://root@rb3gen2.local:22"),
    ("ssh:host", "ssh://root@rb3gen2.local:22"),
    ("local:", "local:/tmp/llama.cpp"),
    ("local", "local:/tmp/llama.cpp"),
    ("qemu:", "qemu:/tmp/llama.cpp"),
    ("adb+tcp://phone/R5CT", "adb+tcp://192.168.1.42:5555"),
    ("adb+tcp:phone", "adb+tcp://192.168.1.42:5555"),
])
def test_malformed_targets_are_usage_errors_with_an_example(spec, example):
    with pytest.raises(UsageError) as e:
        parse_target(spec, None)
    assert "malformed target" in e.value.message and example in e.value.message


@pytest.mark.parametrize("spec", ["", "   ", "ftp://host", "phone", "usb:1234", "adb\nrm"])
def test_unknown_targets_list_the_forms(spec):
    with pytest.raises(UsageError) as e:
        parse_target(spec, None)
    assert "adb:SERIAL" in e.value.message or "control characters" in e.value.message


def test_every_registered_kind_is_one_module_that_declares_itself():
    """The registry's scheme is the one its module declares, the example of each kind makes a
    target of that kind with its declared caps, and --target's help names every form."""
    from hexbuild.cli.deploy import TARGET_FORMS
    from hexbuild.targets import registry

    kinds = registry.all_kinds()
    assert [k.scheme for k in kinds] == [scheme for scheme, _ in registry.REGISTRY]
    for k in kinds:
        t = parse_target(k.example, None)
        assert registry.find(k.example) is k and t.caps == k.caps, k
    assert {f.strip() for f in TARGET_FORMS.split("|")} == {f for k in kinds for f in k.form.split(" or ")}


def test_parsing_a_spec_imports_only_its_kind(tmp_path):
    """The registry repeats each scheme so a `run --print` on qemu: never loads sockets or SSH."""
    code = ("import sys; from hexbuild.targets import parse_target; parse_target('qemu:/tmp/x'); "
            "print(sorted(m for m in sys.modules if m.startswith('hexbuild.targets.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = eval(out)
    assert "hexbuild.targets.qemu" in loaded
    assert not {"hexbuild.targets.ssh", "hexbuild.targets.sshsession", "hexbuild.targets.adbproto",
                "hexbuild.targets.adbssh"} & set(loaded), loaded


def test_soc_table_is_data_and_unknown_stays_unknown():
    assert socs.htp_arch("SM8650") == "v75"
    assert socs.htp_arch("sm8550") == "v73"
    assert socs.htp_arch("SM8750") == "v79"
    assert socs.htp_arch("SM8850") == "v81"
    assert socs.htp_arch("", "pineapple") == "v75"
    assert socs.htp_arch(None, "kalama") == "v73"
    assert socs.htp_arch("SM7450", "taro") is None
    assert socs.htp_arch(None, None) is None
    assert all(s.source for s in socs.table().values())


def test_shell_command_quotes_every_argument():
    cmd = shell_command(["printf", "%s\\n", "$(id)"], {"A_B": "x y"}, "/data/local/tmp/my dir")
    assert cmd == "cd '/data/local/tmp/my dir' && A_B='x y' 'printf' '%s\\n' '$(id)'"
    # a program name is never an assignment or a keyword
    assert shell_command(["A=B", "x"]) == "'A=B' x" and shell_command(["if"]) == "'if'"
    with pytest.raises(UsageError):
        shell_command(["true"], {"BAD-NAME": "1"})
    with pytest.raises(UsageError):
        shell_command(["echo", "nul\x00byte"])


def test_df_parsing():
    assert parse_df_available("/dev/block/dm-48 229313520 88066940 141115508 39% /data") == 141115508 * 1024
    assert parse_df_available("tmpfs 4096 4096 0 100% /data/local/tmp") == 0
    assert parse_df_available("garbage") is None


# -- adb: real client/server, real adbd --------------------------------------------------------------
def adb_target(dev, **kw) -> AdbTarget:
    return parse_target(f"adb:{dev.serial}", kw or None)


@pytest.mark.parametrize("soc, platform, arch", [("SM8650", "pineapple", "v75"), ("SM8550", "kalama", "v73"),
                                                 ("SM8750", "sun", "v79")])
def test_adb_probe_reads_the_phone(phones, soc, platform, arch):
    info = adb_target(phones[soc]).probe("/data/local/tmp/llama.cpp")
    assert (info.state, info.soc, info.platform, info.htp_arch, info.abi) == ("device", soc, platform, arch, "arm64-v8a")
    assert info.os == "android" and info.kind == "adb" and info.serial == phones[soc].serial
    assert info.ram_bytes and info.ram_bytes > 100 << 20
    assert info.free_bytes and info.free_bytes > 0
    assert info.extra["free_at"] == "/data/local/tmp"  # nearest existing parent of the destination


def test_adb_probe_of_an_unknown_soc_leaves_the_arch_unknown(make_device):
    dev = make_device("SM7450", platform="taro", model="Some Phone")
    info = adb_target(dev).probe("/data/local/tmp")
    assert (info.soc, info.platform, info.htp_arch, info.model) == ("SM7450", "taro", None, "Some Phone")


def test_adb_platform_names_the_arch_when_soc_model_is_empty(make_device):
    dev = make_device("", platform="kalama")
    assert adb_target(dev).probe("/data/local/tmp").htp_arch == "v73"


@pytest.mark.parametrize("via", ["v2", "v1"])
def test_adb_run_delivers_exactly_argv_and_the_exit_code(phones, tmp_path, via):
    t = adb_target(phones["SM8650"])
    if via == "v1":
        t._shell_v2 = False  # the sentinel path, for adbd without shell protocol v2
    got = t.capture(["sh", "-c", 'for a in "$@"; do printf "<%s>" "$a"; done', "sh", *NASTY])
    assert got.rc == 0
    assert got.out == "".join(f"<{a}>" for a in NASTY)
    assert t.capture(["sh", "-c", "exit 42"]).rc == 42
    assert t.capture(["no-such-program-hexbuild"]).rc == 127
    assert t.capture(["A=B", "true"]).rc == 127 and t.capture(["if"]).rc == 127


def test_adb_run_streams_stderr_and_applies_env_and_cwd(phones):
    t = adb_target(phones["SM8650"])
    t.capture(["mkdir", "-p", "/data/local/tmp/a dir"])
    chunks: list[tuple[str, bytes]] = []
    rc = t.run(["sh", "-c", 'pwd; printf "%s" "$HEX_VAR"; echo oops >&2; exit 3'],
               env={"HEX_VAR": "va lue $(x)"}, cwd="/data/local/tmp/a dir", on_output=lambda s, d: chunks.append((s, d)))
    out = b"".join(d for s, d in chunks if s == "stdout").decode()
    err = b"".join(d for s, d in chunks if s == "stderr").decode()
    assert (rc, out, err) == (3, "/data/local/tmp/a dir\nva lue $(x)", "oops\n")


def test_adb_run_times_out(phones):
    with pytest.raises(RemoteFailed) as e:
        adb_target(phones["SM8650"]).run(["sleep", "5"], timeout=0.5)
    assert "did not answer" in e.value.message


def test_adb_files_push_list_hash_rename_remove(phones, tmp_path):
    dev = phones["SM8650"]
    t = adb_target(dev)
    local = tmp_path / "blob.bin"
    data = bytes(range(256)) * 12000  # 3 MB: several progress reports
    local.write_bytes(data)
    seen = []
    t.push(local, "/data/local/tmp/files/x y/blob.bin", mode=0o755, progress=lambda n, wire=None: seen.append(n))
    assert sum(seen) == len(data) and len(seen) > 1  # progress per chunk
    assert (dev.root / "tmp/files/x y/blob.bin").read_bytes() == data
    listing = t.list_files("/data/local/tmp/files")
    f = listing["x y/blob.bin"]
    assert (f.size, f.mode, f.sha256) == (len(data), 0o755, hashlib.sha256(data).hexdigest())
    assert t.list_files("/data/local/tmp/nothing-here") == {}
    t.write_file("/data/local/tmp/files/meta.json", b"{}", mode=0o600)
    assert t.read_file("/data/local/tmp/files/meta.json") == b"{}"
    assert t.read_file("/data/local/tmp/files/none.json") is None
    t.rename("/data/local/tmp/files/meta.json", "/data/local/tmp/files/meta2.json")
    t.remove(["/data/local/tmp/files/meta2.json"])
    t.remove(["/data/local/tmp/files"], recursive=True)
    assert not (dev.root / "tmp/files").exists()


def test_bare_adb_needs_exactly_one_ready_device(private_adb_server, make_device):
    t = parse_target("adb", None)
    with pytest.raises(EnvironmentMissing) as e:
        t.probe("/data/local/tmp")
    assert "no device attached" in e.value.message
    one = make_device("SM8650", server=private_adb_server)
    assert parse_target("adb", None).probe("/data/local/tmp").serial == one.serial
    make_device("SM8550", server=private_adb_server)
    with pytest.raises(UsageError) as e:
        parse_target("adb", None).probe("/data/local/tmp")
    assert "2 devices" in e.value.message and one.serial in e.value.hint


def test_missing_device_and_dead_server_are_environment_errors(adb_server, tmp_path):
    with pytest.raises(EnvironmentMissing) as e:
        parse_target("adb:127.0.0.1:1", None).probe("/data/local/tmp")
    assert "not attached" in e.value.message or "not found" in e.value.message
    from tests.infra.devices import free_port

    with pytest.raises(EnvironmentMissing) as e:
        parse_target(f"adb://127.0.0.1:{free_port()}/X", None).probe("/data/local/tmp")
    assert "no adb server" in e.value.message


def test_remote_adb_server_form_reaches_the_device(adb_server, phones):
    dev = phones["SM8750"]
    t = parse_target(f"adb://127.0.0.1:{adb_server.port}/{dev.serial}", None)
    assert t.probe("/data/local/tmp").htp_arch == "v79"
    assert t.capture(["getprop", "ro.board.platform"]).out.strip() == "sun"


def test_adb_tcp_connects_the_phones_adbd_on_first_use(make_device, adb_server, make_locked_phone):
    """adb+tcp://HOST:PORT: a phone the server does not know yet (wireless debugging) is
    connected, waited for and used; one that refuses or is locked says so in one line."""
    dev = make_device("SM8650")
    adb_server("disconnect", dev.serial)
    assert dev.serial not in adb_server("devices").stdout
    with parse_target(f"adb+tcp://127.0.0.1:{dev.port}") as t:
        got = t.capture(["echo", "it's here"])
        assert (got.rc, got.out) == (0, "it's here\n")
        assert t.probe("/data/local/tmp").soc == "SM8650"
    assert dev.serial in adb_server("devices").stdout
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with pytest.raises(EnvironmentMissing) as e, parse_target(f"adb+tcp://127.0.0.1:{dead}") as t:
        t.capture(["true"])
    assert "could not connect" in e.value.message and "wireless debugging" in e.value.hint
    locked = make_locked_phone()
    adb_server("disconnect", locked.serial)
    with pytest.raises(EnvironmentMissing) as e, parse_target(f"adb+tcp://{locked.serial}") as t:
        t.capture(["true"])
    assert "unauthorized" in e.value.message


def test_unauthorized_and_offline_states_come_from_the_real_server(make_locked_phone, make_device, adb_server):
    locked = make_locked_phone()
    info = parse_target(f"adb:{locked.serial}", None).probe("/data/local/tmp")
    assert info.state == "unauthorized" and info.soc is None
    dead = make_device("SM8650")
    dead.kill()
    adb_server.wait_state(dead.serial, "offline")
    assert parse_target(f"adb:{dead.serial}", None).probe("/data/local/tmp").state == "offline"
    # and the listing parser reads the real server's text
    states = {d.serial: d.state for d in parse_devices_l(adb_server("devices", "-l").stdout)}
    assert states[locked.serial] == "unauthorized" and states[dead.serial] == "offline"


def test_commands_on_an_unauthorized_phone_say_how_to_fix_it(make_locked_phone):
    locked = make_locked_phone()
    with pytest.raises(EnvironmentMissing) as e:
        parse_target(f"adb:{locked.serial}", None).capture(["true"])
    assert "unauthorized" in e.value.message and "RSA key" in e.value.hint


def test_devices_l_parser_handles_every_state():
    text = ("List of devices attached\n"
            "R5CT1234ABC            device usb:1-1 product:pineapple model:SM_S921B device:e1q transport_id:3\n"
            "127.0.0.1:6123         offline transport_id:4\n"
            "0123456789ABCDEF       unauthorized usb:1-2 transport_id:5\n"
            "FA7AB1A00001           no permissions (missing udev rules? user is in the plugdev group); "
            "see [http://developer.android.com/tools/device.html] usb:1-3 transport_id:6\n\n")
    got = {d.serial: (d.state, d.attrs.get("transport_id")) for d in parse_devices_l(text)}
    assert got == {"R5CT1234ABC": ("device", "3"), "127.0.0.1:6123": ("offline", "4"),
                   "0123456789ABCDEF": ("unauthorized", "5"), "FA7AB1A00001": ("no permissions", "6")}


# -- ssh and adb+ssh: real sshd -------------------------------------------------------------------------
def test_ssh_target_probe_run_and_files(sshd_host, tmp_path):
    t = parse_target(f"ssh://root@127.0.0.1:{sshd_host.port}", sshd_host.settings)
    try:
        info = t.probe(str(tmp_path / "not" / "yet"))
        assert (info.os, info.kind, info.state) == ("linux", "ssh", "ready")
        assert info.free_bytes and info.ram_bytes and info.extra["free_at"] == str(tmp_path)
        got = t.capture(["sh", "-c", 'for a in "$@"; do printf "<%s>" "$a"; done', "sh", *NASTY])
        assert (got.rc, got.out) == (0, "".join(f"<{a}>" for a in NASTY))
        assert t.capture(["sh", "-c", "exit 7"]).rc == 7
        local = tmp_path / "f.bin"
        local.write_bytes(b"z" * 100_000)
        t.push(local, str(tmp_path / "remote" / "deep" / "f.bin"), mode=0o755)
        assert (tmp_path / "remote/deep/f.bin").read_bytes() == b"z" * 100_000
        assert (tmp_path / "remote/deep/f.bin").stat().st_mode & 0o777 == 0o755
        t.write_file(str(tmp_path / "remote" / "new" / "m.json"), b"[]")
        assert t.read_file(str(tmp_path / "remote/new/m.json")) == b"[]"
        assert t.read_file(str(tmp_path / "remote/none")) is None
        assert t.home() == "/root" and t.expand("~/llama.cpp") == "/root/llama.cpp"
    finally:
        t.close()


def ssh_fingerprint(pub: Path) -> str:
    return subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True).stdout.split()[1]


def test_unknown_host_key_is_refused_with_its_fingerprint(sshd_host, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    settings = {**sshd_host.settings, "ssh.known_hosts": str(empty)}
    for spec in (f"ssh://root@127.0.0.1:{sshd_host.port}", f"adb+ssh://root@127.0.0.1:{sshd_host.port}/X"):
        with pytest.raises(EnvironmentMissing) as e:
            parse_target(spec, settings).probe("/tmp")
        assert ssh_fingerprint(sshd_host.host_key_pub) in e.value.message
        assert f"ssh-keyscan -p {sshd_host.port} 127.0.0.1 >> {empty}" in e.value.hint
    assert empty.read_text() == ""  # nothing trusted behind the user's back


def test_changed_host_key_is_refused(sshd_host, tmp_path):
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd_host.port} " + " ".join(other.with_suffix(".pub").read_text().split()[:2]) + "\n")
    with pytest.raises(EnvironmentMissing) as e:
        parse_target(f"ssh://root@127.0.0.1:{sshd_host.port}", {**sshd_host.settings, "ssh.known_hosts": str(kh)}).probe("/tmp")
    assert "CHANGED" in e.value.message and ssh_fingerprint(sshd_host.host_key_pub) in e.value.message


def test_ssh_authentication_failure_names_the_fix(sshd_host, tmp_path):
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    t = parse_target(f"ssh://root@127.0.0.1:{sshd_host.port}", {**sshd_host.settings, "ssh.identity": str(stranger)})
    with pytest.raises(EnvironmentMissing) as e:
        t.probe("/tmp")
    assert "authentication" in e.value.message and "authorized_keys" in e.value.hint


def test_ssh_agent_authentication(sshd_host, tmp_path, monkeypatch):
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from tests.infra.devices import wait_path

        wait_path(sock)
        subprocess.run(["ssh-add", str(sshd_host.identity)], env={**os.environ, "SSH_AUTH_SOCK": str(sock)},
                       check=True, capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/id_* to fall back on: only the agent
        t = parse_target(f"ssh://root@127.0.0.1:{sshd_host.port}", {**sshd_host.settings, "ssh.identity": ""})
        try:
            assert t.capture(["echo", "via agent"]).out == "via agent\n"
        finally:
            t.close()
    finally:
        agent.terminate()
        agent.wait(timeout=10)


def test_adb_over_ssh_reaches_the_phone_through_the_hosts_adb_server(sshd_host, phones, tmp_path):
    dev = phones["SM8550"]
    t = parse_target(f"adb+ssh://root@127.0.0.1:{sshd_host.port}/{dev.serial}", sshd_host.settings)
    try:
        info = t.probe("/data/local/tmp/llama.cpp")
        assert (info.kind, info.soc, info.htp_arch, info.serial) == ("adb+ssh", "SM8550", "v73", dev.serial)
        got = t.capture(["sh", "-c", 'for a in "$@"; do printf "<%s>" "$a"; done', "sh", *NASTY])
        assert got.out == "".join(f"<{a}>" for a in NASTY)
        local = tmp_path / "x.bin"
        local.write_bytes(b"q" * 300_000)
        t.push(local, "/data/local/tmp/via-ssh/x.bin", mode=0o644)
        assert (dev.root / "tmp/via-ssh/x.bin").read_bytes() == b"q" * 300_000
    finally:
        t.close()


def test_adb_over_ssh_starts_the_hosts_adb_server_when_none_runs(tmp_path):
    from tests.infra.devices import AdbServer, free_port, start_sshd, stop_sshd

    port = free_port()  # no adb server listens here yet
    host = start_sshd(tmp_path / "sshd", port)
    server = AdbServer(port, tmp_path, shutil.which("adb"))
    try:
        t = parse_target(f"adb+ssh://root@127.0.0.1:{host.port}", host.settings)
        with pytest.raises(EnvironmentMissing) as e:
            t.probe("/data/local/tmp")
        assert "no device attached" in e.value.message  # the server it started has no phone
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # hexbuild started it there
        t.close()
    finally:
        server.stop()  # adb -P PORT kill-server
        stop_sshd(host)


# -- local ------------------------------------------------------------------------------------------------
def test_local_target_runs_argv_exactly_and_times_out(tmp_path):
    t = parse_target(f"local:{tmp_path}", None)
    got = t.capture(["sh", "-c", 'for a in "$@"; do printf "<%s>" "$a"; done', "sh", *NASTY], cwd=str(tmp_path))
    assert got.out == "".join(f"<{a}>" for a in NASTY)
    assert t.capture(["sh", "-c", "exit 5"]).rc == 5
    with pytest.raises(RemoteFailed):
        t.run(["sleep", "5"], timeout=0.3)
    info = t.probe(str(tmp_path / "llama.cpp"))
    assert (info.kind, info.state, info.os) == ("local", "ready", "linux")


def test_local_listing_matches_find_without_spawning_it(tmp_path, monkeypatch):
    """local: and qemu: list a directory here (serve lists the models directory before each
    start); the same files, sizes, modes and mtimes as the shell targets' find/stat, symbolic
    links (to files and to directories) left out as find leaves them; nothing is spawned."""
    from hexbuild.targets.posix import ShellTarget

    root = tmp_path / "models"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.gguf").write_bytes(b"x" * 10)
    (root / "sub" / "deeper" / "b b.gguf").write_bytes(b"y")
    (root / "sub" / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "sub" / "run.sh", 0o4755)
    (root / "link.gguf").symlink_to(root / "a.gguf")
    (root / "dirlink").symlink_to(root / "sub")
    os.utime(root / "a.gguf", (1_700_000_000.9, 1_700_000_000.9))
    for t in (LocalTarget(f"local:{tmp_path}", str(tmp_path)), QemuTarget(f"qemu:{tmp_path}", str(tmp_path))):
        want = ShellTarget.list_files(t, str(root), hashes=False)
        assert sorted(want) == ["a.gguf", "sub/deeper/b b.gguf", "sub/run.sh"]
        assert want["a.gguf"].mtime == 1_700_000_000 and want["sub/run.sh"].mode == 0o4755
        monkeypatch.setattr(subprocess, "Popen", None)  # the listing itself spawns nothing
        try:
            assert t.list_files(str(root), hashes=False) == want
            assert t.list_files(str(tmp_path / "absent"), hashes=False) == {}
        finally:
            monkeypatch.undo()
