"""A feature extractor of a functional model translated above it: ``keras.Model(model.input,
model.get_layer("dense2").output)`` (keras-io's captcha_ocr / handwriting_recognition prediction model, a model
built by a builder and bound at module level or built there). The base class gets a method running forward's
statements up to that layer (``upto_dense2``), and the extractor is a module calling it on that very model, so
the weights are shared as in Keras. Where that cannot be followed, a specific error says why."""
from __future__ import annotations

import textwrap

import numpy as np

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

from helpers import needs
from runners import keras_and_torch

PACK = load_pack("tf2torch")


def tr(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "extract.py", PACK)


def errors(r) -> list[tuple[int, str]]:
    return sorted((f.line, f.message) for f in r.findings if f.severity is Severity.ERROR)


BUILT = '''
import keras
from keras import layers


def build_model():
    image = keras.Input(shape=(8,), name="image")
    labels = keras.Input(shape=(3,), name="label")
    x = layers.Dense(16, activation="relu", name="dense1")(image)
    x = layers.Dense(3, activation="softmax", name="dense2")(x)
    output = layers.Add(name="with_labels")([x, labels])
    return keras.Model(inputs=[image, labels], outputs=output)


model = build_model()
prediction_model = keras.Model(model.get_layer(name="image").input, model.get_layer(name="dense2").output)
'''

# the builder compiles its model: the training pass makes `model = build_model()` `model, opt, loss_fn = ...`
COMPILED = BUILT.replace("    return keras.Model(inputs=[image, labels], outputs=output)\n",
                         "    model = keras.Model(inputs=[image, labels], outputs=output)\n"
                         "    model.compile(optimizer=keras.optimizers.Adam(), loss=\"mse\")\n    return model\n")

CONV = '''
import keras
from keras import layers

inputs = keras.Input(shape=(8, 8, 3), name="image")
x = layers.Conv2D(4, 3, padding="same", activation="relu", name="conv1")(inputs)
x = layers.MaxPooling2D(2)(x)
x = layers.Conv2D(6, 3, name="conv2")(x)
x = layers.Flatten()(x)
outputs = layers.Dense(2, name="head")(x)
model = keras.Model(inputs, outputs)

extractor = keras.Model(model.input, model.get_layer("conv2").output)
'''


def test_the_base_class_gets_a_method_up_to_the_layer():
    r = tr(BUILT)
    assert errors(r) == []
    out = r.output
    assert "    def upto_dense2(self, image):\n" in out
    method = out[out.index("def upto_dense2"):]
    method = method[:method.index("\n\n")]
    assert "labels" not in method and "with_labels" not in method  # only what dense2's output depends on
    assert "class PredictionModel(nn.Module):" in out and "self.model = model" in out
    assert "return self.model.upto_dense2(image)" in out and "prediction_model = PredictionModel()" in out
    assert "get_layer" not in out


def test_a_builder_that_compiles_its_model_is_followed_too():
    r = tr(COMPILED)
    assert errors(r) == []
    assert "model, optimizer, loss_fn = build_model()" in r.output and "return self.model.upto_dense2(image)" in r.output


def test_a_channels_first_model_gives_the_map_back_channels_last():
    r = tr(CONV)
    assert errors(r) == []
    method = r.output[r.output.index("def upto_conv2"):]
    assert "inputs = inputs.permute(0, 3, 1, 2)" in method and "return x.permute(0, 2, 3, 1)" in method
    assert "self.flatten" not in method[:method.index("return")]


DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import model as m
side = sys.argv[2]
conv = hasattr(m, "extractor")
x = np.random.default_rng(1).normal(size=(2, 8, 8, 3) if conv else (5, 8)).astype("float32")
labels = np.random.default_rng(2).normal(size=(5, 3)).astype("float32")
shared = sys.argv[1].rsplit("/", 1)[0] + "/weights.npz"
sub = m.extractor if conv else m.prediction_model
if side == "keras":
    weights = [np.asarray(w) for layer in m.model.layers for w in layer.weights]
    np.savez(shared, *weights)
    y = np.asarray(sub(x))
    full = np.asarray(m.model(x) if conv else m.model([x, labels]))
else:
    import torch
    z = np.load(shared)
    weights = [z[f"arr_{i}"] for i in range(len(z.files))]
    mods = [mod for mod in m.model.modules() if isinstance(mod, (torch.nn.Linear, torch.nn.Conv2d))]
    with torch.no_grad():
        for mod, k, b in zip(mods, weights[::2], weights[1::2]):
            if isinstance(mod, torch.nn.Conv2d):
                k = k.transpose(3, 2, 0, 1)
            elif conv:  # the Dense after a channels-first Flatten: rows in Keras's (h, w, c) order
                k = k.reshape(2, 2, 6, 2).transpose(2, 0, 1, 3).reshape(24, 2).T
            else:
                k = k.T
            mod.weight.copy_(torch.as_tensor(np.ascontiguousarray(k)))
            mod.bias.copy_(torch.as_tensor(b))
        y = sub(torch.as_tensor(x)).numpy()
        full = (m.model(torch.as_tensor(x)) if conv else m.model(torch.as_tensor(x), torch.as_tensor(labels))).numpy()
