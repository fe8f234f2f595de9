"""Android devices through an adb server: the local one (``adb``, ``adb:SERIAL``) or a remote
one (``adb://HOST:PORT[/SERIAL]``, what ``adb -H HOST -P PORT`` talks to — an adb *server*, not
a phone's adbd).

hexbuild speaks the server's smart-socket protocol itself (adbproto.py) and starts the local
server with ``adb start-server`` when none answers, as the adb client does. Shell commands use
shell protocol v2 (the remote exit code comes back in-band); devices without it get the
``echo $?`` sentinel fallback. Every argument is ``shlex.quote``-d into the device command line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..errors import EnvironmentMissing, HexbuildError, RemoteFailed, UsageError
from ..ui import ui
from . import adbsync, socs
from .adbproto import AdbClient, AdbConnectError, AdbError, AdbStreamClosed, AdbTimeout, DeviceEntry, tcp_connector
from .base import ByteProgress, DeviceInfo, OutputSink, Sent, TargetCaps, TargetKind, TargetSettings
from .posix import ShellTarget, not_ready_message, parse_df_available, shell_command
from .tools import INSTALLED_SCRIPT, PROBE_SCRIPT, parse_tools, split_installed

_PROBE = r'''for p in ro.soc.model ro.board.platform ro.product.model ro.product.cpu.abi; do
  printf 'prop %s=%s\n' "$p" "$(getprop "$p" 2>/dev/null)"
done
sed -n 's/^MemTotal:[^0-9]*\([0-9]*\).*/mem \1/p' /proc/meminfo
d=$1
while [ ! -d "$d" ]; do d=$(dirname "$d"); done
printf 'dfdir %s\n' "$d"
printf 'df %s\n' "$(df -Pk "$d" 2>/dev/null | tail -n 1)"'''


def local_server_port() -> int:
    raw = os.environ.get("ANDROID_ADB_SERVER_PORT", "5037")
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"ANDROID_ADB_SERVER_PORT is not a port number: {raw!r}") from None


class AdbTarget(ShellTarget):
    kind = "adb"
    os = "android"
    caps = TargetCaps(forward=True, push_makes_dirs=True)
    local_server = False  # the adb server runs on this machine (adb forward listens here)

    def __init__(self, spec: str, client: AdbClient, serial: str | None, *, server: str,
                 timeout: float = 15.0, transfer_timeout: float = 600.0,
                 start_server: Callable[[], None] | None = None):
        self.spec = spec
        self.client = client
        self.serial = serial
        self.server = server  # for messages: "the local adb server (port 5037)"
        self.default_timeout = timeout
        self.transfer_timeout = transfer_timeout
        self._start_server = start_server
        self._started = False
        self._features: set[str] | None = None
        self._wire = None  # wire.WirePolicy, made on the first push

    # -- errors ---------------------------------------------------------------------------------
    def _call(self, fn: Callable, *args, **kw):
        try:
            return fn(*args, **kw)
        except AdbConnectError as e:
            if self._start_server and not self._started:
                self._started = True
                self._start_server()
                return self._call(fn, *args, **kw)
            raise EnvironmentMissing(f"{self.spec}: {e}", hint=self._server_hint()) from None
        except AdbTimeout as e:
            raise RemoteFailed(f"{self.spec}: the device did not answer ({e})",
                               hint="check the cable/network; adb reconnect") from None
        except AdbStreamClosed as e:  # any stream: a shell, a push, a forwarded connection
            raise RemoteFailed(f"{self.spec}: lost the connection to the device ({e}): "
                               "it rebooted, or the cable or network dropped") from None
        except AdbError as e:
            raise self._translate(str(e)) from None

    def _server_hint(self) -> str:
        return "start it with `adb start-server`" if self._start_server else \
            f"is an adb server listening on {self.server} (adb -a -P PORT server nodaemon)?"

    def _translate(self, msg: str) -> HexbuildError:
        low = msg.lower()
        if "not found" in low and "device" in low:
            return EnvironmentMissing(f"{self.spec}: {msg} on {self.server}",
                                      hint="adb devices -l lists the attached devices; for a network device: adb connect HOST:PORT")
        for state in ("unauthorized", "offline"):
            if state in low:
                what, fix = not_ready_message(state)
                return EnvironmentMissing(f"{self.spec}: device {self.serial} {what}", hint=fix)
        return RemoteFailed(f"{self.spec}: {msg}")

    # -- devices --------------------------------------------------------------------------------
    def devices(self) -> list[DeviceEntry]:
        return self._call(self.client.devices)

    def resolve_serial(self) -> str:
        if self.serial:
            return self.serial
        devs = self.devices()
        ready = [d for d in devs if d.state == "device"]
        if len(ready) == 1:
            self.serial = ready[0].serial
            return self.serial
        if not ready:
            if devs:
                what, fix = not_ready_message(devs[0].state)
                raise EnvironmentMissing(f"{self.spec}: no ready device; {devs[0].serial} {what}", hint=fix)
            raise EnvironmentMissing(f"{self.spec}: no device attached to {self.server}",
                                     hint="plug in a phone with USB debugging on, or adb connect HOST:PORT")
        raise UsageError(f"{self.spec}: {len(ready)} devices are attached; choose one with --target adb:SERIAL",
                         hint="attached: " + ", ".join(d.serial for d in ready))

    def _serial(self) -> str:
        return self.resolve_serial()

    # -- Target -----------------------------------------------------------------------------------
    def probe(self, dest: str) -> DeviceInfo:
        serial = self.resolve_serial()
        entry = next((d for d in self.devices() if d.serial == serial), None)
        if entry is None:
            raise EnvironmentMissing(f"device {serial} is not attached to {self.server}",
                                     hint="adb devices -l lists the attached devices; for a network device: adb connect HOST:PORT")
        info = DeviceInfo(target=self.spec, kind=self.kind, os=self.os, state=entry.state, serial=serial)
        if entry.state != "device":
            return info
        res = self.sh(_PROBE + "\n" + PROBE_SCRIPT + "\n" + INSTALLED_SCRIPT, dest, what="probing the device")
        out, manifest = split_installed(res.stdout)
        props: dict[str, str] = {}
        for line in out.splitlines():
            key, _, value = line.partition(" ")
            if key == "prop":
                name, _, v = value.partition("=")
                props[name] = v.strip()
            elif key == "mem" and value.strip().isdigit():
                info.ram_bytes = int(value) * 1024
            elif key == "dfdir":
                info.extra["free_at"] = value
            elif key == "df":
                info.free_bytes = parse_df_available(value)
        info.soc = props.get("ro.soc.model") or None
        info.platform = props.get("ro.board.platform") or None
        info.model = props.get("ro.product.model") or entry.attrs.get("model")
        info.abi = props.get("ro.product.cpu.abi") or None
        info.htp_arch = socs.htp_arch(info.soc, info.platform)
        info.extra["tools"] = parse_tools(out).to_json()
        info.extra["installed"] = self.installed(dest, manifest)
        return info

    def features(self) -> set[str]:
        """What the device's adbd said it speaks (its banner, as the server recorded it)."""
        if self._features is None:
            self._features = self._call(self.client.features, self._serial())
        return self._features

    def _supports_v2(self) -> bool:
        return "shell_v2" in self.features()

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, on_output: OutputSink | None = None) -> int:
        command = shell_command(argv, env, cwd)
        serial = self._serial()
        ui.command(self._display_prefix(serial) + ["shell", command])
        t = timeout or self.default_timeout
        shell = self.client.shell_v2 if self._supports_v2() else self.client.shell_v1
        return self._call(shell, serial, command, timeout=t, on_output=on_output)

    def _display_prefix(self, serial: str) -> list[str]:
        return ["adb", "-s", serial]

    def forward(self, local_port: int, remote_port: int):
        from .forward import AdbServerForward, ListenerForward, check_port_free

        serial = self._serial()
        check_port_free(local_port)
        if self.local_server:
            ui.command(self._display_prefix(serial) + ["forward", "--no-rebind", f"tcp:{local_port}", f"tcp:{remote_port}"])
            return self._call(AdbServerForward, self.client, serial, local_port, remote_port)

        def open_stream():
            return self._call(self.client.open_tcp, serial, remote_port, timeout=self.default_timeout)

        return ListenerForward(local_port, remote_port, open_stream, how=f"adb tcp:{remote_port} via {self.server}")

    def wire(self):
        """This device's wire.WirePolicy: zstd or raw, file by file."""
        if self._wire is None:
            from .wire import LinkMemory, WirePolicy

            serial = self._serial()

            def probe(data: bytes) -> float:
                return min(self._call(adbsync.dry_runs, self.client, serial, "/data/local/tmp/.hexbuild-link-probe",
                                      data, runs=2, timeout=self.default_timeout))

            self._wire = WirePolicy.for_features(self.features(), probe, LinkMemory(f"adb:{serial}"))
        return self._wire

    def expect_transfer(self, files) -> None:
        self.wire().expect(files)

    def measured_link_rate(self) -> float | None:
        return self._wire.link_rate if self._wire is not None else None

    def send_file(self, local: Path, remote: str, progress: ByteProgress | None = None) -> Sent:
        got: list[Sent] = []
        self.send_files([(local, remote, 0o644)], progress, lambda i, how: got.append(how))
        return got[0]

    def send_files(self, files, progress, sent) -> None:
        """All on one sync connection (on a fast link, ``policy.lanes()`` at once), each file
        zstd or raw as wire.WirePolicy says, decided just before it goes (each large file's time
        teaches the next choice)."""
        serial = self._serial()
        policy = self.wire()
        order = policy.order([local for local, _, _ in files])
        index = {}

        def uploads():
            for i in order:
                local, remote, mode = files[i]
                level = policy.choose(local).level
                # the adb command that sends the same bytes: -z zstd compresses, -Z sends raw
                flag = ["-z", "zstd"] if level is not None else (["-Z"] if policy.zstd else [])
                ui.command(self._display_prefix(serial) + ["push", *flag, str(local), remote])
                up = adbsync.Upload(local, remote, mode, level)
                index[id(up)] = i
                yield up

        def done(up: adbsync.Upload, wire: int) -> None:
            policy.observe(os.stat(up.local).st_size, up.landed - up.started, up.zstd_level is not None)
            sent(index.pop(id(up)), Sent(wire, compressed=up.zstd_level is not None))

        self._call(adbsync.push_lanes, self.client, serial, uploads(), lanes=policy.lanes(),
                   timeout=self.transfer_timeout, progress=progress, sent=done)

    def read_file(self, remote: str) -> bytes | None:
        return self._call(adbsync.pull_bytes, self.client, self._serial(), remote, timeout=self.transfer_timeout)

    def write_file(self, remote: str, data: bytes, *, mode: int = 0o644) -> None:
        tmp = self.stage_file(remote, data, mode=mode)
        self.sh('mv -f "$1" "$2"', tmp, remote, what=f"writing {remote}")

    def stage_file(self, remote: str, data: bytes, *, mode: int = 0o644) -> str:
        tmp = self.temp_name(remote)
        self._call(adbsync.push_bytes, self.client, self._serial(), data, tmp, mode=mode, timeout=self.transfer_timeout)
        if mode & 0o111:  # adbd makes an executable 0777 whatever SEND's mode says
            self.sh('chmod "$1" "$2"', format(mode, "o"), tmp, what=f"writing {remote}")
        return tmp


