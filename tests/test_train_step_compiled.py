"""Keras 2 style custom ``train_step`` reading what compile gives the model: ``self.compiled_loss(y,
y_pred, regularization_losses=self.losses)``, ``self.compiled_metrics.update_state(y, y_pred)`` and
``return {m.name: m.result() for m in self.metrics}``. Where the file's compiles of the class give a
known loss and known metrics, the written TrainStepModule keeps them (the loss as a lambda in Keras's
argument order, the metrics by their Keras names) and gives the class Keras 2's own test_step;
elsewhere an error names the line and says why.

Numbers: the source trained by Keras 2 (tf_keras: these are Keras 2 APIs, which Keras 3 keeps only as
deprecated shims that feed the predictions to the "loss" tracker) and the translation trained by
torch, from the same weights; histories (training and validation) and weights compared.
"""
from __future__ import annotations

import json
import re
import textwrap

import numpy as np
import pytest

from fwport.core.pipeline import translate_source
from runners import keras_and_torch, python
from test_train_step import DRIVER, WGAN, _run, errors, tx
from train_step_net import LABELS, SHAPES, net_driver, net_source, same_fit

TRAINER = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class MyTrainer(keras.Model):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self.model(x, training=True)
            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)
        self.optimizer.apply_gradients(zip(gradients, trainable_vars))
        self.compiled_metrics.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}

    def call(self, x):
        return self.model(x)


model_a = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(5, activation="relu"),
                            layers.Dense(3, activation="softmax")])
trainer = MyTrainer(model_a)
trainer.compile(keras.optimizers.SGD(learning_rate=0.5), loss="sparse_categorical_crossentropy", metrics=["accuracy"])


def run(x, y):
    return trainer.fit(x, y, batch_size=5, epochs=3, shuffle=False, verbose=0, validation_data=(x[:7], y[:7]))
