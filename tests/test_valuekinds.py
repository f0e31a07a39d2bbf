"""NumPy values meeting the translated torch modules, and model outputs meeting NumPy (passes/valuekinds.py):
Keras takes NumPy arrays (float64 too: it casts them to float32) and its eager tensors go into NumPy
functions; the translations ran with no error finding and crashed in torch. Each program is run by Keras and,
translated, by torch with TensorFlow blocked, and the values compared."""
from __future__ import annotations

import importlib.util
import json
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from test_variables import _run  # Keras's run, and the translation's with TensorFlow blocked

needs_both = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None
                                or importlib.util.find_spec("torch") is None, reason="needs TensorFlow and PyTorch")

def _both(tmp_path, program: str) -> tuple[dict, dict, str]:
    program = textwrap.dedent(program).lstrip()
    r = translate_source(program, "prog.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    src, out = tmp_path / "keras_prog.py", tmp_path / "torch_prog.py"
    src.write_text(program)
    out.write_text(r.output)
    return _run(src, block=False), _run(out, block=True), r.output


NUMPY_IN_AND_OUT = '''
import json

import numpy as np
import tensorflow as tf


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable([[0.5, -1.0, 0.2], [2.0, 0.25, -0.3]])
        self.b = tf.Variable([0.1, -0.2, 0.05])

    def call(self, x):
        return tf.matmul(x, self.w) * 3.0 + self.b


model = Net()
x = np.linspace(-1.0, 1.0, 8).reshape(4, 2)
z = np.array([[0.5, 1.0], [2.0, -1.0]])
y = model(x)
best = np.argmax(model(x), axis=1)
first = np.squeeze(y[:, :1])
mean = np.mean(y)
loss_fn = tf.keras.losses.MeanSquaredError()
targets = np.ones((4, 3)) * 0.5
loss = loss_fn(targets, model(x * 2.0))
yz = model(z)
print(json.dumps({"y": y.numpy().tolist(), "best": best.tolist(), "first": first.tolist(), "mean": float(mean),
                  "loss": float(loss), "yz": yz.numpy().tolist(), "dtype": str(y.numpy().dtype)}))
'''


@needs_both
def test_numpy_arrays_into_a_model_and_model_outputs_into_numpy(tmp_path):
    """float64 NumPy data into a model (Keras casts it to float32), a model's output into np.argmax / np.squeeze /
    np.mean, NumPy labels into a loss: the same values as Keras."""
    keras_result, torch_result, out = _both(tmp_path, NUMPY_IN_AND_OUT)
    assert "model(torch.as_tensor(x, dtype=torch.float32))" in out  # np.linspace: surely floating
    assert "model(as_float32(z))" in out  # np.array of a list: cast only if floating
    assert "np.argmax(model(torch.as_tensor(x, dtype=torch.float32)).detach().numpy(), axis=1)" in out
    assert "np.squeeze(y[:, :1].detach().numpy())" in out and "np.mean(y.detach().numpy())" in out
    assert "torch.as_tensor(targets, dtype=torch.float32)" in out
    assert torch_result["dtype"] == keras_result["dtype"] == "float32"
    assert torch_result["best"] == keras_result["best"]
    for key in ("y", "first", "mean", "loss", "yz"):
        np.testing.assert_allclose(torch_result[key], keras_result[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_tensors_and_unknown_values_are_left_as_written():
    """A tensor argument, a parameter (may be anything) and a name bound to something else too are not converted;
    NumPy functions of values that are not model outputs are left alone."""
    r = translate_source(textwrap.dedent('''
        import numpy as np
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
        t = tf.ones((2, 3))
        a = np.ones((2, 3))
        if t.shape[0] > 1:
            a = t
        out = model(t)
        out2 = model(a)
        s = np.sum(np.ones(3))

        def f(batch):
            return model(batch)
    ''').lstrip(), "p.py")
    assert "model(t)" in r.output and "model(a)" in r.output and "model(batch)" in r.output
    assert "np.sum(np.ones(3))" in r.output and "as_tensor" not in r.output and "detach" not in r.output


SATURATED = '''
import json

import numpy as np
import tensorflow as tf


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable([[1.0], [-2.0]])

    def call(self, x):
        return tf.keras.activations.sigmoid(tf.matmul(x, self.w))


model = Net()
loss_fn = tf.keras.losses.BinaryCrossentropy()
labels = np.array([[0.0], [1.0], [0.0]], dtype="float32")
small = np.array([[0.5, 0.25], [-1.0, 0.5], [2.0, 1.0]], dtype="float32")
large = small * 40.0
print(json.dumps({"small": float(loss_fn(labels, model(small))), "large": float(loss_fn(labels, model(large)))}))
'''


@needs_both
def test_a_probability_loss_of_a_sigmoid_is_a_warning_that_states_the_difference(tmp_path):
    """Keras computes BinaryCrossentropy() of a sigmoid's output from its logits; the translation clips the
    probabilities. Equal for moderate logits, far apart for saturated ones: the translation says so (a warning,
    once a file), and the numbers bear out what it says."""
    r = translate_source(SATURATED.lstrip(), "prog.py")
    warnings = [f for f in r.findings if f.severity is Severity.WARNING and f.code == "approximate"]
    assert len(warnings) == 1 and "from_logits=True" in warnings[0].message and warnings[0].line == 21
    keras_result, torch_result, _ = _both(tmp_path, SATURATED)
    assert torch_result["small"] == pytest.approx(keras_result["small"], rel=1e-5)
    assert keras_result["large"] > torch_result["large"] + 10.0 and torch_result["large"] < 17.0  # (-log(1e-7) = 16.1)
    no_activation = translate_source(SATURATED.replace("tf.keras.activations.sigmoid(", "(").lstrip(), "prog.py")
    assert not [f for f in no_activation.findings if f.code == "approximate"]


LAYER_WEIGHTS = '''
import json

import numpy as np
import tensorflow as tf


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.fc = tf.keras.layers.Dense(3)
        self.conv = tf.keras.layers.Conv2D(2, 3)

    def call(self, x, images):
        return self.fc(x), self.conv(images)

    def penalty(self):
        return tf.reduce_sum(tf.square(self.fc.kernel)) + tf.reduce_sum(self.conv.kernel * self.conv.kernel)


net = Net()
x = np.linspace(-1.0, 1.0, 8).reshape(4, 2).astype("float32")
images = np.linspace(-1.0, 1.0, 2 * 5 * 5 * 2).reshape(2, 5, 5, 2).astype("float32")
net(x, images)
net.fc.kernel.assign(np.arange(6).reshape(2, 3) / 10.0)
net.fc.bias.assign(np.array([0.5, -0.5, 1.0]))
net.conv.kernel.assign(np.arange(36).reshape(3, 3, 2, 2) / 100.0)
net.conv.bias.assign(np.zeros(2))
y, z = net(x, images)
print(json.dumps({"y": y.numpy().tolist(), "z": np.asarray(z).tolist(), "kernel": net.fc.kernel.numpy().tolist(),
                  "ckernel": net.conv.kernel.numpy().tolist(), "penalty": float(net.penalty())}))
'''


@needs_both
def test_keras_weight_names_read_on_translated_layers(tmp_path):
    """layer.kernel on the nn.Linear / nn.Conv2d a Dense / Conv2D became is the rule's weight map read backwards
    (a view of torch's weight in Keras's layout): reading, assigning and a penalty on it give Keras's values."""
    keras_result, torch_result, out = _both(tmp_path, LAYER_WEIGHTS)
    assert "torch.sum(torch.square(self.fc.weight.T))" in out
    assert "torch.sum(self.conv.weight.permute(2, 3, 1, 0) * self.conv.weight.permute(2, 3, 1, 0))" in out
    assert "net.fc.weight.T.data.copy_(" in out and "net.fc.bias.data.copy_(" in out
    assert "np.asarray(z.detach().numpy())" in out  # (y, z = net(...): model outputs by unpacking)
    for key in ("y", "z", "kernel", "ckernel", "penalty"):
        np.testing.assert_allclose(torch_result[key], keras_result[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_a_weight_in_another_layout_is_an_error_and_copies_are_renamed():
    """A Dense after a Flatten of a channels-first map stores its kernel reordered (no view gives Keras's): an error
    naming what torch stores; BatchNormalization's moving_mean / gamma are running_mean / weight."""
    r = translate_source(textwrap.dedent('''
        from tensorflow import keras

        model = keras.Sequential([keras.Input((6, 6, 2)), keras.layers.Conv2D(3, 3), keras.layers.Flatten(),
                                  keras.layers.Dense(2), keras.layers.BatchNormalization()])
        k = model.layers[2].kernel
        m = model.layers[3].moving_mean
        g = model.layers[3].gamma
    ''').lstrip(), "p.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.line for f in errors] == [5] and "has no kernel" in errors[0].message and ".weight (" in errors[0].message
    assert "m = model[3].running_mean" in r.output and "g = model[3].weight" in r.output


OPS_ON_VALUES = '''
import json

import numpy as np
import tensorflow as tf

img = np.linspace(0.0, 1.0, 4 * 4 * 3).reshape(4, 4, 3)
batch = tf.expand_dims(img, 0)
total = tf.reduce_sum(img)
ints = tf.cast(np.arange(4), tf.float32)
row = tf.square(img[0])
b = tf.expand_dims([1.0, 2.0], -1)
s = tf.reduce_sum([1.0, 2.0, 3.0])
m = tf.reduce_mean([[1.0, 2.0], [3.0, 4.0]], axis=0)
g = tf.math.log([1.0, 2.0])
print(json.dumps({"batch": list(batch.shape), "total": float(total), "ints": ints.numpy().tolist(),
                  "row": row.numpy().tolist(), "b": b.numpy().tolist(), "s": float(s), "m": m.numpy().tolist(),
                  "g": g.numpy().tolist(), "dtype": str(batch.numpy().dtype)}))
'''


@needs_both
def test_tf_ops_on_numpy_arrays_and_python_lists(tmp_path):
    """TensorFlow's ops convert a NumPy array or a list of numbers; the torch method or function they become needs
    a tensor: torch.as_tensor(array) (its dtype kept, as TensorFlow keeps it), torch.tensor(list)."""
    keras_result, torch_result, out = _both(tmp_path, OPS_ON_VALUES)
    assert "torch.as_tensor(img).unsqueeze(0)" in out and "torch.sum(torch.as_tensor(img))" in out
    assert "torch.as_tensor(np.arange(4)).to(torch.float32)" in out and "torch.tensor([1.0, 2.0]).unsqueeze(-1)" in out
    assert torch_result["dtype"] == keras_result["dtype"] == "float64"
    assert torch_result["batch"] == keras_result["batch"] == [1, 4, 4, 3]
    for key in ("total", "ints", "row", "b", "s", "m", "g"):
        np.testing.assert_allclose(torch_result[key], keras_result[key], rtol=1e-6, err_msg=key)


DATASET_ELEMENTS = '''
import json

import numpy as np
import tensorflow as tf


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable([[0.5], [-1.0], [0.25]])

    def call(self, x):
        return tf.matmul(x, self.w)


model = Net()
x = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
y = np.arange(4.0)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(2)
outs = []
for xb, yb in ds:
    outs.append(model(xb)[:, 0].numpy().tolist())
print(json.dumps({"outs": outs}))
'''


@needs_both
def test_a_model_called_on_float64_dataset_elements_gets_float32(tmp_path):
    """A tf.data dataset of float64 arrays yields float64 tensors; Keras casts a model's float64 input to float32,
    torch's layers refuse it: model(as_float32(xb)) for the elements of a dataset the file builds."""
    keras_result, torch_result, out = _both(tmp_path, DATASET_ELEMENTS)
    assert "model(as_float32(xb))" in out
    np.testing.assert_allclose(torch_result["outs"], keras_result["outs"], rtol=1e-6)


def test_a_numpy_shape_or_list_of_tensors_is_not_converted():
    """Only an op's tensor parameter is converted: a NumPy shape (tf.zeros(shape)) or a list argument stays."""
    r = translate_source(textwrap.dedent('''
        import numpy as np
        import tensorflow as tf

        shape = np.array([2, 3])
        z = tf.zeros(shape)
        img = np.random.rand(4, 4)
        s = tf.reduce_sum(img)
    ''').lstrip(), "p.py")
    assert "z = torch.zeros(shape)" in r.output and "s = torch.sum(torch.as_tensor(img))" in r.output


WRAPPED_WEIGHTS = '''
import json

import numpy as np
import tensorflow as tf


class Block(tf.keras.layers.Layer):
    def __init__(self, strides):
        super().__init__()
        self.conv = tf.keras.layers.Conv2D(2, 3, strides=strides, padding="same")

    def call(self, x):
        return self.conv(x)

    def penalty(self):
        return tf.reduce_sum(self.conv.kernel * tf.range(18.0, dtype=tf.float32)[:, None] / 10.0)


block = Block(2)
images = tf.constant(np.linspace(-1.0, 1.0, 2 * 5 * 5 * 1).reshape(2, 5, 5, 1).astype("float32"))
block(images)
block.conv.kernel.assign(np.arange(18).reshape(3, 3, 1, 2) / 10.0)
block.conv.bias.assign(np.array([0.5, -0.5]))
y = block(images)
print(json.dumps({"y": y.numpy().tolist(), "penalty": float(block.penalty())}))
'''


@needs_both
def test_a_weight_read_on_a_layer_wrapped_for_same_padding(tmp_path):
    """Conv2D(padding="same") with a stride became nn.Sequential(SamePad2d(...), nn.Conv2d(...)): self.conv.kernel is
    the conv's weight, self.conv[1].weight (it read self.conv.weight, which the Sequential has not). The kernel is set
    to known values and the penalty weighs its entries by their place in Keras's layout: Keras's values both ways."""
    keras_result, torch_result, out = _both(tmp_path, WRAPPED_WEIGHTS)
    assert "self.conv[1].weight.permute(2, 3, 1, 0)" in out, out
    for key in ("y", "penalty"):
        np.testing.assert_allclose(torch_result[key], keras_result[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_keras_variable_methods_and_build_on_a_translated_layer_are_errors():
    """keras-io pixelcnn (with its **kwargs spelled out) builds a wrapped Conv2D by hand and masks its kernel in
    call: build(), kernel.get_shape() and kernel.assign() on the torch module were left as written with no finding
    (AttributeError at run time); each is an error that says what to write."""
    r = translate_source(textwrap.dedent('''
        import numpy as np
        from tensorflow import keras


        class Masked(keras.layers.Layer):
            def __init__(self, filters):
                super().__init__()
                self.conv = keras.layers.Conv2D(filters, 3, padding="same")

            def build(self, input_shape):
                self.conv.build(input_shape)
                self.mask = np.ones(self.conv.kernel.get_shape())

            def call(self, x):
                self.conv.kernel.assign(self.conv.kernel * self.mask)
                return self.conv(x)
    ''').lstrip(), "p.py")
    errors = {f.line: f.message for f in r.findings if f.severity is Severity.ERROR}
    assert sorted(errors) == [11, 12, 15], r.findings
    assert "self.conv.build(...)" in errors[11] and "self.conv.kernel.get_shape(...)" in errors[12]
    assert "w.copy_(value)" in errors[15]
