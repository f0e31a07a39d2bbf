"""fwport.core.codegen.emit writes libcst's tokens, positions and spans, one for one: checked against
libcst's own codegen on parsed code (every fixture program and its translation) and on nodes built
with libcst's defaults (MaybeSentinel commas, equals, semicolons, as the passes build them)."""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from fwport.core.codegen import _EMIT, emit
from fwport.core.position import PlainState, _Marks, render

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(ROOT.glob("fixtures/*/*/model.py")) + sorted(ROOT.glob("fixtures/*/*/expected.py"))

SNIPPETS = [
    "if a:\n    pass\nelif b:  # c\n    x = 1; y = 2;\nelse:\n    del x\n",
    "@d\n@e.f(1, *a, k=2, **kw)\nasync def f(a, /, b: int = 1, *c, d, e=2, **f) -> None:\n    return\n",
    "def g(*, a): return (a)\n",
    "class C(B, metaclass=M):\n\n    # comment\n    x: int = 1\n\n\n    def f(self): ...\n",
    "class D: pass\nclass E(): pass\n",
    "t = (1,); u = 1, 2; v = [1, *w]; z = {'a': 1, **q}; s = {1, 2}\n",
    "x = a[1:2, ::3, b][c]\ny = not a and (b or -c) is not d < e\nz += f'{a!r}' 'b'\n",
    "x = a[1:, :2, ::, ...] if ~+b else (-c)\ny = f(\n    a,  # x\n\n    b,\n)\n",
    "for i in range(3):\n    continue\nelse:\n    break\n",
    "with open(a) as f, open(b) as g:\n    pass\n",
    "x = (  # comment\n    a +\n    b\n)\n",
    "lambda: 0\nlambda x, *y: x\nx = yield\n",
    "import a.b as c, d\nfrom . import (e, f,)\nfrom .g import *\n",
    "try:\n    pass\nexcept (A, B) as e:\n    raise C from e\nfinally:\n    pass\n",
    "while x:\n    x -= 1\n",
    "if x:\n  if y:\n      pass\n  z = 1\n",
]


def _built() -> list[cst.CSTNode]:
    """Nodes as passes build them: MaybeSentinel defaults everywhere."""
    call = cst.Call(cst.Attribute(cst.Name("nn"), cst.Name("Linear")),
                    [cst.Arg(cst.Integer("3")), cst.Arg(cst.Integer("4"), keyword=cst.Name("bias"))])
    params = cst.Parameters(params=[cst.Param(cst.Name("self")), cst.Param(cst.Name("x"), default=cst.Integer("1"))],
                            star_arg=cst.Param(cst.Name("args")), kwonly_params=[cst.Param(cst.Name("k"))],
                            star_kwarg=cst.Param(cst.Name("kw")), posonly_params=[cst.Param(cst.Name("p"))])
    body = cst.IndentedBlock([
        cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name("y"))], call), cst.Expr(cst.Name("y"))]),
        cst.SimpleStatementLine([cst.Return(cst.Tuple([cst.Element(cst.Name("y"))]))]),
        cst.SimpleStatementLine([cst.Return()]),
        cst.SimpleStatementLine([]),
    ])
    fn = cst.FunctionDef(cst.Name("f"), params, body, decorators=[cst.Decorator(cst.Name("staticmethod"))])
    cls = cst.ClassDef(cst.Name("M"), cst.IndentedBlock([fn]), bases=[cst.Arg(cst.Name("B"))],
                       keywords=[cst.Arg(cst.Name("T"), keyword=cst.Name("metaclass"))])
    empty = cst.ClassDef(cst.Name("N"), cst.IndentedBlock([]))
    lists = cst.SimpleStatementLine([cst.Expr(cst.List([cst.Element(cst.Integer("1")), cst.Element(cst.Integer("2"))])),
                                     cst.Expr(cst.Dict([cst.DictElement(cst.Name("a"), cst.Integer("1"))]))])
    return [cls, empty, lists, cst.If(cst.Name("a"), body, orelse=cst.If(cst.Name("b"), body, orelse=cst.Else(body)))]


def _check(module: cst.Module, node: cst.CSTNode) -> None:
    ref = _Marks(module)
    node._codegen(ref)  # libcst's own codegen all the way down
    fast = _Marks(module)
    emit(node, fast)
    assert fast.tokens == ref.tokens
    assert fast.starts == ref.starts
    assert fast.spans == ref.spans
    plain = PlainState(default_indent=module.default_indent, default_newline=module.default_newline)
    emit(node, plain)
    assert plain.tokens == ref.tokens
    assert render(node, module) == module.code_for_node(node)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_fixture_statements(path):
    module = cst.parse_module(path.read_text(encoding="utf-8"))
    for stmt in module.body:
        _check(module, stmt)


@pytest.mark.parametrize("text", SNIPPETS)
def test_snippets(text):
    module = cst.parse_module(text)
    for stmt in module.body:
        _check(module, stmt)
    assert "".join(render(s, module) for s in module.body) == module.code


def test_built_nodes():
    module = cst.Module([])
    for node in _built():
        _check(module, node)
    assert "def f(p, /, self, x = 1, *args, k, **kw):" in render(_built()[0], module)


def test_covers_the_common_types():
    """The types that make up most of a render are fwport's to write (else nothing is gained)."""
    for t in (cst.Name, cst.Attribute, cst.Call, cst.Arg, cst.Comma, cst.Dot, cst.SimpleWhitespace,
              cst.SimpleStatementLine, cst.IndentedBlock, cst.FunctionDef, cst.ClassDef, cst.Assign):
        assert t in _EMIT
