"""Issue 8 (lay21): values of module-level Keras objects the translation leaves as written.

``x.numpy()`` becomes ``x.detach().numpy()`` (a torch tensor that requires grad has no numpy()), but where x is the
output of a module-level Keras layer or model that stays Keras (left as written, with an error at it), x is a
TensorFlow tensor, which has numpy() and no detach(): the call stays as written. Checked by running the original
and the translation (TensorFlow importable on both sides here: the untranslated layer needs it) and comparing.
"""
from __future__ import annotations

import json
import textwrap

import numpy as np
from fwport.core.pipeline import translate_source
from runners import python

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
    p = python(path, side="keras", timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3"})  # TensorFlow importable on both
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


REGULARIZED = '''
from tensorflow import keras
from tensorflow.keras import layers, regularizers


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        weight_decay = 0.003
        self.fc = layers.Dense(3, kernel_regularizer=regularizers.l2(weight_decay))
        self.out = layers.Dense(2, bias_regularizer=regularizers.l1(weight_decay))

    def call(self, x):
        return self.out(self.fc(x))
'''

REG_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import Net
rng = np.random.default_rng(0)
k1, b1 = rng.normal(size=(4, 3)), rng.normal(size=3)
k2, b2 = rng.normal(size=(3, 2)), rng.normal(size=2)
net = Net()
if sys.argv[2] == "keras":
    net(np.zeros((1, 4), "float32"))
    net.fc.set_weights([k1, b1]); net.out.set_weights([k2, b2])
    penalty = float(sum(net.losses))
else:
    import torch
    net(torch.zeros(1, 4))
    with torch.no_grad():
        for m, k, b in ((net.fc, k1, b1), (net.out, k2, b2)):
            m.weight.copy_(torch.as_tensor(k.T)); m.bias.copy_(torch.as_tensor(b))
    penalty = float(net.regularization_loss())
print("RESULT " + json.dumps({"penalty": penalty}))
'''


def test_regularizer_factor_from_a_local_constant(tmp_path):
    """``weight_decay = 0.003`` in __init__ then ``l2(weight_decay)`` / ``l1(weight_decay)``: the penalty reads the
    number (the method cannot read __init__'s local), and equals Keras's model.losses on the same weights."""
    from runners import keras_and_torch

    src = textwrap.dedent(REGULARIZED).lstrip("\n")
    r = translate_source(src, "model.py")
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert "0.003 * self.fc.weight.square().sum()" in r.output and "0.003 * self.out.bias.abs().sum()" in r.output
    want, got = keras_and_torch(tmp_path, src, r.output, REG_DRIVER)
    assert want["penalty"] > 0.01
    np.testing.assert_allclose(got["penalty"], want["penalty"], rtol=1e-5)
