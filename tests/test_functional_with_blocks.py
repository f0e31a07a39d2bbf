"""A functional model built inside a module-level ``with`` block (``with strategy.scope():``, ``with
tf.device(...):``, a notebook's cell): the functional pass follows its statements as a module-level model's and
puts what comes of them back in the block, the ``with`` kept with its items translated by their own rules (a
strategy's scope → contextlib.nullcontext(), tf.device → torch.device). A model left as written there keeps its
statements, and its errors their lines, in the block. Checked against Keras with ``fwport verify``."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")

STRATEGY = '''
import tensorflow as tf
import keras
from keras import layers

strategy = tf.distribute.MirroredStrategy()

with strategy.scope():
    inputs = keras.Input(shape=(4,))
    x = layers.Dense(8, activation="relu")(inputs)
    outputs = layers.Dense(2)(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="mse")

print(model.count_params())
'''

DEVICE = '''
import tensorflow as tf
import keras
from keras import layers

with tf.device("/CPU:0"):
    inputs = keras.Input(shape=(6,))
    h = layers.Dense(5, activation="tanh")(inputs)

    # the head
    outputs = layers.add([layers.Dense(5)(h), h])
    model = keras.Model(inputs, outputs)
    print("built")
'''

TWO = '''
import tensorflow as tf
import keras
from keras import layers

with tf.device("/CPU:0"):
    enc_in = keras.Input(shape=(4,))
    z = layers.Dense(3)(enc_in)
    encoder = keras.Model(enc_in, z)
    dec_in = keras.Input(shape=(3,))
    y = layers.Dense(4, activation="sigmoid")(dec_in)
    decoder = keras.Model(dec_in, y)

inputs = keras.Input(shape=(4,))
outputs = decoder(encoder(inputs))
ae = keras.Model(inputs, outputs)
'''

LEFT = '''
import tensorflow as tf
import keras
from keras import layers
import foo

with tf.device("/CPU:0"):
    inputs = keras.Input(shape=(4,))
    x = foo.Thing()(inputs)
    outputs = layers.Dense(2)(x)
    model = keras.Model(inputs, outputs)
'''


def _translate(src: str, errors: bool = False):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)
    found = [f for f in r.findings if f.severity.value == "error"]
    assert bool(found) == errors, found
    return r.output, found


def test_a_model_built_in_a_strategy_scope_is_translated_in_the_block():
    out, _ = _translate(STRATEGY)
    assert "import keras" not in out and "keras." not in out and "pass" not in out, out
    assert "\nwith contextlib.nullcontext():\n    class Model(nn.Module):\n" in out, out
    assert "            x = torch.relu(self.fc1(inputs))\n            outputs = self.fc2(x)\n" in out, out
    assert "\n    model = Model()\n    optimizer = torch.optim.Adam(" in out, out
    assert out.rstrip().endswith("\n\nprint(keras_count_params(model))"), out


def test_a_device_block_keeps_its_comments_and_later_statements():
    out, _ = _translate(DEVICE)
    assert '\nwith torch.device("cpu"):\n    class Model(nn.Module):\n' in out, out
    assert "\n\n            # the head\n" in out, out
    assert '\n    model = Model()\n    print("built")\n' in out, out
    assert not [ln for ln in out.splitlines() if ln and not ln.strip()], out  # no whitespace-only lines


def test_a_model_left_as_written_stays_in_its_block_with_its_errors_at_their_lines():
    out, errors = _translate(LEFT, errors=True)
    lines = out.splitlines()
    start = lines.index('with torch.device("cpu"):')
    block = lines[start + 1:]
    assert all(ln.startswith("    ") for ln in block), out
    code = [ln.strip() for ln in block if not ln.strip().startswith("#")]
    assert code == ["inputs = keras.Input(shape=(4,))", "x = foo.Thing()(inputs)", "outputs = layers.Dense(2)(x)",
                    "model = keras.Model(inputs, outputs)"], out
    k = next(i for i, ln in enumerate(block) if "foo.Thing()(inputs)" in ln)
    assert block[k - 1].strip().startswith("# fwport: unsupported-construct: foo.Thing(...)(...)"), out
    k = next(i for i, ln in enumerate(block) if "keras.Model(" in ln)
    assert "this functional model is left as written" in block[k - 1], out
    assert {f.line for f in errors} == {8, 10}, errors  # (x = foo.Thing()(inputs), model = keras.Model(...))


def test_two_models_in_a_block_are_layers_of_a_model_below_it():
    out, _ = _translate(TWO)
    assert '\nwith torch.device("cpu"):\n    class Encoder(nn.Module):\n' in out, out
    assert "\n    encoder = Encoder()\n\n\n    class Decoder(nn.Module):\n" in out, out
    assert "\n    decoder = Decoder()\n\n\nclass Ae(nn.Module):\n" in out, out
    assert out.rstrip().endswith("\nae = Ae()"), out


@pytest.mark.parametrize("src, model, shape", [(STRATEGY, "model", "float32[3,4]"), (DEVICE, "model", "float32[3,6]"),
                                               (TWO, "ae", "float32[3,4]")],
                         ids=["strategy-scope", "tf-device", "two-in-a-block"])
def test_the_model_in_the_block_computes_what_keras_computes(session, tmp_path, src, model, shape):
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify

    src = textwrap.dedent(src).lstrip("\n")
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(_translate(src)[0])
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=[shape],
                          checks=("forward", "grad"), device="cpu"), session)
    assert cert["verdict"] == "pass", cert.get("problems")


LINES = '''
import tensorflow as tf
import keras
from keras import layers
import foo

loss = tf.keras.losses.MeanSquaredError(
    reduction="none"
)

with tf.device("/CPU:0"):
    tf.config.optimizer.set_experimental_options({})
    inputs = keras.Input(shape=(4,))
    x = foo.Thing()(inputs)
    outputs = layers.Dense(2)(x)
    model = keras.Model(inputs, outputs)

tf.config.optimizer.set_experimental_options({})
'''


def test_later_passes_findings_in_and_after_the_block_keep_their_source_lines():
    """The rule pass's findings on the block's statements (at the top level in its input tree) and on the
    statements below, where a statement above (three lines → one) moved the lines: Layout.source_lines pairs the
    block's statements with the lines they had in the block."""
    out, errors = _translate(LINES, errors=True)
    lines = {(f.line, f.code) for f in errors}
    assert lines == {(11, "no-rule"), (13, "unsupported-construct"), (15, "unsupported-construct"),
                     (17, "no-rule")}, errors
    block = out.split('with torch.device("cpu"):\n', 1)[1].split("\n\n", 1)[0].splitlines()
    assert block[0].startswith("    # fwport: no-rule: tensorflow.config.optimizer.set_experimental_options"), out
    assert block[1] == '    tf.config.optimizer.set_experimental_options({})', out
