"""speedI: four walks made cheaper without changing what they find. ``spread.expand`` and ``pipeline._observed_at``
read positions from the translation's Layout (the source's statements rendered once, for the passes' findings too)
instead of a render of the whole module of their own; torch2jax's ``ranks.given_classes`` walks twice only the
functions that call one of the file's classes; tf2torch's model_api reads how a function uses every parameter in
one walk, not one walk per parameter. Each is checked here against the way it was found before."""
from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from fwport.core import spread
from fwport.core.context import FileContext
from fwport.core.direction import get_direction

from fwport.core.names import collect_imports, find_all, scan
from fwport.core.parse import parse_module
from fwport.core.pipeline import _Calls, _observed_at
from fwport.core.position import Layout, node_positions
from fwport.core.rule import load_pack
from fwport.packs.torch2jax import ranks
from fwport.packs.tf2torch.passes import model_api

ROOT = Path(__file__).resolve().parent.parent
TF_FIXTURES = sorted((ROOT / "fixtures" / "tf2torch").glob("*/model.py"))
PT_FIXTURES = sorted((ROOT / "fixtures" / "torch2jax").glob("*/model.py"))


def _ctx(source: str, direction: str):
    pack = load_pack(direction)
    d = get_direction(direction)
    module = parse_module(source)
    ctx = FileContext("t.py", pack, collect_imports(module, d.source, source), d, None, {})
    ctx.analyses["parsed"] = (module, source)
    return module, ctx


SPREAD = textwrap.dedent('''
    from tensorflow import keras
    from tensorflow.keras import layers


    def get_model(channels=1):
        conv_args = {
            "activation": "relu",
            "padding": "same",
        }
        inputs = keras.Input(shape=(8, 8, channels))
        x = layers.Conv2D(6, 5, **conv_args)(inputs)
        x = layers.Conv2D(channels, 3, **conv_args)(x)
        return keras.Model(inputs, x)


    other = {"padding": "valid"}


    def block(x):
        return layers.Conv2D(4, 3, **other)(x)
''')


def test_spread_reads_the_lines_of_the_dicts_it_removes_from_the_layout():
    module, ctx = _ctx(SPREAD, "tf2torch")
    plain = spread.expand(module, ctx, SPREAD)
    without = ctx.analyses[spread.KEY]
    module, ctx = _ctx(SPREAD, "tf2torch")
    layout = Layout()
    shared = spread.expand(module, ctx, SPREAD, layout)
    assert ctx.analyses[spread.KEY] == without
    assert [(name, line) for name, _, line, _ in without] == [("conv_args", 7), ("other", 17)]
    assert shared.code == plain.code and "**conv_args" not in shared.code
    assert module in [p.module for p in layout._parts_of.values()]  # the source's statements rendered by the Layout


@pytest.mark.parametrize("path", TF_FIXTURES[:12], ids=lambda p: p.parent.name)
def test_observed_shapes_are_found_at_the_same_calls_with_the_layout(path):
    text = path.read_text(encoding="utf-8")
    module = parse_module(text)
    finder = _Calls()
    scan(module, finder)
    # every call observed, at the position libcst's own position recorder gives it
    observed = [(line, col, f"shape{k}") for k, (line, col) in enumerate(node_positions(module, finder.calls).values())]
    layout = Layout()
    with_layout = _observed_at(module, observed, layout)
    assert with_layout == _observed_at(module, observed)
    assert len(with_layout) == len(finder.calls) > 0
    assert module in [p.module for p in layout._parts_of.values()]


def _given_classes_walking_every_function(module, ctx, classes):
    """ranks.given_classes as it was: every function of the file walked twice."""
    import functools
    from fwport.packs.torch2jax.passes.modules import _bind
    inits = {s.name.value: m for s in module.body if isinstance(s, cst.ClassDef) and s.name.value in classes
             for m in s.body.body if isinstance(m, cst.FunctionDef) and m.name.value == "__init__"}
    out: dict = {}
    seen = []

    def kinds(value, bound):
        seen.append(value)
        return {"?"}

    for fn in find_all(module, cst.FunctionDef):
        names = ranks._Bound(fn)
        scan(fn, names)
        bound = {k: [] if None in v else v for k, v in names.bound.items()}
        scan(fn, ranks._GivenCalls(fn, inits, functools.partial(kinds, bound=bound), out, _bind))
    return out, seen


