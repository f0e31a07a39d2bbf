"""The functional pass on a layer or model called with a literal training flag (keras-io's
``x = backbone(inputs, training=False)`` on a frozen backbone, ``bn(x, training=True)``): the training pass writes
the flag as ``backbone.eval()`` / ``.train()`` before the call, and the generated forward sets that mode on the
module just before calling it, which runs it as Keras does whatever the model's own mode. Checked against Keras
in separate processes (the outer model in both modes, batch-normalisation statistics that tell the modes apart);
a module called both with and without a flag, or with a flag that is not a literal, is an error on its line."""
from __future__ import annotations

import json
import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_counts as errors
from runners import python

PACK = load_pack("tf2torch")


def tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


KERAS2 = '''\n# fwport: keras=2\n'''

MODES = '''
from tensorflow import keras
from tensorflow.keras import layers


def make_backbone():
    inp = keras.Input(shape=(6,))
    h = layers.Dense(8)(inp)
    h = layers.BatchNormalization()(h)
    return keras.Model(inp, h)


def build(backbone):
    inputs = keras.Input(shape=(6,))
    x = backbone(inputs, training=False)
    frozen = layers.BatchNormalization()
    y = frozen(x, training=False)
    batch = layers.BatchNormalization()
    z = batch(x, training=True)
    w = layers.BatchNormalization()(x)
    outputs = layers.Dense(3)(layers.Concatenate()([y, z, w]))
    return keras.Model(inputs, outputs)
'''

KERAS = '''
import json, sys
import numpy as np
import m

records = json.load(open("records.json"))
backbone = m.make_backbone()
model = m.build(backbone)
rng = np.random.default_rng(0)
x = rng.standard_normal((5, 6)).astype("float32")
model(x, training=False)
weights = {}
for scope, source, target in records:
    layer = eval(("model." if scope == "build" else "backbone.") + source)
    values = [rng.standard_normal(w.shape).astype("float32") for w in layer.weights]
    if len(values) == 4:  # gamma, beta, moving mean, moving variance (> 0), far from a batch's statistics
        values[2] = values[2] + 3.0
        values[3] = np.abs(values[3]) + 0.5
    layer.set_weights(values)
    for i, v in enumerate(values):
        weights[f"{scope}/{target}/{i}"] = v
# inference first: a call in training mode updates the moving statistics, which torch updates with the unbiased
# variance (the semantic trap "BatchNorm running-variance estimator")
infer = model(x, training=False).numpy()
np.savez("weights.npz", x=x, infer=infer, train=model(x, training=True).numpy(), **weights)
'''

TORCH = '''
import json
import numpy as np
import torch
import t

records = json.load(open("records.json"))
data = np.load("weights.npz")
backbone = t.make_backbone()
model = t.build(backbone)
x = torch.from_numpy(data["x"])
model.eval()
with torch.no_grad():
    model(x)  # (lazy modules take their sizes)
for scope, source, target in records:
    module = (model if scope == "build" else backbone).get_submodule(target)
    values = [torch.from_numpy(data[f"{scope}/{target}/{i}"]) for i in range(4) if f"{scope}/{target}/{i}" in data]
    with torch.no_grad():
        if len(values) == 2:
            module.weight.copy_(values[0].T)
            module.bias.copy_(values[1])
        else:
            module.weight.copy_(values[0])
            module.bias.copy_(values[1])
            module.running_mean.copy_(values[2])
            module.running_var.copy_(values[3])
out = {}
for mode in ("infer", "train"):
    model.train(mode == "train")
    with torch.no_grad():
        got = model(x).numpy()
    out[mode] = float(np.abs(got - data[mode]).max())
print(json.dumps(out))
'''


def test_keras2_a_call_with_a_training_flag_sets_that_mode_on_the_module_in_forward():
    r = tx(KERAS2 + MODES)
    assert not errors(r), r.findings
    forward = r.output.split("def forward(self, inputs):")[1]
    assert "self.backbone.eval()\n        x = self.backbone(inputs)" in forward
    assert "self.frozen.eval()\n        y = self.frozen(x)" in forward
    assert "self.batch.train()\n        z = self.batch(x)" in forward
    assert "import keras" not in r.output and "from tensorflow" not in r.output and "__fwport" not in r.output
    said = [f for f in r.findings if "before the call" in f.message]
    assert [f.line for f in said] == [16, 18, 20]


