"""``fwport verify --model model`` where the file binds ``model = make_model(5)`` at the top level: the
translation records the layers under the builder (or class) the assignment calls, so verify reads that
builder's weight map (it used to find none and call every variable unmapped, a mismatch)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.verify.run import _scope

BUILT = '''
import keras
from keras import layers


def make_model(units):
    inputs = keras.Input(shape=(6,))
    x = layers.Dense(units, activation="relu")(inputs)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)


model = make_model(5)
'''

SUBCLASS = '''
import keras
from keras import layers


class Net(keras.Model):
    def __init__(self, units):
        super().__init__()
        self.hidden = layers.Dense(units, activation="relu")
        self.out = layers.Dense(3)

    def call(self, x):
        return self.out(self.hidden(x))


def make_net():
    return Net(4)


net = make_net()
'''


def test_the_scope_of_a_top_level_model_is_what_builds_it():
    assert _scope("model", BUILT) == "make_model"
    assert _scope("net", SUBCLASS) == "Net"  # the builder returns the file's class
    # a functional model built at the top level keeps its own name
    assert _scope("model", "import keras\nmodel = keras.Model(i, o)\n") == "model"
    # rebound to something else last: its own name
    assert _scope("model", BUILT + "model = keras.Sequential([model])\n") == "model"


@pytest.mark.parametrize("src, model, inputs", [(BUILT, "model", ["float32[2,6]"]), (SUBCLASS, "net", ["float32[2,6]"])],
                         ids=["builder", "class"])
def test_a_model_bound_at_the_top_level_verifies(session, tmp_path, src, model, inputs):
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify

    src = textwrap.dedent(src).lstrip("\n")
    r = translate_source(src, "m.py")
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=inputs,
                          checks=("forward", "grad"), device="cpu"), session)
    assert cert["verdict"] == "pass", cert.get("problems")
    assert len(cert["weights"]) == 2
