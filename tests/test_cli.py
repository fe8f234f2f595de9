"""The CLI shell: version, help, global flags, and one clear line + exit code for bad input."""

import os
import subprocess
import sys

import pytest

from hexbuild import __version__, errors


def test_version(cli):
    r = cli("--version")
    assert r.rc == 0 and r.out.strip() == f"hexbuild {__version__}"
    r = cli("--json", "--version")
    assert r.rc == 0 and r.json == {"version": __version__}


def test_help_lists_commands(cli):
    r = cli("--help")
    assert r.rc == 0
    for cmd in ("source", "config", "doctor"):
        assert cmd in r.out


def test_help_imports_nothing_heavy():
    # --help must start fast: docker, paramiko, elftools, gguf and jinja2 load only when used.
    code = ("import sys\nfrom hexbuild.cli.main import main\nmain(['--help'])\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'docker','paramiko','elftools','gguf','jinja2','numpy'})\n"
            "print('HEAVY', heavy, file=sys.stderr)\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in cp.stderr, cp.stderr[-500:]


def test_global_flags_after_command(cli, tmp_path):
    r = cli("config", "show", "--source", str(tmp_path), "--json")
    assert r.rc == 0 and "settings" in r.json
    r = cli("--json", "config", "show", "--source", str(tmp_path))
    assert r.rc == 0 and "settings" in r.json


def test_config_show_sources(cli, tmp_path):
    (tmp_path / "hexbuild.toml").write_text('[build]\nos = "linux"\n')
    r = cli("config", "show", "--source", str(tmp_path), "--json", env={"HEXBUILD_BUILD_JOBS": "7"})
    s = r.json["settings"]
    assert s["build.os"] == {"value": "linux", "source": "file", "env": "HEXBUILD_BUILD_OS"}
    assert s["build.jobs"]["source"] == "env" and s["build.jobs"]["value"] == 7
    assert r.json["config_file"].endswith("hexbuild.toml")


# The table of bad inputs (one line, the documented exit code, nothing half-written) is
# tests/test_bad_input.py, one row per kind, mirrored in docs/bad-input.md.


def test_bad_input_json_error_object(cli, tmp_path):
    r = cli("source", "info", "--source", str(tmp_path / "missing"), "--json")
    assert r.rc == errors.USAGE
    assert r.json == {"error": {"type": "usage", "message": f"no such directory: {tmp_path / 'missing'}",
                                "exit_code": 2}}


def test_traceback_only_with_verbose(tmp_path):
    env = dict(os.environ, HEXBUILD_BUILD_JOBS="x")
    cp = subprocess.run([sys.executable, "-m", "hexbuild", "config", "show"], capture_output=True, text=True,
                        env=env, cwd=tmp_path)
    assert cp.returncode == 2 and "Traceback" not in cp.stderr
    cp = subprocess.run([sys.executable, "-m", "hexbuild", "-v", "config", "show"], capture_output=True,
                        text=True, env=env, cwd=tmp_path)
    assert cp.returncode == 2 and "Traceback" in cp.stderr


def test_exit_code_table_is_complete():
    codes = {v for k, v in vars(errors).items() if k.isupper() and isinstance(v, int)}
    assert codes == set(errors.EXIT_CODES)
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.HexbuildError)]
    assert {c.exit_code for c in classes} <= set(errors.EXIT_CODES)


def test_completion_script():
    cp = subprocess.run([sys.executable, "-m", "hexbuild", "--show-completion", "bash"], capture_output=True,
                        text=True, env=dict(os.environ, SHELL="/bin/bash"))
    assert cp.returncode == 0 and "complete" in cp.stdout


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_interrupt_is_one_line_and_130(tmp_path, signame):
    import signal
    import time

    script = tmp_path / "slow.py"
    script.write_text("import sys, time\nfrom hexbuild.cli import main as m\n"
                      "@m.app.command('slow')\ndef slow():\n    print('started', file=sys.stderr, flush=True)\n"
                      "    time.sleep(30)\nsys.argv = ['hexbuild', 'slow']\nm.run()\n")
    p = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, text=True)
    assert p.stderr.readline().strip() == "started"
    time.sleep(0.2)
    p.send_signal(getattr(signal, signame))
    err = p.communicate(timeout=20)[1]
    assert p.returncode == 130 and err.strip() == "hexbuild: error: interrupted"


@pytest.mark.parametrize("where", ["outcome", "typer"])
def test_an_interrupt_inside_exec_still_exits_130_under_python_m(tmp_path, where):
    """Ctrl-C landing in code run by exec() of a string (a dataclass made by a lazy import, as
    `serve --detach` does while it waits) is marked unhandled by CPython even once caught; under
    `python -m` the process then died by SIGINT (-2), not with the documented 130."""
    body = ("from hexbuild.cli import outcome\n"
            "raise SystemExit(outcome.run(lambda: exec('raise KeyboardInterrupt')))\n") if where == "outcome" else (
            "import sys\nfrom hexbuild.cli import main as m\n"
            "@m.app.command('slow')\ndef slow():\n    exec('raise KeyboardInterrupt')\n"
            "sys.argv = ['hexbuild', 'slow']\nm.run()\n")
    (tmp_path / "interrupted_in_exec.py").write_text(body)
    cp = subprocess.run([sys.executable, "-m", "interrupted_in_exec"], capture_output=True, text=True, cwd=tmp_path,
                        timeout=60)
    assert cp.returncode == 130 and cp.stderr.strip() == "hexbuild: error: interrupted", (cp.returncode, cp.stderr)