'''

NET = net_source(
    imports="from tensorflow import keras\nfrom tensorflow.keras import layers",
    loss="self.compiled_loss(y, y_pred, regularization_losses=self.losses)",
    result="        self.compiled_metrics.update_state(y, y_pred)\n"
           "        return {m.name: m.result() for m in self.metrics}",
    compile='loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)\n'
            'acc = keras.metrics.SparseCategoricalAccuracy(name="acc")\n'
            "net.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3, momentum=0.5), loss=loss_fn, metrics=[acc])")


def _run_keras2(tmp_path, src: str, driver: dict) -> tuple[dict, dict]:
    """tf_keras (Keras 2) on the source, torch on its translation (TensorFlow made unimportable there)."""
    trans = tx(src)
    assert errors(trans) == [], errors(trans)
    assert not re.search(r"^\s*(import|from) (tensorflow|keras|tf_keras)\b", trans.output, re.M)
    return keras_and_torch(tmp_path, textwrap.dedent(src), trans.output, DRIVER % driver, TF_USE_LEGACY_KERAS="1")


def test_a_trainer_with_compiled_loss_and_accuracy_trains_and_validates_as_keras2(tmp_path):
    keras_out, torch_out = _run_keras2(tmp_path, TRAINER, {
        "shapes": SHAPES,
        "n": 12, "width": 4, "x_map": LABELS, "models": "(model_a,)",
        "fit": "h = run(x, y)\nextra = None"})
    same_fit(keras_out, torch_out, ["accuracy", "loss", "val_accuracy", "val_loss"])
    # the "loss" tracker is the epoch's mean weighted by batch size (5, 5, 2), not the last batch's loss
    assert len(set(np.round(keras_out["history"]["loss"], 6))) == 3


def test_a_named_loss_a_named_metric_and_regularization_losses_train_as_keras2(tmp_path):
    keras_out, torch_out = _run_keras2(tmp_path, NET, net_driver(n=10, epochs=3))
    same_fit(keras_out, torch_out, ["acc", "loss"])


# keras-io's transformer_asr: compiled_loss(y, y_pred, sample_weight=mask), a boolean mask of the labels
WEIGHTED = NET.replace(
    "            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)",
    "            mask = tf.math.logical_not(tf.math.equal(y, 0))\n"
    "            loss = self.compiled_loss(y, y_pred, sample_weight=mask, regularization_losses=self.losses)")


def test_a_sample_weight_given_to_compiled_loss_weighs_as_keras2(tmp_path):
    assert WEIGHTED != NET
    keras_out, torch_out = _run_keras2(tmp_path, WEIGHTED, net_driver(n=10, epochs=3))
    same_fit(keras_out, torch_out, ["acc", "loss"])
    out = tx(WEIGHTED).output
    assert ("loss=lambda y_true, y_pred, sample_weight=None: loss_fn(y_pred.movedim(-1, 1), y_true.long().reshape(y_pred.shape[:-1])) if "
            "sample_weight is None else weighted_loss(loss_fn, y_pred.movedim(-1, 1), y_true.long().reshape(y_pred.shape[:-1]), sample_weight)") in out
    assert "def weighted_loss(loss_fn, input, target, sample_weight):" in out
    assert "    def compiled_loss(self, y_true, y_pred, sample_weight=None, regularization_losses=None):" in out


def test_what_the_translation_says():
    r = tx(NET)
    out = r.output
    assert "class CompiledMetrics:" in out and "    def compiled_loss(self, y_true, y_pred, regularization_losses=None):" in out
    assert ('net.compile(optimizer=functools.partial(torch.optim.SGD, lr=0.3, momentum=0.5), '
            'loss=lambda y_true, y_pred: loss_fn(y_pred.movedim(-1, 1), y_true.long().reshape(y_pred.shape[:-1])), metrics={"acc": acc})') in out
    assert "loss_fn = nn.CrossEntropyLoss()" in out and "acc = SparseCategoricalAccuracy()" in out
    assert "            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)" not in out  # (tape gone)
    assert "        loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)\n" in out
    assert "        return {m.name: m.result() for m in self.metrics}\n" in out
    r = tx(TRAINER)
    # the variables bound to a name are the model's: all its parameters, no backward(inputs=...)
    assert "        loss.backward()\n" in r.output


def _messages(src: str) -> list[str]:
    return [m for _, m in errors(tx(src))]


def test_what_is_not_followed_stays_an_error_naming_why():
    # a metric whose Keras name the translation cannot tell
    msgs = _messages(NET.replace('metrics=[acc]', 'metrics=[my_metric]'))
    assert any(m.startswith("self.compiled_metrics: ") and "the metric my_metric is not" in m for m in msgs), msgs
    assert any(m.startswith("self.metrics: ") for m in msgs), msgs
    # "accuracy" under a loss that does not decide which accuracy Keras picks
    msgs = _messages(TRAINER.replace('"sparse_categorical_crossentropy"', '"mse"'))
    assert any("Keras 2 picks the accuracy" in m for m in msgs), msgs
    # a sample weight of a loss the file's own function computes: its per-sample values are not fwport's
    msgs = _messages(NET.replace("regularization_losses=self.losses)", "sample_weight=w)").replace(
        "loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)",
        "def loss_fn(y_true, y_pred):\n    return tf.reduce_mean(y_pred)"))
    assert any("passes compiled_loss a sample_weight" in m or "loss=loss_fn is neither" in m for m in msgs), msgs
    # no compile in the file
    msgs = _messages(NET.split("net = Net()")[0])
    assert any("no compile of a Net in this file" in m for m in msgs), msgs
    # a loss Keras's compile takes but fwport does not follow
    msgs = _messages(NET.replace("loss=loss_fn", "loss=my_loss"))
    assert any(m.startswith("self.compiled_loss: ") and "loss=my_loss is neither" in m for m in msgs), msgs


# a GAN whose compile creates its optimizers itself (keras-io's gaugan, zero_dce): each torch optimizer is
# created over the parameters its apply_gradients updates (here through a name bound to them)
GAN_OWN_OPTIMIZERS = WGAN.replace(
    "        self.d_optimizer = d_optimizer\n        self.g_optimizer = g_optimizer\n",
    "        self.d_optimizer = keras.optimizers.SGD(learning_rate=d_optimizer)\n"
    "        self.g_optimizer = keras.optimizers.Adam(learning_rate=g_optimizer, beta_1=0.5)\n").replace(
    "        gen_gradient = tape.gradient(g_loss, self.generator.trainable_variables)\n"
    "        self.g_optimizer.apply_gradients(zip(gen_gradient, self.generator.trainable_variables))\n",
    "        g_vars = self.generator.trainable_variables\n"
    "        gen_gradient = tape.gradient(g_loss, g_vars)\n"
    "        self.g_optimizer.apply_gradients(zip(gen_gradient, g_vars))\n").replace(
    "d_opt = keras.optimizers.SGD(learning_rate=0.05)\ng_opt = keras.optimizers.SGD(learning_rate=0.05, momentum=0.5)\n",
    "d_opt = 0.05\ng_opt = 0.02\n")


def test_a_gan_whose_compile_creates_its_optimizers_trains_as_keras(tmp_path):
    assert GAN_OWN_OPTIMIZERS.count("keras.optimizers.") == 2 and "g_vars" in GAN_OWN_OPTIMIZERS
    out = tx(GAN_OWN_OPTIMIZERS).output
    assert "        self.d_optimizer = torch.optim.SGD(self.discriminator.parameters(), lr=d_optimizer)\n" in out
    assert "        self.g_optimizer = torch.optim.Adam(self.generator.parameters(), lr=g_optimizer" in out
    keras_out, torch_out = _run(tmp_path, GAN_OWN_OPTIMIZERS, {
        "shapes": [("k0", (4, 8)), ("b0", (8,)), ("k1", (8, 1)), ("b1", (1,)), ("k2", (3, 4)), ("b2", (4,))],
        "n": 8, "width": 4, "x_map": "", "models": "(d_model, g_model)",
        "fit": "h = gan.fit(x, batch_size=4, epochs=2, shuffle=False, verbose=0)\nextra = None"})
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-4, atol=1e-5)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):  # Adam's epsilon: tolerances of test_train_step
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_an_optimizer_a_compile_creates_for_unknown_variables_is_an_error():
    src = GAN_OWN_OPTIMIZERS.replace("zip(gen_gradient, g_vars)", "zip(gen_gradient, some_vars)").replace(
        "tape.gradient(g_loss, g_vars)", "tape.gradient(g_loss, some_vars)")
    msgs = [m for _, m in errors(translate_source(src, "model.py"))]  # (its output keeps half a step: not again)
    assert any(m.startswith("self.g_optimizer = keras.optimizers.Adam(") and "fwport cannot tell which" in m
               for m in msgs), msgs


FROZEN = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

encoder = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3, activation="tanh")])
head = keras.Sequential([keras.Input(shape=(3,)), layers.Dense(2)])
encoder.trainable = False
optimizer = keras.optimizers.SGD(learning_rate=0.2, momentum=0.5)
loss_fn = keras.losses.MeanSquaredError()


def train(x, steps=4):
    losses = []
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = loss_fn(x[:, :2], head(encoder(x)))
        grads = tape.gradient(loss, encoder.trainable_variables + head.trainable_variables)
        optimizer.apply_gradients(zip(grads, encoder.trainable_variables + head.trainable_variables))
        losses.append(float(loss))
    return {"loss": losses}
'''


