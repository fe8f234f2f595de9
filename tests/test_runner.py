"""hexbuild/runner/: rendering runs in the deployed revision's vocabulary, the user's flags
replacing injected defaults, and the launch scripts `deploy --ndev` writes (run under a real sh
with the argv_echo tool standing in for llama.cpp's binaries)."""

import shlex
import subprocess

import jinja2
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hexbuild import runner
from hexbuild.errors import UsageError
from hexbuild.source import read_source
from tests.infra.runner_tools import decode_echo, make_install

DEST = "/data/local/tmp/llama.cpp"
MODELS = "/data/local/tmp/gguf"


@pytest.fixture(scope="module")
def old_facts(tree_0_3_20):
    return read_source(tree_0_3_20).to_json()


@pytest.fixture(scope="module")
def new_facts(tree_0_3_36):
    return read_source(tree_0_3_36).to_json()


def render(kind, facts=None, *, ndev=None, devices=None, extra=(), **kw):
    rev = runner.Revision.from_facts(facts)
    return runner.render(kind, rev=rev, dest=DEST, models_dir=MODELS,
                         sessions_=runner.sessions(rev, ndev=ndev, devices=devices), extra=list(extra), **kw)


def count(argv, *flags):
    return sum(1 for a in argv if a in flags)


# -- the revision's vocabulary --------------------------------------------------------------------
def test_revision_styles_follow_the_trees_own_scripts(old_facts, new_facts):
    old, new, unknown = (runner.Revision.from_facts(f) for f in (old_facts, new_facts, None))
    assert (old.style, old.ndev_var, old.devices_var) == ("adb-scripts", "GGML_HEXAGON_NDEV", None)
    assert (new.style, new.devices_var) == ("run.py", "GGML_HEXAGON_DEVICES")
    assert not unknown.known and unknown.style == "unknown"


def test_sessions_use_ndev_on_older_trees_and_devices_on_newer(old_facts, new_facts):
    inv = render("completion", old_facts, ndev=4)
    assert inv.env["GGML_HEXAGON_NDEV"] == "4" and "GGML_HEXAGON_DEVICES" not in inv.env
    assert inv.argv[inv.argv.index("--device") + 1] == "HTP0,HTP1,HTP2,HTP3"
    inv = render("completion", new_facts, ndev=4)
    assert inv.env["GGML_HEXAGON_DEVICES"] == "4" and "GGML_HEXAGON_NDEV" not in inv.env
    assert inv.argv[inv.argv.index("--device") + 1] == "HTP0,HTP1,HTP2,HTP3"


def test_one_session_sets_no_variable_but_names_htp0(old_facts):
    inv = render("cli", old_facts)
    assert not set(inv.env) & set(runner.SESSION_VARS)
    assert inv.argv[inv.argv.index("--device") + 1] == "HTP0"


def test_device_lists_in_the_newer_syntax(new_facts, old_facts):
    inv = render("completion", new_facts, devices="HTP0:0,HTP0:1")
    assert inv.env["GGML_HEXAGON_DEVICES"] == "HTP0:0,HTP0:1"
    assert inv.argv[inv.argv.index("--device") + 1] == "HTP0:0,HTP0:1"
    inv = render("completion", new_facts, devices="HTP0[0-1],HTP1[2-3]")
    assert inv.argv[inv.argv.index("--device") + 1] == "HTP0,HTP1"
    with pytest.raises(UsageError, match="does not read GGML_HEXAGON_DEVICES"):
        render("completion", old_facts, devices="HTP0:0,HTP0:1")
    inv = render("completion", old_facts, devices="HTP0,HTP1")  # plain names: NDEV=2 opens them
    assert inv.env["GGML_HEXAGON_NDEV"] == "2"
    with pytest.raises(UsageError, match="HTP0..HTP<n-1>"):
        render("completion", old_facts, devices="HTP0,HTP2")
    with pytest.raises(UsageError, match="not both"):
        render("completion", new_facts, ndev=2, devices="HTP0,HTP1")
    with pytest.raises(UsageError, match="not an HTP device"):
        render("completion", new_facts, devices="GPU0")