def test_keras3_a_call_with_a_training_flag_follows_the_models_mode():
    r = tx(MODES)
    assert not errors(r), r.findings
    forward = r.output.split("def forward(self, inputs):")[1]
    assert ".eval()" not in forward and ".train()" not in forward
    assert "x = self.backbone(inputs)" in forward and "z = self.batch(x)" in forward
    assert not any("before the call" in f.message for f in r.findings)
    said = {(f.line, f.severity.value) for f in r.findings if "Keras 3 replaces it by the training value" in f.message}
    assert said == {(14, "info"), (16, "info"), (18, "warning")}


@pytest.mark.parametrize("version", [2, 3])
def test_a_call_with_a_training_flag_computes_what_keras_does(tmp_path, version):
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    env = {}
    if version == 2:
        pytest.importorskip("tf_keras")
        env["TF_USE_LEGACY_KERAS"] = "1"
    src = (KERAS2 if version == 2 else "") + MODES
    r = tx(src)
    assert not errors(r), r.findings
    (tmp_path / "m.py").write_text(textwrap.dedent(src).lstrip("\n"))
    (tmp_path / "t.py").write_text(r.output)
    records = [(x.scope, x.source, x.target) for x in r.layers]
    assert {s for s, _, _ in records} == {"build", "make_backbone"}
    (tmp_path / "records.json").write_text(json.dumps(records))
    for script, side in ((KERAS, "keras"), (TORCH, "torch")):  # TensorFlow unimportable on the torch side
        out = python("-c", script, side=side, cwd=tmp_path, timeout=300, env=env if side == "keras" else None)
        assert out.returncode == 0, out.stderr[-3000:]
    diff = json.loads(out.stdout.strip().splitlines()[-1])
    # Keras 2, the model in training mode: the backbone and `frozen` on their moving statistics, `batch` and `w` on
    # the batch's; in inference mode `batch` still on the batch's. Keras 3: every layer in the model's mode.
    assert diff["train"] < 1e-4 and diff["infer"] < 1e-4, diff


def test_keras2_a_module_called_with_and_without_a_training_flag_is_an_error_on_its_line():
    src = KERAS2 + '''
from tensorflow import keras
from tensorflow.keras import layers


def build():
    inputs = keras.Input(shape=(6,))
    norm = layers.BatchNormalization()
    x = norm(inputs, training=False)
    y = norm(x)
    return keras.Model(inputs, y)
'''
    r = tx(src)
    errs = [f for f in r.findings if f.severity.value == "error"]
    assert [f.line for f in errs if "called again after a call with training=" in f.message] == [11]
    assert any("left as written" in f.message for f in errs)
    assert not any("compound statement" in f.message for f in errs)


def test_a_training_flag_that_is_not_a_literal_is_an_error_on_its_line():
    src = '''
from tensorflow import keras
from tensorflow.keras import layers


def build(backbone, train_backbone):
    inputs = keras.Input(shape=(6,))
    x = backbone(inputs, training=train_backbone)
    return keras.Model(inputs, layers.Dense(2)(x))
'''
    r = tx(src)
    errs = [f for f in r.findings if f.severity.value == "error"]
    assert [f.line for f in errs if "not a literal True / False" in f.message] == [7]
    assert not any("compound statement" in f.message for f in errs)


def test_a_model_with_a_flagged_call_gets_its_compile_and_fit_written_out():
    # (the training pass asks this pass which models it leaves, on the source as written: the flag still there)
    src = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input(shape=(6,))
norm = layers.BatchNormalization()
x = norm(inputs, training=False)
outputs = layers.Dense(3)(x)
model = keras.Model(inputs, outputs)
model.compile(optimizer="adam", loss="mse")
model.fit(np.zeros((8, 6)), np.zeros((8, 3)), epochs=1)
'''
    r = tx(src)
    assert not errors(r), r.findings
    assert "keras" not in r.output.replace("Keras", "") and "def fit(" in r.output