def test_a_frozen_model_is_frozen_in_torch_too(tmp_path):
    """`encoder.trainable = False` → encoder.requires_grad_(False) (the attribute alone would freeze nothing)."""
    r = tx(FROZEN)
    assert "encoder.requires_grad_(False)\n" in r.output and ".trainable" not in r.output
    assert any(f.message.startswith("encoder.trainable = False → encoder.requires_grad_(False)") for f in r.findings)
    keras_out, torch_out = _run(tmp_path, FROZEN, {
        "shapes": [("k0", (4, 3)), ("b0", (3,)), ("k1", (3, 2)), ("b1", (2,))],
        "n": 6, "width": 4, "x_map": "", "models": "(encoder, head)",
        "fit": "h = type('H', (), {'history': train(x if 'torch' not in sys.argv[2] else "
               "__import__('torch').tensor(x))})()\nextra = None"})
    np.testing.assert_allclose(torch_out["history"]["loss"], keras_out["history"]["loss"], rtol=1e-5)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    rng = np.random.default_rng(0)  # the driver's weights: the encoder's kernel did not move, the head's did
    start = [(rng.normal(size=s) * 0.5).astype("float32") for s in ((4, 3), (3,), (3, 2))]
    np.testing.assert_allclose(torch_out["kernels"][0], start[0], rtol=1e-6)
    assert not np.allclose(torch_out["kernels"][1], start[2], atol=1e-3)


