"""speedG: two torch2jax walks that libcst did at full cost. ``params.run`` rewrote each scope with libcst's
``visit`` (every node rebuilt and validated, trivia included): ``rewrite(..., fresh=True)`` now, which calls the
same hooks and gives every node it enters a new identity, as libcst's visit does. ``clashes.module_bindings``
rendered the whole source with libcst's position recorder: it asks the translation's Layout now (the source's
statements rendered once, for the findings' positions too). The outputs and findings must not change."""
from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import libcst as cst
from libcst._nodes.base import BaseLeaf  # (operators, punctuation: trivia a copy shares)
import pytest

import fwport.packs.torch2jax.params as params
from fwport.core.names import scan
from fwport.core.parse import parse_module
from fwport.core.pipeline import translate_source
from fwport.core.position import Layout, node_positions
from fwport.packs.torch2jax import clashes

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures" / "torch2jax").glob("*/model.py"))

_HEAD = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        return self.out(torch.tanh(self.fc(x)))


model = Net()
'''

#: the params pass changes these (a global model changed inside functions, nested definitions it does not enter,
#: a loop over the parameters, one change it refuses)
PROGRAMS = [
    _HEAD + '''
def bump(v):
    def inner(w):
        return w + 1
    model.fc.weight.data += v
    k = lambda m: m
    return inner(v)


with torch.no_grad():
    model.fc.bias.sub_(0.25, alpha=2)
for p in model.parameters():
    p.data.clamp_(-0.7, 0.9)
    p.data *= 0.5
model.fc.weight.data.fill_(0.1)


class Other:
    def f(self):
        model.out.bias.data.zero_()
''',
    _HEAD + '''
def scale(s):
    model.out.bias.data *= s  # a comment kept
    model.fc.weight.data.normal_()
''',
]


def _libcst_visit(node, transformer, fresh=False):
    return node.visit(transformer)


def _result(r):
    return r.output, r.status, [(f.line, f.column, f.severity, f.code, f.message) for f in r.findings]


@pytest.mark.parametrize("text", [textwrap.dedent(p).lstrip("\n") for p in PROGRAMS]
                         + [p.read_text(encoding="utf-8") for p in FIXTURES[:12]],
                         ids=[f"program{i}" for i in range(len(PROGRAMS))] + [p.parent.name for p in FIXTURES[:12]])
def test_params_gives_what_libcst_visit_gave(text, monkeypatch):
    calls = []
    walk = params.rewrite

    def counted(node, transformer, fresh=False):
        out = walk(node, transformer, fresh)
        calls.append((node, out, transformer.changed))
        return out

    monkeypatch.setattr(params, "rewrite", counted)
    ours = _result(translate_source(text, "f.py", "torch2jax"))
    monkeypatch.setattr(params, "rewrite", _libcst_visit)
    theirs = _result(translate_source(text, "f.py", "torch2jax"))
    assert ours == theirs
    for node, out, _ in calls:  # a copy: a node the walk entered is not the input's (a nested def it skips is)
        kept = {id(n) for n in _nodes(node)}
        skipped = {id(n) for d in _pruned(node) for n in _nodes(d)}
        assert {id(n) for n in _nodes(out)} & kept <= skipped


def test_the_programs_reach_the_params_rewrite(monkeypatch):
    changed = []
    walk = params.rewrite

    def counted(node, transformer, fresh=False):
        out = walk(node, transformer, fresh)
        changed.append(transformer.changed)
        return out

    monkeypatch.setattr(params, "rewrite", counted)
    for p in PROGRAMS:
        r = translate_source(textwrap.dedent(p).lstrip("\n"), "f.py", "torch2jax")
        assert "eqx.tree_at(lambda m: m." in r.output
    assert sum(changed) >= 4


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.parent.name)
def test_module_bindings_asks_the_layout_for_the_same_positions(path):
    text = path.read_text(encoding="utf-8")
    tree = parse_module(text)
    layout = Layout()
    with_layout = clashes.module_bindings(SimpleNamespace(analyses={"parsed": (tree, text), "layout": layout}))
    without = clashes.module_bindings(SimpleNamespace(analyses={"parsed": (tree, text)}))
    assert with_layout == without
    assert with_layout  # (every fixture imports torch)
    assert tree in [p.module for p in layout._parts_of.values()]  # the source's statements rendered by the Layout


def _nodes(node):
    out = []

    class _All(cst.CSTVisitor):
        def on_visit(self, n):
            if not isinstance(n, (cst.BaseParenthesizableWhitespace, cst.Comment, cst.EmptyLine, cst.Newline,
                                  cst.TrailingWhitespace, BaseLeaf)):
                out.append(n)
            return True

    scan(node, _All())
    return out


def _pruned(node):
    """The subtrees params' rewrite does not enter: classes, lambdas, functions other than the statement itself."""
    out = []

    class _Find(cst.CSTVisitor):
        def on_visit(self, n):
            if n is not node and isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                out.append(n)
                return False
            return True

    scan(node, _Find())
    return out
