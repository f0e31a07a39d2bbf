"""``.astype(dtype)`` chained on a call of TensorFlow's NumPy API (tnp) → ``.to(torch dtype)`` (ndarrays.py), in a
file that turns on NumPy behaviour with prefer_float32=True (which makes tnp's float default float32: the cast makes
it matter no more, so tnp.random.randn(...).astype(...) translates there; without the cast it is still refused).
The original runs under TensorFlow, the translation in a process where TensorFlow cannot be imported; dtypes,
shapes and values compared (randn's values differ: another generator; their moments are checked)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SRC = '''import numpy as np
import tensorflow as tf
import tensorflow.experimental.numpy as tnp

tnp.experimental_enable_numpy_behavior(prefer_float32=True)


def run(x):
    return (tnp.ones((2, 3)).astype(np.int32), tnp.ones(4).astype("float32"), tnp.asarray(x).astype(tnp.float16),
            tnp.asarray(x).astype(dtype=tnp.bool_), tnp.ones([2], dtype=tnp.int32).astype(np.float64),
            tnp.random.randn(4000, 2).astype(np.float32), tnp.random.randn(3).astype(tnp.float64))
'''

_RUN = r'''
import json, sys
import numpy as np
if sys.argv[2] == "torch":
    sys.modules["tensorflow"] = None  # the translation must not import TensorFlow
ns = {}
exec(sys.argv[1], ns)
x = np.array([[0.0, 1.5], [-2.25, 3.0]], np.float32)
out = ns["run"](x if sys.argv[2] == "tf" else __import__("torch").as_tensor(x))
print(json.dumps([[str(np.asarray(o).dtype), list(np.asarray(o).shape), np.asarray(o).astype("float64").tolist()]
                  for o in out]))
'''


def _run(source: str, framework: str) -> list:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    p = subprocess.run([sys.executable, "-c", _RUN, source, framework], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_astype_on_tnp_calls_matches_tensorflow():
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    r = translate_source(SRC, "m.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert ".astype(" not in r.output and "tnp." not in r.output, r.output
    assert "torch.randn(4000, 2, dtype=torch.float64).to(torch.float32)" in r.output
    want, got = _run(SRC, "tf"), _run(r.output, "torch")
    assert len(want) == len(got) == 7
    for k, ((wd, ws, wv), (gd, gs, gv)) in enumerate(zip(want, got)):
        assert (wd, ws) == (gd, gs), (k, wd, ws, gd, gs)
        if k < 5:
            assert wv == gv, (k, wv, gv)
    for values in (want[5][2], got[5][2]):  # standard normal draws: moments within 5 standard errors
        a = np.asarray(values)
        assert abs(a.mean()) < 5 / np.sqrt(a.size) and abs(a.std() - 1) < 5 / np.sqrt(a.size / 2)


def test_without_a_cast_prefer_float32_is_still_refused_and_an_unknown_dtype_is_an_error():
    r = translate_source("import tensorflow.experimental.numpy as tnp\n\n"
                         "tnp.experimental_enable_numpy_behavior(prefer_float32=True)\n"
                         "a = tnp.random.randn(3)\n"
                         "b = tnp.ones(3, dtype=tnp.float32).astype(dt)\n", "m.py")
    errors = sorted((f.line, f.code) for f in r.findings if f.severity is Severity.ERROR)
    assert errors == [(4, "unsupported-argument"), (5, "unsupported-argument")], r.findings
    assert "tnp.random.randn(3)" in r.output and ".astype(dt)" in r.output
    assert any("has no astype" in f.message for f in r.findings if f.line == 5)