def test_each_command_module_alone_makes_its_command():
    """main() builds only the tree of the command named on the command line (start-up time):
    that works only while every module registers the command of its own name."""
    from hexbuild.cli.main import COMMAND_MODULES, build_cli, command_module

    for name in COMMAND_MODULES:
        assert name in build_cli(name).commands, name
    assert command_module(["--json", "--config", "x.toml", "run", "cli"]) == "run"
    assert command_module(["--config", "run", "plan"]) == "plan"  # --config takes a value
    assert command_module(["--help"]) is None and command_module(["nope"]) is None
    assert command_module(["bench", "compare"]) == "bench"


def test_a_command_runs_without_importing_the_others(tmp_path):
    code = ("import sys\nfrom hexbuild.cli.main import main\nmain(['config', 'show'])\n"
            "print('MODS', sorted(m for m in sys.modules if m.startswith('hexbuild.cli.')), file=sys.stderr)\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert "MODS ['hexbuild.cli.common', 'hexbuild.cli.config', 'hexbuild.cli.main', 'hexbuild.cli.outcome']" \
        in cp.stderr, cp.stderr[-500:]


def test_the_exit_skips_collecting_what_start_up_made(tmp_path):
    """run() freezes the objects before the interpreter's shutdown (its cycle collection over
    typer's and rich's objects cost a deploy tens of ms), and what a command wrote still
    reaches its stream."""
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('FROZEN', gc.get_freeze_count() > 1000, file=sys.stderr))\n"
            "sys.argv = ['hexbuild', '--json', '--version']\n"
            "from hexbuild.cli.main import run\nrun()\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr[-500:]
    assert "FROZEN True" in cp.stderr, cp.stderr[-500:]
    assert cp.stdout.strip() == '{"version": "%s"}' % __version__


def test_every_warning_and_note_is_in_the_json_document(cli, tmp_path, argv_echo):
    """One rule: every warning said goes into the --json document's `warnings`, every note into
    its `notes`; -q only keeps them off stderr. A package without the Hexagon host library and
    no build saying why gets the CPU-only warning: deploy's per-target results list it, and run's
    document has a `warnings` list (it had none); one built with the open toolchain gets a note."""
    from hexbuild.artifacts import write_manifest

    for meta, said in (({}, "warnings"), ({"toolchain": "open", "lacks": ["htp"]}, "notes")):
        pkg = tmp_path / said / "llama.cpp"
        (pkg / "bin").mkdir(parents=True)
        (pkg / "lib").mkdir()
        (pkg / "bin" / "llama-completion").write_bytes(argv_echo.read_bytes())
        (pkg / "bin" / "llama-completion").chmod(0o755)
        (pkg / "lib" / "libggml-cpu.so").write_bytes(b"cpu\n")
        write_manifest(pkg, {"os": "linux", **meta})
        spec = f"local:{tmp_path / said / 'inst'}"
        for quiet in ([], ["-q"]):
            r = cli("--json", *quiet, "deploy", str(pkg), "-t", spec)
            assert r.rc == 0, r.err
            (result,) = r.json
            assert any("runs on the CPU only" in w for w in result.get(said) or []), result
            assert ("runs on the CPU only" in r.err) is not bool(quiet)
            r = cli("--json", *quiet, "run", "completion", "-t", spec, "--results-dir", str(tmp_path / "res"))
            assert r.rc == 0, r.err
            assert isinstance(r.json["warnings"], list) and any("runs on the CPU only" in w for w in r.json[said])
            assert ("runs on the CPU only" in r.err) is not bool(quiet)
        if said == "notes":  # a note is no warning: --strict does not count it
            assert not any("runs on the CPU only" in w for w in r.json["warnings"])


def test_verbose_is_a_counted_flag_and_its_help_says_so(cli):
    """-v is repeated (-vv), not given a number: its help showed '-v <int> [default: 0]', and
    the --verbose 2 it suggested was refused."""
    for argv in (["--help"], ["run", "--help"], ["deploy", "--help"]):
        r = cli(*argv)
        line = next(ln for ln in r.out.splitlines() if "--verbose" in ln)
        assert "<int>" not in line and "INTEGER" not in line and "-vv" in r.out, line
        assert "[default: 0]" not in r.out.split("--verbose", 1)[1].split("--quiet", 1)[0]
    from hexbuild.ui import ui

    r = cli("-vv", "config", "show")
    assert r.rc == 0 and ui.verbose == 2