def test_revision_without_session_variables_opens_one(old_facts):
    facts = dict(old_facts, device_selection={"ndev_var": None, "devices_var": None})
    with pytest.raises(UsageError, match="one session only"):
        render("cli", facts, ndev=2)
    assert render("cli", facts, devices="HTP0").env.keys() == {"LD_LIBRARY_PATH", "ADSP_LIBRARY_PATH"}


def test_unknown_revision_gets_forms_every_revision_reads():
    inv = render("completion", None, ndev=2)
    assert inv.env["GGML_HEXAGON_NDEV"] == "2"  # newer trees still fall back to it
    assert inv.tool == "llama-completion" and "--no-mmap" not in inv.argv


def test_tool_names_as_the_revision_calls_them(new_facts):
    facts = dict(new_facts, tools=[t for t in new_facts["tools"] if t != "llama-completion"])
    inv = render("completion", facts)
    assert inv.argv[0] == "./bin/llama-cli" and "-no-cnv" in inv.argv
    assert render("completion", new_facts).argv[0] == "./bin/llama-completion"
    with pytest.raises(UsageError, match="builds no llama-server"):
        render("server", dict(new_facts, tools=["llama-cli"]))
    with pytest.raises(UsageError, match="after --"):
        render("tool", new_facts)


def test_defaults_follow_each_revisions_scripts(old_facts, new_facts):
    old = render("completion", old_facts).argv
    for flag in ("--no-mmap", "--cpu-mask", "--cpu-strict", "-no-cnv", "--poll"):
        assert flag in old
    new = render("completion", new_facts).argv
    # 0.3.36's common/arg.cpp has no --no-mmap: injecting it would make every run fail.
    assert "--no-mmap" not in new and "--cpu-mask" not in new
    assert new[new.index("-t") + 1] == "6" and new[new.index("--ubatch-size") + 1] == "1024"
    assert new[new.index("-ngl") + 1] == "99" and new[new.index("-fa") + 1] == "on"
    assert new[new.index("--ctx-size") + 1] == "8192"
    bench_old = render("bench", old_facts, ndev=2).argv
    assert bench_old[bench_old.index("--mmap") + 1] == "0"
    # llama-bench separates devices of one run with '/', combinations with ','.
    assert bench_old[bench_old.index("--device") + 1] == "HTP0/HTP1"


@pytest.mark.parametrize("kind", ["completion", "cli", "server", "mtmd"])
@pytest.mark.parametrize("flags,dropped", [
    (["-t", "4"], "-t"), (["--threads", "4"], "-t"),
    (["-ngl", "20"], "-ngl"), (["--n-gpu-layers", "20"], "-ngl"), (["--gpu-layers", "20"], "-ngl"),
    (["-fa", "off"], "-fa"), (["--flash-attn", "off"], "-fa"),
    (["-ub", "256"], "--ubatch-size"), (["--ubatch-size", "256"], "--ubatch-size"),
    (["-c", "4096"], "--ctx-size"), (["--ctx-size", "4096"], "--ctx-size"),
    (["-dev", "HTP1"], "--device"), (["--device", "HTP1"], "--device"),
    (["--poll", "0"], "--poll"),
])
def test_user_flags_replace_defaults(new_facts, kind, flags, dropped):
    argv = render(kind, new_facts, extra=flags).argv
    assert dropped not in argv[1:len(argv) - len(flags)]  # the injected one is gone
    assert argv[-len(flags):] == flags  # the user's own, last and unchanged


def test_model_flag_replaces_model_option(new_facts):
    argv = render("completion", new_facts, model="a.gguf", extra=["--model", "/x/b.gguf"]).argv
    assert count(argv, "-m", "--model") == 1 and argv[-1] == "/x/b.gguf"
    argv = render("completion", new_facts, model="a.gguf").argv
    assert argv[argv.index("-m") + 1] == f"{MODELS}/a.gguf"
    argv = render("completion", new_facts, model="/sdcard/m.gguf").argv
    assert argv[argv.index("-m") + 1] == "/sdcard/m.gguf"


