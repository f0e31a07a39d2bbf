"""Keras models with their own ``train_step`` (GANs, VAEs): they derive from the written-out
``TrainStepModule`` whose ``compile`` / ``fit`` drive ``train_step`` as Keras does; optimizers given
to compile are factories created over the parameters their ``apply_gradients`` updates; tapes that
watch tensors (a gradient penalty) become ``torch.autograd.grad(..., create_graph=True)``;
``keras.callbacks.Callback`` subclasses become plain classes fit calls.

Numbers: a WGAN-GP (two tapes, two optimizers, a nested tape, a custom compile, a callback) and an
autoencoder with a loss tracker are trained by Keras and by the translation from the same weights
(subprocesses: TensorFlow never in the torch one) and their histories and weights compared.
"""
from __future__ import annotations

import re
import textwrap

import numpy as np

from pathlib import Path

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from helpers import error_lines as errors
from runners import keras_and_torch, python


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tf2torch"


def tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    again = translate_source(r.output, "model.py")
    assert again.output == r.output, "translating the output again must change nothing"
    return r


WGAN = (FIXTURES / "wgan_gradient_penalty" / "model.py").read_text()

AUTOENCODER = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

encoder = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(3, activation="tanh")])
decoder = keras.Sequential([keras.Input(shape=(3,)), layers.Dense(6, activation="sigmoid")])


class AE(keras.Model):
    def __init__(self, encoder, decoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.decoder = decoder
        self.total_loss_tracker = keras.metrics.Mean(name="total_loss")

    @property
    def metrics(self):
        return [self.total_loss_tracker]

    def train_step(self, data):
        with tf.GradientTape() as tape:
            reconstruction = self.decoder(self.encoder(data))
            total_loss = tf.reduce_mean(tf.reduce_sum(tf.square(data - reconstruction), axis=1))
        grads = tape.gradient(total_loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        self.total_loss_tracker.update_state(total_loss)
        return {"loss": self.total_loss_tracker.result()}


ae = AE(encoder, decoder)
ae.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5))
'''

# the same weights on both sides (Dense kernels are (in, out), nn.Linear weights (out, in))
DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(0)
shapes = %(shapes)r
W = {k: (rng.normal(size=s) * 0.5).astype("float32") for k, s in shapes}
x = rng.normal(size=(%(n)d, %(width)d)).astype("float32")%(x_map)s
if "torch" in sys.argv[2]:
    import torch
    linears = [m for s in %(models)s for m in s if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for i, m in enumerate(linears):
            m.weight.copy_(torch.tensor(W["k%%d" %% i]).T)
            m.bias.copy_(torch.tensor(W["b%%d" %% i]))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    dense = [l for s in %(models)s for l in s.layers]
    for i, l in enumerate(dense):
        l.set_weights([W["k%%d" %% i], W["b%%d" %% i]])
    kernels = lambda: [l.get_weights()[0].tolist() for l in dense]
%(fit)s
print("RESULT " + json.dumps({"history": h.history, "kernels": kernels(), "extra": extra}))
'''


def _run(tmp_path, src: str, driver: dict) -> tuple[dict, dict]:
    """Keras on the source, torch on its translation (TensorFlow made unimportable there)."""
    trans = tx(src)
    assert errors(trans) == [], errors(trans)
    assert not re.search(r"^\s*(import|from) (tensorflow|keras|tf_keras)\b", trans.output, re.M)
    assert "tf." not in trans.output and "keras.optimizers" not in trans.output
    return keras_and_torch(tmp_path, textwrap.dedent(src), trans.output, DRIVER % driver)


