"""``local:DIR``: a directory on this machine (a Snapdragon Linux board deploying to itself, or a
staging tree). Same shell scripts as the remote targets, run with this machine's ``sh``."""

from __future__ import annotations

import errno
import os
import selectors
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import EnvironmentMissing, RemoteFailed, UsageError, shell_status
from ..pids import process_start
from ..ui import ui
from .base import ByteProgress, DeviceInfo, OutputSink, RemoteFile, TargetCaps, TargetKind, TargetSettings
from .posix import ShellTarget

CHUNK = 1024 * 1024
LEFTOVER_GRACE = 2.0  # seconds what a program started may hold its output open after it ended
# e_machine of the ELF header → a name people use; uname -m → the e_machine it runs natively
ELF_MACHINES = {3: "x86", 8: "MIPS", 20: "PowerPC", 21: "PowerPC64", 22: "s390x", 40: "ARM", 62: "x86-64",
                164: "Hexagon", 183: "AArch64", 243: "RISC-V"}
NATIVE = {"x86_64": 62, "amd64": 62, "i386": 3, "i686": 3, "aarch64": 183, "arm64": 183, "armv7l": 40,
          "armv8l": 40, "riscv64": 243, "ppc64le": 21, "ppc64": 21, "s390x": 22}


def elf_machine(path: str) -> int | None:
    """The ELF header's e_machine (either byte order), None for anything that is not ELF."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    return int.from_bytes(head[18:20], "big" if head[5] == 2 else "little")


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):  # the group is gone
        pass


def stop_group(p: subprocess.Popen, grace: float = 2.0) -> None:
    """Stop a program started in a session of its own and everything it started: SIGINT to its
    process group (what a terminal's Ctrl-C sends), then SIGKILL to whatever is left of the group
    after ``grace`` seconds (at once if the program has ended), and reap it. By the PID of the
    program started here: its group outlives it only while a member lives."""
    try:
        _signal_group(p, signal.SIGINT)
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    finally:
        _signal_group(p, signal.SIGKILL)
        p.wait()


def this_machine() -> tuple[str, int | None]:
    m = os.uname().machine  # platform.machine()'s answer, without importing platform
    code = NATIVE.get(m.lower())
    return (ELF_MACHINES.get(code, m) if code else m), code


class LocalTarget(ShellTarget):
    kind = "local"
    os = "linux"
    caps = TargetCaps(forward=True, this_machine=True, early_start=True)

    def __init__(self, spec: str, root: str, *, timeout: float = 15.0, transfer_timeout: float = 600.0):
        self.spec = spec
        self.root = str(Path(root).expanduser().absolute())
        self.default_timeout = timeout
        self.transfer_timeout = transfer_timeout

    def probe(self, dest: str) -> DeviceInfo:
        return self.probe_linux(self.expand(dest))

    def default_threads(self) -> int | None:
        # the programs run on this machine: threads beyond its cores only contend (emulated ones
        # under qemu: -t 6 on 2 cores is ~10x slower), so -t is the cores this process may use
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    def fit_cpu_mask(self, mask: str) -> str | None:
        # this machine: a mask naming a core it lacks pins nothing ('failed to set affinity mask'
        # on a 2-core runner), and its threads default to its own cores anyway (qemu:)
        try:
            cores = os.sched_getaffinity(0)
            wanted = int(mask, 16)
        except (AttributeError, ValueError):
            return None
        named = {i for i in range(wanted.bit_length()) if wanted >> i & 1}
        return mask if named and named <= cores else None

    def foreign(self, path: str) -> str | None:
        machine = elf_machine(path)
        _, native = this_machine()
        if machine is None or native is None or machine == native:
            return None
        return ELF_MACHINES.get(machine, f"ELF machine {machine}")

    def _program_path(self, argv: Sequence[str], cwd: str | None) -> str | None:
        program = str(argv[0]) if argv else ""
        if "/" not in program:
            return None  # found on PATH: this machine's own programs
        return program if os.path.isabs(program) else os.path.join(cwd or self.root, program)

    def foreign_message(self, program: str, arch: str) -> tuple[str, str]:
        host, _ = this_machine()
        message = (f"{self.spec}: {os.path.basename(program)} is an {arch} program and this machine is {host}: "
                   f"{self.kind}: starts the package's programs natively")
        hint = (f"run it under qemu-aarch64 from the same directory: --target qemu:{self.root}" if arch == "AArch64"
                else f"run it on an {arch} machine")
        return message, hint

    def check_runnable(self, argv: Sequence[str], cwd: str | None = None) -> None:
        path = self._program_path(argv, cwd)
        arch = self.foreign(path) if path else None
        if arch:
            message, hint = self.foreign_message(path, arch)
            raise UsageError(message, hint=hint)

    def home(self) -> str:
        return str(Path.home())

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, on_output: OutputSink | None = None) -> int:
        ui.command(list(argv), env=dict(env) if env else None)
        full_env = dict(os.environ)
        full_env.update(env or {})
        t = timeout or self.default_timeout
        try:
            # a session of its own: what the program starts (a qemu+npu run's DSP processes, a
            # script's children) is one process group, stopped as one (stop_group)
            p = subprocess.Popen(list(argv), cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except FileNotFoundError:
            return 127
        except OSError as e:
            if e.errno != errno.ENOEXEC:
                raise
            self.check_runnable(argv, cwd)  # names the architecture when it is an ELF file of another
            raise UsageError(f"{self.spec}: cannot start {argv[0]}: this machine cannot execute it "
                             "(Exec format error: neither a program of its architecture nor a script with #!)") from None
        except NotADirectoryError:
            raise EnvironmentMissing(f"{self.spec}: not a directory: {cwd}") from None
        deadline = time.monotonic() + t
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ, "stdout")
        sel.register(p.stderr, selectors.EVENT_READ, "stderr")
        ended: float | None = None
        try:
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    stop_group(p)
                    raise RemoteFailed(f"{self.spec}: {argv[0]} did not finish within {t:g}s")
                if ended is None and p.poll() is not None:
                    ended = time.monotonic()
                elif ended is not None and time.monotonic() - ended > LEFTOVER_GRACE:
                    # the program has ended and what it started still holds its output open (a DSP
                    # process of a program that died without closing its sessions): end them
                    _signal_group(p, signal.SIGKILL)
                    ended = float("inf")
                for key, _ in sel.select(timeout=min(left, 0.25 if ended is not None else 1.0)):
                    data = os.read(key.fileobj.fileno(), 65536)
                    if not data:
                        sel.unregister(key.fileobj)
                    elif on_output:
                        on_output(key.data, data)
            return shell_status(p.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            stop_group(p)
            raise RemoteFailed(f"{self.spec}: {argv[0]} did not finish within {t:g}s") from None
        except BaseException:  # Ctrl-C (SIGTERM arrives as it too), or an output sink that failed
            stop_group(p)
            raise
        finally:
            sel.close()
            p.stdout.close()
            p.stderr.close()

    def start_detached(self, argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: str | None,
                       log: str) -> tuple[int, str]:
        """Start ``argv`` here in a session of its own, its output in ``log``, and leave it running:
        (its PID, its start time). Done here rather than through a shell, which on a 2-core machine
        cost a tenth of a server's start (sh, mkdir, then the program)."""
        ui.command(list(argv), env=dict(env) if env else None)
        full_env = dict(os.environ)
        full_env.update(env or {})
        os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
        try:
            with open(log, "wb") as out:
                p = subprocess.Popen(list(argv), cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        except (FileNotFoundError, NotADirectoryError, PermissionError, OSError) as e:
            raise RemoteFailed(f"cannot start {argv[0]} on {self.spec}: {e.strerror or e}") from None
        # reaped as soon as it ends, so that its PID stops naming it (a stop waits for that)
        threading.Thread(target=p.wait, name=f"reap-{p.pid}", daemon=True).start()
        return p.pid, process_start(p.pid) or ""

    def forward(self, local_port: int, remote_port: int):
        from ..errors import UsageError
        from .forward import DirectPort

        if local_port != remote_port:  # one machine, one port
            raise UsageError(f"{self.spec}: the program listens on this machine; its port is the local port {local_port}")
        return DirectPort(local_port, remote_port)

    def send_file(self, local: Path, remote: str, progress: ByteProgress | None = None) -> None:
        dst = Path(remote)
        dst.parent.mkdir(parents=True, exist_ok=True)
        with open(local, "rb") as src, open(dst, "wb") as out:
            while True:
                chunk = src.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                if progress:
                    progress(len(chunk))

    def list_files(self, root: str, *, hashes: bool = True) -> dict[str, RemoteFile]:
        """``find ROOT -type f`` with sizes, modes and mtimes, read here rather than by spawning
        sh, find and stat (serve lists the models directory before each start); hashes as the
        shell targets make them."""
        if hashes:
            return super().list_files(root, hashes=True)
        files: dict[str, RemoteFile] = {}
        if not os.path.isdir(root):
            return files
        todo = [("", root)]
        while todo:
            prefix, directory = todo.pop()
            try:
                with os.scandir(directory) as entries:
                    for e in entries:
                        if e.is_dir(follow_symlinks=False):  # symbolic links not followed, as find
                            todo.append((f"{prefix}{e.name}/", e.path))
                        elif e.is_file(follow_symlinks=False):
                            st = e.stat(follow_symlinks=False)
                            rel = prefix + e.name
                            files[rel] = RemoteFile(rel, st.st_size, st.st_mode & 0o7777, None, int(st.st_mtime))
            except OSError as e:
                raise RemoteFailed(f"listing {root} failed on {self.spec}: {e.strerror or e}") from None
        return files

    def is_file(self, remote: str) -> bool:
        return os.path.isfile(remote)

    def read_file(self, remote: str) -> bytes | None:
        try:
            return Path(remote).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write_file(self, remote: str, data: bytes, *, mode: int = 0o644) -> None:
        dst = Path(remote)
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(self.temp_name(remote))
        tmp.write_bytes(data)
        os.chmod(tmp, mode)
        os.replace(tmp, dst)


def _parse(spec: str, s: TargetSettings) -> LocalTarget:
    from .spec import after_colon, malformed

    path = after_colon(spec, KIND)
    if not path:
        raise malformed(spec, KIND, "the directory is empty")
    return LocalTarget(spec, path, timeout=s.timeout, transfer_timeout=s.transfer_timeout)


KIND = TargetKind(scheme="local", form="local:DIR", example="local:/tmp/llama.cpp",
                  summary="a directory on this machine, its programs run natively", parse=_parse,
                  caps=LocalTarget.caps)
