"""names.ValueVisitor: the base of the visitors that collect the names code reads (not attribute or keyword names)."""
from __future__ import annotations

import libcst as cst

from fwport.core.names import ValueVisitor, scan


class _Names(ValueVisitor):
    def __init__(self):
        self.names: list[str] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node.value)


def names_read(code: str) -> list[str]:
    v = _Names()
    scan(cst.parse_module(code), v)
    return v.names


def test_attribute_and_keyword_names_are_not_read():
    assert names_read("f(x.mnist, train=y, z=w[k].a.b(c))\n") == ["f", "x", "y", "w", "k", "c"]


def test_a_subclass_hook_still_runs_inside_what_the_base_skips():
    class Calls(_Names):
        def visit_Call(self, node: cst.Call) -> None:
            self.names.append("call")

    v = Calls()
    scan(cst.parse_module("a.b(c=d(e))\n"), v)
    assert v.names == ["call", "a", "call", "d", "e"]