def test_wgan_gp_trains_as_keras_trains_it(tmp_path):
    keras_out, torch_out = _run(tmp_path, WGAN, {
        "shapes": [("k0", (4, 8)), ("b0", (8,)), ("k1", (8, 1)), ("b1", (1,)), ("k2", (3, 4)), ("b2", (4,))],
        "n": 8, "width": 4, "x_map": "", "models": "(d_model, g_model)",
        "fit": "rec = Recorder()\nh = gan.fit(x, batch_size=4, epochs=2, shuffle=False, verbose=0, callbacks=[rec])\n"
               "extra = rec.epochs"})
    assert sorted(torch_out["history"]) == ["d_loss", "g_loss"]
    for k, v in keras_out["history"].items():  # the last batch's values of each epoch, as Keras logs them
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-5)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    assert torch_out["extra"] == keras_out["extra"] == [[0, ["d_loss", "g_loss"], 10.0], [1, ["d_loss", "g_loss"], 10.0]]
    # the training did something: the weights moved
    assert not np.allclose(keras_out["kernels"][0], (np.random.default_rng(0).normal(size=(4, 8)) * 0.5))


def test_autoencoder_with_a_loss_tracker_trains_as_keras_trains_it(tmp_path):
    keras_out, torch_out = _run(tmp_path, AUTOENCODER, {
        "shapes": [("k0", (6, 3)), ("b0", (3,)), ("k1", (3, 6)), ("b1", (6,))],
        "n": 10, "width": 6, "x_map": "\nx = 1 / (1 + np.exp(-x))", "models": "(encoder, decoder)",
        "fit": "h = ae.fit(x, batch_size=4, epochs=3, shuffle=False, verbose=0)\nextra = None"})
    # the tracker's running mean over each epoch's three batches (reset at each epoch's start)
    np.testing.assert_allclose(torch_out["history"]["loss"], keras_out["history"]["loss"], rtol=1e-5)
    assert len(set(np.round(keras_out["history"]["loss"], 6))) == 3
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_a_method_of_the_model_called_with_training_keeps_the_argument(tmp_path):
    """train_step calling a method of its own class with training=True (keras-io shiftvit's
    self._calculate_loss(data, training=True)): the method takes the flag and passes it on to its layers; it
    is no sub-model to call .train() on (a function has none)."""
    src = AUTOENCODER.replace('''        with tf.GradientTape() as tape:
            reconstruction = self.decoder(self.encoder(data))
            total_loss = tf.reduce_mean(tf.reduce_sum(tf.square(data - reconstruction), axis=1))''', '''        with tf.GradientTape() as tape:
            total_loss = self._loss(data, training=True)''').replace('''    def train_step(self, data):''', '''    def _loss(self, data, training=False):
        reconstruction = self.decoder(self.encoder(data, training=training), training=training)
        return tf.reduce_mean(tf.reduce_sum(tf.square(data - reconstruction), axis=1))

    def train_step(self, data):''')
    assert "self._loss(data, training=True)" in src
    out = tx(src).output
    assert "self._loss(data, training=True)" in out and "self._loss.train" not in out
    keras_out, torch_out = _run(tmp_path, src, {
        "shapes": [("k0", (6, 3)), ("b0", (3,)), ("k1", (3, 6)), ("b1", (6,))],
        "n": 10, "width": 6, "x_map": "\nx = 1 / (1 + np.exp(-x))", "models": "(encoder, decoder)",
        "fit": "h = ae.fit(x, batch_size=4, epochs=2, shuffle=False, verbose=0)\nextra = None"})
    np.testing.assert_allclose(torch_out["history"]["loss"], keras_out["history"]["loss"], rtol=1e-5)


def test_what_the_translation_says():
    r = tx(WGAN)
    out = r.output
    assert "class WGAN(TrainStepModule):" in out and out.count("class TrainStepModule(nn.Module):") == 1
    assert "        super().compile()\n        self.d_optimizer = d_optimizer(self.discriminator.parameters())\n" in out
    assert "        self.g_optimizer = g_optimizer(self.generator.parameters())\n" in out
    assert "d_opt = functools.partial(torch.optim.SGD, lr=0.05)" in out
    assert "g_opt = functools.partial(torch.optim.SGD, lr=0.05, momentum=0.5)" in out
    # the nested tape: the gradient of the summed critic output, kept differentiable
    assert ("        interpolated.requires_grad_(True)\n        self.discriminator.train()\n"
            "        pred = self.discriminator(interpolated)\n"
            "        grads = torch.autograd.grad(pred.sum(), [interpolated], create_graph=True)[0]\n") in out
    # two steps in one method, the second tape under the same name
    assert out.count("self.d_optimizer.zero_grad()") == 1 and out.count("self.g_optimizer.step()") == 1
    assert "class Recorder:\n" in out
    infos = [f.message for f in r.findings if f.code == "idiom-replaced"]
    assert any(m.startswith("WGAN defines its own train_step") for m in infos)
    assert any(m.startswith("tf.GradientTape watching interpolated") for m in infos)


