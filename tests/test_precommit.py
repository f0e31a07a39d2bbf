"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit against a throwaway project.

pre-commit builds a virtual environment and pip-installs fwport into it (from a snapshot of this
working tree committed to a temporary git repository, so the test does not depend on what is
committed here). That needs the package index for libcst, click and hatchling: about 10 seconds
with a warm pip cache.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TF = "import tensorflow as tf\n\ny = tf.reduce_sum(x, 1)\n"
TORCH = "import torch\n\ny = torch.sum(x, dim=1)\n"

pytestmark = pytest.mark.skipif(shutil.which("pre-commit") is None or shutil.which("git") is None,
                                reason="needs the pre-commit and git executables")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=test@fwport", "-c", "user.name=fwport test",
                           "-c", "commit.gpgsign=false", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def snapshot_repo(dest: Path) -> str:
    """This working tree's package, committed to a fresh repository; returns the commit."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, dest / name)
    for folder in ("fwport", "rules"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "snapshot")
    return git(dest, "rev-parse", "HEAD")


def run_hook(project: Path, hook: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    env.pop("PYTHONPATH", None)  # the hook must work from its own installed environment
    return subprocess.run(["pre-commit", "run", hook, "--all-files"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)


def test_hooks_fail_on_tensorflow_code_and_pass_once_translated(tmp_path):
    sha = snapshot_repo(tmp_path / "fwport")
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {tmp_path / 'fwport'}\n    rev: {sha}\n    hooks:\n"
        "      - id: fwport-tf2torch-check\n      - id: fwport-no-tensorflow\n")
    (project / "model.py").write_text(TF)
    git(project, "add", "-A")
    home = tmp_path / "pre-commit-home"

    r = run_hook(project, "fwport-tf2torch-check", home)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "would translate model.py" in r.stdout
    r = run_hook(project, "fwport-no-tensorflow", home)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "model.py:1:1: error: residue: still uses the source framework: import tensorflow" in r.stdout

    (project / "model.py").write_text(TORCH)
    git(project, "add", "-A")
    for hook in ("fwport-tf2torch-check", "fwport-no-tensorflow"):
        r = run_hook(project, hook, home)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Passed" in r.stdout


def test_hooks_check_notebooks_too(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    sha = snapshot_repo(tmp_path / "fwport")
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {tmp_path / 'fwport'}\n    rev: {sha}\n    hooks:\n"
        "      - id: fwport-tf2torch-check\n      - id: fwport-no-tensorflow\n")
    nb = new_notebook()
    nb.cells = [new_code_cell("%matplotlib inline\nimport tensorflow as tf"), new_code_cell("y = tf.reduce_sum(x, 1)")]
    (project / "analysis.ipynb").write_text(nbformat.writes(nb) + "\n")
    git(project, "add", "-A")
    home = tmp_path / "pre-commit-home"

    r = run_hook(project, "fwport-tf2torch-check", home)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "would translate analysis.ipynb" in r.stdout
    r = run_hook(project, "fwport-no-tensorflow", home)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "analysis.ipynb:cell 1:2:1: error: residue: still uses the source framework: import tensorflow" in r.stdout

    nb.cells = [new_code_cell("%matplotlib inline\nimport torch"), new_code_cell("y = torch.sum(x, dim=1)")]
    (project / "analysis.ipynb").write_text(nbformat.writes(nb) + "\n")
    git(project, "add", "-A")
    for hook in ("fwport-tf2torch-check", "fwport-no-tensorflow"):
        r = run_hook(project, hook, home)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Passed" in r.stdout
