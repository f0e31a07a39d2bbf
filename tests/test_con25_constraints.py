"""Keras weight constraints (issue 8): ``keras.constraints.get`` / ``serialize`` / ``max_norm(...)`` → the
KerasConstraint helper (Keras's projection, its axis defaults); ``add_weight(constraint=...)`` → the class's
apply_constraints(), which the written fit calls after each optimizer.step() as Keras's optimizer assigns
``constraint(var)`` to each trainable variable after its update. Checked against Keras numerically: each
projection, and a model trained by Keras and by the translation from the same weights (subprocesses)."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from helpers import error_lines as errors
from runners import compare_fit, keras_and_torch
from test_fit_callbacks import tx


def _helper():
    """The KerasConstraint class the translation writes, run here (it is plain Python)."""
    out = tx("from tensorflow import keras\nc = keras.constraints.get('max_norm')\n").output
    ns: dict = {}
    exec(out[out.index("class KerasConstraint"):out.index("\nc = ")], ns)
    return ns["KerasConstraint"]


# (Keras's constructor, its arguments, the translation's name): every class with its defaults and with axes
CASES = [("MaxNorm", {}), ("MaxNorm", {"max_value": 0.7, "axis": 1}), ("MaxNorm", {"max_value": 1.5, "axis": [0, 1]}),
         ("MinMaxNorm", {}), ("MinMaxNorm", {"min_value": 0.9, "max_value": 1.3, "rate": 0.4, "axis": 2}),
         ("NonNeg", {}), ("UnitNorm", {}), ("UnitNorm", {"axis": [0, 2]})]


@pytest.mark.parametrize("name,config", CASES)
def test_the_helper_projects_as_keras(name, config):
    import keras
    import torch

    C = _helper()
    rng = np.random.default_rng(3)
    w = (rng.normal(size=(3, 4, 5)) * 1.5).astype("float32")
    want = keras.ops.convert_to_numpy(getattr(keras.constraints, name)(**config)(keras.ops.convert_to_tensor(w)))
    got = C(name, **config)(torch.tensor(w)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert not np.allclose(want, w)  # the projection changes this weight (the check could fail)
    tf_keras = pytest.importorskip("tf_keras")  # Keras 2 projects the same way
    np.testing.assert_allclose(got, getattr(tf_keras.constraints, name)(**config)(w).numpy(), rtol=1e-6, atol=2e-7)


def test_the_helper_resolves_identifiers_as_keras_get():
    import keras

    C = _helper()
    assert C(None) is None
    for ident in ["max_norm", "MaxNorm", "min_max_norm", "non_neg", "unit_norm", "UnitNorm"]:
        k = keras.constraints.serialize(keras.constraints.get(ident))
        assert C(ident).get_config() == {"class_name": k["class_name"], "config": k["config"]}, ident
    c = C("MaxNorm", max_value=3)
    assert C(c) is c and C(C.serialize(c)).get_config() == c.get_config() == \
        {"class_name": "MaxNorm", "config": {"max_value": 3, "axis": 0}}
    assert C.serialize(None) is None
    with pytest.raises(ValueError):
        C("radial_constraint")
    with pytest.raises(TypeError):
        C("NonNeg", axis=0)


MODEL = '''
import tensorflow as tf
from tensorflow import keras


class Proj(keras.layers.Layer):
    def __init__(self, units, kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_uniform",
                                      constraint=self.kernel_constraint, name="kernel")
        self.bias = self.add_weight(shape=(self.units,), initializer="zeros", constraint=self.bias_constraint,
                                    name="bias")

    def call(self, x):
        return tf.matmul(x, self.kernel) + self.bias

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units,
                       "kernel_constraint": keras.constraints.serialize(self.kernel_constraint),
                       "bias_constraint": keras.constraints.serialize(self.bias_constraint)})
        return config


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = Proj(8, kernel_constraint=keras.constraints.max_norm(1))
        self.d2 = Proj(1, bias_constraint="non_neg")

    def call(self, x):
        return self.d2(tf.tanh(self.d1(x)))


model = Net()
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.02), loss="mse")


def train(x, y):
    history = model.fit(x, y, epochs=3, batch_size=8, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(1)
x = (rng.normal(size=(32, 5)) * 2).astype("float32")
y = (x @ rng.normal(size=(5, 1)) * 4 - 3).astype("float32")
W = {"d1": [(rng.normal(size=(5, 8)) * 0.3).astype("float32"), (rng.normal(size=8) * 0.3).astype("float32")],
     "d2": [(rng.normal(size=(8, 1)) * 0.3).astype("float32"), (rng.normal(size=1) * 0.3).astype("float32")]}
if sys.argv[2] == "torch":
    import torch
    model(torch.tensor(x[:1]))  # LazyBuild: build() runs on the first call, as Keras's
    with torch.no_grad():
        for name, ws in W.items():
            for p, w in zip([getattr(model, name).kernel, getattr(model, name).bias], ws):
                p.copy_(torch.tensor(w))
    weights = lambda: [p.detach().numpy().tolist() for n in W for p in
                       [getattr(model, n).kernel, getattr(model, n).bias]]
else:
    model(x[:1])
    for name, ws in W.items():
        getattr(model, name).set_weights(ws)
    weights = lambda: [w.tolist() for n in W for w in getattr(model, n).get_weights()]
h, ev = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": weights()}))
'''


def test_a_constrained_model_trains_as_keras(tmp_path):
    trans = tx(MODEL)
    assert errors(trans) == [], errors(trans)
    out = trans.output
    assert "self.kernel_constraint = KerasConstraint(kernel_constraint)" in out
    assert '"kernel_constraint": KerasConstraint.serialize(self.kernel_constraint)' in out
    assert 'Proj(8, kernel_constraint=KerasConstraint("MaxNorm", max_value=1))' in out
    assert "self.kernel.copy_(KerasConstraint(self.kernel_constraint)(self.kernel))" in out
    assert "m.apply_constraints()" in out
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(MODEL), out, DRIVER)
    # each epoch's loss, evaluate, every weight. The problem is kept well conditioned (SGD at lr 0.02, max-norm 1):
    # at lr 0.1 and max-norm 2, Keras itself moved its final weights by 8e-4 when its initial weights moved by
    # 3e-7 relative, so float32 rounding alone could fail the comparison on another machine
    compare_fit(keras_out, torch_out, ["loss"], atol=1e-4)
    k1 = np.array(keras_out["kernels"][0])
    norms = np.sqrt((k1 ** 2).sum(0))
    assert norms.max() <= 1 + 1e-5  # within the max-norm (that it was active: the next test)
    assert min(keras_out["kernels"][3]) >= 0  # d2's bias: non_neg


def test_without_the_constraints_the_weights_differ(tmp_path):
    """The same check fails where the translation leaves the constraints out (the test above can fail)."""
    out = tx(MODEL).output.replace("m.apply_constraints()", "pass")
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(MODEL), out, DRIVER)
    assert not np.allclose(keras_out["kernels"][0], torch_out["kernels"][0], atol=1e-3)
    assert np.sqrt((np.array(torch_out["kernels"][0]) ** 2).sum(0)).max() > 1.05  # unconstrained, a column grows past 1


def test_constraints_without_a_written_loop_are_reported():
    """No compile in the file: a constraint given to the layer (None by default) is a warning, a literal one an
    error, both saying to apply after each optimizer.step(); None is exact to drop."""
    src = MODEL[:MODEL.index("class Net")]
    r = tx(src)
    assert errors(r) == []
    warns = [f for f in r.findings if f.severity.name == "WARNING" and "apply_constraints" in f.message]
    assert [f.line for f in warns] == [13, 15] and "after each optimizer.step()" in warns[0].message
    lit = tx(src.replace("constraint=self.kernel_constraint", 'constraint="unit_norm"'))
    assert [line for line, m in errors(lit) if "after each optimizer.step()" in m] == [13], errors(lit)
    assert '# fwport: unsupported-argument: add_weight(constraint="unit_norm")' in lit.output
    assert 'self.kernel.copy_(KerasConstraint("unit_norm")(self.kernel))' in lit.output
    none = tx(src.replace("constraint=self.kernel_constraint", "constraint=None"))
    assert "self.kernel.copy_" not in none.output and errors(none) == []


def test_every_written_update_applies_the_constraints():
    """fit and train_on_batch: each optimizer.step() fwport writes is followed by the modules' apply_constraints();
    a file without constraints gets none."""
    src = MODEL + "\nloss = model.train_on_batch(x, y)\n"
    for text in [src]:
        out = tx(text).output.splitlines()
        steps = [i for i, line in enumerate(out) if line.strip() == "optimizer.step()"]
        assert len(steps) >= 2, out
        for i in steps:
            assert out[i + 1].strip().startswith("for m in model.modules():"), out[i:i + 3]
            assert out[i + 3].strip() == "m.apply_constraints()"
    plain = tx(MODEL.replace("constraint=self.kernel_constraint", "constraint=None")
               .replace("constraint=self.bias_constraint", "constraint=None")).output
    assert "optimizer.step()" in plain and "m.apply_constraints()" not in plain and "def apply_constraints" not in plain
