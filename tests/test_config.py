"""[tool.fwport] in the nearest pyproject.toml: keys, validation messages, and options overriding it."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fwport.core.cli import main
from fwport.core.config import ConfigError, load_config
from fwport.core.rule import builtin_rules_dir

TF = "import tensorflow as tf\n\ny = tf.reduce_sum(x, 1)\n"


def run(*args: str, cwd: Path | None = None):
    old = os.getcwd()
    try:
        if cwd:
            os.chdir(cwd)
        return CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)


def project(tmp_path: Path, table: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[project]\nname = 'x'\n\n[tool.fwport]\n{table}\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(TF)
    return tmp_path


def test_nearest_pyproject_with_a_fwport_table_wins(tmp_path):
    project(tmp_path, "keras = 2\nmax_size = 1234")
    nested = tmp_path / "src" / "sub"
    nested.mkdir()
    (nested / "pyproject.toml").write_text("[project]\nname = 'unrelated'\n")
    cfg = load_config(nested / "m.py")
    assert cfg.path == str(tmp_path / "pyproject.toml")
    assert (cfg.keras, cfg.max_size) == (2, 1234)


@pytest.mark.parametrize("table,key,words", [
    ("exlude = ['x']", "exlude", "did you mean 'exclude'"),
    ("keras = 4", "keras", "expected 2 or 3"),
    ("max_size = '5MB'", "max_size", "positive number of bytes"),
    ("rules = ['missing-dir']", "rules", "does not exist"),
    ("exclude = 3", "exclude", "list of strings"),
])
def test_bad_config_names_the_file_the_key_and_the_fix(tmp_path, table, key, words):
    project(tmp_path, table)
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "src")
    msg = str(e.value)
    assert msg.startswith(str(tmp_path / "pyproject.toml")) and f"key '{key}'" in msg and "Fix:" in msg
    assert words in msg
    r = run("tf2torch", str(tmp_path / "src" / "m.py"))
    assert r.exit_code == 2 and f"key '{key}'" in r.stderr and "Traceback" not in r.stderr


def test_keras_from_config_and_the_option_overrides_it(tmp_path):
    project(tmp_path, "keras = 2")
    rep = tmp_path / "r.json"
    run("tf2torch", str(tmp_path / "src" / "m.py"), "--report", str(rep))
    assert json.loads(rep.read_text())["files"][0]["keras_version"] == 2
    run("tf2torch", str(tmp_path / "src" / "m.py"), "--keras", "3", "--report", str(rep))
    assert json.loads(rep.read_text())["files"][0]["keras_version"] == 3


def test_exclude_globs_apply_to_walked_and_named_files(tmp_path):
    project(tmp_path, "exclude = ['src/gen/*', '*_pb2.py']")
    (tmp_path / "src" / "gen").mkdir()
    (tmp_path / "src" / "gen" / "a.py").write_text(TF)
    (tmp_path / "src" / "x_pb2.py").write_text(TF)
    r = run("tf2torch", "src", "-o", "out", cwd=tmp_path)
    assert r.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "out").rglob("*.py")) == ["m.py"]
    # a file named on the command line (as pre-commit does) is still excluded, and reported skipped
    r = run("tf2torch", "--check", "src/x_pb2.py", cwd=tmp_path)
    assert r.exit_code == 0 and "1 skipped" in r.stderr


def test_extra_rule_folder_and_disabled_rules(tmp_path):
    mine = tmp_path / "my-rules"
    mine.mkdir()
    text = (builtin_rules_dir() / "tf2torch" / "reduce-sum.toml").read_text()
    (mine / "my-sum.toml").write_text(text.replace('target = "torch.sum"', 'target = "torch.nansum"')
                                      .replace("torch.sum(", "torch.nansum("))
    project(tmp_path, "rules = ['my-rules']\ndisable = ['reduce-sum']")
    r = run("tf2torch", str(tmp_path / "src" / "m.py"))
    assert r.exit_code == 0, r.stderr
    assert "torch.nansum(x, dim=1)" in r.stdout
    r = run("rules", "show", "my-sum", cwd=tmp_path)
    assert r.exit_code == 0 and "torch.nansum" in r.stdout


def test_disabling_an_unknown_rule_suggests_the_right_id(tmp_path):
    project(tmp_path, "disable = ['reduce_sum']")
    r = run("tf2torch", str(tmp_path / "src" / "m.py"))
    assert r.exit_code == 2 and "no rule 'reduce_sum'" in r.stderr and "'reduce-sum'" in r.stderr


def test_disabled_rule_leaves_the_call(tmp_path):
    r = run("tf2torch", "--disable", "reduce-sum", str(project(tmp_path, "") / "src" / "m.py"))
    assert "tf.reduce_sum" in r.stdout and r.exit_code == 1  # untranslated: needs a human


def test_max_size_from_config(tmp_path):
    project(tmp_path, "max_size = 10")
    r = run("tf2torch", str(tmp_path / "src" / "m.py"))
    assert r.exit_code == 2 and "over the" in r.stderr and "max_size" in r.stderr
    assert run("tf2torch", "--max-size", "100000", str(tmp_path / "src" / "m.py")).exit_code == 0


def test_explicit_config_file(tmp_path):
    project(tmp_path, "keras = 2")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(tmp_path / "src" / "m.py", elsewhere / "m.py")
    rep = tmp_path / "r.json"
    run("tf2torch", str(elsewhere / "m.py"), "--config", str(tmp_path / "pyproject.toml"), "--report", str(rep))
    assert json.loads(rep.read_text())["files"][0]["keras_version"] == 2
