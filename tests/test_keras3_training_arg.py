"""A Keras 3 trap (passes/training_arg.py): a keras.Model subclass whose call takes no ``training`` parameter.

Keras 3's fit calls such a model without training=True, so its layers get training=None: Dropout does not drop,
BatchNormalization normalises with (and keeps) its moving statistics. tf_keras passes fit's training=True on, and the
translation's fit loop sets model.train(). The warning is checked here, and the behaviours it states are measured
(Keras 3, tf_keras with TF_USE_LEGACY_KERAS=1, and the translation): a later Keras that changes them fails here.
"""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.pipeline import translate_source
from runners import run_side

WARNING = "takes no training parameter"

SRC = '''
import numpy as np
from tensorflow import keras


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.norm = keras.layers.BatchNormalization()
        self.drop = keras.layers.Dropout(0.5)
        self.out = keras.layers.Dense(1)

    def call(self, x):
        return self.out(self.drop(self.norm(x)))


rng = np.random.default_rng(0)
x = (3 + 2 * rng.standard_normal((64, 10))).astype("float32")
y = np.zeros((64, 1), "float32")
model = Net()
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.0), loss="mse")
history = model.fit(x, y, batch_size=64, epochs=1, shuffle=False, verbose=0)
loss = history.history["loss"][0]
'''

# the fit loss, the loss of the same (unchanged: learning rate 0) model in inference mode, and BatchNormalization's
# moving / running mean after fit (0 before)
DRIVER = '''
import json, runpy, sys
import numpy as np
ns = runpy.run_path(sys.argv[1] + "/model.py")
model, x = ns["model"], ns["x"]
if sys.argv[2] == "keras":
    inference = float(np.mean(np.square(np.asarray(model(x, training=False)))))
    mean = float(np.abs(np.asarray(model.norm.moving_mean)).max())
else:
    import torch
    model.eval()
    with torch.no_grad():
        inference = float(torch.mean(model(torch.as_tensor(x)) ** 2))
    mean = float(model.norm.running_mean.abs().max())
print("RESULT " + json.dumps({"loss": float(ns["loss"]), "inference": inference, "mean": mean}))
'''


def _warnings(src: str) -> list[tuple[int, str]]:
    r = translate_source(src, "model.py")
    return [(f.line, f.message) for f in r.findings if WARNING in f.message and f.severity.name == "WARNING"]


def test_a_model_whose_call_takes_no_training_is_a_warning_naming_its_layers():
    said = _warnings(SRC)
    assert [line for line, _ in said] == [13], said  # at the class's call
    message = said[0][1]
    assert "Net" in message and "BatchNormalization, Dropout" in message
    assert "no dropout" in message and "moving statistics" in message and "training=None" in message


def test_layers_held_through_the_files_own_layer_and_builder_are_named():
    src = SRC.replace("class Net(keras.Model):", '''def block():
    return keras.Sequential([keras.layers.GaussianNoise(0.1)])


class Inner(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.drop = keras.layers.SpatialDropout1D(0.2)

    def call(self, x, training=None):
        return self.drop(x, training=training)


class Net(keras.Model):''').replace("        self.norm = keras.layers.BatchNormalization()\n",
                                    "        self.norm = keras.Sequential([Inner(), block()])\n")
    said = _warnings(src)
    assert len(said) == 1, said
    assert "Inner (holding SpatialDropout1D), block (holding GaussianNoise), Dropout" in said[0][1]
    assert "no dropout; no noise" in said[0][1]


@pytest.mark.parametrize("change", [
    # a call taking training (passed on or not: Keras 3 then calls it with training=True, the context carries it)
    ("    def call(self, x):", "    def call(self, x, training=None):"),
    # Keras 2 code (tf_keras passes fit's training on)
    ("from tensorflow import keras", "import tf_keras as keras"),
    # no training-dependent layer
    ("keras.layers.BatchNormalization()\n        self.drop = keras.layers.Dropout(0.5)",
     "keras.layers.LayerNormalization()\n        self.drop = keras.layers.Dropout(0.0)"),
    # the file trains it by its own GradientTape steps only: model(x, training=...) decides, the same in both
    ("history = model.fit(x, y, batch_size=64, epochs=1, shuffle=False, verbose=0)\nloss = history.history[\"loss\"][0]",
     "with tf.GradientTape() as tape:\n    loss = model(x, training=True)"),
    # every training-dependent layer called with a literal flag: run in that mode on both sides (the translation's
    # written train() keeps it there)
    ("return self.out(self.drop(self.norm(x)))", "return self.out(self.drop(self.norm(x, training=False), True))"),
    # its own train_step decides how the model is called
    ("    def call(self, x):", "    def train_step(self, data):\n        return {}\n\n    def call(self, x):"),
])
def test_no_warning_where_keras_3_and_the_translation_agree(change):
    src = SRC.replace(*change)
    assert src != SRC
    if "GradientTape" in src:
        src = src.replace("import numpy as np\n", "import numpy as np\nimport tensorflow as tf\n", 1)
    assert _warnings(src) == []


