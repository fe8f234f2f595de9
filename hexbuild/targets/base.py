"""The one interface every deploy/run target implements (adb, adb over SSH, ssh, local).

Paths on the target are POSIX strings. Implementations must: time out every remote call,
quote every string that reaches a remote shell (``shlex.quote``), and never log secrets.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

OutputSink = Callable[[str, bytes], None]  # (stream name "stdout"|"stderr", chunk)


class ByteProgress(Protocol):
    """``progress(n, wire)``: ``n`` more bytes of the file went out since the last call, as
    ``wire`` bytes on the link (compressed; None: as many as ``n``)."""

    def __call__(self, n: int, wire: int | None = None, /) -> None: ...


@dataclass
class Sent:
    """How one file crossed the link."""

    wire_bytes: int  # what the link carried for its contents (compressed size, or the file's)
    compressed: bool = False


@dataclass
class RemoteFile:
    path: str  # relative to the root that was listed
    size: int
    mode: int  # permission bits, e.g. 0o755
    sha256: str | None = None
    mtime: int | None = None  # seconds since the epoch, when the lister knows it


@dataclass
class DeviceInfo:
    target: str  # the spec the user gave
    kind: str  # adb | adb+ssh | adb+tcp | ssh | local | qemu
    os: str  # android | linux
    state: str  # device | unauthorized | offline | unknown (adb states); ready for ssh/local
    serial: str | None = None
    soc: str | None = None  # ro.soc.model
    platform: str | None = None  # ro.board.platform
    model: str | None = None  # ro.product.model
    abi: str | None = None
    htp_arch: str | None = None  # from hexbuild/data/socs.toml; None when the SoC is unknown
    ram_bytes: int | None = None
    free_bytes: int | None = None  # at the destination
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Captured:
    rc: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


@dataclass(frozen=True)
class TargetCaps:
    """What a back-end can do, declared once per target class (as Zephyr west's RunnerCaps), so
    a command refuses an unsupported target in one line before it touches anything.
    Back-ends that gain a capability add a field here with a False default."""

    package_oses: tuple[str, ...] = ("android", "linux")  # packages whose programs it can run
    forward: bool = False  # can expose a device TCP port on this machine's loopback
    glibc_check: bool = False  # deploy compares the package's glibc needs with the target's glibc
    # its programs run under an emulator on this machine (qemu:): an AArch64 CPU and no NPU, and
    # the glibc they see is the emulator's sysroot's, not this machine's
    emulator: bool = False
    # an emulated cDSP answers its FastRPC sessions (qemu+npu:): NPU packages run their HTP sessions
    # there, emulated, and every result says so
    virtual_npu: bool = False
    # the device is this machine: its paths are this machine's paths (local:, and qemu:'s
    # emulated programs), read and written here without a device call
    this_machine: bool = False
    # a push makes the directories it writes into (adb sync's SEND), so a release's staging call
    # (links, device-side copies) can run beside the push instead of before it
    push_makes_dirs: bool = False
    # a detached server is a plain process of this machine, which the same words may launch again
    # before they are parsed (serve/early_start.py): not qemu+npu:, whose server needs the virtual
    # NPU's parts started first
    early_start: bool = False


@dataclass(frozen=True)
class TargetSettings:
    """What every kind's parser may need from the settings, read once by ``parse_target``."""

    timeout: float = 15.0  # ssh.timeout: one remote call
    transfer_timeout: float = 600.0  # deploy.timeout: one file
    known_hosts: str = ""  # ssh.known_hosts
    identity: str = ""  # ssh.identity
    sysroot: str = ""  # linux.sysroot
    npu: str = "v73"  # qemu.npu: the virtual NPU's HTP version


@dataclass(frozen=True)
class TargetKind:
    """One kind of target, declared by its own module as ``KIND`` and found through
    ``targets/registry.py`` (as Zephyr's west finds a runner and its RunnerCaps)."""

    scheme: str  # how a spec of this kind starts: a word ("adb": adb, adb:SERIAL) or a URL scheme ("ssh://")
    form: str  # the grammar, for messages: "ssh://[USER@]HOST[:PORT]"
    example: str  # a spec that works: "ssh://root@rb3gen2.local:22"
    summary: str  # one line: what is at the other end
    parse: Callable[[str, TargetSettings], "Target"]  # the spec (scheme included) → a Target; UsageError if malformed
    caps: TargetCaps

    def matches(self, spec: str) -> bool:
        return self.matches_scheme(self.scheme, spec)

    @staticmethod
    def matches_scheme(scheme: str, spec: str) -> bool:
        if scheme.endswith("://"):
            return spec.startswith(scheme)
        return spec == scheme or (spec.startswith(scheme + ":") and not spec.startswith(scheme + "://"))


class Target(ABC):
    spec: str
    kind: str
    os: str  # android | linux
    caps: TargetCaps = TargetCaps()

    def require(self, capability: str, what: str) -> None:
        """UsageError (one line) unless ``caps.<capability>`` is true; ``what`` names the action."""
        from ..errors import UsageError

        if not getattr(self.caps, capability):
            raise UsageError(f"target {self.spec!r} ({self.kind}) cannot {what}")

    @abstractmethod
    def probe(self, dest: str) -> DeviceInfo:
        """State, SoC facts, RAM and free space at ``dest`` (or its nearest existing parent)."""

    @abstractmethod
    def list_files(self, root: str, *, hashes: bool = True) -> dict[str, RemoteFile]:
        """Every regular file under ``root`` keyed by its path relative to ``root``;
        an empty dict when ``root`` does not exist."""

    @abstractmethod
    def push(self, local: Path, remote: str, *, mode: int | None = None,
             progress: ByteProgress | None = None) -> None:
        """Copy one local file to ``remote`` (parents created), then set ``mode``."""

    @abstractmethod
    def remove(self, paths: Sequence[str], *, recursive: bool = False) -> None:
        ...

    @abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Atomic rename on the target's filesystem (replaces a file ``dst``)."""

    def is_file(self, remote: str) -> bool:
        """Whether ``remote`` is a file (or a link to one) on the device."""
        return self.capture(["test", "-f", remote]).rc == 0

    @abstractmethod
    def read_file(self, remote: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""

    @abstractmethod
    def write_file(self, remote: str, data: bytes, *, mode: int = 0o644) -> None:
        ...

    @abstractmethod
    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, on_output: OutputSink | None = None) -> int:
        """Run ``argv`` exactly (each element reaches the program unchanged) with ``env`` added,
        streaming output to ``on_output``; return the program's exit code."""

    def capture(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
                timeout: float | None = None) -> "Captured":
        """``run`` with stdout and stderr collected instead of streamed."""
        out: list[bytes] = []
        err: list[bytes] = []
        rc = self.run(argv, env=env, cwd=cwd, timeout=timeout,
                      on_output=lambda stream, chunk: (out if stream == "stdout" else err).append(chunk))
        return Captured(rc, b"".join(out), b"".join(err))

    def forward(self, local_port: int, remote_port: int) -> "Any":
        """Make the device's 127.0.0.1:``remote_port`` reachable at this machine's
        127.0.0.1:``local_port`` (targets with ``caps.forward``); returns a targets.forward.Forward
        the caller closes."""
        self.require("forward", "forward a port")
        raise NotImplementedError

    def program_argv(self, argv: Sequence[str], cwd: str | None = None) -> list[str]:
        """How the device's shell starts a program of the install (``qemu:`` puts its emulator
        in front of AArch64 programs)."""
        return list(argv)

    def launcher(self) -> list[str]:
        """The words a launch script on the device puts before a program of the install (``qemu:``:
        its emulator); ``program_argv`` does the same for one argv hexbuild runs itself."""
        return []

    def expect_transfer(self, files: Sequence[Path]) -> None:
        """A push of ``files`` is about to start (a target may measure its link first)."""

    def measured_link_rate(self) -> float | None:
        """Raw bytes/s the link carried when this target measured it, else None."""
        return None

    def preflight(self) -> None:
        """Check what this machine itself needs for the target (EnvironmentMissing), before any work."""

    def foreign(self, path: str) -> str | None:
        """The architecture of the program at ``path`` (a file of this machine) when this target
        cannot start it: only targets that run programs on this machine can tell."""
        return None

    def check_runnable(self, argv: Sequence[str], cwd: str | None = None) -> None:
        """UsageError in one line when ``argv``'s program is one this target cannot start (local:
        on a machine of another architecture); nothing is run."""

    def default_threads(self) -> int | None:
        """CPU threads a run gets when -t/run.threads says nothing (None: the phones' 6)."""
        return None

    def fit_cpu_mask(self, mask: str) -> str | None:
        """The revision's CPU mask default (older trees' adb scripts: ``0xfc``, a phone's cores
        2-7) if it fits the machine the programs run on, else None: then neither --cpu-mask nor
        --cpu-strict is injected. Phones and boards: the revision's own choice."""
        return mask

    def fidelity(self) -> dict[str, Any]:
        """The mark every result made here carries (hexbuild/fidelity.py): ``emulated`` and
        ``npu_model`` on the virtual NPU; nothing on a real device, or where no NPU runs."""
        return {}

    def glibc_version(self) -> str | None:
        """The glibc release programs run against here ("2.31"), None when unknown or not glibc."""
        return None

    def close(self) -> None:
        pass

    def __enter__(self) -> "Target":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
