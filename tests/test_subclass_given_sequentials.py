"""A Sequential the passes made channels-first (NCHW) held by a Model subclass that keeps Keras's channels-last layout,
where the class does not write the Sequential itself: ``self.features = build_features()`` (a builder of the file) or
``self.backbone = backbone`` (its constructor's parameter, given by the file's ``Head(bb)``; subclass.py
``_given_sequential``). Its calls in the body are permuted as an inline Sequential's are. Before, the body fed NHWC
tensors to the NCHW modules with no finding (another result where the sizes fit: here 4 channels on 4x4 maps).
Models of different layouts, or a value not known, given to the parameter: an error naming the line."""
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
    return keras.Sequential([keras.Input((4, 4, 4)), layers.Conv2D(4, 3, padding="same")])


class Head(keras.Model):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone
        self.features = build_features()
        self.out = layers.Dense(2)

    def call(self, x):
        return self.out(self.backbone(x) + self.features(x))


bb = keras.Sequential([keras.Input((4, 4, 4)), layers.Conv2D(4, 1)])
model = Head(bb)
x = np.sin(np.arange(128.0)).reshape(2, 4, 4, 4).astype("float32")
y = model(x)
'''

TORCH_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
np.savez(sys.argv[1] + "/weights.npz", **{k: v.detach().numpy() for k, v in m.model.state_dict().items()})
print("RESULT " + json.dumps({"y": m.y.detach().numpy().tolist()}))
'''

KERAS_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
w = np.load(sys.argv[3])
m.model.backbone.layers[0].set_weights([w["backbone.0.weight"].transpose(2, 3, 1, 0), w["backbone.0.bias"]])
m.model.features.layers[0].set_weights([w["features.0.weight"].transpose(2, 3, 1, 0), w["features.0.bias"]])
m.model.out.set_weights([w["out.weight"].T, w["out.bias"]])
print("RESULT " + json.dumps({"y": np.asarray(m.model(m.x)).tolist()}))
'''


def _translate(program: str):
    r = translate_source(textwrap.dedent(program).lstrip(), "prog.py")
    return r, [f for f in r.findings if f.severity is Severity.ERROR]


@needs_both
def test_a_sequential_from_a_builder_or_the_constructor_is_permuted_in_a_channels_last_body(tmp_path):
    r, errors = _translate(PROGRAM)
    assert not errors, [f.message for f in errors]
    assert "self.backbone(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)" in r.output
    assert "self.features(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)" in r.output
    torch_result = run_side(tmp_path / "torch", "torch", r.output, TORCH_DRIVER, "torch")
    keras_result = run_side(tmp_path / "keras", "keras", textwrap.dedent(PROGRAM).lstrip(), KERAS_DRIVER, "keras",
                            str(tmp_path / "torch" / "weights.npz"))
    assert np.shape(torch_result["y"]) == np.shape(keras_result["y"]) == (2, 4, 4, 2)
    np.testing.assert_allclose(torch_result["y"], keras_result["y"], rtol=1e-5, atol=1e-5)


def test_a_constructor_given_models_of_different_layouts_is_an_error():
    r, errors = _translate('''
        import keras
        from keras import layers


        class Head(keras.Model):
            def __init__(self, backbone):
                super().__init__()
                self.backbone = backbone

            def call(self, x):
                return self.backbone(x)


        cnn = keras.Sequential([keras.Input((4, 4, 3)), layers.Conv2D(4, 1)])
        mlp = keras.Sequential([keras.Input((4, 4, 3)), layers.Dense(4)])
        a, b = Head(cnn), Head(mlp)
    ''')
    assert [f.line for f in errors] == [8], [(f.line, f.message) for f in r.findings]
    assert "self.backbone is given a Sequential model fwport made channels-first" in errors[0].message
