"""The one binding walker (fwport/core/bindings.py) that every "which names are bound" analysis uses."""
from __future__ import annotations

import textwrap

import libcst as cst

from fwport.core.bindings import BindingWalker
from fwport.core.names import bound_names

SRC = textwrap.dedent('''
    a = 1
    b, (c, *d) = f()
    e: int = 2
    g: int
    h += 1
    for i in range(3):
        j = i
    while k:
        m = 0
    with open(p) as fh, q() as (r, s):
        pass
    try:
        pass
    except E as err:
        pass
    del t
    global u
    import os.path, numpy as np
    from x import y, z as w
    self.attr = 5
    def fn(param):
        inner = 1
    class C:
        cls_attr = 1
    lam = lambda v: (lw := v)
    comp = [(cw := n) for n in xs]
    n2 = (walrus := 3)
    v1 = v2 = 7
''')


class Recorder(BindingWalker):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen: list[tuple[str, str, str | None, int]] = []

    def bound(self, target, how, value):
        name = cst.Module([]).code_for_node(target)
        self.seen.append((name, how, None if value is None else cst.Module([]).code_for_node(value), self.loop))


def walk(**kw) -> list[tuple[str, str, str | None, int]]:
    r = Recorder(**kw)
    cst.parse_module(SRC).visit(r)
    return r.seen


def test_every_kind_of_binding_is_reported_once_with_its_value_and_loop_depth():
    seen = walk()
    assert seen == [
        ("a", "assign", "1", 0), ("b", "assign", None, 0), ("c", "assign", None, 0), ("d", "assign", None, 0),
        ("e", "annassign", "2", 0), ("g", "annotation", None, 0), ("h", "augassign", None, 0),
        ("i", "for", None, 1), ("j", "assign", "i", 1), ("m", "assign", "0", 1),
        ("fh", "as", None, 0), ("r", "as", None, 0), ("s", "as", None, 0), ("err", "as", None, 0),
        ("t", "del", None, 0), ("u", "global", None, 0),
        ("os", "import", None, 0), ("np", "import", None, 0), ("y", "import", None, 0), ("w", "import", None, 0),
        ("self.attr", "assign", "5", 0), ("fn", "def", None, 0), ("C", "class", None, 0),
        ("lam", "assign", "lambda v: (lw := v)", 0),
        ("comp", "assign", "[(cw := n) for n in xs]", 0), ("cw", "walrus", None, 0),
        ("n2", "assign", "(walrus := 3)", 0), ("walrus", "walrus", None, 0),
        ("v1", "assign", None, 0), ("v2", "assign", None, 0),
    ]


def test_options_choose_what_is_walked():
    names = lambda **kw: [n for n, *_ in walk(**kw)]  # noqa: E731
    assert "lw" in names(lambdas=True) and "lw" not in names()
    assert "cw" not in names(comprehensions=False)
    cheap = names(expressions=False)
    assert "walrus" not in cheap and "cw" not in cheap and "a" in cheap and "fh" in cheap
    assert "os" not in names(imports=False) and "np" not in names(imports=False)


def test_nested_scopes_are_entered_only_when_asked():
    class Into(Recorder):
        def enter_scope(self, node):
            return isinstance(node, cst.FunctionDef)

    r = Into()
    cst.parse_module(SRC).visit(r)
    names = [n for n, *_ in r.seen]
    assert "inner" in names and "cls_attr" not in names


def test_bound_names_of_a_function_are_its_parameters_and_statement_bindings():
    fn = cst.parse_module("def f(a, *b, c=1, **d):\n    x = 1\n    y: int\n    (z := 2)\n    import tf\n"
                          "    for i in r: pass\n    def g(): pass\n").body[0]
    assert bound_names(fn) == {"a", "b", "c", "d", "x", "y", "i", "g"}
