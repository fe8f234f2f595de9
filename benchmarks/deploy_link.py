#!/usr/bin/env python3
"""Deploy at the link's limit: `hexbuild deploy` against `adb push` on a shaped link, in one run.

Real parts only: a virtual phone (AOSP adbd 34.0.5 in a network namespace of its own, reached
over a veth pair shaped with tc tbf in both directions: tests/infra/devices.py, link_mbit), the
real adb server and client (34.0.5, whose `adb push` compresses with zstd by default; `-Z` sends
raw), and the real open-toolchain build of llama.cpp 0.3.36 (tests/infra/real_build.py; made
once in the test cache, seconds when it is up to date) plus two large real shared libraries of
this machine (LLVM's, from clang-19's dependencies), so that a rebuild changes 200+ MB.

Cases, at each link rate (--rates, MB/s; tbf at 8x that in Mbit/s):

- (a) redeploy after a rebuild that changed every shared library: `hexbuild deploy` of the new
  package (the phone has the old one, and hexbuild remembers its link from that deploy) against
  `adb push` of the same changed files, and `adb push -Z` (raw) of them;
- (b) first deploy of the whole package to an empty phone (nothing remembered: hexbuild measures
  the link) against `adb push` of the package directory (and `-Z`);
- (d) as (a), but the rebuild ends as `hexbuild build` does: its verify and manifest steps (the
  manifest hashes every file) run on the new package through the same hexbuild, timed apart, and
  leave the hashes in hexbuild's cache for the deploy that follows;
- (c) a typical rebuild, a few MB changed (libllama and libggml-cpu): hexbuild against `adb push`
  of those files, with hexbuild's start-up (`hexbuild --version`) and its device probe and
  listing (`deploy --dry-run`) timed apart, to show what dominates there.

- (ssh) the changed libraries of (a) to an SSH board (sshd in the phone's namespace, this
  machine's userland): SFTP (what hexbuild used before), SFTP over SSH's own zlib compression
  (paramiko's compress=True), and hexbuild's zstd stream into the board's `zstd -d` — the
  figures that decide what ssh:// keeps.

A "rebuild" rewrites each changed library's GNU build ID (what a relink with new code does): the
bytes and their compressibility are the real library's. Every hexbuild run is the CLI as a user
runs it (`hexbuild deploy PKG --target adb:SERIAL --json`), start-up included: by default a
virtual environment of its own in the work directory with this checkout installed into it as a
wheel, as pip or pipx installs it (--hexbuild checkout runs `python -m hexbuild` from the
checkout instead: the interpreter that runs the benchmark, its site-packages' .pth files and an
editable install's finder included; both start-ups are printed). After each run, the phone's
files are checked against the package's sha256. Times are medians of --repeat
runs; the load average and the CPU seconds of hexbuild and of adb are printed beside them, since
the machine is shared and compression is CPU work.

    python benchmarks/deploy_link.py [--rates 20,40,300] [--repeat 3] [--cases a,d,b,c,ssh] [--hexbuild wheel|checkout]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.infra.devices import new_device, start_adb_server  # noqa: E402
from tests.infra.docker_engine import cache_dir, engine_for_benchmark  # noqa: E402
from tests.infra.real_build import build_open_package, ensure_open_image_on  # noqa: E402

BIG_LIBS = ("/usr/lib/x86_64-linux-gnu/libLLVM.so.19.1", "/usr/lib/x86_64-linux-gnu/libclang-cpp.so.19.1")
TYPICAL = ("libllama.so", "libggml-cpu.so")  # what a change in the model code relinks
DEST_PARENT = "/data/local/tmp"
MB = 1e6


# -- the package -------------------------------------------------------------------------------------
def real_package(work: Path, built: Path | None = None) -> Path:
    """A copy of the real open-toolchain build (``built``, else built or found up to date in the
    test cache) with the two large libraries added to lib/."""
    if built is None:
        import docker

        daemon, host = engine_for_benchmark()
        try:
            ensure_open_image_on(docker.DockerClient(base_url=host, timeout=900), cache_dir())
            built, _ = build_open_package(host, cache_dir())
        finally:
            if daemon is not None:
                daemon.stop()
    pkg = work / "pkg" / "llama.cpp"
    shutil.copytree(built, pkg, symlinks=True)
    for lib in BIG_LIBS:
        if not Path(lib).is_file():
            raise SystemExit(f"{lib} is missing: run scripts/setup-test-env.sh (it installs clang-19)")
        shutil.copyfile(lib, pkg / "lib" / Path(lib).name)
    return pkg


def shared_libraries(pkg: Path) -> list[Path]:
    return sorted(p for p in (pkg / "lib").iterdir() if p.is_file() and not p.is_symlink() and ".so" in p.name)


def rebuild(paths: list[Path], stamp: int) -> None:
    """A new GNU build ID in each library (stamp makes it differ from every earlier one)."""
    from elftools.elf.elffile import ELFFile

    for path in paths:
        with open(path, "r+b") as f:
            section = ELFFile(f).get_section_by_name(".note.gnu.build-id")
            if section is None:
                raise SystemExit(f"{path} has no GNU build ID")
            f.seek(section["sh_offset"] + 16)  # namesz, descsz, type, "GNU\0"
            desc = hashlib.sha256(f"{path.name}-{stamp}".encode()).digest()[:section["sh_size"] - 16]
            f.write(desc)


def tree_bytes(paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in paths)


# -- running things ------------------------------------------------------------------------------------
class Clock:
    """Wall time of a child process with its CPU seconds (user + system)."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def __enter__(self) -> "Clock":
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._cpu0, self._t0 = r.ru_utime + r.ru_stime, time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self._t0
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu = r.ru_utime + r.ru_stime - self._cpu0


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    cp = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=env, stdin=subprocess.DEVNULL,
                        timeout=3600)
    if cp.returncode != 0:
        raise SystemExit(f"failed ({cp.returncode}): {' '.join(argv)}\n{cp.stdout[-2000:]}{cp.stderr[-3000:]}")
    return cp


