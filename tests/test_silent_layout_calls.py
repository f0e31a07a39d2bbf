"""A Sequential model the passes made channels-first (NCHW), called directly on Keras's channels-last data in the file
(``y = model(x)`` at module level, in a function, in a GradientTape loop over a dataset; passes/valuekinds.py
``_layout``): its input is moved channels-first and its feature-map output moved back, as the written fit / predict
functions do. Before, the translation fed NHWC data to the NCHW module with no finding (a crash, or another
result where the sizes happened to fit). The translation runs with TensorFlow blocked; Keras runs the original with
the torch side's weights, and the outputs are compared."""
from __future__ import annotations

import importlib.util
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import run_side

needs_both = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None
                                or importlib.util.find_spec("torch") is None, reason="needs TensorFlow and PyTorch")

PROGRAM = '''
import numpy as np
import tensorflow as tf
import keras
from keras import layers


def build_model():
    model = keras.Sequential([
        keras.Input(shape=(8, 8, 3)),
        layers.Conv2D(4, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(2),
        layers.Flatten(),
        layers.Dense(5),
    ])
    return model


features = keras.Sequential([
    keras.Input(shape=(8, 8, 3)),
    layers.Conv2D(2, 3, padding="same"),
])
x = np.random.RandomState(0).rand(2, 8, 8, 3)
y = features(x)
t = tf.constant(x, dtype=tf.float32)
yt = features(t)
p = features.predict(x, verbose=0)


def main():
    model = build_model()
    return model, model(x * 2.0)


net, z = main()
'''

#: the translation's side: its outputs and the weights of its two models (torch's layout)
TORCH_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
weights = {f"features.{k}": v.detach().numpy() for k, v in m.features.state_dict().items()}
weights.update({f"net.{k}": v.detach().numpy() for k, v in m.net.state_dict().items()})
np.savez(sys.argv[1] + "/weights.npz", **weights)
print("RESULT " + json.dumps({"y": m.y.detach().numpy().tolist(), "yt": m.yt.detach().numpy().tolist(),
                              "p": m.p.tolist(), "z": m.z.detach().numpy().tolist()}))
'''

#: Keras's side: the original's models given the translation's weights, called on the same data
KERAS_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
w = np.load(sys.argv[3])
m.features.layers[0].set_weights([w["features.0.weight"].transpose(2, 3, 1, 0), w["features.0.bias"]])
conv, dense = m.net.layers[0], m.net.layers[-1]
conv.set_weights([w["net.0.weight"].transpose(2, 3, 1, 0), w["net.0.bias"]])
# torch flattens (C, H, W), Keras (H, W, C): the Dense rows in Keras's order
k = w["net.4.weight"].reshape(5, 4, 4, 4).transpose(2, 3, 1, 0).reshape(64, 5)
dense.set_weights([k, w["net.4.bias"]])
y = m.features(m.x).numpy()
print("RESULT " + json.dumps({"y": y.tolist(), "yt": m.features(m.t).numpy().tolist(),
                              "p": m.features.predict(m.x, verbose=0).tolist(),
                              "z": m.net(m.x * 2.0).numpy().tolist()}))
'''


def _translate(program: str):
    r = translate_source(textwrap.dedent(program).lstrip(), "prog.py")
    return r, [f for f in r.findings if f.severity is Severity.ERROR]


@needs_both
def test_channels_first_sequential_called_on_channels_last_data(tmp_path):
    r, errors = _translate(PROGRAM)
    assert not errors, [f.message for f in errors]
    out = r.output
    # (x: floats of a NumPy generator, Keras's float32 spelled out)
    assert "y = features(torch.as_tensor(x, dtype=torch.float32).movedim(-1, 1)).movedim(1, -1)" in out
    assert "yt = features(as_float32(t).movedim(-1, 1)).movedim(1, -1)" in out
    assert "return model, model(torch.as_tensor(x * 2.0, dtype=torch.float32).movedim(-1, 1))" in out  # a (batch, 5) output stays
    torch_result = run_side(tmp_path / "torch", "torch", out, TORCH_DRIVER, "torch")
    keras_result = run_side(tmp_path / "keras", "keras", textwrap.dedent(PROGRAM).lstrip(), KERAS_DRIVER, "keras",
                            str(tmp_path / "torch" / "weights.npz"))
    for key in ("y", "yt", "p", "z"):
        assert np.shape(torch_result[key]) == np.shape(keras_result[key]), key
        np.testing.assert_allclose(torch_result[key], keras_result[key], rtol=1e-5, atol=1e-5, err_msg=key)


