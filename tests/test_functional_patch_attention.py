"""A functional model that unfolds a feature map into patches and attends over them (keras-io's mobilevit
``mobilevit_block``): the sizes the builder reads from its tensors go where the layers are built (``num_patches =
int((x.shape[1] * x.shape[2]) / patch_size)``, ``mlp(x, hidden_units=[x.shape[-1] * 2, x.shape[-1]])`` given to a
helper, ``layers.Reshape((*x.shape[1:-1], d))``), and MultiHeadAttention on a (batch, patch, patches, features)
query attends over both step axes at once, as Keras's default attention_axes does (was: "this operation on tensors
of the functional model is not followed", "only (batch, steps, features) inputs are translated"). Verified against
Keras with the weights transferred (forward and gradients)."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_messages as _errors
from runners import Warm

SRC = '''
import keras
from keras import layers

patch_size = 4


def mlp(x, hidden_units):
    for units in hidden_units:
        x = layers.Dense(units, activation="swish")(x)
    return x


def transformer_block(x, num_blocks, projection_dim):
    for _ in range(num_blocks):
        x1 = layers.LayerNormalization(epsilon=1e-6)(x)
        attention_output = layers.MultiHeadAttention(num_heads=2, key_dim=projection_dim)(x1, x1)
        x2 = layers.Add()([attention_output, x])
        x3 = layers.LayerNormalization(epsilon=1e-6)(x2)
        x3 = mlp(x3, hidden_units=[x.shape[-1] * 2, x.shape[-1]])
        x = layers.Add()([x3, x2])
    return x


def patch_block(x, num_blocks, projection_dim):
    local_features = layers.Conv2D(projection_dim, 3, padding="same", activation="swish")(x)
    num_patches = int((local_features.shape[1] * local_features.shape[2]) / patch_size)
    patches = layers.Reshape((patch_size, num_patches, projection_dim))(local_features)
    global_features = transformer_block(patches, num_blocks, projection_dim)
    folded = layers.Reshape((*local_features.shape[1:-1], projection_dim))(global_features)
    folded = layers.Conv2D(x.shape[-1], 1)(folded)
    return layers.Concatenate(axis=-1)([x, folded])


def build():
    inputs = keras.Input((6, 4, 3))
    x = patch_block(inputs, num_blocks=2, projection_dim=8)  # (no layer of the builder's own: channels-last kept)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''


def _tx(src: str):
    return translate_source(src, "m.py", "tf2torch")


def test_patches_attended_over_both_step_axes_match_keras(tmp_path):
    r = _tx(SRC)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "local_features.shape" not in out and "x.shape" not in out, out  # sizes written where layers are built
    assert "nn.Unflatten(1, (patch_size, 6, 8))" in out and "nn.Unflatten(1, (6, 4, 8))" in out, out
    assert "nn.Linear(8, 16)" in out and "nn.Linear(16, 8)" in out, out  # [x.shape[-1] * 2, x.shape[-1]]
    assert "KerasMultiHeadAttention(2, 8)" in out, out
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(SRC)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build()", inputs=["float32[2,6,4,3]"],
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_a_size_of_an_unknown_axis_given_to_a_helper_stays_refused():
    src = SRC.replace("keras.Input((6, 4, 3))", "keras.Input((None, None, 3))")
    errors = _errors(_tx(src))
    assert any("left as written" in e for e in errors), errors


def test_a_mask_on_a_query_of_several_step_axes_stays_refused():
    src = SRC.replace("(x1, x1)", "(x1, x1, use_causal_mask=True)")
    errors = _errors(_tx(src))
    assert any("on a query of several step axes, shape (None, patch_size, 6, 8), with use_causal_mask" in e for e in errors), errors
    assert any("left as written" in e for e in errors), errors