def test_option_values_are_not_mistaken_for_flags(new_facts):
    argv = render("completion", new_facts, extra=["-p", "-t", "-n", "8"]).argv
    assert argv[argv.index("-t") + 1] == "6"  # "-t" here was the prompt, not a thread count


def test_mmap_spellings_replace_each_other(old_facts):
    argv = render("completion", old_facts, extra=["-lm", "mmap"]).argv
    assert "--no-mmap" not in argv
    argv = render("completion", old_facts, extra=["--mmap"]).argv
    assert count(argv, "--no-mmap", "--mmap") == 1


def test_backend_ops_gets_the_first_session_as_backend(new_facts):
    inv = render("tool", new_facts, ndev=2, extra=["test-backend-ops", "-o", "MUL_MAT"])
    assert inv.argv == ["./bin/test-backend-ops", "-b", "HTP0", "-o", "MUL_MAT"]
    inv = render("tool", new_facts, extra=["test-backend-ops", "-b", "HTP0:0"])
    assert inv.argv == ["./bin/test-backend-ops", "-b", "HTP0:0"]
    inv = render("tool", new_facts, extra=["llama-tokenize", "-t", "x"])
    assert inv.argv == ["./bin/llama-tokenize", "-t", "x"]  # run-tool.sh adds nothing
    inv = render("tool", new_facts, model="m.gguf", extra=["llama-perplexity", "-f", "w.txt"])
    assert inv.argv == ["./bin/llama-perplexity", "-m", f"{MODELS}/m.gguf", "-f", "w.txt"]
    with pytest.raises(UsageError, match="takes no model"):
        render("tool", new_facts, model="m.gguf", extra=["test-backend-ops"])


def test_environment_points_at_the_install(new_facts):
    inv = render("cli", new_facts)
    assert inv.env["LD_LIBRARY_PATH"] == f"{DEST}/lib"
    # ADSP_LIBRARY_PATH is ';'-separated (fastrpc#379): one directory, no ':' anywhere.
    assert inv.env["ADSP_LIBRARY_PATH"] == f"{DEST}/lib" and ":" not in inv.env["ADSP_LIBRARY_PATH"]
    assert inv.cwd == DEST


# -- knobs ---------------------------------------------------------------------------------------
def test_knobs_map_to_the_revisions_variables(old_facts, new_facts):
    new = runner.Revision.from_facts(new_facts)
    assert runner.knob_env([("nhvx", "4"), ("opfilter", "MUL_MAT|ADD")], new) == {
        "GGML_HEXAGON_NHVX": "4", "GGML_HEXAGON_OPFILTER": "MUL_MAT|ADD"}
    old = runner.Revision.from_facts(old_facts)
    assert runner.knob_env([("hmx", "0"), ("opmask", "3")], old) == {
        "GGML_HEXAGON_USE_HMX": "0", "GGML_HEXAGON_OPMASK": "3"}


def test_verbose_knobs_make_the_tool_verbose(new_facts):
    rev = runner.Revision.from_facts(new_facts)
    for kind in ("completion", "bench"):
        inv = runner.render(kind, rev=rev, dest=DEST, models_dir=MODELS, knobs={"GGML_HEXAGON_PROFILE": "1"},
                            sessions_=runner.sessions(rev, ndev=1, devices=None))
        assert inv.argv.count("-v") == 1
    assert "-v" not in render("completion", new_facts).argv