def test_self_trainable_in_a_layer_is_an_error():
    msgs = _messages('''
        from tensorflow import keras
        class Frozen(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.trainable = False
                self.d = keras.layers.Dense(3)
            def call(self, x):
                return self.d(x)
        ''')
    assert any(m.startswith("self.trainable = False: Keras freezes the layer's weights") for m in msgs), msgs


def test_a_module_level_optimizer_stepped_on_a_class_s_own_variables_is_an_error():
    """keras-io's gat_node_classification: `optimizer = keras.optimizers.SGD(...)` at the top level, used as
    `optimizer.apply_gradients(zip(grads, self.trainable_weights))` in train_step: `self` does not exist
    where the optimizer is created (it was written `torch.optim.SGD(self.parameters(), ...)`)."""
    src = NET.replace("self.optimizer.apply_gradients", "opt.apply_gradients").replace(
        "net = Net()", "opt = keras.optimizers.SGD(learning_rate=0.1)\nnet = Net()")
    r = translate_source(src, "model.py")  # (its output keeps half a step: not again)
    msgs = [m for _, m in errors(r)]
    assert any(m.startswith("opt = keras.optimizers.SGD(learning_rate=0.1): a torch optimizer takes the parameters")
               and "inside a class" in m for m in msgs), msgs
    assert "self.parameters()" not in r.output.split("class Net")[-1].split("\n\n\n", 1)[-1]


# keras-io's stylegan writes the gradient and the update inside the tape's with block
GRADIENT_INSIDE = WGAN.replace(
    "            g_loss = self.g_loss_fn(self.discriminator(generated, training=True))\n"
    "        gen_gradient = tape.gradient(g_loss, self.generator.trainable_variables)\n"
    "        self.g_optimizer.apply_gradients(zip(gen_gradient, self.generator.trainable_variables))\n",
    "            g_loss = self.g_loss_fn(self.discriminator(generated, training=True))\n"
    "            gen_gradient = tape.gradient(g_loss, self.generator.trainable_variables)\n"
    "            self.g_optimizer.apply_gradients(zip(gen_gradient, self.generator.trainable_variables))\n")


def test_a_gradient_taken_inside_the_tape_block_trains_as_keras(tmp_path):
    assert GRADIENT_INSIDE != WGAN
    out = tx(GRADIENT_INSIDE).output
    assert "        g_loss.backward()\n        self.g_optimizer.step()\n" in out
    keras_out, torch_out = _run(tmp_path, GRADIENT_INSIDE, {
        "shapes": [("k0", (4, 8)), ("b0", (8,)), ("k1", (8, 1)), ("b1", (1,)), ("k2", (3, 4)), ("b2", (4,))],
        "n": 8, "width": 4, "x_map": "", "models": "(d_model, g_model)",
        "fit": "h = gan.fit(x, batch_size=4, epochs=2, shuffle=False, verbose=0)\nextra = None"})
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-5)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_a_gradient_inside_the_block_that_is_not_followed_stays_one_error():
    src = GRADIENT_INSIDE.replace("            self.g_optimizer.apply_gradients(zip(gen_gradient, self.generator.trainable_variables))\n",
                                  "            print(gen_gradient)\n")
    r = translate_source(src, "model.py")
    msgs = [(ln, m) for ln, m in errors(r) if "GradientTape" in m]
    assert len(msgs) == 1 and "no `optimizer.apply_gradients(zip(grads, variables))` follows" in msgs[0][1], msgs
    assert "            gen_gradient = tape.gradient(" in r.output  # left as written, in its block


