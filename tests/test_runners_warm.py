"""runners.Warm, the warm worker the numerical tests run their drivers in: each run sees what a new process would
(its own argv, working folder and modules; the test's own modules, blocked imports and framework settings of an
earlier run gone), and a failure, an exit code, a hang come back as from subprocess.run."""
from __future__ import annotations

import json
import subprocess

import pytest

from runners import Warm, run_side

STATE = """
import json, os, sys
import numpy as np
blocked = sys.modules.get("torch", "absent") is None
mine = "mymod" in sys.modules
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "blocked": blocked, "mine": mine}))
sys.modules["torch"] = None  # what a jax side does; a later run must be able to import torch again
sys.path.insert(0, sys.argv[1])
import mymod
print("value", mymod.VALUE)
"""


def test_each_run_starts_as_a_new_process_would(tmp_path):
    for i, value in enumerate((1, 2)):  # the second run imports its own mymod, not the first's
        d = tmp_path / str(i)
        d.mkdir()
        (d / "mymod.py").write_text(f"VALUE = {value}\n")
        p = Warm.run(STATE, [d, "x"], "plain", cwd=d)
        assert p.returncode == 0, p.stderr
        first, second = p.stdout.splitlines()
        assert json.loads(first) == {"argv": [str(d), "x"], "cwd": str(d), "blocked": False, "mine": False}
        assert second == f"value {value}"
    assert len(Warm.workers) == 1  # one worker ran both


def test_framework_settings_are_put_back():
    pytest.importorskip("torch")
    code = "import torch\nprint(torch.get_default_dtype(), torch.initial_seed())\n" \
           "torch.set_default_dtype(torch.float64)\ntorch.manual_seed(3)\n"
    a, b = (Warm.run(code, [], "torch") for _ in range(2))
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    (dtype_a, seed_a), (dtype_b, seed_b) = a.stdout.split(), b.stdout.split()
    assert dtype_a == dtype_b == "torch.float32"
    assert seed_b not in ("3", seed_a)  # a random seed, as a new process has, not the one the first run set


def test_failures_exit_codes_and_hangs_are_reported(tmp_path):
    p = Warm.run("raise ValueError('boom')", [], "plain")
    assert p.returncode == 1 and "ValueError: boom" in p.stderr
    p = Warm.run("import sys\nprint('out')\nsys.exit(3)", [], "plain")
    assert p.returncode == 3 and p.stdout == "out\n"
    p = Warm.run("import tensorflow", [], "torch")  # the torch side cannot import TensorFlow
    assert p.returncode == 1 and "tensorflow" in p.stderr
    with pytest.raises(subprocess.TimeoutExpired):
        Warm.run("import time\ntime.sleep(60)", [], "plain", timeout=2)
    p = Warm.run("print('after')", [], "plain")  # a new worker after the hung one was killed
    assert p.returncode == 0 and p.stdout == "after\n"


def test_run_side_reads_the_result_line(tmp_path):
    driver = "import sys\nsys.path.insert(0, sys.argv[1])\nfrom model import N\nprint('RESULT', N * 2)\n"
    assert run_side(tmp_path / "a", "torch", "N = 4\n", driver, "torch") == 8
    assert run_side(tmp_path / "b", "torch", "N = 5\n", driver, "torch") == 10  # its own model.py
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        run_side(tmp_path / "c", "torch", "N = 1 / 0\n", driver, "torch")