def test_a_training_loop_over_a_dataset_moves_each_batch():
    """``logits = model(x_batch, training=True)`` in a GradientTape loop over a tf.data dataset."""
    r, errors = _translate('''
        import numpy as np
        import tensorflow as tf
        import keras
        from keras import layers

        model = keras.Sequential([
            keras.Input(shape=(28, 28, 1)),
            layers.Conv2D(4, 3, activation="relu"),
            layers.GlobalAveragePooling2D(),
            layers.Dense(10),
        ])
        optimizer = keras.optimizers.Adam(1e-3)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        ds = tf.data.Dataset.from_tensor_slices((np.zeros((8, 28, 28, 1)), np.zeros(8))).batch(4)
        for x_batch, y_batch in ds:
            with tf.GradientTape() as tape:
                logits = model(x_batch, training=True)
                loss = loss_fn(y_batch, logits)
            grads = tape.gradient(loss, model.trainable_weights)
            optimizer.apply_gradients(zip(grads, model.trainable_weights))
    ''')
    assert not errors, [f.message for f in errors]
    assert "logits = model(as_float32(x_batch).movedim(-1, 1))" in r.output


def test_a_name_bound_to_a_channels_first_sequential_and_to_something_else_is_an_error():
    r, errors = _translate('''
        import numpy as np
        import keras
        from keras import layers

        model = keras.Sequential([keras.Input(shape=(8, 8, 3)), layers.Conv2D(2, 3)])
        if np.random.rand() > 2:
            model = keras.models.load_model("m.keras")
        y = model(np.zeros((1, 8, 8, 3)))
    ''')
    assert [f.line for f in errors if "channels-first" in f.message] == [8], [f.message for f in r.findings]
    assert "# fwport: unsupported-construct: model may be a Sequential model" in r.output


def test_keras_names_and_attributes_of_a_translated_models_weights_and_layers_are_errors():
    """``p.name`` of a parameter (None in torch), ``layer.weights`` / ``layer.kernel`` / ``layer.name`` of the module a
    layer became (an AttributeError): error findings where the translation ran wrong or crashed with none; what
    translates (p.shape, v.numpy(), model.layers[0].kernel by its weight map) stays."""
    r, errors = _translate('''
        import numpy as np
        import keras
        from keras import layers

        model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3, name="d1"), layers.Dense(2)])
        for p in model.trainable_variables:
            print(p.name, p.shape)
        print(model.layers[0].kernel.shape)
        print(model.layers[0].weights)
        layer = model.layers[1]
        print(layer.kernel.numpy())
        print(model.trainable_variables[0].name)
        for layer in model.layers:
            print(layer.name)
        for i, v in enumerate(model.weights):
            print(v.numpy().shape, v.name)
    ''')
    assert sorted(f.line for f in errors) == [7, 9, 11, 12, 14, 16], [(f.line, f.message) for f in r.findings]
    assert "print(model[0].weight.T.shape)" in r.output  # (layer_weights: a view in Keras's layout)
    assert r.output.count("# fwport: unsupported-construct") == 6


TRAIN_STEP = '''
import numpy as np
import tensorflow as tf
import keras
from keras import layers


class CustomModel(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = layers.Dense(1)
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.mae_metric = keras.metrics.MeanAbsoluteError(name="mae")

    def call(self, x):
        return self.dense(x)

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = keras.losses.mean_squared_error(y, y_pred)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.loss_tracker.update_state(loss)
        self.mae_metric.update_state(y, y_pred)
        return {"loss": self.loss_tracker.result(), "mae": self.mae_metric.result()}

    @property
    def metrics(self):
        return [self.loss_tracker, self.mae_metric]


model = CustomModel()
x = np.linspace(-1.0, 1.0, 64 * 4).reshape(64, 4)
y = x.sum(axis=1, keepdims=True) * 0.5 + 0.25
model(x[:1])


def train(model):
    model.compile(optimizer=keras.optimizers.SGD(0.01))
    history = model.fit(x, y, epochs=3, batch_size=16, verbose=0, shuffle=False)
    return history.history
'''

