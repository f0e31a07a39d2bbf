"""A Sequential model the passes made channels-first (NCHW) given to a parameter of a function of the file
(``def run(m, x): return m(x)`` ... ``run(model, images)``; passes/valuekinds.py ``_param_infos``): what every call of
the function gives the parameter decides, as for a name the file binds, whether the call in the function moves its
channels-last input (and feature-map output). Before, the translation fed NHWC images to the NCHW module with no
finding (a crash, or another result where the sizes happened to fit: a square image with as many channels as rows).
Calls giving models of different layouts, or a value not known here, are an error naming the line."""
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
import keras
from keras import layers


def build_features():
    return keras.Sequential([keras.Input((6, 6, 6)), layers.Conv2D(6, 3, padding="same")])


model = keras.Sequential([keras.Input((6, 6, 6)), layers.Conv2D(4, 3), layers.Flatten(), layers.Dense(3)])


def run(m, x):
    return m(x)


def twice(net, batch):
    return run(net, batch) + run(net, batch * 0.5)


def features_of(extractor, images):
    return extractor(images, training=False)


images = np.random.RandomState(0).rand(2, 6, 6, 6).astype("float32")
features = build_features()
y = run(model, images)
z = twice(net=model, batch=images)
f = features_of(features, images)
nets = {"cnn": model}
g = nets["cnn"](images)
for net in [features]:
    h = net(images)
'''

#: the translation's side: its outputs and the weights of its two models (torch's layout)
TORCH_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
weights = {f"model.{k}": v.detach().numpy() for k, v in m.model.state_dict().items()}
weights.update({f"features.{k}": v.detach().numpy() for k, v in m.features.state_dict().items()})
np.savez(sys.argv[1] + "/weights.npz", **weights)
print("RESULT " + json.dumps({k: getattr(m, k).detach().numpy().tolist() for k in ("y", "z", "f", "g", "h")}))
'''

#: Keras's side: the original's models given the translation's weights, the program's functions run again
KERAS_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
w = np.load(sys.argv[3])
m.model.layers[0].set_weights([w["model.0.weight"].transpose(2, 3, 1, 0), w["model.0.bias"]])
# torch flattens (C, H, W), Keras (H, W, C): the Dense rows in Keras's order
k = w["model.2.weight"].reshape(3, 4, 4, 4).transpose(2, 3, 1, 0).reshape(64, 3)
m.model.layers[-1].set_weights([k, w["model.2.bias"]])
m.features.layers[0].set_weights([w["features.0.weight"].transpose(2, 3, 1, 0), w["features.0.bias"]])
out = {"y": m.run(m.model, m.images), "z": m.twice(net=m.model, batch=m.images),
       "f": m.features_of(m.features, m.images), "g": m.model(m.images), "h": m.features(m.images)}
print("RESULT " + json.dumps({k: np.asarray(v).tolist() for k, v in out.items()}))
'''


def _translate(program: str):
    r = translate_source(textwrap.dedent(program).lstrip(), "prog.py")
    return r, [f for f in r.findings if f.severity is Severity.ERROR]


@needs_both
def test_a_channels_first_sequential_given_to_a_function_moves_its_input_there(tmp_path):
    """So too an element of a dict or a list the file writes out. (6 rows, 6 columns, 6 channels: NHWC data fits the NCHW module, which gave another result with no finding)"""
    r, errors = _translate(PROGRAM)
    assert not errors, [f.message for f in errors]
    out = r.output
    # (x, images: NumPy arrays every call gives: followed through twice's calls, the helper of known floats)
    assert "    return m(torch.as_tensor(x, dtype=torch.float32).movedim(-1, 1))" in out
    assert ("    return extractor(torch.as_tensor(images, dtype=torch.float32).movedim(-1, 1)).movedim(1, -1)"
            in out)  # feature maps back
    torch_result = run_side(tmp_path / "torch", "torch", out, TORCH_DRIVER, "torch")
    keras_result = run_side(tmp_path / "keras", "keras", textwrap.dedent(PROGRAM).lstrip(), KERAS_DRIVER, "keras",
                            str(tmp_path / "torch" / "weights.npz"))
    assert 'g = nets["cnn"](as_float32(images).movedim(-1, 1))' in out  # (an element of a dict written out)
    assert "    h = net(as_float32(images).movedim(-1, 1)).movedim(1, -1)" in out
    for key in ("y", "z", "f", "g", "h"):
        assert np.shape(torch_result[key]) == np.shape(keras_result[key]), key
        np.testing.assert_allclose(torch_result[key], keras_result[key], rtol=1e-5, atol=1e-5, err_msg=key)


def test_a_parameter_given_models_of_different_layouts_is_an_error():
    r, errors = _translate('''
        import numpy as np
        import keras
        from keras import layers

        cnn = keras.Sequential([keras.Input((8, 8, 3)), layers.Conv2D(2, 3), layers.GlobalAveragePooling2D()])
        mlp = keras.Sequential([keras.Input((8, 8, 3)), layers.Flatten(), layers.Dense(2)])


        def apply(model, batch):
            return model(batch)


        x = np.zeros((2, 8, 8, 3), "float32")
        a = apply(cnn, x)
        b = apply(mlp, x)
    ''')
    assert [f.line for f in errors] == [10], [(f.line, f.message) for f in r.findings]
    assert "different layouts" in errors[0].message


def test_a_parameter_given_a_channels_first_sequential_and_an_unknown_value_is_an_error():
    """``main(m)`` is called nowhere: what it gives ``apply`` is not known, its other call gives the NCHW model."""
    r, errors = _translate('''
        import numpy as np
        import keras
        from keras import layers

        cnn = keras.Sequential([keras.Input((8, 8, 3)), layers.Conv2D(2, 3), layers.GlobalAveragePooling2D()])


        def apply(model, batch):
            return model(batch)


        def main(m):
            return apply(m, np.zeros((1, 8, 8, 3)))


        a = apply(cnn, np.zeros((2, 8, 8, 3)))
    ''')
    assert [f.line for f in errors] == [9], [(f.line, f.message) for f in r.findings]
    assert "not known here" in errors[0].message


def test_a_layer_taken_out_of_a_channels_first_sequential_and_called_is_an_error():
    """``first = model.layers[0]`` is the module it became (model[0]), channels-first; called on Keras's images it
    saw their axes in another order, with no finding (``model.layers[0](x)`` itself was an error already)."""
    r, errors = _translate('''
        import numpy as np
        import keras
        from keras import layers

        model = keras.Sequential([keras.Input((8, 8, 3)), layers.Conv2D(4, 3), layers.GlobalAveragePooling2D()])
        x = np.zeros((2, 8, 8, 3), "float32")
        first = model.layers[0]
        maps = first(x)
    ''')
    assert [f.line for f in errors] == [8], [(f.line, f.message) for f in r.findings]
    assert "first is a layer taken out of model.layers" in errors[0].message