def installed_hexbuild(work: Path) -> list[str]:
    """This checkout installed as a wheel into a virtual environment of its own (its dependencies
    from the package index, as pip installs them): the command a user runs."""
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)], dict(os.environ))
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(REPO)],
        dict(os.environ))
    return [str(venv / "bin" / "hexbuild")]


def start_up(cmd: list[str], env: dict[str, str], n: int = 5) -> float:
    """Median seconds of `hexbuild --version`."""
    times = []
    for _ in range(n):
        with Clock() as c:
            run([*cmd, "--version"], env)
        times.append(c.wall)
    return med(times)


class Bench:
    def __init__(self, server, dev, env: dict[str, str], cmd: list[str]):
        self.server, self.dev, self.env, self.cmd = server, dev, env, cmd
        self.serial = dev.serial

    def hexbuild(self, *args: str) -> tuple[Clock, dict]:
        with Clock() as c:
            cp = run([*self.cmd, *args], self.env)
        return c, (json.loads(cp.stdout)[0] if "--json" in args else {})

    def deploy(self, pkg: Path, dest: str, *extra: str) -> tuple[Clock, dict]:
        clock, res = self.hexbuild("deploy", str(pkg), "--target", f"adb:{self.serial}", "--dest", dest, "--json",
                                   "-q", *extra)
        if res.get("status") not in ("ok", "unchanged"):
            raise SystemExit(f"hexbuild deploy failed: {res}")
        return clock, res

    def forget_link(self) -> None:
        (Path(self.env["XDG_STATE_HOME"]) / "hexbuild" / "links.json").unlink(missing_ok=True)

    def adb(self, *args: str) -> Clock:
        with Clock() as c:
            run([self.server.adb, "-P", str(self.server.port), "-s", self.serial, *args], self.env)
        return c

    def shell(self, command: str) -> None:
        run([self.server.adb, "-P", str(self.server.port), "-s", self.serial, "shell", command], self.env)

    def check(self, pkg: Path, dest: str) -> None:
        """Every file of the package is on the phone with the package's sha256."""
        link = self.dev.tmp / Path(dest).relative_to(DEST_PARENT)
        root = link.parent / os.readlink(link)  # the release link is relative, within its parent
        for p in pkg.rglob("*"):
            if p.is_file() and p.name != "manifest.json":
                rel = p.relative_to(pkg)
                got = hashlib.sha256((root / rel).read_bytes()).hexdigest()
                if got != hashlib.sha256(p.read_bytes()).hexdigest():
                    raise SystemExit(f"{rel} differs on the phone after the deploy")


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def row(case: str, h: list[Clock], a: list[Clock], raw: list[Clock] | None, note: str) -> None:
    hw, aw = med([c.wall for c in h]), med([c.wall for c in a])
    rw = f"{med([c.wall for c in raw]):8.2f}" if raw else f"{'-':>8}"
    ratio_raw = f"{hw / med([c.wall for c in raw]):7.2f}x" if raw else f"{'-':>8}"
    print(f"{case:30}{hw:9.2f}{aw:9.2f}{hw / aw:7.2f}x{rw}{ratio_raw}  cpu {med([c.cpu for c in h]):.2f}/"
          f"{med([c.cpu for c in a]):.2f}s  {note}", flush=True)