HISTORY_DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import model as m
if sys.argv[2] == "keras":  # the same start on both sides: weights of 0.1
    m.model.dense.set_weights([w * 0 + 0.1 for w in m.model.dense.get_weights()])
else:
    import torch
    with torch.no_grad():
        for p in m.model.parameters():
            p.fill_(0.1)
print("RESULT " + json.dumps({k: [float(v) for v in vs] for k, vs in m.train(m.model).items()}))
'''


@needs_both
def test_a_train_step_on_a_per_sample_loss_records_its_keys_per_epoch(tmp_path):
    """keras.losses.mean_squared_error gives a loss per sample: tape.gradient differentiates its sum, torch's
    backward() refused a vector (a crash with no finding): loss.sum().backward(). The returned dict's keys are
    history.history's, per epoch, with Keras's values (zero kernels: the same start)."""
    program = TRAIN_STEP.lstrip()
    r, errors = _translate(program)
    assert not errors, [f.message for f in errors]
    assert "loss.sum().backward()" in r.output
    keras_result = run_side(tmp_path / "keras", "keras", program, HISTORY_DRIVER, "keras")
    torch_result = run_side(tmp_path / "torch", "torch", r.output, HISTORY_DRIVER, "torch")
    assert sorted(torch_result) == sorted(keras_result) == ["loss", "mae"]
    for key in ("loss", "mae"):
        assert len(torch_result[key]) == 3
        np.testing.assert_allclose(torch_result[key], keras_result[key], rtol=1e-4, atol=1e-5, err_msg=key)


def test_metric_names_read_in_a_train_step_are_an_error():
    r, errors = _translate(TRAIN_STEP.replace(
        'return {"loss": self.loss_tracker.result(), "mae": self.mae_metric.result()}',
        "return {m.name: m.result() for m in self.metrics}"))
    assert [f.line for f in errors] == [26] and "keep no Keras name" in errors[0].message, [f.message for f in errors]


PAIRED = '''
import json

import numpy as np
import tensorflow as tf


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable([[0.5, -1.0, 0.2], [2.0, 0.25, -0.3]])

    def call(self, x):
        return tf.matmul(x, self.w)


model = Net()
a, b = np.linspace(0.0, 255.0, 8).reshape(4, 2), np.arange(4).reshape(2, 2)
a, b = a / 255.0, b / 2.0
y = model(a[:2])
print(json.dumps({"y": np.asarray(y).tolist(), "z": model(b).numpy().tolist()}))
'''


@needs_both
def test_names_a_tuple_assignment_binds_to_numpy_values_are_numpy(tmp_path):
    """``x_train, x_test = x_train / 255.0, x_test / 255.0`` (the TensorFlow quickstart, after ``mnist =
    tf.keras.datasets.mnist; (x_train, ...), ... = mnist.load_data()``): each name its own element, NumPy values;
    before, they were not known and ``model(x_train[:1])`` gave torch a NumPy array (a crash, no finding)."""
    from test_variables import _run

    program = PAIRED.lstrip()
    r, errors = _translate(program)
    assert not errors, [f.message for f in errors]
    assert "y = model(torch.as_tensor(a[:2], dtype=torch.float32))" in r.output
    assert "model(as_float32(b))" in r.output  # (np.arange: ints, then floats)
    src, out = tmp_path / "keras_prog.py", tmp_path / "torch_prog.py"
    src.write_text(program)
    out.write_text(r.output)
    keras_result, torch_result = _run(src, block=False), _run(out, block=True)
    for key in ("y", "z"):
        np.testing.assert_allclose(torch_result[key], keras_result[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_a_keras_dataset_module_bound_to_a_name_loads_numpy_arrays():
    r, errors = _translate('''
        import tensorflow as tf

        mnist = tf.keras.datasets.mnist
        (x_train, y_train), (x_test, y_test) = mnist.load_data()
        x_train, x_test = x_train / 255.0, x_test / 255.0
        model = tf.keras.models.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)), tf.keras.layers.Dense(10)])
        predictions = model(x_train[:1]).numpy()
    ''')
    assert not errors, [f.message for f in errors]
    assert "predictions = model(as_float32(x_train[:1])).detach().numpy()" in r.output
