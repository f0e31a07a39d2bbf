"""Issue 8 (lay21): values of module-level Keras objects the translation leaves as written.

``x.numpy()`` becomes ``x.detach().numpy()`` (a torch tensor that requires grad has no numpy()), but where x is the
output of a module-level Keras layer or model that stays Keras (left as written, with an error at it), x is a
TensorFlow tensor, which has numpy() and no detach(): the call stays as written. Checked by running the original
and the translation (TensorFlow importable on both sides here: the untranslated layer needs it) and comparing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
from fwport.core.pipeline import translate_source

LEFT = '''
import json
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

data = np.array([[-1.5, 0.5], [2.0, 0.0]], dtype="float32")
disc = layers.Discretization(bin_boundaries=[0.0, 1.0])
ids = disc(data)
out = {"ids": ids.numpy().tolist(), "sum": float(disc(data).numpy().sum())}
print("RESULT " + json.dumps(out))
'''

TRANSLATED = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

data = np.random.rand(10, 3).astype("float32")
norm = layers.Normalization()
norm.adapt(data)
y = norm(data)
print(y.numpy())
'''


def _run(code: str, tmp_path, name: str) -> dict:
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, p.stderr[-3000:]
    return json.loads(line[-1][len("RESULT "):])


def test_numpy_of_a_keras_layer_left_as_written_stays(tmp_path):
    src = textwrap.dedent(LEFT).lstrip("\n")
    r = translate_source(src, "model.py")
    assert any(f.code == "no-rule" and "Discretization" in f.message for f in r.findings)
    assert "ids.numpy()" in r.output and "disc(data).numpy()" in r.output
    assert "detach" not in r.output
    want, got = _run(src, tmp_path, "original"), _run(r.output, tmp_path, "translated")
    np.testing.assert_array_equal(got["ids"], want["ids"])
    assert got["sum"] == want["sum"] == 4.0


def test_numpy_of_a_translated_module_level_layer_is_detached():
    r = translate_source(textwrap.dedent(TRANSLATED).lstrip("\n"), "model.py")
    assert not [f for f in r.findings if f.severity.value == "error"]
    assert "y.detach().numpy()" in r.output
    assert any("x.numpy() → x.detach().numpy()" in f.message for f in r.findings)
