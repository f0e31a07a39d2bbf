"""``**config`` of a dict literal written out as keyword arguments (fwport/core/spread.py): the
translation is the one of the same code with the arguments spelled out, the dict is gone, and every
case where that would not be what Python does stays refused at its line."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from runners import Warm

TF = load_pack("tf2torch")

SPREAD = '''
from tensorflow import keras
from tensorflow.keras import layers


def get_model(upscale_factor=3, channels=1):
    conv_args = {
        "activation": "relu",
        "kernel_initializer": "Orthogonal",
        "padding": "same",
    }
    inputs = keras.Input(shape=(8, 8, channels))
    x = layers.Conv2D(6, 5, **conv_args)(inputs)
    x = layers.Conv2D(channels * (upscale_factor**2), 3, **conv_args)(x)
    return keras.Model(inputs, x)


def get_decoder(width=4):
    config = {"kernel_size": 3, "strides": 1, "padding": "same", "activation": keras.activations.gelu}
    return keras.Sequential(
        [
            layers.InputLayer((6, 6, 8)),
            layers.Conv2D(filters=width, **config),
            layers.UpSampling2D(),
            layers.Conv2D(filters=3, **config),
        ]
    )
'''

SPELLED = '''
from tensorflow import keras
from tensorflow.keras import layers


def get_model(upscale_factor=3, channels=1):
    inputs = keras.Input(shape=(8, 8, channels))
    x = layers.Conv2D(6, 5, activation="relu", kernel_initializer="Orthogonal", padding="same")(inputs)
    x = layers.Conv2D(channels * (upscale_factor**2), 3, activation="relu", kernel_initializer="Orthogonal", padding="same")(x)
    return keras.Model(inputs, x)


def get_decoder(width=4):
    return keras.Sequential(
        [
            layers.InputLayer((6, 6, 8)),
            layers.Conv2D(filters=width, kernel_size=3, strides=1, padding="same", activation=keras.activations.gelu),
            layers.UpSampling2D(),
            layers.Conv2D(filters=3, kernel_size=3, strides=1, padding="same", activation=keras.activations.gelu),
        ]
    )
'''


def tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", TF)


def errors(r) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in r.findings if f.severity.value == "error"]


def test_a_spread_dict_translates_as_the_arguments_written_out():
    r, spelled = tx(SPREAD), tx(SPELLED)
    assert not errors(r), r.findings
    assert "**conv_args" not in r.output and "conv_args" not in r.output and "config" not in r.output
    # the same program as the one with the arguments written by hand (the dicts' lines aside)
    assert r.output == spelled.output
    # findings on the calls keep their lines in the source
    dropped = [f.line for f in r.findings if f.code == "dropped-argument"]
    assert dropped == [12, 13]


MODULE_LEVEL = '''
from tensorflow import keras
from tensorflow.keras import layers

conv = {"kernel_size": 3, "padding": "same"}


def block(n):
    return keras.Sequential([keras.Input((8, 8, 2)), layers.Conv2D(n, **conv), layers.Conv2D(n, **conv)])
'''


def test_a_module_level_dict_spread_in_functions_is_written_out_there():
    r = tx(MODULE_LEVEL)
    assert not errors(r), r.findings
    assert "nn.Conv2d(2, n, 3, padding=\"same\"), nn.Conv2d(n, n, 3, padding=\"same\")" in r.output
    assert "conv = {" not in r.output and "**conv" not in r.output


@pytest.mark.parametrize("body, why", [
    # the dict changes after it is written, or is read as a dict elsewhere
    ('cfg = {"padding": "same"}\n    cfg["strides"] = 2\n    return layers.Conv2D(n, 3, **cfg)(x)', "mutated"),
    ('cfg = {"padding": "same"}\n    print(cfg)\n    return layers.Conv2D(n, 3, **cfg)(x)', "read"),
    ('cfg = {"padding": "same"}\n    cfg = {"padding": "valid"}\n    return layers.Conv2D(n, 3, **cfg)(x)', "rebound"),
    # a value that reads a local assigned in the function (it may change between dict and call)
    ('k = 3\n    cfg = {"kernel_size": k}\n    k = 5\n    return layers.Conv2D(n, **cfg)(x)', "local"),
    # a parameter assigned in the function
    ('cfg = {"filters": n}\n    n = n * 2\n    return layers.Conv2D(kernel_size=3, **cfg)(x)', "param"),
    # a key written as a keyword too (Python raises TypeError)
    ('cfg = {"padding": "same"}\n    return layers.Conv2D(n, 3, padding="valid", **cfg)(x)', "clash"),
    # a key that is not an identifier, or not a string
    ('cfg = {"pad-ding": "same"}\n    return layers.Conv2D(n, 3, **cfg)(x)', "not identifier"),
    # spread into a function of the file, not the framework
    ('cfg = {"padding": "same"}\n    helper(**cfg)\n    return layers.Conv2D(n, 3, **cfg)(x)', "own call"),
])
def test_what_python_would_not_do_the_same_stays_refused(body, why):
    src = f'''
from tensorflow import keras
from tensorflow.keras import layers


def helper(**kw):
    return kw


def block(x, n):
    {body}
'''
    r = tx(src)
    refused = [f for f in r.findings if f.severity.value == "error" and "bound statically" in f.message]
    assert refused, (why, r.output)
    assert "cfg = {" in r.output, why  # nothing removed


def test_a_dict_with_a_comment_is_written_out_but_kept():
    r = tx('''
from tensorflow.keras import layers


def block(x):
    # shared by both convolutions
    cfg = {"padding": "same"}
    return layers.Conv2D(4, 3, **cfg)(layers.Conv2D(4, 3, **cfg)(x))
''')
    assert "# shared by both convolutions\n    cfg = {" in r.output
    assert "**cfg" not in r.output


def test_torch2jax_spreads_too():
    r = translate_source(textwrap.dedent('''
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                kw = {"kernel_size": 3, "padding": 1}
                self.conv = nn.Conv2d(3, 8, **kw)

            def forward(self, x):
                return self.conv(x)
        ''').lstrip("\n"), "m.py", "torch2jax")
    assert "**kw" not in r.output and "kw = {" not in r.output
    assert "self.conv = eqx.nn.Conv2d(3, 8, 3, padding=1, key=key)" in r.output, r.output


def test_the_spread_model_verifies_against_keras(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    src = textwrap.dedent(SPREAD).lstrip("\n")
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "m_torch.py").write_text(tx(SPREAD).output)
    session = Warm.session()
    for model, shape in (("get_model", "float32[2,8,8,1]"), ("get_decoder", "float32[2,6,6,8]")):
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), model, inputs=[shape],
                              checks=("forward", "grad"), device="cpu"), session)
        assert cert["verdict"] == "pass", (model, cert.get("problems") or cert.get("first_diverging"))
