"""TensorFlow 1's tf.keras (tf.compat.v1.keras) is Keras 2's: its layers, models and utilities translate as
keras.* does, checked numerically against Keras (fwport verify: forward and gradients); its LSTM / GRU and
their cells, whose TF 1 defaults gate with hard_sigmoid, are refused with that reason."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.verify import Options, verify
from helpers import error_texts as _errors
from runners import Warm

SRC = '''import tensorflow as tf


def build_model():
    return tf.compat.v1.keras.Sequential([
        tf.compat.v1.keras.layers.Conv2D(4, 3, padding="same", activation="relu", input_shape=(8, 8, 3)),
        tf.compat.v1.keras.layers.MaxPooling2D(),
        tf.compat.v1.keras.layers.Flatten(),
        tf.compat.v1.keras.layers.Dense(5),
    ])
'''


def test_compat_v1_keras_model_verifies(tmp_path):
    r = translate_source(SRC, "model.py")
    assert not _errors(r), _errors(r)
    assert "tf." not in r.output and "nn.Conv2d(3, 4, 3" in r.output, r.output
    (tmp_path / "m.py").write_text(SRC)
    (tmp_path / "m_torch.py").write_text(r.output)
    session = Warm.session()
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), "build_model",
                          inputs=["float32[2,8,8,3]"], args={}, checks=("forward", "grad"), device="cpu"),
                  session)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


@pytest.mark.parametrize("name", ["LSTM", "LSTMCell", "GRU", "GRUCell"])
def test_compat_v1_recurrent_layers_refused_with_their_gates(name):
    r = translate_source(f"import tensorflow as tf\n\nrnn = tf.compat.v1.keras.layers.{name}(4)\n", "m.py")
    errs = _errors(r)
    assert len(errs) == 1 and "hard_sigmoid" in errs[0] and f"tensorflow.compat.v1.keras.layers.{name}" in errs[0], errs
    assert f"tf.compat.v1.keras.layers.{name}(4)" in r.output