REDUCTIONS = '''
from tensorflow import keras

mse = keras.losses.MeanSquaredError(reduction="none")
mae_sum = keras.losses.MeanAbsoluteError(reduction="sum")
bce = keras.losses.BinaryCrossentropy(from_logits=True, reduction=None)
bce_p = keras.losses.BinaryCrossentropy(reduction="sum")
huber = keras.losses.Huber(delta=0.5, reduction="none")


def losses(y, p, q):
    return [mse(y, p), mae_sum(y, p), bce(q, p), bce_p(q, 1 / (1 + keras.ops.exp(-p))), huber(y, p)]
'''


def test_loss_objects_without_the_batch_mean_reduce_the_last_axis_as_keras(tmp_path):
    """reduction='none' / None / 'sum' on an elementwise Keras loss: Keras's per-sample loss is the mean over
    the last axis, torch's reduction='none' keeps every element (.mean(-1) added; 'sum' sums those means)."""
    r = tx(REDUCTIONS)
    assert errors(r) == []
    assert "mse = nn.MSELoss(reduction=\"none\")" in r.output and "mse(p, y.view_as(p)).mean(-1)" in r.output
    assert ".mean(-1).sum()" in r.output
    results = _losses_both_sides(tmp_path, REDUCTIONS, r.output)
    for shape, values in results["keras"].items():
        for i, (a, b) in enumerate(zip(values, results["torch"][shape])):
            assert np.shape(a) == np.shape(b), (shape, i)
            np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-6, err_msg=f"{shape} loss {i}")


LOSS_DRIVER = '''
import json, sys
import numpy as np
import pytest
sys.path.insert(0, sys.argv[1])
from model import losses
rng = np.random.default_rng(1)
out = {}
for shape in ((5, 3), (2, 4, 3)):
    y = rng.normal(size=shape).astype("float32")
    p = rng.normal(size=shape).astype("float32")
    q = (rng.uniform(size=shape) > 0.5).astype("float32")
    if "torch" in sys.argv[2]:
        import torch
        y, p, q = (torch.tensor(a) for a in (y, p, q))
    out[str(shape)] = [np.asarray(v).tolist() for v in losses(y, p, q)]
print("RESULT " + json.dumps(out))
'''


def _losses_both_sides(tmp_path, src: str, translated: str) -> dict:
    """losses(y, p, q) of the source (Keras) and of its translation (torch, TensorFlow unimportable) on
    (5, 3) and (2, 4, 3) inputs."""
    results = {}
    for side, text in (("keras", textwrap.dedent(src)), ("torch", translated)):
        d = tmp_path / side
        d.mkdir()
        (d / "model.py").write_text(text)
        (d / "drive.py").write_text(LOSS_DRIVER)
        p = python(d / "drive.py", d, side, side=side, timeout=600, env={"TF_CPP_MIN_LOG_LEVEL": "3"})
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        assert line, p.stderr[-3000:]
        results[side] = json.loads(line[-1][7:])
    return results


CLASS_AXIS = '''
from tensorflow import keras

scce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
cce = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)
cce_p = keras.losses.CategoricalCrossentropy()
scce_none = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


def losses(y, p, q):
    labels = keras.ops.argmax(y, axis=-1)
    probs = keras.ops.softmax(y, axis=-1)
    return [scce(labels, p), cce(probs, p), cce_p(probs, keras.ops.softmax(p, axis=-1)), scce_none(labels, p)]
'''


def test_cross_entropy_objects_take_the_class_axis_last_as_keras(tmp_path):
    """(batch, steps, classes) outputs (a sequence model's): torch's class axis is the second, so each
    call moves Keras's last axis there (a no-op for (batch, classes)); was silently wrong for rank 3."""
    r = tx(CLASS_AXIS)
    assert errors(r) == []
    assert "scce(p.movedim(-1, 1), labels.long().reshape(p.shape[:-1]))" in r.output
    results = _losses_both_sides(tmp_path, CLASS_AXIS, r.output)
    for shape, values in results["keras"].items():
        for i, (a, b) in enumerate(zip(values, results["torch"][shape])):
            assert np.shape(a) == np.shape(b), (shape, i)
            np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-6, err_msg=f"{shape} loss {i}")


OWN_COMPILE_ACCURACY = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

model_a = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(5, activation="tanh"), layers.Dense(%(units)d)])