def test_compile_without_a_loss_of_a_model_made_elsewhere():
    """A snippet: `model` is not built here; a compile without a loss can only train a model with its
    own train_step, whose compile takes the optimizer as a factory."""
    r = tx('''
        from tensorflow import keras
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3))
        h = model.fit(x, epochs=1, batch_size=4, verbose=0)
        ''')
    assert errors(r) == []
    assert "model.compile(optimizer=functools.partial(torch.optim.Adam, lr=1e-3, eps=1e-07))" in r.output
    assert "h = model.fit(x, epochs=1, batch_size=4, verbose=0)" in r.output


def test_an_optimizer_of_a_custom_compile_that_updates_two_models_is_an_error():
    src = WGAN.replace("self.d_optimizer.apply_gradients(zip(d_gradient, self.discriminator.trainable_variables))",
                       "self.d_optimizer.apply_gradients(zip(d_gradient, self.discriminator.trainable_variables))\n"
                       "        self.d_optimizer.apply_gradients(zip(d_gradient, self.generator.trainable_variables))")
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    msgs = [m for _, m in errors(r)]
    assert any(m.startswith("self.d_optimizer = d_optimizer: this optimizer updates") for m in msgs), msgs


def test_fit_over_an_iterable_of_batches_keeps_one_iterator_across_epochs():
    """TrainStepModule.fit over a DataLoader-like iterable: steps_per_epoch batches per epoch from
    one iterator (an endless one, like a repeated tf.data dataset)."""
    r = tx(AUTOENCODER)
    script = r.output + '''
import itertools
seen = []


class Counting(AE):
    def train_step(self, data):
        seen.append(int(data[0, 0]))
        return {"n": len(seen)}


m = Counting(encoder, decoder)
m.compile(optimizer=functools.partial(torch.optim.SGD, lr=0.1))
stream = (torch.full((2, 6), float(i)) for i in itertools.count())
h = m.fit(stream, epochs=3, steps_per_epoch=2, verbose=0)
assert seen == [0, 1, 2, 3, 4, 5], seen
assert h.history == {"n": [2.0, 4.0, 6.0]}, h.history
print("ok")
'''
    p = python("-c", script, side="torch", timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr[-3000:]


def test_gan_with_two_tapes_in_one_with_trains_as_keras_trains_it(tmp_path):
    """fixtures/tf2torch/gan_two_optimizers: `with tf.GradientTape() as gen_tape, tf.GradientTape() as
    disc_tape:` → backward(inputs=...) per loss; three steps compared (losses and both models' weights)."""
    src = (FIXTURES / "gan_two_optimizers" / "model.py").read_text()
    out = tx(src).output
    assert ("    gen_loss.backward(inputs=list(generator.parameters()), retain_graph=True)\n"
            "    disc_loss.backward(inputs=list(discriminator.parameters()))\n") in out
    assert "    generator_optimizer.zero_grad()\n    discriminator_optimizer.zero_grad()\n" in out
    keras_out, torch_out = _run(tmp_path, src, {
        "shapes": [("k0", (3, 4)), ("b0", (4,)), ("k1", (4, 8)), ("b1", (8,)), ("k2", (8, 1)), ("b2", (1,))],
        "n": 6, "width": 4, "x_map": "", "models": "(generator, discriminator)",
        "fit": "noise = (rng.normal(size=(6, 3)) * 0.5).astype('float32')\n"
               "arr = (lambda a: __import__('torch').as_tensor(a)) if 'torch' in sys.argv[2] else (lambda a: a)\n"
               "losses = [[float(v) for v in train_step(arr(x), arr(noise))] for _ in range(3)]\n"
               "h = type('H', (), {'history': {'losses': losses}})\nextra = None"})
    np.testing.assert_allclose(torch_out["history"]["losses"], keras_out["history"]["losses"], rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    assert keras_out["history"]["losses"][0] != keras_out["history"]["losses"][2]  # it trained


def test_a_callback_hook_no_fit_calls_is_an_error():
    r = tx(WGAN.replace("    def on_epoch_end(self, epoch, logs=None):",
                        "    def on_train_batch_end(self, batch, logs=None):\n        pass\n\n"
                        "    def on_epoch_end(self, epoch, logs=None):"))
    msgs = [m for _, m in errors(r)]
    assert len(msgs) == 1 and msgs[0].startswith("Recorder.on_train_batch_end: the translated fit calls only"), msgs


SCALED = '''
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(3, activation="tanh"), keras.layers.Dense(2)])
loss_fn = keras.losses.MeanSquaredError()
optimizer = keras.optimizers.SGD(0.2, momentum=0.5)


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    scaled = [g * 0.5 for g in grads]
    scaled[-1] = scaled[-1] + 0.01
    optimizer.apply_gradients(zip(scaled, model.trainable_variables))
    return loss
'''


def test_gradients_changed_before_apply_gradients_train_as_keras_trains_them(tmp_path):
    """grads = tape.gradient(...) used by other code before apply_gradients: read from p.grad after
    backward(), written back before step(); elementwise changes keep their meaning."""
    out = tx(SCALED).output
    assert ("    loss.backward()\n    grads = [p.grad for p in model.parameters()]\n"
            "    scaled = [g * 0.5 for g in grads]\n") in out
    assert "    for param, grad in zip(model.parameters(), scaled):\n        param.grad = grad\n    optimizer.step()\n" in out
    keras_out, torch_out = _run(tmp_path, SCALED, {
        "shapes": [("k0", (4, 3)), ("b0", (3,)), ("k1", (3, 2)), ("b1", (2,))],
        "n": 6, "width": 4, "x_map": "", "models": "(model,)",
        "fit": "arr = (lambda a: __import__('torch').as_tensor(a)) if 'torch' in sys.argv[2] else (lambda a: a)\n"
               "losses = [float(train_step(arr(x), arr(x[:, :2] * 2))) for _ in range(4)]\n"
               "h = type('H', (), {'history': {'losses': losses}})\nextra = None"})
    np.testing.assert_allclose(torch_out["history"]["losses"], keras_out["history"]["losses"], rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_a_file_with_only_a_callback_class():
    """The training pass's trigger: a Callback subclass alone is translated (no residue left)."""
    r = tx('''
        from keras.callbacks import Callback


        class Rec(Callback):
            def on_epoch_end(self, epoch, logs=None):
                print(epoch, logs)
        ''')
    assert errors(r) == [] and "class Rec:\n" in r.output and "keras" not in r.output


def test_the_default_optimizer_of_a_train_step_model_moves_only_what_apply_gradients_gets():
    """compile(optimizer) gives self.optimizer all the parameters; a train_step that applies it to a
    sub-model's variables gets backward(inputs=...) so that step() moves only those."""
    src = AUTOENCODER.replace("grads = tape.gradient(total_loss, self.trainable_weights)",
                              "grads = tape.gradient(total_loss, self.decoder.trainable_weights)").replace(
        "self.optimizer.apply_gradients(zip(grads, self.trainable_weights))",
        "self.optimizer.apply_gradients(zip(grads, self.decoder.trainable_weights))")
    r = tx(src)
    assert errors(r) == []
    assert "        total_loss.backward(inputs=list(self.decoder.parameters()))\n" in r.output
    script = r.output + '''
enc = [p.detach().clone() for p in encoder.parameters()]
ae.fit(torch.rand(8, 6), batch_size=4, epochs=1, verbose=0)
assert all(torch.equal(a, b) for a, b in zip(enc, encoder.parameters()))
assert all(p.grad is None for p in encoder.parameters())
print("ok")
'''
    p = python("-c", script, side="torch", timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr[-3000:]


def test_a_keras_optimizer_name_given_to_the_default_compile():
    r = tx(AUTOENCODER.replace("ae.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5))",
                               'ae.compile(optimizer="rmsprop")'))
    assert errors(r) == []
    assert "ae.compile(optimizer=functools.partial(torch.optim.RMSprop, lr=0.001, alpha=0.9, eps=1e-07))" in r.output


EVALUATED = (FIXTURES / "train_step_evaluate" / "model.py").read_text()


def test_test_step_and_predict_step_run_as_keras_runs_them(tmp_path):
    """fit(validation_data=...) calls test_step after each epoch (metrics reset first: the val_loss is
    the mean over the validation batches only), evaluate returns the one value (a dict with
    return_dict), predict concatenates predict_step's outputs over the batches."""
    keras_out, torch_out = _run(tmp_path, EVALUATED, {
        "shapes": [("k0", (6, 8)), ("b0", (8,)), ("k1", (8, 1)), ("b1", (1,))],
        "n": 10, "width": 6, "x_map": "\ny = np.sin(x[:, :1]).astype('float32')", "models": "(net,)",
        "fit": "h = regressor.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, "
               "validation_data=(x[:6], y[:6]))\n"
               "extra = [regressor.evaluate(x, y, batch_size=3, verbose=0), "
               "regressor.evaluate(x, y, verbose=0, return_dict=True), regressor.predict(x[:7], batch_size=3).tolist()]"})
    assert sorted(torch_out["history"]) == sorted(keras_out["history"]) == ["loss", "val_loss"]
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-6)
    k_eval, k_dict, k_pred = keras_out["extra"]
    t_eval, t_dict, t_pred = torch_out["extra"]
    assert isinstance(t_eval, float) and isinstance(k_eval, float)
    np.testing.assert_allclose(t_eval, k_eval, rtol=1e-5)
    assert list(t_dict) == list(k_dict) == ["loss"]
    np.testing.assert_allclose(t_dict["loss"], k_dict["loss"], rtol=1e-5)
    assert np.shape(t_pred) == np.shape(k_pred) == (7, 1)
    np.testing.assert_allclose(t_pred, k_pred, rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_what_a_train_step_model_without_test_step_or_with_compiled_loss_gets():
    """Keras's own test_step uses the compiled loss and metrics, which TrainStepModule does not carry:
    validation_data or evaluate on such a model, and self.compiled_loss / compiled_metrics /
    compute_loss in its methods, are errors (never left to fail at run time)."""
    src = AUTOENCODER + "ae.fit(x, epochs=2, validation_data=(x, x))\nae.evaluate(x)\n"
    r = tx(src)
    msgs = [m for _, m in errors(r)]
    assert any("validation_data is evaluated by Keras's own test_step" in m for m in msgs), msgs
    assert any(m.startswith("ae.evaluate(...) is a Keras model method") for m in msgs), msgs
    assert "class TrainStepModule(nn.Module):" in r.output and "def evaluate(" not in r.output
    compiled = AUTOENCODER.replace(
        "total_loss = tf.reduce_mean(tf.reduce_sum(tf.square(data - reconstruction), axis=1))",
        "total_loss = self.compiled_loss(data, reconstruction)")
    r = tx(compiled)
    assert [m.split(":")[0] for _, m in errors(r)] == ["self.compiled_loss"], errors(r)
    plain = tx(AUTOENCODER + "out = ae.predict(x)\n")
    assert errors(plain) == [] and "def predict_step(self, data):" in plain.output


KERAS3_GUIDE = '''
import tensorflow as tf
from tensorflow import keras


class CustomModel(keras.Model):
    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}
'''


def test_keras_own_metrics_and_compute_loss_in_a_train_step_are_errors():
    """Keras 3's recipe (compute_loss, the built-in self.metrics with its "loss" tracker): neither is
    carried by TrainStepModule, so each use is an error on its line, never an empty History."""
    r = tx(KERAS3_GUIDE)
    found = sorted((line, m.split(":")[0]) for line, m in errors(r))
    assert found == [(10, "self.compute_loss"), (13, "self.metrics"), (18, "self.metrics")], found


PERSISTENT = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

generator = keras.Sequential([keras.Input(shape=(3,)), layers.Dense(4, activation="tanh")])
discriminator = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(8, activation="relu"), layers.Dense(1)])
cross_entropy = keras.losses.BinaryCrossentropy(from_logits=True)
generator_optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
discriminator_optimizer = keras.optimizers.SGD(0.1, momentum=0.5)


def train_step(images, noise):
    with tf.GradientTape(persistent=True) as tape:
        generated_images = generator(noise, training=True)
        real_output = discriminator(images, training=True)
        fake_output = discriminator(generated_images, training=True)
        gen_loss = cross_entropy(tf.ones_like(fake_output), fake_output)
        disc_loss = (cross_entropy(tf.ones_like(real_output), real_output)
                     + cross_entropy(tf.zeros_like(fake_output), fake_output))
    grads_g = tape.gradient(gen_loss, generator.trainable_variables)
    grads_d = tape.gradient(disc_loss, discriminator.trainable_variables)
    generator_optimizer.apply_gradients(zip(grads_g, generator.trainable_variables))
    discriminator_optimizer.apply_gradients(zip(grads_d, discriminator.trainable_variables))
    return gen_loss, disc_loss
'''


def test_gan_with_a_persistent_tape_trains_as_keras_trains_it(tmp_path):
    """One persistent tape, two gradients from the one forward, two optimizers (keras-io cyclegan,
    gan_ada): backward(inputs=...) per loss, retain_graph on all but the last, every step after every
    backward; three steps compared (losses and both models' weights)."""
    out = tx(PERSISTENT).output
    assert ("    gen_loss.backward(inputs=list(generator.parameters()), retain_graph=True)\n"
            "    disc_loss.backward(inputs=list(discriminator.parameters()))\n"
            "    generator_optimizer.step()\n    discriminator_optimizer.step()\n") in out
    assert "    generator_optimizer.zero_grad()\n    discriminator_optimizer.zero_grad()\n" in out
    deleted = tx(PERSISTENT.replace("    return gen_loss, disc_loss", "    del tape\n    return gen_loss, disc_loss"))
    assert deleted.output == out and not errors(deleted)  # `del tape` after the steps: its line goes
    keras_out, torch_out = _run(tmp_path, PERSISTENT, {
        "shapes": [("k0", (3, 4)), ("b0", (4,)), ("k1", (4, 8)), ("b1", (8,)), ("k2", (8, 1)), ("b2", (1,))],
        "n": 6, "width": 4, "x_map": "", "models": "(generator, discriminator)",
        "fit": "noise = (rng.normal(size=(6, 3)) * 0.5).astype('float32')\n"
               "arr = (lambda a: __import__('torch').as_tensor(a)) if 'torch' in sys.argv[2] else (lambda a: a)\n"
               "losses = [[float(v) for v in train_step(arr(x), arr(noise))] for _ in range(3)]\n"
               "h = type('H', (), {'history': {'losses': losses}})\nextra = None"})
    np.testing.assert_allclose(torch_out["history"]["losses"], keras_out["history"]["losses"], rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    assert keras_out["history"]["losses"][0] != keras_out["history"]["losses"][2]  # it trained


def test_persistent_and_paired_tapes_it_does_not_follow_are_one_error_naming_the_line():
    """A step before the last gradient, one model's parameters under two gradients, a tape the block
    uses: one error on the tape's line each, saying why, and no no-rule error on the same tape."""
    lines = PERSISTENT.lstrip("\n").splitlines()
    at = lines.index("    with tf.GradientTape(persistent=True) as tape:") + 1
    interleaved = PERSISTENT.replace(
        "    grads_d = tape.gradient(disc_loss, discriminator.trainable_variables)\n"
        "    generator_optimizer.apply_gradients(zip(grads_g, generator.trainable_variables))\n",
        "    generator_optimizer.apply_gradients(zip(grads_g, generator.trainable_variables))\n"
        "    grads_d = tape.gradient(disc_loss, discriminator.trainable_variables)\n")
    shared = PERSISTENT.replace("tape.gradient(disc_loss, discriminator.trainable_variables)",
                                "tape.gradient(disc_loss, generator.trainable_variables)").replace(
        "zip(grads_d, discriminator.trainable_variables)", "zip(grads_d, generator.trainable_variables)")
    layer = PERSISTENT.replace("tape.gradient(disc_loss, discriminator.trainable_variables)",
                               "tape.gradient(disc_loss, generator.layers[0].trainable_variables)").replace(
        "zip(grads_d, discriminator.trainable_variables)", "zip(grads_d, generator.layers[0].trainable_variables)")
    one_optimizer = PERSISTENT.replace("discriminator_optimizer.apply_gradients", "generator_optimizer.apply_gradients")
    watched = PERSISTENT.replace("with tf.GradientTape(persistent=True) as tape:",
                                 "with tf.GradientTape() as tape, tf.GradientTape() as tape_2:").replace(
        "        gen_loss = ", "        tape_2.watch(noise)\n        gen_loss = ")
    for src, why in ((interleaved, "an apply_gradients comes before the last gradient"),
                     (shared, "differentiated with respect to the same parameters"),
                     (layer, "differentiated with respect to the same parameters"),
                     (one_optimizer, "one optimizer applies two gradients"),
                     (watched, "the block uses tape or tape_2")):
        r = translate_source(src.lstrip("\n"), "model.py")
        errs = [f for f in r.findings if f.severity is Severity.ERROR and f.line >= at]  # (optimizers: their own)
        # (generator.layers[0] of a module-level Sequential is the slice of modules its Dense became: not an error)
        attrs = [f for f in errs if "generator.layers is a Keras model attribute" in f.message]
        assert attrs == [], attrs
        assert (src is layer) == ("[p for p in generator[0:2].parameters() if p.requires_grad]" in r.output)
        errs = [f for f in errs if f not in attrs]
        assert [(f.line, f.code) for f in errs] == [(at, "unsupported-construct")], (why, errs)
        assert why in errs[0].message and errs[0].message.startswith("tf.GradientTape: "), errs[0].message


def test_validation_split_holds_out_the_last_samples_for_test_step(tmp_path):
    """fit(validation_split=...) of a train_step model (keras-io's real_nvp): the last samples, held out before
    shuffling, are evaluated by test_step after each epoch, the rest trained on, as Keras does."""
    src = EVALUATED + ("\n\ndef train(x, y):\n"
                       "    return regressor.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0, "
                       "validation_split=0.4)\n")
    keras_out, torch_out = _run(tmp_path, src, {
        "shapes": [("k0", (6, 8)), ("b0", (8,)), ("k1", (8, 1)), ("b1", (1,))],
        "n": 10, "width": 6, "x_map": "\ny = np.sin(x[:, :1]).astype('float32')", "models": "(net,)",
        "fit": "h = train(x, y)\nextra = []"})
    assert sorted(torch_out["history"]) == sorted(keras_out["history"]) == ["loss", "val_loss"]
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    out = tx(EVALUATED + "\nregressor.fit(x, y, validation_split=0.2)\n").output
    assert "split = int(len(x) * (1 - validation_split))" in out


def test_validation_steps_evaluate_that_many_batches_from_the_start_each_epoch(tmp_path):
    """fit(validation_data=..., validation_steps=N) of a train_step model (keras-io's adain): test_step on the
    first N batches of the validation data after each epoch, from its start every time, as Keras does."""
    src = EVALUATED + ("\n\ndef train(x, y):\n"
                       "    return regressor.fit(x, y, batch_size=3, epochs=3, shuffle=False, verbose=0, "
                       "validation_data=(x[::-1].copy(), y[::-1].copy()), validation_steps=2)\n")
    keras_out, torch_out = _run(tmp_path, src, {
        "shapes": [("k0", (6, 8)), ("b0", (8,)), ("k1", (8, 1)), ("b1", (1,))],
        "n": 10, "width": 6, "x_map": "\ny = np.sin(x[:, :1]).astype('float32')", "models": "(net,)",
        "fit": "h = train(x, y)\nextra = []"})
    assert sorted(torch_out["history"]) == sorted(keras_out["history"]) == ["loss", "val_loss"]
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-6)