def test_knobs_the_revision_does_not_read_are_refused_by_name(old_facts, new_facts):
    with pytest.raises(UsageError) as e:
        runner.knob_env([("opstage", "1")], runner.Revision.from_facts(old_facts))
    assert "GGML_HEXAGON_OPSTAGE" in e.value.message and "--hex-opmask" in e.value.message
    assert "--hex-ndev" not in e.value.message and "\n" not in e.value.message
    with pytest.raises(UsageError, match="--hex-nhmx"):
        runner.knob_env([("opmask", "1")], runner.Revision.from_facts(new_facts))
    with pytest.raises(UsageError, match="spelled --ndev"):
        runner.knob_env([("ndev", "2")], runner.Revision())
    assert runner.knob_env([("future-knob", "1")], runner.Revision()) == {"GGML_HEXAGON_FUTURE_KNOB": "1"}


# -- exact quoting -------------------------------------------------------------------------------
nasty_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


@settings(max_examples=60, deadline=None)
@given(extra=st.lists(nasty_text, max_size=6), model=nasty_text.filter(bool))
def test_command_line_reads_back_into_the_same_argv(extra, model):
    rev = runner.Revision()
    inv = runner.render("cli", rev=rev, dest="/data/local/tmp/llama cpp", models_dir=MODELS,
                        sessions_=runner.sessions(rev, ndev=2, devices=None), extra=extra, model=model,
                        knobs={"GGML_HEXAGON_OPFILTER": "a b$(c)"})
    words = shlex.split(inv.command_line())
    assert words[:3] == ["cd", inv.cwd, "&&"]
    env_words = [f"{k}={v}" for k, v in inv.env.items()]
    assert words[3:3 + len(env_words)] == env_words
    assert words[3 + len(env_words):] == inv.argv
    assert inv.argv[len(inv.argv) - len(extra):] == extra


def test_nul_in_an_argument_is_a_usage_error():
    with pytest.raises(UsageError, match="NUL"):
        render("cli", None, extra=["a\x00b"])


def test_templates_refuse_undefined_variables():
    with pytest.raises(jinja2.UndefinedError):
        runner.render_template("commands/cli.j2", tool="llama-cli")


def test_a_render_seen_before_is_read_back_without_jinja2(tmp_path):
    """The second process that renders the same template with the same context reads the render
    back (a repeated `hexbuild run` does not import Jinja2) and gets the same text."""
    import os
    import sys

    code = ("import sys; from hexbuild.runner.templating import render_template as r; "
            "print(repr(r('commands/_env.j2', lib='/x y', session_env={'GGML_HEXAGON_NDEV': '2'}, knobs={}))); "
            "print('jinja2' in sys.modules)")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
            for _ in range(2)]
    assert runs[0].splitlines()[1] == "True" and runs[1].splitlines()[1] == "False"
    assert runs[0].splitlines()[0] == runs[1].splitlines()[0]
    assert "GGML_HEXAGON_NDEV" in runs[0] and "/x y" in runs[0]
    assert len(list((tmp_path / "hexbuild" / "renders-v1").iterdir())) == 1


def test_render_cache_keys_are_exact_and_private(tmp_path, monkeypatch):
    """An entry is used only under its whole key (the context and the size and mtime of every
    template, of jinja2 and of the filters), and never from a directory others can write."""
    from hexbuild.runner.templating import RenderCache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = RenderCache()
    stamp = cache._sources_stamp()
    assert "commands/cli.j2" in stamp and "launch/_base.sh.j2" in stamp and "jinja2" in stamp
    key = cache.key("commands/cli.j2", {"a": 1})
    assert key is not None and cache.get(key) is None
    cache.put(key, "tool \"x\"\n")
    assert cache.get(key) == "tool \"x\"\n"
    assert cache.get(cache.key("commands/cli.j2", {"a": 2})) is None
    cache._stamp = stamp.replace("cli.j2:", "cli.j2:9")  # the template changed size
    assert cache.get(cache.key("commands/cli.j2", {"a": 1})) is None
    assert cache.key("commands/cli.j2", {"a": object()}) is None  # not JSON: rendered every time
    cache.root.chmod(0o777)
    assert cache.get(key) is None