def start_local_server() -> None:
    from .. import proc

    adb = proc.which("adb", hint="install Android platform-tools (apt install adb) and put adb on PATH")
    cp = proc.run([adb, "start-server"], timeout=30)
    if cp.returncode != 0:
        raise EnvironmentMissing(f"adb start-server failed: {(cp.stderr or cp.stdout).strip()}",
                                 hint="adb kill-server; adb start-server")


def local_client(timeout: float) -> AdbClient:
    return AdbClient(tcp_connector("127.0.0.1", local_server_port()), timeout=timeout)


def local_target(spec: str, serial: str | None, *, timeout: float, transfer_timeout: float) -> AdbTarget:
    port = local_server_port()
    t = AdbTarget(spec, local_client(timeout), serial, server=f"the local adb server (port {port})",
                  timeout=timeout, transfer_timeout=transfer_timeout, start_server=start_local_server)
    t.local_server = True
    return t


def ready_local_devices(timeout: float) -> tuple[list[str], list[DeviceEntry]]:
    """(serials in state ``device``, the others) on the local server — for ``--all``."""
    probe = local_target("adb", None, timeout=timeout, transfer_timeout=timeout)
    devs = probe.devices()
    return [d.serial for d in devs if d.state == "device"], [d for d in devs if d.state != "device"]


def _parse(spec: str, s: TargetSettings) -> AdbTarget:
    from .spec import serial_part

    return local_target(spec, serial_part(spec, KIND), timeout=s.timeout, transfer_timeout=s.transfer_timeout)


KIND = TargetKind(scheme="adb", form="adb or adb:SERIAL", example="adb:R5CT1234ABC",
                  summary="a device on this machine's adb server: the one ready device, or SERIAL",
                  parse=_parse, caps=AdbTarget.caps)
