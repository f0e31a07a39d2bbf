"""An ``if`` statement of a functional model's builder whose test is known where the model is built (a module
constant such as keras-io cct's ``positional_emb = True``, a literal, a value every call of the builder gives)
is followed as Keras builds the graph: the branch it takes is written out in the class (its layers in
``__init__``, its code in ``forward``), with an info finding; an ``if`` on a value not known there keeps the
refusal."""
from __future__ import annotations


from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import keras3_verified as _verify

DECIDED = '''
from tensorflow import keras
from tensorflow.keras import layers

use_norm = True
mode = "mlp"


def build(units=8):
    inputs = keras.Input(shape=(6, 4))
    x = layers.Dense(units)(inputs)
    if use_norm:
        x = layers.LayerNormalization()(x)
    if mode == "conv":
        x = layers.Conv1D(units, 3, padding="same")(x)
    elif mode == "mlp":
        h = layers.Dense(units, activation="relu")(x)
        x = x + h
    else:
        x = layers.Dropout(0.1)(x)
    x = layers.GlobalAveragePooling1D()(x)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''

# the builder's parameter decides the branch; the file calls it with one value (keras-io's mlp_image_classification
# builds with positional_encoding=True and False: that keeps the refusal, below)
PINNED = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_classifier(positional_encoding=False):
    inputs = layers.Input(shape=(6, 4))
    x = layers.Dense(units=8)(inputs)
    if positional_encoding:
        positions = layers.Dense(8, use_bias=False)(inputs)
        x = x + positions
    else:
        x = layers.Dropout(0.2)(x)
    representation = layers.GlobalAveragePooling1D()(x)
    logits = layers.Dense(3)(representation)
    return keras.Model(inputs=inputs, outputs=logits)


classifier = build_classifier(positional_encoding=True)
'''


def _tx(src: str, keras: int = 3):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": keras})


def test_an_if_on_module_constants_is_the_branch_keras_builds(tmp_path):
    r = _tx(DECIDED)
    assert not _errors(r), _errors(r)
    out = r.output
    cls = out[out.index("class Build"):out.index("def build")]
    assert "if " not in cls and "Conv1d" not in cls and "Dropout" not in cls
    assert "self.norm = nn.LayerNorm(units" in cls and "h = torch.relu(self.fc2(x))\n        x = x + h\n" in cls
    infos = sorted(f.line for f in r.findings if f.code == "if-decided")
    lines = DECIDED.splitlines()
    assert [lines[i - 1].strip() for i in infos] == ["if use_norm:", 'if mode == "conv":']
    cert = _verify(tmp_path, DECIDED, out, "build()", "float32[2,6,4]")
    assert len(cert["results"]["gradients"]) == 2 * 4  # three Linear, one LayerNorm
    # other constants, other branches: the else clause's Dropout, no LayerNorm, no second Linear
    src = DECIDED.replace("use_norm = True", "use_norm = False").replace('mode = "mlp"', 'mode = "none"')
    other = _tx(src)
    assert not _errors(other), _errors(other)
    assert "nn.Dropout(0.1)" in other.output and "LayerNorm" not in other.output and "fc3" not in other.output
    _verify(tmp_path, src, other.output, "build()", "float32[2,6,4]")


def test_an_if_on_the_builders_parameter_is_decided_by_the_files_call(tmp_path):
    r = _tx(PINNED)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "if positional_encoding is not True:\n            raise ValueError(" in out
    assert "x = x + positions" in out and "Dropout" not in out
    assert {f.code for f in r.findings} >= {"built-for-values", "if-decided"}
    _verify(tmp_path, PINNED, out, "build_classifier(positional_encoding=True)", "float32[2,6,4]")


def test_an_if_on_a_parameter_the_file_calls_with_several_values_is_kept_in_the_class(tmp_path):
    # keras-io's mlp_image_classification builds with positional_encoding=True and False: the class keeps the
    # parameter and the if / else (test_functional_runtime_ifs.py), each variant computes what Keras does
    src = PINNED + "other = build_classifier()\n"
    both = _tx(src)
    assert not _errors(both), _errors(both)
    assert not [f for f in both.findings if f.code in ("if-decided", "built-for-values")]
    assert ("        if positional_encoding:\n            self.fc2 = nn.Linear(4, 8, bias=False)\n        else:\n"
            "            self.dropout = nn.Dropout(0.2)\n") in both.output
    assert ("        if self.positional_encoding:\n            positions = self.fc2(inputs)\n            x = x + positions\n"
            "        else:\n            x = self.dropout(x)\n") in both.output
    for call in ("build_classifier(positional_encoding=True)", "build_classifier()"):
        _verify(tmp_path, src, both.output, call, "float32[2,6,4]")


def test_an_if_not_known_where_the_model_is_built_keeps_the_refusal():
    # a test on a tensor's run-time value or a name the builder binds: not decided either
    bound = _tx(DECIDED.replace("    if use_norm:\n", "    flag = units > 4\n    if flag:\n"))
    assert any("inside a compound statement" in m for m in _errors(bound)), _errors(bound)
    # an if that raises stays an if (config, not the graph)
    raising = _tx(DECIDED.replace("    if use_norm:\n        x = layers.LayerNormalization()(x)\n",
                                  "    if not use_norm:\n        raise ValueError(\"norm\")\n"))
    assert not _errors(raising), _errors(raising)
    assert "if not use_norm:\n            raise ValueError" in raising.output  # (in __init__, as other config)
    assert len([f for f in raising.findings if f.code == "if-decided"]) == 1  # (the other one: mode)


def test_an_if_below_keras_model_stays_as_written():
    # the builder's own code after the model (a summary, a compile) keeps its if statement
    src = DECIDED.replace("    return keras.Model(inputs, outputs)\n",
                          "    model = keras.Model(inputs, outputs)\n    if use_norm:\n        print(\"normed\")\n"
                          "    return model\n")
    r = _tx(src)
    assert not _errors(r), _errors(r)
    assert "    if use_norm:\n        print(\"normed\")\n    return model\n" in r.output
    assert len([f for f in r.findings if f.code == "if-decided"]) == 2  # the two above the model
