"""CI-native output: compiler diagnostics → located annotations, the GitHub step summary, fold
groups, and plain timestamped logs (no spinners, no redraws) when there is no terminal."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hexbuild import ci
from hexbuild.ui import _gh_location, ui

REPO = Path(__file__).resolve().parent.parent

BUILD_LOG = """\
-- Configuring done (1.2s)
[12/240] Building C object ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o
[13/240] Building C object ggml/src/ggml-hexagon/CMakeFiles/ggml-hexagon.dir/ggml-hexagon.cpp.o
FAILED: ggml/src/ggml-hexagon/CMakeFiles/ggml-hexagon.dir/ggml-hexagon.cpp.o
/workspace/ggml/src/ggml-hexagon/ggml-hexagon.cpp:1234:17: error: use of undeclared identifier 'rpcmem_alloc2'
 1234 |     void * p = rpcmem_alloc2(heap, flags, size);
      |                ^
/workspace/ggml/src/ggml-hexagon/ggml-hexagon.cpp:88:5: warning: unused variable 'n' [-Wunused-variable]
/workspace/ggml/src/ggml-hexagon/htp/matmul-ops.c:40:10: fatal error: 'hvx_utils.h' file not found
In file included from /workspace/ggml/src/ggml-hexagon/htp/main.c:3:
/workspace/ggml/src/ggml-hexagon/htp/ops.h:12:1: note: previous declaration is here
\x1b[1m/workspace/ggml/src/ggml-hexagon/ggml-hexagon.cpp:1234:17: \x1b[0;1;31merror: \x1b[0m\x1b[1muse of undeclared identifier 'rpcmem_alloc2'\x1b[0m
tools/ui/llama-ui-embed-host.c:1:10: fatal error: 'stdio.h' file not found
ld.lld: error: undefined symbol: htp_iface_skel_handle_invoke
CMake Error at ggml/src/ggml-hexagon/CMakeLists.txt:5 (message):
  Make sure HEXAGON_SDK_ROOT point to the correct Hexagon SDK installation.


ninja: build stopped: subcommand failed.
"""


def test_parse_diagnostics_locates_errors_in_the_checkout():
    diags = ci.parse_diagnostics(BUILD_LOG, roots=["/workspace"])
    got = [(d.file, d.line, d.col, d.severity) for d in diags]
    assert got == [
        ("ggml/src/ggml-hexagon/ggml-hexagon.cpp", 1234, 17, "error"),
        ("ggml/src/ggml-hexagon/ggml-hexagon.cpp", 88, 5, "warning"),
        ("ggml/src/ggml-hexagon/htp/matmul-ops.c", 40, 10, "error"),
        ("tools/ui/llama-ui-embed-host.c", 1, 10, "error"),
        ("ggml/src/ggml-hexagon/CMakeLists.txt", 5, None, "error"),
    ]
    # the colored repeat of the first error is the same error: reported once
    assert diags[0].message == "use of undeclared identifier 'rpcmem_alloc2'"
    assert diags[2].message == "'hvx_utils.h' file not found"
    assert diags[4].message == "Make sure HEXAGON_SDK_ROOT point to the correct Hexagon SDK installation."


def test_parse_diagnostics_host_paths_and_ninja_prefix(tmp_path):
    src = tmp_path / "llama.cpp"
    log = (f"[3/9] {src}/ggml/src/ggml.c:7: error: expected ';'\n"
           f"./common/arg.cpp:9:1: warning: x\n"
           f"/usr/include/stdio.h:1:1: error: outside\n")
    diags = ci.parse_diagnostics(log, roots=["/workspace", str(src)])
    assert [(d.file, d.line, d.col) for d in diags] == [
        ("ggml/src/ggml.c", 7, None), ("common/arg.cpp", 9, 1), ("/usr/include/stdio.h", 1, 1)]


def test_parse_diagnostics_nothing_in_a_clean_log():
    assert ci.parse_diagnostics("-- Build files have been written to: /workspace/build\nok\n") == []


def test_annotation_location_is_escaped():
    assert _gh_location("a,b:c.c", 3, 4) == " file=a%2Cb%3Ac.c,line=3,col=4"
    assert _gh_location("x.c", None, None) == " file=x.c"
    assert _gh_location(None, 3, 4) == ""


def test_annotate_github(capsys):
    ui.ci = "github"
    diags = ci.parse_diagnostics(BUILD_LOG)
    n = ci.annotate(diags)
    err = capsys.readouterr().err.splitlines()
    assert n == 4  # errors only, by default
    assert err[0] == ("::error file=ggml/src/ggml-hexagon/ggml-hexagon.cpp,line=1234,col=17::"
                      "use of undeclared identifier 'rpcmem_alloc2'")
    assert err[3] == ("::error file=ggml/src/ggml-hexagon/CMakeLists.txt,line=5::Make sure HEXAGON_SDK_ROOT "
                      "point to the correct Hexagon SDK installation.")
    many = [ci.Diagnostic(f"f{i}.c", i + 1, None, "error", "boom") for i in range(30)]
    assert ci.annotate(many) == ci.MAX_ANNOTATIONS


def test_annotate_elsewhere_uses_the_compiler_form(capsys):
    ui.ci = "gitlab"
    before = len(ui.warnings)
    ci.annotate(ci.parse_diagnostics(BUILD_LOG), severities=("error", "warning"))
    err = capsys.readouterr().err
    assert "ggml/src/ggml-hexagon/ggml-hexagon.cpp:1234:17: error: use of undeclared identifier" in err
    assert "::error" not in err
    assert len(ui.warnings) == before + 1  # the compiler warning counts toward --strict


def test_step_summary_only_on_github(tmp_path):
    summary = tmp_path / "summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    assert ci.step_summary_path({"GITHUB_STEP_SUMMARY": str(summary)}) is None
    assert ci.append_step_summary("# one", env) == summary
    assert ci.append_step_summary("# two\n", env) == summary
    assert summary.read_text() == "# one\n# two\n"  # appended: other steps' summaries stay


def test_step_summary_unwritable_is_a_warning(tmp_path, capsys):
    ui.ci = None
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "no" / "such" / "dir" / "s.md")}
    before = len(ui.warnings)
    assert ci.append_step_summary("# x", env) is None
    assert len(ui.warnings) == before + 1 and "cannot write the step summary" in capsys.readouterr().err


def _report(**over):
    report = {
        "status": "failed", "exit_code": 7, "failed_stage": "deploy", "revision": "b1234-abc",
        "os": ["android"], "strict": True, "warnings": ["verify (android): lib/x|y.so: something"],
        "error": {"message": "deploy failed on 1 of 2 target(s): adb:B: no space left", "hint": "free some space",
                  "details": {"diagnostics": [{"file": "ggml/x.c", "line": 7, "col": 3, "severity": "error",
                                               "message": "expected ';'"}]}},
        "stages": [
            {"name": "build", "os": "android", "status": "ok", "duration_s": 61.25, "summary": "pkg", "error": None},
            {"name": "verify", "os": "android", "status": "ok", "duration_s": 0.3, "summary": "s", "error": None,
             "verify": {"ok": True, "checks_total": 40, "warnings": 1, "failures": 0, "htp_versions": ["v73", "v79"],
                        "problems": [{"file": "lib/libggml-htp-v79.so", "check": "matmul symbol", "status": "warn",
                                      "detail": "op_matmul not found"}]}},
            {"name": "deploy", "os": None, "status": "failed", "duration_s": 2.0, "summary": "1/2 targets",
             "error": {"message": "deploy failed on 1 of 2 target(s)"}},
            {"name": "smoke", "os": None, "status": "skipped", "duration_s": None, "summary": "after deploy failed",
             "error": None},
        ],
        "artifacts": [{"name": "llama.cpp-android-b1234-hexagon.tar.gz", "os": "android", "size": 123456789,
                       "sha256": "ab" * 32}],
        "devices": [
            {"target": "adb:A", "device": "SM8650 v75", "deploy": "ok", "smoke": None, "error": None},
            {"target": "adb:B", "device": None, "deploy": "failed", "smoke": None, "error": "no space left"},
        ],
    }
    report.update(over)
    return report


def test_release_summary_markdown():
    md = ci.release_summary(_report())
    assert md.startswith("## hexbuild release: failed at deploy\n")
    assert "llama.cpp `b1234-abc`" in md and "exit code 7" in md
    assert "| build (android) | ✅ ok | 61.2s | pkg |" in md or "| build (android) | ✅ ok | 61.3s | pkg |" in md
    assert "| deploy | ❌ failed | 2.0s | deploy failed on 1 of 2 target(s) |" in md
    assert "| `llama.cpp-android-b1234-hexagon.tar.gz` | 117.7 MiB | `" + "ab" * 32 + "` |" in md
    assert "| android | ✅ ok | 40 | 1 | 0 | v73 v79 |" in md
    assert "| android | `lib/libggml-htp-v79.so` | matmul symbol | warn | op_matmul not found |" in md
    assert "| `adb:B` | - | ❌ failed | - | no space left |" in md
    assert "lib/x\\|y.so" in md  # a pipe in a value does not break the table
    assert "fatal (--strict)" in md
    assert "> hint: free some space" in md and "| `ggml/x.c` | 7 | expected ';' |" in md
    ok = ci.release_summary(_report(status="ok", exit_code=0, failed_stage=None, error=None, warnings=[]))
    assert ok.startswith("## hexbuild release: succeeded") and "Warnings" not in ok


def _run(args, env_extra, cwd):
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "GITHUB_STEP_SUMMARY") and not k.startswith("HEXBUILD_")}
    env.update(env_extra)
    env["PYTHONPATH"] = str(REPO)
    cp = subprocess.run([sys.executable, "-m", "hexbuild", *args], cwd=cwd, env=env, capture_output=True,
                        stdin=subprocess.DEVNULL, timeout=120)
    # bytes decoded by hand: text=True would turn the \r of GitLab's section markers into \n
    return subprocess.CompletedProcess(cp.args, cp.returncode, cp.stdout.decode(), cp.stderr.decode())


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    from tests import elf_factory as ef

    return ef.make_package(tmp_path_factory.mktemp("pkg"), os="android", htp=["v68", "v73"])


_STAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] ")


def test_plain_ci_log_is_timestamped_without_redraws(package, tmp_path):
    cp = _run(["release", "--prebuilt", str(package), "--dist", str(tmp_path / "dist")], {"CI": "true"}, tmp_path)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stderr.splitlines()
    assert lines and all(_STAMP.match(line) for line in lines), cp.stderr
    assert "\r" not in cp.stderr and "\x1b" not in cp.stderr and "\x1b" not in cp.stdout
    assert any("== verify (android)" in line for line in lines)


def test_no_terminal_is_enough_for_timestamps(package, tmp_path):
    """The README: without a terminal (CI) there are no spinners, plain timestamped lines —
    a pipe or a file is no terminal, CI=true or not."""
    cp = _run(["release", "--prebuilt", str(package), "--dist", str(tmp_path / "dist")], {}, tmp_path)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stderr.splitlines()
    assert lines and all(_STAMP.match(line) for line in lines), cp.stderr
    assert "\r" not in cp.stderr and "\x1b" not in cp.stderr


def test_quiet_prints_only_errors_yet_warnings_still_count(package, tmp_path):
    """-q: 'Only errors on stderr' — a warning is not printed, but --strict still counts it
    (exit 10) and --json still carries it."""
    import shutil

    from tests import elf_factory as ef

    warned = package.parent / "warned"
    shutil.copytree(package, warned / "llama.cpp", symlinks=True)
    # verify warns about a skel whose HVX matmul entry is hidden
    ef.hexagon_so(warned / "llama.cpp" / "lib" / "libggml-htp-v73.so", "v73", exports=(ef.SKEL_SYMBOL,),
                  hidden=("op_matmul",))
    base = ["release", "--prebuilt", f"android={warned / 'llama.cpp'}"]
    loud = _run([*base, "--dist", str(tmp_path / "d1"), "--no-strict"], {}, tmp_path)
    assert loud.returncode == 0 and "warning:" in loud.stderr, loud.stderr
    quiet = _run(["-q", "--json", *base, "--dist", str(tmp_path / "d2"), "--no-strict"], {}, tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "", quiet.stderr
    import json

    assert json.loads(quiet.stdout)["warnings"], quiet.stdout
    strict = _run(["-q", *base, "--dist", str(tmp_path / "d3"), "--strict"], {}, tmp_path)
    assert strict.returncode == 10, strict.stderr
    assert [ln for ln in strict.stderr.splitlines() if not ln.startswith("hint:")] == \
        [ln for ln in strict.stderr.splitlines() if ln.startswith("hexbuild: error:")]


def test_github_groups_each_stage(package, tmp_path):
    cp = _run(["release", "--prebuilt", str(package), "--dist", str(tmp_path / "dist")],
              {"CI": "true", "GITHUB_ACTIONS": "true"}, tmp_path)
    assert cp.returncode == 0, cp.stderr
    opened = re.findall(r"^::group::(.+)$", cp.stderr, re.M)
    assert opened == ["build (android)", "verify (android)", "package (android)", "checksums"]
    assert cp.stderr.count("::endgroup::") == len(opened)
    # each stage's outcome is printed after its group closes, so a folded log still shows it
    assert re.search(r"::endgroup::\n\[\d\d:\d\d:\d\d\] verify \(android\): ok", cp.stderr)
    assert "\x1b" not in cp.stderr


def test_gitlab_sections(package, tmp_path):
    cp = _run(["release", "--prebuilt", str(package), "--dist", str(tmp_path / "dist")],
              {"CI": "true", "GITLAB_CI": "true"}, tmp_path)
    assert cp.returncode == 0, cp.stderr
    starts = re.findall(r"\x1b\[0Ksection_start:\d+:(\w+)\r\x1b\[0K", cp.stderr)
    ends = re.findall(r"\x1b\[0Ksection_end:\d+:(\w+)\r\x1b\[0K", cp.stderr)
    assert starts == ends == ["build__android_", "verify__android_", "package__android_", "checksums"]


def test_github_groups_do_not_nest(capsys):
    """GitHub cannot nest ::group:: (the build opens its own inside the release's stage)."""
    ui.ci = "github"
    with ui.group("outer"):
        with ui.group("inner"):
            ui.info("x")
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("::")] == ["::group::outer", "::endgroup::"]
    assert any(line.endswith("== inner") for line in err)
    ui.ci = "gitlab"  # GitLab sections do nest
    with ui.group("outer"):
        with ui.group("inner"):
            pass
    assert capsys.readouterr().err.count("section_start:") == 2


def test_repo_path_for_a_checkout_below_the_workspace(tmp_path):
    src = tmp_path / "ws" / "third_party" / "llama.cpp"
    src.mkdir(parents=True)
    ws = {"GITHUB_WORKSPACE": str(tmp_path / "ws")}
    assert ci.repo_path("ggml/x.c", src, ws) == "third_party/llama.cpp/ggml/x.c"
    assert ci.repo_path("ggml/x.c", src, {"GITHUB_WORKSPACE": str(src)}) == "ggml/x.c"
    assert ci.repo_path("ggml/x.c", src, {"GITHUB_WORKSPACE": str(tmp_path / "elsewhere")}) == "ggml/x.c"
    assert ci.repo_path("/usr/include/x.h", src, ws) == "/usr/include/x.h"
    assert ci.repo_path("ggml/x.c", src, {}) == "ggml/x.c"


def test_build_log_text_prefers_the_log_file(tmp_path):
    log = tmp_path / "hexbuild-build.log"
    log.write_bytes(b"x" * (ci.LOG_TAIL_BYTES + 10) + b"\nlast line\n")
    text = ci.build_log_text({"log": str(log), "log_tail": ["tail"]})
    assert text.endswith("last line\n") and len(text) == ci.LOG_TAIL_BYTES
    assert ci.build_log_text({"log": str(tmp_path / "gone"), "log_tail": ["a", "b"]}) == "a\nb"
    assert ci.build_log_text({}) == ""