# -- launch scripts ------------------------------------------------------------------------------
def test_launch_scripts_for_each_tool_the_revision_builds(new_facts):
    scripts = runner.launch_scripts(facts=new_facts, dest=DEST, models_dir=MODELS, ndev=2, os="android",
                                    htp_arch="v79")
    assert set(scripts) == {"run-completion.sh", "run-cli.sh", "run-bench.sh", "run-server.sh", "run-tool.sh"}
    assert all(s.startswith("#!/system/bin/sh\n") for s in scripts.values())
    assert "GGML_HEXAGON_DEVICES=2" in scripts["run-cli.sh"] and "HTP0,HTP1" in scripts["run-cli.sh"]
    assert "HTP0/HTP1" in scripts["run-bench.sh"]
    facts = dict(new_facts, tools=["llama-cli"])
    assert set(runner.launch_scripts(facts=facts, dest=DEST, models_dir=MODELS, ndev=2, os="linux",
                                     htp_arch=None)) == {"run-completion.sh", "run-cli.sh", "run-tool.sh"}


def test_launch_scripts_refuse_sessions_llama_cpp_forces_to_one(old_facts):
    with pytest.raises(UsageError, match="below v75"):
        runner.launch_scripts(facts=old_facts, dest=DEST, models_dir=MODELS, ndev=2, os="android", htp_arch="v73")
    # one session, or Linux, or an unknown arch: nothing to refuse
    runner.launch_scripts(facts=old_facts, dest=DEST, models_dir=MODELS, ndev=1, os="android", htp_arch="v73")
    runner.launch_scripts(facts=old_facts, dest=DEST, models_dir=MODELS, ndev=2, os="linux", htp_arch="v73")
    runner.launch_scripts(facts=old_facts, dest=DEST, models_dir=MODELS, ndev=2, os="android", htp_arch=None)


@pytest.fixture
def install(tmp_path, argv_echo):
    tools = {n: argv_echo for n in ("llama-completion", "llama-cli", "llama-bench", "llama-server",
                                    "test-backend-ops", "llama-tokenize")}
    return make_install(tmp_path / "inst all", tools)


def write_scripts(install, facts, ndev=2, models_dir="/models dir"):
    scripts = runner.launch_scripts(facts=facts, dest=str(install), models_dir=models_dir, ndev=ndev,
                                    os="linux", htp_arch=None)
    (install / "scripts").mkdir(exist_ok=True)
    for name, text in scripts.items():
        (install / "scripts" / name).write_text(text)
    return install / "scripts"


def sh(script, *args, env=None):
    cp = subprocess.run(["sh", str(script), *args], capture_output=True, timeout=30,
                        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **(env or {})})
    assert cp.returncode == 0, cp.stderr
    return decode_echo(cp.stdout)


def test_launch_script_runs_the_tool_with_sessions_and_defaults(install, old_facts):
    scripts = write_scripts(install, old_facts)
    got = sh(scripts / "run-completion.sh", "-p", "hi there", env={"GGML_HEXAGON_DEVICES": "HTP9:9"})
    assert got["cwd"] == str(install)
    assert got["env"]["GGML_HEXAGON_NDEV"] == "2" and "GGML_HEXAGON_DEVICES" not in got["env"]
    assert got["env"]["ADSP_LIBRARY_PATH"] == f"{install}/lib"
    argv = got["argv"]
    assert argv[0] == "./bin/llama-completion" and argv[-2:] == ["-p", "hi there"]
    assert argv[argv.index("--device") + 1] == "HTP0,HTP1" and argv[argv.index("-t") + 1] == "6"
    assert argv[1:] == render("completion", old_facts, ndev=2, extra=["-p", "hi there"]).argv[1:]