# -- the cases -------------------------------------------------------------------------------------------
# the last steps of `hexbuild build` (build/publish.py): verify the package, write its manifest
BUILD_TAIL = """import sys, time
from pathlib import Path
from hexbuild.artifacts import verify_package, write_manifest
pkg = Path(sys.argv[1])
t = time.perf_counter()
verify_package(pkg, os="linux", toolchain="open")  # it reports the two x86-64 libraries added: no matter here
write_manifest(pkg)
print(time.perf_counter() - t)"""


def case_redeploy(b: Bench, pkg: Path, repeat: int, stamp: list[int], *, built: bool = False) -> None:
    dest = f"{DEST_PARENT}/llama.cpp"
    libs = shared_libraries(pkg)
    b.shell(f"rm -rf {DEST_PARENT}/llama.cpp {DEST_PARENT}/.llama.cpp* {DEST_PARENT}/plain")
    b.deploy(pkg, dest)  # the phone has the old build
    b.shell(f"mkdir -p {DEST_PARENT}/plain/lib")
    h, a, raw, wire, pushed, inside, tail, sends = [], [], [], [], 0, [], [], []
    for _ in range(repeat):
        stamp[0] += 1
        rebuild(libs, stamp[0])
        if built:
            python = str(Path(b.cmd[0]).with_name("python")) if len(b.cmd) == 1 else b.cmd[0]
            tail.append(float(run([python, "-c", BUILD_TAIL, str(pkg)], b.env).stdout.split()[-1]))
        clock, res = b.deploy(pkg, dest)
        b.check(pkg, dest)
        h.append(clock)
        inside.append(res["duration_s"])
        sends.append(res["push_s"])
        wire.append(res["wire_bytes"] / res["bytes_pushed"])
        pushed = res["bytes_pushed"]
        a.append(b.adb("push", *map(str, libs), f"{DEST_PARENT}/plain/lib/"))
        raw.append(b.adb("push", "-Z", *map(str, libs), f"{DEST_PARENT}/plain/lib/"))
    after = (f"; the build's verify and manifest took {med(tail):.2f}s before it" if built
             else " (the rest: start-up, hashing the package)")
    row(f"({'d' if built else 'a'}) redeploy, {pushed / MB:.0f} MB changed", h, a, raw,
        f"wire/file {med(wire):.2f}, link {res.get('link_mb_s')} MB/s, {res['files_compressed']}/{res['files_pushed']} "
        f"files zstd; the device part {med(inside):.2f}s, of which sending {med(sends):.2f}s "
        f"({med(sends) / med([c.wall for c in raw]):.2f}x adb push -Z){after}; load {os.getloadavg()[0]:.1f}")


def case_first(b: Bench, pkg: Path, repeat: int) -> None:
    dest = f"{DEST_PARENT}/first"
    h, a, raw, wire, inside, sends = [], [], [], [], [], []
    total = tree_bytes([p for p in pkg.rglob("*") if p.is_file()])
    for _ in range(repeat):
        b.shell(f"rm -rf {DEST_PARENT}/first {DEST_PARENT}/.first* {DEST_PARENT}/plain")
        b.forget_link()  # a first deploy knows nothing of the phone: it measures the link
        clock, res = b.deploy(pkg, dest)
        b.check(pkg, dest)
        h.append(clock)
        inside.append(res["duration_s"])
        sends.append(res["push_s"])
        wire.append(res["wire_bytes"] / res["bytes_pushed"])
        b.shell(f"mkdir -p {DEST_PARENT}/plain")
        a.append(b.adb("push", str(pkg), f"{DEST_PARENT}/plain/"))
        b.shell(f"rm -rf {DEST_PARENT}/plain && mkdir -p {DEST_PARENT}/plain")
        raw.append(b.adb("push", "-Z", str(pkg), f"{DEST_PARENT}/plain/"))
    b.shell(f"rm -rf {DEST_PARENT}/first {DEST_PARENT}/.first* {DEST_PARENT}/plain")
    row(f"(b) first deploy, {total / MB:.0f} MB", h, a, raw,
        f"wire/file {med(wire):.2f}, link {res.get('link_mb_s')} MB/s; the device part {med(inside):.2f}s, of which "
        f"sending {med(sends):.2f}s ({med(sends) / med([c.wall for c in raw]):.2f}x adb push -Z); "
        f"load {os.getloadavg()[0]:.1f}")


