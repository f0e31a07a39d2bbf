"""The command line: outputs, modes, exit codes, the rule catalogue and the residue check.

Most tests run the click command in-process (fast); the import-time checks need a fresh
interpreter and run one subprocess each.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fwport.core.cli import main

ROOT = Path(__file__).resolve().parent.parent

TF_SUM = '''import tensorflow as tf

def total(x):
    return tf.reduce_sum(x, axis=[1, 2], keepdims=True)
'''
TORCH_SUM = '''import torch

def total(x):
    return torch.sum(x, dim=(1, 2), keepdim=True)
'''
TF_UNSUPPORTED = '''import tensorflow as tf

d = tf.keras.layers.Dense(3, kernel_regularizer="l2")
'''
PLAIN = "def f(x):\n    return x + 1\n"
SEQUENTIAL = '''from tensorflow import keras

model = keras.Sequential([
    keras.Input(shape=(8,)),
    keras.layers.Dense(4, activation="relu"),
    keras.layers.Dense(2),
])
'''


def invoke(*args: str, cwd: Path | None = None):
    runner = CliRunner()
    old = os.getcwd()
    try:
        if cwd:
            os.chdir(cwd)
        return runner.invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


# --- one file ---------------------------------------------------------------------------------------
def test_one_file_translation_on_stdout_findings_on_stderr(tmp_path):
    f = write(tmp_path / "m.py", TF_SUM)
    r = invoke("tf2torch", str(f))
    assert r.exit_code == 0
    assert r.stdout == TORCH_SUM
    assert "keras-version" in r.stderr and "1 translated" in r.stderr
    assert f.read_text() == TF_SUM  # stdout mode writes nothing


def test_error_finding_exits_1_and_leaves_a_comment(tmp_path):
    f = write(tmp_path / "m.py", TF_UNSUPPORTED)
    r = invoke("tf2torch", str(f))
    assert r.exit_code == 1
    assert "# fwport: unsupported-argument" in r.stdout
    assert f"{f}:3:5: error: unsupported-argument" in r.stderr


def test_quiet_hides_info_findings(tmp_path):
    f = write(tmp_path / "m.py", TF_SUM)
    r = invoke("tf2torch", "-q", str(f))
    assert "keras-version" not in r.stderr and r.stdout == TORCH_SUM


def test_output_file(tmp_path):
    f = write(tmp_path / "m.py", TF_SUM)
    out = tmp_path / "out" / "m_torch.py"
    r = invoke("tf2torch", str(f), "-o", str(out))
    assert r.exit_code == 0 and r.stdout == ""
    assert out.read_text() == TORCH_SUM


def test_diff_is_a_patch_that_gives_the_translation(tmp_path):
    f = write(tmp_path / "m.py", TF_SUM)
    r = invoke("tf2torch", "--diff", "m.py", cwd=tmp_path)
    assert r.exit_code == 0
    assert r.stdout.startswith("--- a/m.py\n+++ b/m.py\n")
    subprocess.run(["patch", "-p1", "-s"], input=r.stdout, text=True, cwd=tmp_path, check=True)
    assert f.read_text() == TORCH_SUM


def test_check_exits_1_on_a_change_and_writes_nothing(tmp_path):
    tf = write(tmp_path / "a.py", TF_SUM)
    done = write(tmp_path / "b.py", TORCH_SUM)
    r = invoke("tf2torch", "--check", str(tf), str(done))
    assert r.exit_code == 1
    assert f"would translate {tf}" in r.stderr and f"would translate {done}" not in r.stderr
    assert tf.read_text() == TF_SUM
    assert invoke("tf2torch", "--check", str(done)).exit_code == 0


def test_in_place_rewrites_and_keeps_the_mode_but_never_touches_unchanged_files(tmp_path):
    tf = write(tmp_path / "a.py", TF_SUM)
    os.chmod(tf, 0o751)
    plain = write(tmp_path / "b.py", PLAIN)
    before = os.stat(plain)
    r = invoke("tf2torch", "--in-place", str(tf), str(plain))
    assert r.exit_code == 0
    assert tf.read_text() == TORCH_SUM
    assert os.stat(tf).st_mode & 0o7777 == 0o751
    after = os.stat(plain)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not [p for p in tmp_path.iterdir() if "fwport-tmp" in p.name]


def test_report_json_has_every_file_with_layers_and_models(tmp_path):
    write(tmp_path / "src" / "seq.py", SEQUENTIAL)
    write(tmp_path / "src" / "plain.py", PLAIN)
    write(tmp_path / "src" / "bad.py", b"import tensorflow\n\xff\n")
    rep = tmp_path / "rep" / "r.json"
    r = invoke("tf2torch", str(tmp_path / "src"), "-o", str(tmp_path / "out"), "--report", str(rep))
    assert r.exit_code == 2  # bad.py failed; the run went on
    data = json.loads(rep.read_text())
    by_name = {Path(f["path"]).name: f for f in data["files"]}
    assert [Path(f["path"]).name for f in data["files"]] == ["bad.py", "plain.py", "seq.py"]  # walk order
    assert by_name["seq.py"]["status"] == "converted"
    assert by_name["seq.py"]["layers"] and by_name["seq.py"]["layers"][0]["rule"] == "dense"
    assert by_name["seq.py"]["models"][0]["scope"] == "model"
    assert by_name["plain.py"]["status"] == "unchanged"
    assert by_name["bad.py"]["status"] == "failed"
    assert by_name["bad.py"]["findings"][0]["code"] == "input-error"
    assert data["summary"]["failed"] == 1 and data["summary"]["translated"] == 1
    assert by_name["seq.py"]["output_path"] == str(tmp_path / "out" / "seq.py")


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_stderr_report_formats(tmp_path, fmt):
    f = write(tmp_path / "m.py", TF_UNSUPPORTED)
    r = invoke("tf2torch", "--format", fmt, str(f))
    assert r.exit_code == 1
    if fmt == "json":
        data = json.loads(r.stderr)
        assert data["files"][0]["needs_attention"] is True
        assert data["summary"]["needs_attention"] == 1
    else:
        assert "## Needs attention" in r.stderr and "`unsupported-argument`" in r.stderr


def test_options_reach_the_translator(tmp_path, monkeypatch):
    import fwport.core.pipeline

    seen = []
    real = fwport.core.pipeline.translate_source

    def spy(source, path="<string>", pack=None, options=None):
        seen.append(dict(options or {}))
        return real(source, path, pack, options)

    monkeypatch.setattr(fwport.core.pipeline, "translate_source", spy)
    f = write(tmp_path / "m.py", TF_SUM)
    invoke("tf2torch", "--keras", "2", "--compile", str(f))
    assert seen == [{"keras": 2, "compile": True}]


def test_keras_option_decides_the_version(tmp_path):
    f = write(tmp_path / "m.py", TF_SUM)
    rep = tmp_path / "r.json"
    invoke("tf2torch", "--keras", "2", str(f), "--report", str(rep))
    assert json.loads(rep.read_text())["files"][0]["keras_version"] == 2


# --- trees ------------------------------------------------------------------------------------------
def _tree(root: Path) -> None:
    write(root / "pkg" / "model.py", TF_SUM)
    write(root / "pkg" / "util.py", PLAIN)
    write(root / "pkg" / "__init__.py", "")
    write(root / "pkg" / "data.txt", "not python")
    write(root / "top.py", SEQUENTIAL)
    for skipped in (".git/hook.py", "venv/lib/x.py", "env2/lib/y.py", "site-packages/z.py", "__pycache__/c.py",
                    "node_modules/n.py", "build/b.py", "dist/d.py", "legacy/old.py"):
        write(root / skipped, TF_SUM)
    write(root / "env2" / "pyvenv.cfg", "home = /usr\n")  # a virtual environment under another name


def test_directory_is_mirrored_skipping_tooling_folders(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    _tree(src)
    r = invoke("tf2torch", str(src), "-o", str(out), "--exclude", "legacy", "-j", "1")
    assert r.exit_code == 0, r.stderr
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == ["pkg/__init__.py", "pkg/data.txt", "pkg/model.py", "pkg/util.py", "top.py"]  # the whole tree
    assert (out / "pkg" / "data.txt").read_text() == "not python"
    assert (out / "pkg" / "model.py").read_text() == TORCH_SUM
    assert (out / "pkg" / "util.py").read_bytes() == (src / "pkg" / "util.py").read_bytes()
    assert "4 files: 2 translated, 2 unchanged, 0 need attention, 0 failed; 1 other file copied;" in r.stderr


def test_parallel_run_gives_the_same_outputs_in_walk_order(tmp_path):
    src = tmp_path / "src"
    for i in range(7):
        write(src / f"m{i}.py", TF_SUM if i % 2 else PLAIN)
    write(src / "m7.py", "import tensorflow as tf\nx = (\n")
    rep = tmp_path / "r.json"
    r = invoke("tf2torch", str(src), "-o", str(tmp_path / "out"), "-j", "2", "--report", str(rep))
    assert r.exit_code == 2  # m7.py does not parse; everything else was translated
    files = json.loads(rep.read_text())["files"]
    assert [Path(f["path"]).name for f in files] == [f"m{i}.py" for i in range(8)]
    for i in range(7):
        assert (tmp_path / "out" / f"m{i}.py").read_text() == (TORCH_SUM if i % 2 else PLAIN)
    assert files[7]["findings"][0]["code"] == "parse-error" and files[7]["findings"][0]["line"] == 2


def test_folder_needs_a_destination(tmp_path):
    _tree(tmp_path)
    r = invoke("tf2torch", str(tmp_path / "pkg"))
    assert r.exit_code == 2 and "-o DIR or --in-place" in r.stderr


@pytest.mark.parametrize("args,message", [
    (["--in-place", "-o", "x"], "exclude each other"),
    (["--check", "--in-place"], "--check writes nothing"),
])
def test_conflicting_options_are_usage_errors(tmp_path, args, message):
    f = write(tmp_path / "m.py", TF_SUM)
    r = invoke("tf2torch", str(f), *args)
    assert r.exit_code == 2 and message in r.stderr
    assert f.read_text() == TF_SUM


def test_output_into_the_input_folder_is_refused(tmp_path):
    write(tmp_path / "m.py", TF_SUM)
    r = invoke("tf2torch", str(tmp_path), "-o", str(tmp_path))
    assert r.exit_code == 2 and "--in-place" in r.stderr


def test_missing_path_exits_2_but_the_other_files_are_done(tmp_path):
    f = write(tmp_path / "m.py", TF_SUM)
    r = invoke("tf2torch", str(tmp_path / "nope.py"), str(f), "-o", str(tmp_path / "out"))
    assert r.exit_code == 2
    assert f"{tmp_path / 'nope.py'}: error: input-error: no such file or directory" in r.stderr
    assert (tmp_path / "out" / "m.py").read_text() == TORCH_SUM


# --- rules ------------------------------------------------------------------------------------------
def test_rules_lists_the_pack():
    r = invoke("rules", "tf2torch")
    assert r.exit_code == 0
    assert "keras.layers.Dense → torch.nn.Linear" in r.stdout
    assert "tensorflow.reduce_sum, tensorflow.math.reduce_sum, tensorflow.compat.v1.reduce_sum → torch.sum" in r.stdout


@pytest.mark.parametrize("rid", ["dense", "tf2torch/dense"])
def test_rules_show_one(rid):
    r = invoke("rules", "show", rid)
    assert r.exit_code == 0
    out = r.stdout
    assert out.startswith("tf2torch/dense: ")
    assert "units" in out and "rename       → out_features" in out
    assert "kernel_regularizer" in out and "unsupported" in out
    assert "kernel → weight: transpose(1, 0)" in out
    assert "-from tensorflow import keras" in out and "+from torch import nn" in out  # examples as diffs


def test_rules_show_unknown_suggests_close_matches():
    r = invoke("rules", "show", "dens")
    assert r.exit_code == 2
    assert "no rule 'dens'" in r.stderr and "dense" in r.stderr


def test_rules_unknown_pack():
    r = invoke("rules", "tf2torh")
    assert r.exit_code == 2 and "did you mean 'tf2torch'" in r.stderr


# --- residue ----------------------------------------------------------------------------------------
def test_residue_check(tmp_path):
    tf = write(tmp_path / "a.py", "import os\n\ndef f():\n    from tensorflow.keras import layers\n    return layers\n")
    dyn = write(tmp_path / "b.py", "import importlib\ntf = importlib.import_module('tensorflow')\n")
    done = write(tmp_path / "c.py", TORCH_SUM)
    r = invoke("residue", str(tf), str(dyn), str(done))
    assert r.exit_code == 1
    assert f"{tf}:4:5: error: residue: still uses the source framework: from tensorflow.keras import ..." in r.stderr
    assert f"{dyn}:2:6: error: residue" in r.stderr
    assert str(done) not in r.stderr.replace("files checked", "")
    assert invoke("residue", str(done)).exit_code == 0


def test_residue_looks_for_the_named_directions_source(tmp_path):
    tf = write(tmp_path / "a.py", "import tensorflow as tf\n")
    r = invoke("residue", "--direction", "tf2torch", str(tf))
    assert r.exit_code == 1 and "1 still use TensorFlow/Keras" in r.stderr
    r = invoke("residue", "--direction", "tf2jax-nope", str(tf))
    assert r.exit_code == 2 and "no translation direction 'tf2jax-nope'" in r.stderr and "tf2torch" in r.stderr
    bad = write(tmp_path / "d.py", "x = (\n")
    assert invoke("residue", str(bad)).exit_code == 2


# --- import time --------------------------------------------------------------------------------------
_BANNED = ("tensorflow", "keras", "tf_keras", "torch", "jax", "numpy")
_PROBE = """
import runpy, sys
sys.argv = ["fwport"] + sys.argv[1:]
try:
    runpy.run_module("fwport", run_name="__main__")
