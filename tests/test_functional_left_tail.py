"""The tail of keras-io's functional models left as written (issue 8, session 20): causes that refused a model
Keras builds fine, each now translated exactly and checked against Keras (fwport verify runs the translation with
TensorFlow unimportable)."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors


def _tx(src: str, keras: int = 3):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": keras})


def _verify(tmp_path, src: str, out: str, model: str, inputs: list[str], checks=("forward", "grad")) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=inputs, checks=checks,
                          device="cpu", keras=3))
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


# keras-io's guides (serialization_and_saving, working_with_rnns) rebind `model` cell after cell: a Sequential
# first, then the functional model. The earlier `model = ...` and the statements reading it are not the
# functional model's: `model = keras.Model(...)` binds the name, it does not read it.
REBOUND = '''
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input((6,)), layers.Dense(2)])
model.summary()

inputs = keras.Input((6,))
x = layers.Dense(5, activation="relu")(inputs)
outputs = layers.Dense(3)(x)
model = keras.Model(inputs, outputs)
model.summary()
'''


def test_a_name_the_model_statement_binds_anew_is_not_read_by_it(tmp_path):
    r = _tx(REBOUND)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "model = nn.Sequential(nn.Linear(6, 2))" in out and "model = Model()" in out
    assert "keras" not in out.replace("# fwport", "")
    _verify(tmp_path, REBOUND, out, "model", ["float32[4,6]"])
