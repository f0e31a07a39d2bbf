"""The functional pass's cheaper walks (speedA) give what the walks they replace gave.

- ``_line_count`` (the lines of a statement without its leading lines) counts as a render of the statement
  rebuilt without them, on every statement of every tf2torch fixture, at every depth;
- a helper's body copied with ``_Substitute`` rebuilding only what it changes, then ``_ShapeSubstitute``
  copying every node, renders as the two copies made before (both fresh) and holds no node of the source
  or of the call site (the pass keys plans and replacements on node identity);
- ``_memoized`` keeps answers only while ``run`` works (none after), and gives while it works the answers of
  the plain walks.
"""
from __future__ import annotations

from pathlib import Path

import libcst as cst

from fwport.core.engine import code
from fwport.core.names import children, find_all
from fwport.core.pipeline import translate_source
from fwport.core.rewrite import rewrite
from fwport.core.rule import load_pack
from fwport.packs.tf2torch.passes import functional

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures" / "tf2torch").glob("*/model.py"))
PACK = load_pack("tf2torch")


def _statements(node: cst.CSTNode):
    for n in [node, *children(node)]:
        if n is not node:
            yield from _statements(n)
        if isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and n is node:
            yield n


def test_line_count_is_the_render_without_leading_lines():
    counted = several = 0
    for path in FIXTURES:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        for stmt in _statements(module):
            expected = code(stmt.with_changes(leading_lines=[])).count("\n")
            assert functional._line_count(stmt) == expected, (path, code(stmt))
            counted += 1
            several += expected > 1
    assert counted > 1000 and several > 100  # (the fixtures hold many multi-line statements)


HELPER = '''
def block(x, units, act, norm=True):
    h = layers.Dense(units, activation=act, name="d")(x)
    if norm:
        h = layers.LayerNormalization()(h)
    f = lambda t: t * units
    return layers.Dense(x.shape[-1])(h) + f(h)
'''


def _nodes(node: cst.CSTNode) -> list:
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        out.append(n)
        todo += children(n)
    return out


_NOT_TRIVIA = (cst.BaseExpression, cst.Arg, cst.Element, cst.Param, cst.Parameters, cst.AssignTarget,
               cst.BaseSmallStatement, cst.BaseStatement, cst.BaseSuite)


def test_helper_copy_renders_as_before_and_holds_fresh_nodes_only():
    fn = cst.parse_module(HELPER).body[0]
    act = cst.parse_expression("layers.LeakyReLU(0.2)")  # a layer given at the call site
    values = {"units": cst.Integer("64"), "norm": cst.Name("False"), "act": act}
    shapes = {"x": (None, 32)}
    before = [rewrite(rewrite(st, functional._Substitute(values), fresh=True), functional._ShapeSubstitute(shapes),
                      fresh=True) for st in fn.body.body]
    after = [rewrite(rewrite(st, functional._Substitute(values)), functional._ShapeSubstitute(shapes), fresh=True)
             for st in fn.body.body]
    assert [code(s) for s in after] == [code(s) for s in before]
    text = "".join(code(s) for s in after)
    assert "units=64" not in text and "layers.Dense(64," in text and "activation=layers.LeakyReLU(0.2)" in text
    assert "if False:" in text and "layers.Dense(32)" in text and "t * units" in text  # (lambdas keep their names)
    # no node of the source or of the call site but trivia (whitespace, commas...: shared as by the copies before)
    source = {id(n): n for n in _nodes(fn) + _nodes(act) + list(values.values())}

    def shared(stmts):
        return {id(n) for s in stmts for n in _nodes(s) if source.get(id(n)) is n}

    assert shared(after) == shared(before)
    assert not [n for s in after for n in _nodes(s) if source.get(id(n)) is n and isinstance(n, _NOT_TRIVIA)]


def test_memo_lives_while_run_works_and_answers_as_the_walks():
    assert functional._memo is None
    seen = []
    plain_calls, plain_bound = functional._calls_walk, functional._bound_walk

    def calls(stmt):
        seen.append(stmt)
        return plain_calls(stmt)

    functional._calls_walk = calls
    try:
        text = (ROOT / "fixtures" / "tf2torch" / "functional_gan_blocks" / "model.py").read_text(encoding="utf-8")
        translate_source(text, "model.py", PACK)
    finally:
        functional._calls_walk = plain_calls
    assert functional._memo is None  # (nothing kept once the pass returned)
    assert len(seen) == len({id(s) for s in seen})  # each statement walked once while the pass ran
    module = cst.parse_module(text)
    functional._memo = {}
    try:
        for stmt in find_all(module, cst.SimpleStatementLine):
            assert functional._calls(stmt) is functional._calls(stmt)
            assert functional._calls(stmt) == plain_calls(stmt)
            assert functional._names_bound_in(stmt) == plain_bound(stmt)
    finally:
        functional._memo = None
