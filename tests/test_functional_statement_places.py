"""The functional pass's finishing step assembles its classes from the statements it planned, found by their
places in the module; a statement a later pass removes (the sequential pass drops ``head.add(keras.Input(...))``
of a Sequential it translates) must not shift them: the builder's class built from another statement crashed,
and a module-level model's class took the wrong lines (its forward read ``x`` no statement bound, and kept
``keras.Model(...)``), silently. The sequential pass marks such a statement; runtime.finish removes it last.
Checked against Keras with ``fwport verify`` (its own subprocesses per framework)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")

HEAD = '''
import keras
from keras import layers

head = keras.Sequential()
head.add(keras.Input(shape=(4,)))
head.add(layers.Dense(3))
'''

BUILDER = HEAD + '''

def build_model():
    inputs = keras.Input(shape=(4,))
    x = layers.Dense(8, activation="relu")(inputs)
    outputs = layers.Dense(2)(x)
    return keras.Model(inputs, outputs)


model = build_model()
'''

MODULE_LEVEL = HEAD + '''
inputs = keras.Input(shape=(4,))
x = layers.Dense(8, activation="relu")(inputs)
outputs = layers.Dense(2)(x)
model = keras.Model(inputs, outputs)
'''


def _translate(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    return r.output


@pytest.mark.parametrize("src", [BUILDER, MODULE_LEVEL], ids=["builder", "module-level"])
def test_a_statement_removed_above_a_functional_model_does_not_shift_its_class(src):
    out = _translate(src)
    assert "__fwport" not in out and "keras" not in out, out
    assert "# input: (batch, 4)\nhead.append(nn.Linear(4, 3))\n" in out, out
    assert "\n\nclass Model(nn.Module):\n" in out, out
    assert "x = torch.relu(self.fc1(inputs))\n        outputs = self.fc2(x)\n        return outputs\n" in out, out
    assert out.rstrip().endswith(("model = build_model()", "model = Model()")), out


@pytest.mark.parametrize("src, model", [(BUILDER, "build_model"), (BUILDER, "head"), (MODULE_LEVEL, "model"),
                                        (MODULE_LEVEL, "head")],
                         ids=["builder", "builder-head", "module-level", "module-level-head"])
def test_both_models_compute_what_keras_computes(session, tmp_path, src, model):
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify

    src = textwrap.dedent(src).lstrip("\n")
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(_translate(src))
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=["float32[3,4]"],
                          checks=("forward", "grad"), device="cpu"), session)
    assert cert["verdict"] == "pass", cert.get("problems")
