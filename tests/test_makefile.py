"""`make demo` / `make test` install into the active virtual environment, else into a project
.venv they create (never into the system Python: PEP 668). Checked with `make -n` (nothing runs)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry_run(target: str, env_changes: dict[str, str | None], *args: str) -> list[str]:
    # run from `make test` itself, the outer make's variables must not leak in
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PY", "PYTHON", "VENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTEST_ARGS")}
    env.update({k: v for k, v in env_changes.items() if v is not None})
    r = subprocess.run(["make", "-n", "-C", str(ROOT), target, "PYTEST_ARGS=", *args], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.strip() for line in r.stdout.splitlines() if line.strip() and not line.startswith("make")]


@pytest.mark.parametrize("target", ["test", "demo"])
def test_without_an_active_environment_a_project_venv_is_created_and_used(tmp_path, target):
    venv = tmp_path / "venv"
    lines = dry_run(target, {}, f"VENV={venv}")
    assert any(f"-m venv --system-site-packages {venv}" in l for l in lines), lines
    installs = [l for l in lines if "pip install" in l]
    assert installs and all(l.startswith(f"{venv}/bin/python -m pip install") for l in installs)
    assert not any("--break-system-packages" in l for l in lines)
    assert not any(l.startswith("python3 -m pip") for l in lines)  # never the first python3 on PATH


def test_an_active_virtual_environment_is_used_as_it_is(tmp_path):
    lines = dry_run("test", {"VIRTUAL_ENV": str(tmp_path / "active")}, f"VENV={tmp_path / 'venv'}")
    assert not any("-m venv" in l for l in lines)
    assert "python3 -m pip install --quiet -e '.[verify,dev]'" in lines and "python3 -m pytest -q -n auto --dist loadfile --durations=30" in lines


def test_the_project_venv_is_ignored_by_git():
    assert ".venv/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_suite_runs_in_one_process_when_asked(tmp_path):
    lines = dry_run("test", {"VIRTUAL_ENV": str(tmp_path / "active")}, "JOBS=0")
    assert "python3 -m pytest -q -n 0 --dist loadfile --durations=30" in lines
