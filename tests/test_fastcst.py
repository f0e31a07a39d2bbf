"""fwport/core/fastcst.py: libcst's isinstance checks and with_changes, cheaper, give libcst's own answers."""
from __future__ import annotations

import abc
import dataclasses
from pathlib import Path

import libcst as cst
import pytest

import fwport.core.pipeline  # noqa: F401  (installs fastcst)
from fwport.core import fastcst
from fwport.core.names import children

ROOT = Path(__file__).resolve().parent.parent


def _nodes() -> list[cst.CSTNode]:
    """One node of every type found in a few fixture programs of each direction (and the modules themselves)."""
    found: dict[type, cst.CSTNode] = {}
    paths = sorted((ROOT / "fixtures" / "tf2torch").glob("*/model.py"))[:12] \
        + sorted((ROOT / "fixtures" / "torch2jax").glob("*/model.py"))[:12]
    todo = [cst.parse_module(p.read_text(encoding="utf-8")) for p in paths]
    while todo:
        node = todo.pop()
        found.setdefault(type(node), node)
        todo.extend(children(node))
    return list(found.values())


NODES = _nodes()


def test_every_node_class_has_the_plain_checks():
    classes = fastcst.node_classes()
    assert len(classes) > 200
    assert all(type(c) is fastcst._NodeMeta for c in classes)
    assert cst.CSTNode.with_changes is fastcst._with_changes

    class Mine(cst.Name):  # a class written later inherits the metaclass
        pass
    assert type(Mine) is fastcst._NodeMeta and isinstance(Mine("a"), cst.BaseExpression)
    with pytest.raises(TypeError):
        cst.BaseExpression.register(int)
    with pytest.raises(TypeError):  # still an ABC: an abstract class cannot be built
        cst.BaseExpression()


def test_isinstance_and_issubclass_answer_as_abcmeta_does():
    classes = fastcst.node_classes()
    assert len(NODES) > 60
    for node in NODES:
        for c in classes:
            assert isinstance(node, c) is abc.ABCMeta.__instancecheck__(c, node), (type(node), c)
    node_classes = fastcst.node_classes()
    for a in node_classes:
        for b in node_classes:
            assert issubclass(a, b) is abc.ABCMeta.__subclasscheck__(b, a), (a, b)
    assert not isinstance(1, cst.CSTNode) and not isinstance("x", cst.Name)
    assert isinstance(NODES[0], (int, cst.CSTNode))


def test_with_changes_builds_what_dataclasses_replace_builds():
    for node in NODES:
        fields = [f.name for f in dataclasses.fields(node) if f.init]
        same = node.with_changes()
        assert same is not node and type(same) is type(node) and same.deep_equals(node)
        for name in fields:  # each field given (its own value), and the others kept
            got = node.with_changes(**{name: getattr(node, name)})
            want = dataclasses.replace(node, **{name: getattr(node, name)})
            assert got.deep_equals(want) and all(getattr(got, f) is getattr(want, f) for f in fields)
    call = cst.parse_expression("f(a, b=1)")
    assert cst.CSTNode.with_changes(call, func=cst.Name("g")).deep_equals(cst.parse_expression("g(a, b=1)"))
    with pytest.raises(TypeError):  # an unknown field, as dataclasses.replace
        call.with_changes(bogus=1)
    with pytest.raises(cst.CSTValidationError):  # the new node is validated, as before
        call.args[0].with_changes(keyword=None, equal=cst.AssignEqual())
