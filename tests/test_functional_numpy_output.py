"""x.numpy() of a functional model's output: the functional pass settles the keras.Model call when it translates
the model too, and variables.py took every settled source for one left as written (a TensorFlow tensor, which has
numpy() and no detach()), so `model(x).numpy()` stayed and raised at run time (a torch output that requires grad
has no numpy()). A translated model's output gets .detach(); a model left as written keeps .numpy()."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

from fwport.core.pipeline import translate_source

TRANSLATED = '''
import json
import numpy as np
from tensorflow import keras

inputs = keras.Input((4,))
outputs = keras.layers.Dense(3)(inputs)
model = keras.Model(inputs, outputs)
x = np.random.rand(8, 4).astype("float32")
y = model(x).numpy()
again = model(x)
print("RESULT " + json.dumps({"y": y.tolist(), "again": np.asarray(again.detach()).tolist(), "type": type(y).__name__}))
'''

# a layer fwport has no rule for: the model is left as written, its output a TensorFlow tensor
LEFT = '''
import numpy as np
from tensorflow import keras

inputs = keras.Input((4,))
outputs = keras.layers.Discretization(bin_boundaries=[0.5])(inputs)
model = keras.Model(inputs, outputs)
x = np.random.rand(8, 4).astype("float32")
y = model(x).numpy()
'''


def test_numpy_of_a_translated_functional_models_output_is_detached_and_runs_without_tensorflow(tmp_path):
    r = translate_source(textwrap.dedent(TRANSLATED).lstrip("\n"), "model.py")
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert ").detach().numpy()" in r.output
    path = tmp_path / "translated.py"
    path.write_text(r.output)
    p = subprocess.run([sys.executable, "-c", "import sys; sys.modules['tensorflow'] = None; sys.modules['keras'] = None;"
                        f" exec(open({str(path)!r}).read())"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, p.stderr[-3000:]
    import json
    got = json.loads(line[-1][len("RESULT "):])
    assert got["type"] == "ndarray"
    np.testing.assert_array_equal(np.array(got["y"]), np.array(got["again"]))
    assert np.array(got["y"]).shape == (8, 3)


def test_numpy_of_a_functional_model_left_as_written_stays():
    r = translate_source(textwrap.dedent(LEFT).lstrip("\n"), "model.py")
    assert any("left as written" in f.message for f in r.findings if f.severity.value == "error")
    assert ").numpy()" in r.output and "detach" not in r.output