def case_typical(b: Bench, pkg: Path, repeat: int, stamp: list[int]) -> None:
    dest = f"{DEST_PARENT}/llama.cpp"
    libs = [p for p in shared_libraries(pkg) if any(p.name.startswith(t) for t in TYPICAL)]
    b.shell(f"mkdir -p {DEST_PARENT}/plain/lib")
    h, a, startup, dry = [], [], [], []
    for _ in range(repeat):
        stamp[0] += 1
        rebuild(libs, stamp[0])
        dry.append(b.deploy(pkg, dest, "--dry-run")[0])
        clock, res = b.deploy(pkg, dest)
        b.check(pkg, dest)
        h.append(clock)
        a.append(b.adb("push", *map(str, libs), f"{DEST_PARENT}/plain/lib/"))
        startup.append(b.hexbuild("--version")[0])
    hw, s, d = med([c.wall for c in h]), med([c.wall for c in startup]), med([c.wall for c in dry])
    row(f"(c) rebuild, {res['bytes_pushed'] / MB:.1f} MB changed", h, a, None,
        f"of hexbuild's {hw:.2f}s: start-up {s:.2f}s, + probe/listing/plan (--dry-run) {d - s:.2f}s, "
        f"+ push/switch {max(0.0, hw - d):.2f}s; load {os.getloadavg()[0]:.1f}")