print("RESULT " + json.dumps({"y": y.tolist(), "full": full.tolist()}))
'''


@needs("torch", "tensorflow")
def test_the_extractors_compute_what_keras_computes(tmp_path):
    for name, src in (("built", BUILT), ("compiled", COMPILED), ("conv", CONV)):
        src = src.replace('get_layer(name="image").input', 'get_layer(name="image").output')  # (Keras 3's)
        r = tr(src)
        assert errors(r) == []
        keras_out, torch_out = keras_and_torch(tmp_path / name, textwrap.dedent(src), r.output, DRIVER)
        assert np.asarray(keras_out["y"]).shape == np.asarray(torch_out["y"]).shape
        np.testing.assert_allclose(torch_out["y"], keras_out["y"], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(torch_out["full"], keras_out["full"], rtol=1e-4, atol=1e-5)


def test_what_cannot_be_followed_is_a_specific_error():
    # a layer without a literal name (Keras's own name, dense_1, is not known here)
    r = tr(BUILT.replace('model.get_layer(name="dense2")', 'model.get_layer(name="dense_9")'))
    assert "class PredictionModel" not in r.output
    assert any("'dense_9' is not a layer fwport can take the output of" in m for _, m in errors(r))
    # dense2 fed by the labels too: this model is not given them (Keras: graph disconnected)
    src = BUILT.replace('x = layers.Dense(3, activation="softmax", name="dense2")(x)',
                        'x = layers.Dense(3, activation="softmax", name="dense2")(layers.Concatenate()([x, labels]))')
    r = tr(src)
    assert "class PredictionModel" not in r.output
    assert any("'dense2' also depends on labels" in m for _, m in errors(r))
    # an output that is not get_layer(<literal>).output
    r = tr(BUILT.replace('model.get_layer(name="dense2").output', "model.layers[2].output"))
    assert "class PredictionModel" not in r.output
    assert any("fwport follows one output given as model.get_layer" in m for _, m in errors(r))


# a module-level Sequential of preprocessing layers a demo calls above the model (chapter08's plot of augmented images)
SHOWN = '''
import numpy as np
import keras
from keras import layers

preprocess = keras.Sequential([layers.Rescaling(2.0 / 255, offset=-1.0), layers.RandomFlip("horizontal")])

images = np.zeros((2, 8, 8, 3), "float32")
for i in range(2):
    shown = preprocess(images)

inputs = keras.Input(shape=(8, 8, 3))
x = preprocess(inputs)
x = layers.Conv2D(4, 3, activation="relu")(x)
x = layers.GlobalAveragePooling2D()(x)
outputs = layers.Dense(2)(x)
model = keras.Model(inputs, outputs)
'''

SHOWN_DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import model as m
side = sys.argv[2]
shared = sys.argv[1].rsplit("/", 1)[0] + "/weights.npz"
images = np.random.default_rng(0).uniform(0, 255, (2, 8, 8, 3)).astype("float32")
assert np.asarray(m.shown).shape == (2, 8, 8, 3)  # (the demo ran, channels-last)
if side == "keras":
    weights = [np.asarray(w) for layer in m.model.layers for w in layer.weights]
    np.savez(shared, *weights)
    y = np.asarray(m.model(images, training=False))
    shown = np.asarray(m.preprocess(images, training=False))
else:
    import torch
    z = np.load(shared)
    k, b, k2, b2 = [z[f"arr_{i}"] for i in range(4)]
    m.model.eval()
    with torch.no_grad():
        m.model.conv.weight.copy_(torch.as_tensor(np.ascontiguousarray(k.transpose(3, 2, 0, 1))))
        m.model.conv.bias.copy_(torch.as_tensor(b))
        m.model.fc.weight.copy_(torch.as_tensor(np.ascontiguousarray(k2.T)))
        m.model.fc.bias.copy_(torch.as_tensor(b2))
        y = m.model(torch.as_tensor(images)).numpy()
        shown = m.preprocess(torch.as_tensor(images)).numpy()
    assert m.model.preprocess is m.preprocess  # that very object, as Keras shares it
print("RESULT " + json.dumps({"y": y.tolist(), "shown": shown.tolist()}))
'''


def test_a_sequential_a_demo_calls_above_the_model_stays_where_it_stands():
    r = tr(SHOWN)
    assert errors(r) == []
    out = r.output
    assert "self.preprocess = preprocess" in out and "class Model(nn.Module):" in out
    assert out.index("preprocess = nn.Sequential(") < out.index("shown = preprocess(")


@needs("torch", "tensorflow")
def test_the_demo_and_the_model_compute_what_keras_computes(tmp_path):
    r = tr(SHOWN)
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(SHOWN), r.output, SHOWN_DRIVER)
    np.testing.assert_allclose(torch_out["shown"], keras_out["shown"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(torch_out["y"], keras_out["y"], rtol=1e-4, atol=1e-5)


def test_a_channels_first_sequential_a_demo_calls_stays_an_error():
    # a Resizing: the sequential pass makes it channels-first, which the demo's channels-last call would misread
    r = tr(SHOWN.replace('layers.RandomFlip("horizontal")', "layers.Resizing(4, 4)"))
    assert "class Model" not in r.output
    assert any(ln == 8 and "preprocess: a tensor or layer of the functional model used by a statement that is not "
               "part of it" in m for ln, m in errors(r))