class Student(keras.Model):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def compile(self, optimizer, metrics, student_loss_fn):
        super().compile(optimizer=optimizer, metrics=metrics)
        self.student_loss_fn = student_loss_fn

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self.model(x, training=True)
            loss = self.student_loss_fn(y, y_pred)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.compiled_metrics.update_state(y, y_pred)
        results = {m.name: m.result() for m in self.metrics}
        results.update({"student_loss": loss})
        return results

    def call(self, x):
        return self.model(x)


student = Student(model_a)
student.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5), metrics=["accuracy"],
                student_loss_fn=keras.losses.%(loss)s(from_logits=True))


def run(x, y):
    return student.fit(x, y, batch_size=5, epochs=3, shuffle=False, verbose=0)
'''


@pytest.mark.parametrize("units, loss, labels", [
    (3, "SparseCategoricalCrossentropy", LABELS),
    (3, "CategoricalCrossentropy", LABELS + "\ny = np.eye(3, dtype='float32')[y]"),
    (1, "BinaryCrossentropy", "\ny = (x[:, :1] + 0.3 * x[:, 1:2] > 0).astype('float32')"),
])
def test_compiled_accuracy_without_a_compiled_loss_is_picked_by_shapes_as_keras2(tmp_path, units, loss, labels):
    """keras-io's distillers (deit, consistency_training): compile(metrics=["accuracy"]) with the loss kept by the
    class, so no compiled loss tells which accuracy: Keras 2 picks binary / sparse / categorical from the shapes
    of the labels and outputs, and so does the written ShapeAccuracy."""
    src = OWN_COMPILE_ACCURACY % {"units": units, "loss": loss}
    assert 'metrics={"accuracy": ShapeAccuracy()}' in tx(src).output
    keras_out, torch_out = _run_keras2(tmp_path, src, {
        "shapes": [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, units)), ("b1", (units,))],
        "n": 12, "width": 4, "x_map": labels, "models": "(model_a,)",
        "fit": "h = run(x, y)\nextra = None"})
    same_fit(keras_out, torch_out, ["accuracy", "student_loss"])
    assert 0 < min(keras_out["history"]["accuracy"]) < 1  # a value the three accuracies can disagree on


# the train_step model made by a factory (`trainer = make_trainer(...)`, as keras-io's edsr / debugging_tips make
# theirs, there with Keras's functional constructor), compiled after it; the name also bound to another model
# before (a Keras model the file does not subclass): the binding the compile and the fit see decides which class
# they compile and train
FACTORY = TRAINER.replace(
    "trainer = MyTrainer(model_a)\ntrainer.compile(",
    "def make_trainer(inner):\n    made = MyTrainer(inner)\n    return made\n\n\n"
    "trainer = make_trainer(model_a)\ntrainer.compile(").replace(
    "def run(x, y):\n    return trainer.fit(",
    "def run(x, y):\n    trainer = keras.Sequential([layers.Dense(3)])\n    trainer = make_trainer(model_a)\n"
    "    trainer.compile(keras.optimizers.SGD(learning_rate=0.5), loss=\"sparse_categorical_crossentropy\", "
    "metrics=[\"accuracy\"])\n    return trainer.fit(")


def test_a_trainer_made_by_a_factory_keeps_its_compiled_loss_and_train_step_as_keras2(tmp_path):
    assert FACTORY.count("make_trainer(model_a)") == 2
    out = tx(FACTORY).output
    assert "class MyTrainer(TrainStepModule):" in out and "return trainer.fit(x, y" in out
    assert "def fit(model, optimizer" not in out  # (not the written loop of a plain model: the class's train_step)
    keras_out, torch_out = _run_keras2(tmp_path, FACTORY, {
        "shapes": SHAPES,
        "n": 12, "width": 4, "x_map": LABELS, "models": "(model_a,)",
        "fit": "h = run(x, y)\nextra = None"})
    same_fit(keras_out, torch_out, ["accuracy", "loss", "val_accuracy", "val_loss"])


def test_a_compile_of_a_name_also_bound_to_another_model_there_stays_an_error():
    # the module-level name bound to a Keras model and to the factory's: a function's fit cannot tell which
    src = FACTORY.replace("trainer = make_trainer(model_a)\ntrainer.compile(",
                          "trainer = model_a\ntrainer = make_trainer(model_a)\ntrainer.compile(").replace(
        "    trainer = keras.Sequential([layers.Dense(3)])\n    trainer = make_trainer(model_a)\n    trainer.compile("
        "keras.optimizers.SGD(learning_rate=0.5), loss=\"sparse_categorical_crossentropy\", metrics=[\"accuracy\"])\n",
        "")
    msgs = _messages(src)
    assert any(m.startswith("trainer.fit(...) is a Keras model method") for m in msgs), msgs


# keras-io's customizing_what_happens_in_fit defines `class CustomModel` again and again: each compile is of an
# instance of the definition before it, so each definition pairs with its own compiles (a later definition that
# computes its loss itself, compiled without one, no longer makes the first one's compiled_loss an error)
REDEFINED = TRAINER.replace(
    "\n\ndef run(x, y):\n    return trainer.fit(x, y, batch_size=5, epochs=3, shuffle=False, verbose=0, "
    "validation_data=(x[:7], y[:7]))\n",
    '''