def test_launch_script_lets_user_flags_replace_defaults(install, new_facts):
    scripts = write_scripts(install, new_facts)
    argv = sh(scripts / "run-cli.sh", "--threads", "3", "-ngl", "1", "-p", "-t")["argv"]
    assert count(argv[:-1], "-t", "--threads") == 1 and argv[argv.index("--threads") + 1] == "3"
    assert count(argv, "-ngl") == 1 and argv[-2:] == ["-p", "-t"]
    argv = sh(scripts / "run-bench.sh", "-t", "2,4")["argv"]
    assert count(argv, "-t") == 1 and argv[argv.index("--device") + 1] == "HTP0/HTP1"


def test_launch_script_model_from_m(install, new_facts):
    scripts = write_scripts(install, new_facts)
    argv = sh(scripts / "run-completion.sh", env={"M": "my model.gguf"})["argv"]
    assert argv[argv.index("-m") + 1] == "/models dir/my model.gguf"
    argv = sh(scripts / "run-completion.sh", "-m", "/x.gguf", env={"M": "ignored.gguf"})["argv"]
    assert count(argv, "-m") == 1 and argv[-1] == "/x.gguf"


def test_run_tool_script(install, new_facts):
    scripts = write_scripts(install, new_facts)
    got = sh(scripts / "run-tool.sh", "test-backend-ops", "-o", "MUL_MAT")
    assert got["argv"] == ["./bin/test-backend-ops", "-b", "HTP0", "-o", "MUL_MAT"]
    assert sh(scripts / "run-tool.sh", "llama-tokenize", "a b")["argv"] == ["./bin/llama-tokenize", "a b"]
    cp = subprocess.run(["sh", str(scripts / "run-tool.sh")], capture_output=True, timeout=30)
    assert cp.returncode == 2 and b"usage" in cp.stderr


def test_launch_script_with_home_relative_dest(tmp_path, argv_echo, new_facts):
    make_install(tmp_path / "home" / "llama.cpp", {"llama-cli": argv_echo})
    scripts = runner.launch_scripts(facts=new_facts, dest="~/llama.cpp", models_dir="~/gguf", ndev=1,
                                    os="linux", htp_arch=None)
    path = tmp_path / "run-cli.sh"
    path.write_text(scripts["run-cli.sh"])
    got = sh(path, env={"HOME": str(tmp_path / "home"), "M": "m.gguf"})
    assert got["cwd"] == str(tmp_path / "home" / "llama.cpp")
    assert got["env"]["LD_LIBRARY_PATH"] == str(tmp_path / "home" / "llama.cpp" / "lib")
    assert got["argv"][got["argv"].index("-m") + 1] == str(tmp_path / "home" / "gguf" / "m.gguf")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(nasty_text, max_size=8))
def test_launch_script_passes_every_argument_through_exactly(install, new_facts, args):
    scripts = install / "scripts"
    if not scripts.exists():
        write_scripts(install, new_facts)
    argv = sh(scripts / "run-tool.sh", "llama-tokenize", *args)["argv"]
    assert argv == ["./bin/llama-tokenize", *args]
    argv = sh(scripts / "run-cli.sh", "--", *args)["argv"]
    assert argv[argv.index("--") + 1:] == args


def test_mtmd_runs_llama_mtmd_cli_like_run_mtmd_sh(old_facts, new_facts):
    """run-mtmd.sh: llama-mtmd-cli with the cli defaults; --mmproj and --image are the user's."""
    inv = render("mtmd", old_facts, ndev=2, model="gemma.gguf",
                 extra=["--mmproj", "/m/mmproj.gguf", "--image", "cat one.jpg"])
    assert inv.argv[0] == "./bin/llama-mtmd-cli" and inv.tool == "llama-mtmd-cli"
    for flag in ("--no-mmap", "--poll", "--cpu-mask", "--ctx-size", "-fa", "-ngl"):
        assert flag in inv.argv
    assert inv.argv[inv.argv.index("--device") + 1] == "HTP0,HTP1"
    assert inv.argv[-4:] == ["--mmproj", "/m/mmproj.gguf", "--image", "cat one.jpg"]
    with pytest.raises(UsageError, match="builds no llama-mtmd-cli"):
        render("mtmd", dict(new_facts, tools=["llama-cli"]))