NESTED = textwrap.dedent('''
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self, norm, d=4):
            super().__init__()
            self.norm = norm
            self.fc = nn.Linear(d, d)

        def forward(self, x):
            return self.norm(self.fc(x))


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            def make(d):
                return Block(nn.LayerNorm(d), d)
            self.a = make(4)
            self.b = Block(None)

        def forward(self, x):
            return self.b(self.a(x))


    def build():
        class Local:
            def go(self):
                return Block(nn.Identity())
        return Local().go()
''')


@pytest.mark.parametrize("name, text", [("nested", NESTED)] + [(p.parent.name, p.read_text(encoding="utf-8"))
                                                              for p in PT_FIXTURES])
def test_given_classes_finds_what_walking_every_function_found(name, text, monkeypatch):
    module, ctx = _ctx(text, "torch2jax")
    classes = {s.name.value for s in module.body if isinstance(s, cst.ClassDef)}
    reference, reference_values = _given_classes_walking_every_function(module, ctx, classes)
    got = ranks.given_classes(module, ctx, classes)
    assert set(got) == set(reference)
    # the same calls looked at, in the same order (each value given to a parameter)
    monkeypatch.setattr(ranks, "_GivenCalls", _recording(ranks._GivenCalls, values := []))
    ranks.given_classes(module, ctx, classes)
    assert [id(v) for v in values] == [id(v) for v in reference_values if v is not None]
    if name == "nested":
        assert got[("Block", "norm")] == {"torch.nn.LayerNorm", "None", "torch.nn.Identity"}


def _recording(cls, values: list):
    class Recording(cls):
        def __init__(self, fn, inits, kinds, out, bind):
            def record(value):
                values.append(value)
                return kinds(value)
            super().__init__(fn, inits, record, out, bind)
    return Recording


class _OneParameter(cst.CSTVisitor):
    """How a function body reads ``param``, one walk per parameter (model_api as it was)."""

    def __init__(self, param: str) -> None:
        super().__init__()
        self.param, self.ok, self.uses = param, set(), {"method": 0, "shared": 0, "other": 0}

    def visit_Attribute(self, node):
        if isinstance(node.value, cst.Name) and node.value.value == self.param:
            self.ok.add(id(node.value))
            attr = node.attr.value
            self.uses["method" if attr in model_api.METHODS and attr not in model_api._SHARED_NAMES else
                      "shared" if attr in model_api.METHODS else "other"] += 1

    def visit_Call(self, node):
        if isinstance(node.func, cst.Name) and node.func.value == self.param:
            self.ok.add(id(node.func))

    def visit_Return(self, node):
        if isinstance(node.value, cst.Name):
            self.ok.add(id(node.value))

    def visit_Name(self, node):
        if node.value == self.param and id(node) not in self.ok:
            self.uses["other"] += 1

    def visit_FunctionDef(self, node):
        return False

    def visit_Lambda(self, node):
        return False


USES = textwrap.dedent('''
    def train(model, data, est, other, cb):
        model.compile("adam", "mse")
        model.fit(data)
        est.fit(data)
        other.compile()
        print(other)
        cb(model)
        def inner(model):
            return model.summary
        return model
''')


@pytest.mark.parametrize("name, text", [("uses", USES)] + [(p.parent.name, p.read_text(encoding="utf-8"))
                                                          for p in TF_FIXTURES])
def test_model_uses_in_one_walk_are_those_of_one_walk_per_parameter(name, text):
    module = parse_module(text)
    answers = {}
    for fn in find_all(module, cst.FunctionDef):
        uses = model_api._model_uses(fn)
        for p in [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]:
            v = _OneParameter(p.name.value)
            scan(fn.body, v)
            expected = v.uses["method"] > 0 and v.uses["other"] == 0
            assert model_api._used_as_model(uses, p.name.value) == expected, (fn.name.value, p.name.value)
            answers[(fn.name.value, p.name.value)] = expected
    if name == "uses":
        assert answers == {("train", "model"): False, ("train", "data"): False, ("train", "est"): False,
                           ("train", "other"): False, ("train", "cb"): False, ("inner", "model"): True}
        # `cb(model)` passes the model on (a read other than as a model); `model.summary` is a model's attribute