class MyTrainer(keras.Model):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self.model(x, training=True)))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return {"loss": loss}


other = MyTrainer(keras.Sequential([keras.Input(shape=(4,)), layers.Dense(2)]))
other.compile(optimizer="sgd")
h = trainer.fit(x_train, y_train, batch_size=5, epochs=3, shuffle=False, verbose=0, validation_data=(x_val, y_val))
''').replace("from tensorflow.keras import layers\n", "from tensorflow.keras import layers\nimport numpy as np\n"
             "x_train = np.random.default_rng(0).normal(size=(12, 4)).astype(\"float32\")\n"
             "y_train = np.argmax(x_train[:, :3] + 0.3 * x_train[:, 1:4], axis=1)\n"
             "x_val, y_val = x_train[:7], y_train[:7]\n")


def test_each_definition_of_a_redefined_class_pairs_with_its_own_compiles(tmp_path):
    assert REDEFINED.count("class MyTrainer(keras.Model):") == 2 and "def run" not in REDEFINED
    out = tx(REDEFINED).output
    assert out.count("class MyTrainer(TrainStepModule):") == 2
    assert "loss=lambda y_true, y_pred:" in out and 'other.compile(optimizer=functools.partial(torch.optim.SGD' in out
    # the module-level fit trains the first definition's instance from the weights the driver sets after it:
    # the driver refits it, from the same weights, in both frameworks
    keras_out, torch_out = _run_keras2(tmp_path, REDEFINED, {
        "shapes": SHAPES,
        "n": 12, "width": 4, "x_map": LABELS, "models": "(model_a,)",
        "fit": "h = trainer.fit(x, y, batch_size=5, epochs=3, shuffle=False, verbose=0, "
               "validation_data=(x[:7], y[:7]))\nextra = None"})
    same_fit(keras_out, torch_out, ["accuracy", "loss", "val_accuracy", "val_loss"])


def test_a_redefined_class_s_compiled_loss_is_refused_by_its_own_compile_s_line():
    # the first definition's instance compiled without a loss: its compiled_loss / compiled_metrics are errors
    # naming that compile; the second definition's class (which reads neither) is translated without one
    src = REDEFINED.replace('loss="sparse_categorical_crossentropy", metrics=["accuracy"])', ")", 1)
    assert src != REDEFINED
    errs = errors(tx(src))
    lines = src.lstrip("\n").splitlines()  # (as tx reads it)
    second = lines.index("class MyTrainer(keras.Model):", lines.index("class MyTrainer(keras.Model):") + 1) + 1
    compiled = [(n, m) for n, m in errs if m.startswith("self.compiled_")]
    assert [lines[n - 1].strip()[:30] for n, _ in compiled] == [
        "loss = self.compiled_loss(y, y", "self.compiled_metrics.update_s"], errs
    assert all(n < second and "the compile of trainer gives no loss" in m for n, m in compiled), compiled
    # (and its fit's validation_data is Keras's own test_step, which that compile does not tell: an error)
    assert any(m.startswith("trainer.fit(") and "validation_data" in m for _, m in errs), errs