except SystemExit as e:
    code = e.code
banned = sorted(m for m in sys.modules if m.split(".")[0] in {banned!r})
sys.stderr.write("BANNED=" + ",".join(banned) + "\\n")
heavy = sorted(m for m in sys.modules if m == "libcst" or m.startswith("fwport.packs."))
sys.stderr.write("HEAVY=" + ",".join(heavy) + "\\n")
sys.exit(code)
"""


@pytest.mark.parametrize("args", [["--help"], ["tf2torch", "MODEL"]], ids=["help", "one-file"])
def test_no_framework_is_imported(tmp_path, args):
    model = write(tmp_path / "model.py", SEQUENTIAL)
    args = [str(model) if a == "MODEL" else a for a in args]
    p = subprocess.run([sys.executable, "-c", _PROBE.replace("{banned!r}", repr(set(_BANNED))), *args],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    assert "BANNED=\n" in p.stderr, p.stderr
    if args == ["--help"]:
        assert "tf2torch" in p.stdout and "verify" in p.stdout
        assert "HEAVY=\n" in p.stderr, p.stderr  # listing commands loads no parser and no pack (only the registry)


def test_verify_and_weights_are_registered():
    from fwport.core.cli import main as group

    import click
    ctx = click.Context(group)
    for name in ("verify", "weights"):
        cmd = group.get_command(ctx, name)
        assert cmd is not None and cmd.name == name
