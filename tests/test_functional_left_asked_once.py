"""speedC (issue 7): the functional pass's throwaway run (functional.refused_model_calls), which the training pass
and model_api ask before the real run to learn which keras.Model(...) calls it leaves as written, runs at most once
per file: the training pass runs it only once a binding that may be such a model is asked about (training._LeftModels),
and model_api reuses that answer while the refused calls are still nodes of its tree (functional.left_model_calls)."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from fwport.core.names import find_all
from fwport.core.pipeline import translate_source
from fwport.packs.tf2torch.passes import functional
from test_training_functional_left import LEFT, WHY


@pytest.fixture
def runs(monkeypatch):
    """The throwaway runs of the functional pass made while translating (the real run is not one)."""
    made: list[int] = []
    original = functional.refused_model_calls

    def counted(module, scratch):
        made.append(id(module))
        return original(module, scratch)

    monkeypatch.setattr(functional, "refused_model_calls", counted)
    return made


def _errors(r):
    return [f.message for f in r.findings if f.severity.name == "ERROR"]


def test_a_refused_model_is_asked_about_once(runs):
    r = translate_source(LEFT.lstrip("\n") + "model.summary()\n", "model.py")
    # the training pass's run (compile, fit, predict); model_api reuses its answer for summary (it ran again before)
    assert len(runs) == 1, runs
    errs = _errors(r)
    for method in ("compile", "fit", "predict", "summary"):  # model_api's errors, from the reused answer
        assert any(m.startswith(f"model.{method}(...) is a Keras model method, left as written: ") and WHY in m
                   for m in errs), (method, errs)
    assert "= torch.optim" not in r.output and "model.fit(x, y, epochs=2)" in r.output


def test_a_translated_model_is_asked_about_once(runs):
    r = translate_source(LEFT.replace("print(h)\n", "").lstrip("\n") + "k = len(model.layers)\n", "model.py")
    assert len(runs) == 1, runs
    assert not any(WHY in m for m in _errors(r)), _errors(r)
    assert "fit(model, optimizer, loss_fn, x, y, epochs=2)" in r.output


def test_the_training_pass_does_not_run_it_for_a_sequential(runs):
    src = LEFT.replace("model.compile(", '''model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(3)])
model.compile(''')
    r = translate_source(src.lstrip("\n"), "model.py")
    # the compiled model is a Sequential, no keras.Model(...) nor a builder's call: the training pass never needs
    # the answer (it ran the functional pass before), nor model_api (the name is not bound to a left model only)
    assert runs == [], runs
    assert "fit(model, optimizer, loss_fn, x, y, epochs=2)" in r.output
    assert not any(WHY in m for m in _errors(r)), _errors(r)


def test_a_builder_refused_is_asked_about_once(runs):
    src = LEFT.replace('''inputs = keras.Input(shape=(10,))
h = layers.Dense(16, activation="tanh")(inputs)
print(h)
outputs = layers.Dense(3)(h)
model = keras.Model(inputs, outputs)
''', textwrap.dedent('''\
    def build():
        inputs = keras.Input(shape=(10,))
        h = layers.Dense(16, activation="tanh")(inputs)
        print(h)
        outputs = layers.Dense(3)(h)
        return keras.Model(inputs, outputs)


    model = build()
    '''))
    r = translate_source(src.lstrip("\n") + "model.save_weights('w.weights.h5')\n", "model.py")
    assert len(runs) == 1, runs
    for method in ("fit", "save_weights"):
        assert any(m.startswith(f"model.{method}(...) is a Keras model method") and WHY in m
                   for m in _errors(r)), (method, _errors(r))


def test_an_answer_is_reused_only_for_the_calls_themselves():
    before = cst.parse_module("a = 1\nm = keras.Model(i, o)\nb = 2\n")
    call = next(c for c in find_all(before, cst.Call))
    kept = before.with_changes(body=[cst.parse_statement("a = 3\n"), *before.body[1:]])
    copied = before.with_changes(body=[before.body[0], cst.parse_statement("m = keras.Model(i, o)\n"), before.body[2]])
    assert functional._still_in(before, [call], kept)  # its statement kept: the same node
    assert not functional._still_in(before, [call], copied)  # the same text, another node: asked again
    assert functional._still_in(before, [], copied)  # nothing refused: nothing to find