class BoardSshd:
    """sshd in the phone's network namespace (so behind the shaped link), key login as root."""

    def __init__(self, dev, work: Path):
        self.dir = work / f"sshd-{dev.port}"
        self.dir.mkdir()
        d = self.dir
        for key in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True)
        shutil.copy(d / "client_key.pub", d / "authorized_keys")
        self.host, self.port = dev.address, 2222
        (d / "sshd_config").write_text(f"ListenAddress {self.host}\nPort {self.port}\nHostKey {d / 'host_key'}\n"
                                       f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile {d / 'pid'}\n"
                                       "PasswordAuthentication no\nPermitRootLogin prohibit-password\nUsePAM no\n"
                                       "StrictModes no\nCompression yes\nSubsystem sftp internal-sftp\n")
        (d / "sshd_config").chmod(0o600)
        Path("/run/sshd").mkdir(exist_ok=True)
        self.proc = subprocess.Popen(["ip", "netns", "exec", dev.netns, "/usr/sbin/sshd", "-D", "-e", "-f",
                                      str(d / "sshd_config")], stderr=open(d / "log", "wb"))
        from tests.infra.devices import wait_port

        wait_port(self.port, proc=self.proc, host=self.host)
        key = (d / "host_key.pub").read_text().split()
        (d / "known_hosts").write_text(f"[{self.host}]:{self.port} {key[0]} {key[1]}\n")
        self.settings = {"ssh.known_hosts": str(d / "known_hosts"), "ssh.identity": str(d / "client_key"),
                         "deploy.timeout": 600.0}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def case_ssh(dev, work: Path, pkg: Path, repeat: int) -> None:
    import paramiko

    from hexbuild.targets import parse_target
    from hexbuild.targets.wire import WirePolicy

    board = BoardSshd(dev, work)
    libs = shared_libraries(pkg)
    remote = str(work / f"board-{dev.port}" / "lib")  # sshd sees this machine's files
    times: dict[str, list[float]] = {"sftp": [], "sftp+zlib": [], "zstd": []}
    try:
        for _ in range(repeat):
            for how in times:
                t0 = time.perf_counter()
                if how == "sftp+zlib":
                    client = paramiko.SSHClient()
                    client.load_host_keys(board.settings["ssh.known_hosts"])
                    client.connect(board.host, board.port, "root", key_filename=board.settings["ssh.identity"],
                                   compress=True, look_for_keys=False, allow_agent=False)
                    sftp = client.open_sftp()
                    for lib in libs:
                        with open(lib, "rb") as f:
                            sftp.putfo(f, f"{remote}/{lib.name}", file_size=lib.stat().st_size, confirm=True)
                    client.close()
                else:
                    with parse_target(f"ssh://root@{board.host}:{board.port}", board.settings) as t:
                        t.mkdirs(remote)
                        if how == "sftp":
                            t._wire = WirePolicy(zstd=False)
                        for lib in libs:
                            t.send_file(lib, f"{remote}/{lib.name}")
                times[how].append(time.perf_counter() - t0)
                for lib in libs:
                    if (Path(remote) / lib.name).read_bytes() != lib.read_bytes():
                        raise SystemExit(f"{lib.name} differs on the board after {how}")
    finally:
        board.stop()
    sftp_t = med(times["sftp"])
    print(f"{'(ssh) ' + format(tree_bytes(libs) / MB, '.0f') + ' MB of libraries':30}" + "".join(
        f"  {how} {med(ts):.2f}s ({med(ts) / sftp_t:.2f}x)" for how, ts in times.items())
        + f"; load {os.getloadavg()[0]:.1f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="20,40,300", help="link rates in MB/s (comma-separated)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default="a,d,b,c,ssh")
    ap.add_argument("--hexbuild", choices=("wheel", "checkout"), default="wheel",
                    help="wheel: this checkout installed into a virtual environment (as a user has it); "
                         "checkout: python -m hexbuild from the checkout")
    ap.add_argument("--package", help="the real build's package directory, when it is built already (pkg-open-linux/"
                                      "llama.cpp of the test cache's 0.3.36 copy); the two libraries are added")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the shaped link is a network namespace with tc")
    cases = set(args.cases.split(","))
    work = Path(tempfile.mkdtemp(prefix="deploy-link-", dir="/var/tmp"))
    try:
        pkg = real_package(work, Path(args.package) if args.package else None)  # a copy: "rebuilds" rewrite it
        libs = shared_libraries(pkg)
        print(f"package: {pkg} ({tree_bytes([p for p in pkg.rglob('*') if p.is_file()]) / MB:.0f} MB, "
              f"{len(libs)} shared libraries, {tree_bytes(libs) / MB:.0f} MB); {os.cpu_count()} CPUs, "
              f"load {os.getloadavg()[0]:.1f}; medians of {args.repeat}")
        server = start_adb_server(work)
        # hexbuild as a user runs it: with its bytecode (a session that sets PYTHONDONTWRITEBYTECODE
        # would compile every module on every run, 0.4 s of CPU that no installed hexbuild spends)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("HEXBUILD_") and k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "hexbuild")], check=True)
        env.update(ANDROID_ADB_SERVER_PORT=str(server.port), HOME=str(server.home),
                   XDG_CACHE_HOME=str(work / "xdg-cache"), XDG_STATE_HOME=str(work / "xdg-state"),
                   XDG_CONFIG_HOME=str(work / "xdg-config"), PYTHONPATH=str(REPO))
        checkout = [sys.executable, "-m", "hexbuild"]
        wheel = installed_hexbuild(work)
        wheel_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        cmd, cmd_env = (wheel, wheel_env) if args.hexbuild == "wheel" else (checkout, env)
        print(f"hexbuild: {'the wheel in a virtual environment' if args.hexbuild == 'wheel' else 'python -m hexbuild'}; "
              f"start-up (hexbuild --version) {start_up(wheel, wheel_env):.2f}s from the wheel, "
              f"{start_up(checkout, env):.2f}s from the checkout (python -m, this interpreter's site-packages)")
        stamp = [0]
        try:
            for rate in (float(r) for r in args.rates.split(",")):
                dev = new_device(server, work, link_mbit=int(rate * 8))
                try:
                    b = Bench(server, dev, cmd_env, cmd)
                    print(f"\nlink {rate:g} MB/s (tbf {int(rate * 8)} Mbit/s each way), phone {dev.serial}")
                    print(f"{'case':30}{'hexbuild':>9}{'adb':>9}{'ratio':>8}{'adb -Z':>8}{'vs -Z':>8}  "
                          f"cpu hexbuild/adb, notes")
                    if "a" in cases:
                        case_redeploy(b, pkg, args.repeat, stamp)
                    if "d" in cases:
                        case_redeploy(b, pkg, args.repeat, stamp, built=True)
                    if "b" in cases:
                        case_first(b, pkg, args.repeat)
                    if "c" in cases:
                        case_typical(b, pkg, args.repeat, stamp)
                    if "ssh" in cases:
                        case_ssh(dev, work, pkg, args.repeat)
                finally:
                    dev.stop()
        finally:
            server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
