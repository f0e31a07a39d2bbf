"""The cheap walks and renders the pipeline relies on give what libcst's own would.

``names.scan`` must call a visitor's hooks on the same nodes in the same order as ``node.visit``
(trivia aside), and ``position.Layout`` must give the same text, positions and statement spans as
rendering the whole module, however many modules share its statements.
"""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from fwport.core.names import scan
from fwport.core.position import Layout, node_positions, statement_spans

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "fixtures" / "tf2torch").glob("*/model.py"))

EXTRA = '''# header comment

"""Docstring."""
import tensorflow as tf  # trailing


@tf.function
def f(x, *, training=None):
    # inside
    y = [tf.abs(x),  # first
         tf.exp(x)]
    return (lambda z: z + 1)(y[0]) if training else {k: v for k, v in zip("ab", y)}


class A(tf.keras.layers.Layer):
    def call(self, x):
        with tf.name_scope("a"):
            for i in range(2):
                x = x + i
        return x
# footer comment
'''

_TRIVIA = (cst.BaseParenthesizableWhitespace, cst.EmptyLine, cst.TrailingWhitespace, cst.Newline, cst.Comment,
           cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual, cst.LeftParen, cst.RightParen,
           cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.Asynchronous)


class _Log(cst.CSTVisitor):
    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, _TRIVIA):
            self.log.append(("visit", id(node)))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if not isinstance(original_node, _TRIVIA):
            self.log.append(("leave", id(original_node)))


def _texts():
    return [EXTRA] + [p.read_text(encoding="utf-8") for p in SAMPLES]


@pytest.mark.parametrize("text", _texts())
def test_scan_visits_what_visit_visits_in_the_same_order(text):
    module = cst.parse_module(text)
    a, b = _Log(), _Log()
    module.visit(a)
    scan(module, b)
    assert b.log == a.log


@pytest.mark.parametrize("text", _texts())
def test_layout_gives_the_text_positions_and_spans_of_a_whole_render(text):
    module = cst.parse_module(text)
    layout = Layout()
    assert layout.text(module) == module.code == text
    nodes = []

    class _All(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nodes.append(node)
            return True

    scan(module, _All())
    assert node_positions(module, nodes, layout) == node_positions(module, nodes)
    spans, lines = statement_spans(module, layout)
    assert lines == text.count("\n")
    # every statement, argument and element: the lines its text spans (comments and blank lines
    # above it excluded, as its trailing newline)
    lines_of = text.split("\n")
    for node in nodes:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.Arg, cst.Element)):
            first, last = spans.get(id(node))
            assert first == node_positions(module, [node])[id(node)][0]
            assert lines_of[last - 1].strip() and first <= last
    # a module sharing all statements but one: only that one is rendered again, the rest reused
    changed = module.with_changes(body=[*module.body[:-1], module.body[-1].deep_clone()])
    assert layout.text(changed) == changed.code
    assert node_positions(changed, [changed.body[-1]], layout) == node_positions(changed, [changed.body[-1]])