def test_a_layer_called_with_a_literal_flag_is_not_named():
    said = _warnings(SRC.replace("self.norm(x)", "self.norm(x, training=False)"))
    assert len(said) == 1 and "training=None: Dropout run as in inference" in said[0][1], said
    # (called once without the flag too: it follows the model's mode there, named again)
    again = SRC.replace("self.norm(x)", "self.norm(self.norm(x), training=False)")
    assert "training=None: BatchNormalization, Dropout run" in _warnings(again)[0][1]


def test_sequential_functional_and_component_models_are_no_warning():
    seq = SRC.replace("model = Net()", "model = keras.Sequential([keras.Input((10,)), keras.layers.Dropout(0.5), "
                                       "keras.layers.Dense(1)])")
    assert _warnings(seq) == _warnings(SRC)  # only the class's own warning: the Sequential is none
    functional = SRC.replace("model = Net()", "inputs = keras.Input((10,))\n"
                             "model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Dropout(0.5)(inputs)))")
    assert _warnings(functional) == _warnings(SRC)
    # Net built inside an outer model: only the outer one (the one fit calls) is named
    outer = SRC.replace("rng = np.random", '''class Outer(keras.Model):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def call(self, x):
        return self.net(x)


rng = np.random''').replace("model = Net()", "model = Outer()")
    said = _warnings(outer)
    assert len(said) == 1 and "subclass Outer " in said[0][1] and "Net (holding BatchNormalization, Dropout)" in said[0][1]


def test_keras_3_fit_runs_the_layers_as_in_inference_where_tf_keras_and_the_translation_train_them(tmp_path):
    keras3 = run_side(tmp_path / "keras3", "keras", SRC, DRIVER, "keras")
    keras2 = run_side(tmp_path / "keras2", "keras", SRC, DRIVER, "keras", TF_USE_LEGACY_KERAS="1")
    r = translate_source(SRC, "model.py")
    torch = run_side(tmp_path / "torch", "torch", r.output, DRIVER, "torch")
    # Keras 3: fit's loss is the inference loss (no dropout, BatchNormalization on its moving statistics, 0 and 1:
    # the inputs' mean 3 passes through), and the moving mean is left at 0
    np.testing.assert_allclose(keras3["loss"], keras3["inference"], rtol=1e-6)
    assert keras3["mean"] == 0.0
    # tf_keras and the translation train them: the batch's statistics (the loss far from the inference one) and a
    # moving mean updated towards the batch mean 3 (momentum 0.99: 0.03 after one step)
    for side in (keras2, torch):
        # (how far depends on the Dense layer's unseeded initial weights: only "not the inference loss" is asserted)
        assert abs(side["loss"] - side["inference"]) > 0.05 * side["inference"], side
        assert 0.01 < side["mean"] < 0.05, side
    # the fix the warning gives: call takes training=None and passes it on, and Keras 3 trains them too
    fixed = SRC.replace("    def call(self, x):\n        return self.out(self.drop(self.norm(x)))",
                        "    def call(self, x, training=None):\n"
                        "        return self.out(self.drop(self.norm(x, training=training), training=training))")
    assert fixed != SRC and _warnings(fixed) == []
    keras3_fixed = run_side(tmp_path / "keras3_fixed", "keras", fixed, DRIVER, "keras")
    # (as above, only "not the inference loss": how far depends on the unseeded Dense weights; a ratio of 0.5 failed
    # once in CI at 0.71, and over 20000 simulated draws of the weights and the dropout mask the relative difference
    # was never under 0.10)
    assert abs(keras3_fixed["loss"] - keras3_fixed["inference"]) > 0.05 * keras3_fixed["inference"], keras3_fixed
    assert 0.01 < keras3_fixed["mean"] < 0.05, keras3_fixed


def test_dropout_alone_does_not_drop_in_keras_3_fit(tmp_path):
    # without the BatchNormalization: the fit loss is exactly the no-dropout loss in Keras 3, not in tf_keras
    src = SRC.replace("self.out(self.drop(self.norm(x)))", "self.out(self.drop(x))").replace(
        "keras.layers.Dense(1)", 'keras.layers.Dense(1, kernel_initializer="ones", use_bias=False)')
    driver = DRIVER.replace("    mean = float(np.abs(np.asarray(model.norm.moving_mean)).max())\n", "    mean = 0\n")
    keras3 = run_side(tmp_path / "keras3", "keras", src, driver, "keras")
    keras2 = run_side(tmp_path / "keras2", "keras", src, driver, "keras", TF_USE_LEGACY_KERAS="1")
    np.testing.assert_allclose(keras3["loss"], keras3["inference"], rtol=1e-6)
    assert abs(keras2["loss"] - keras2["inference"]) > 1e-3 * keras2["inference"], keras2
    # a call taking **kwargs has no training parameter either: the same in Keras 3, and the same warning
    kwargs = src.replace("    def call(self, x):", "    def call(self, x, **kwargs):")
    assert kwargs != src and len(_warnings(kwargs)) == 1
    keras3_kwargs = run_side(tmp_path / "keras3_kwargs", "keras", kwargs, driver, "keras")
    np.testing.assert_allclose(keras3_kwargs["loss"], keras3_kwargs["inference"], rtol=1e-6)
