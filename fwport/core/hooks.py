"""libcst's ``on_visit`` / ``on_leave`` (and the attribute hooks) with each visitor class's
``visit_<Type>`` / ``leave_<Type>`` looked up once per node type.

libcst finds a node's hooks by name at every node (``getattr(self, f"visit_{type(node).__name__}")``,
and the same for ``leave_`` and for every child attribute), and most of what it finds is its own
empty default. :func:`hooks` keeps, per visitor class and node type, the hook functions the class
really defines (None for libcst's defaults); :func:`default_visit`, :func:`default_leave` and
:func:`default_leave_transform` answer exactly as ``CSTVisitor.on_visit``, ``CSTVisitor.on_leave``
and ``CSTTransformer.on_leave`` do. ``names.scan`` and ``rewrite.rewrite`` use the table directly
for the visitors that keep libcst's ``on_visit`` / ``on_leave``; a visitor that overrides them
calls these in place of ``super().on_visit`` / ``super().on_leave`` (where its next class up is
libcst's): the same answers, without the lookups by name.
"""
from __future__ import annotations

from functools import partial
from types import FunctionType

import libcst as cst

#: libcst's classes: every visit_<Type> / leave_<Type> they define is an empty default (a
#: visitor's returns None, a transformer's returns the updated node)
_LIBCST = frozenset(c for base in (cst.CSTVisitor, cst.CSTTransformer) for c in base.__mro__)
_NONE = (None, None)


class TypeTest(dict):
    """``test[node.__class__]``: whether ``isinstance(node, classes)``, one dict look-up per node type.

    libcst's node classes are ABCs: every ``isinstance`` against one runs ``ABCMeta.__instancecheck__``,
    a Python call about ten times the cost of a look-up, and the walks ask it at nearly every node
    (some four thousand times per fixture program). The answer depends on the type alone."""

    __slots__ = ("classes",)

    def __init__(self, *classes: type):
        super().__init__()
        self.classes = classes

    def __missing__(self, t: type) -> bool:
        is_a = self[t] = issubclass(t, self.classes)
        return is_a


def table(cls: type) -> dict[str, tuple]:
    """Visitor class ``cls``'s hooks: node type name → (visit_<Type>, leave_<Type>), None for the
    one libcst answers with its empty default; node types with neither are absent. Built from the
    classes of its MRO other than libcst's (a few names each), in MRO order, and kept on the class
    itself (many visitors are classes defined inside a function: the table goes with its class)."""
    tab = cls.__dict__.get("_fwport_hooks")
    if tab is None:
        found: dict[str, object] = {}
        for c in cls.__mro__:
            if c in _LIBCST:
                continue
            for name, fn in vars(c).items():
                if name.startswith(("visit_", "leave_")) and name not in found:
                    found[name] = fn if isinstance(fn, FunctionType) else partial(_bound, name)
        tab = {}
        for name in found:
            kind, _, node_type = name.partition("_")
            if node_type and "_" not in node_type and node_type not in tab:
                tab[node_type] = (found.get("visit_" + node_type), found.get("leave_" + node_type))
        setattr(cls, "_fwport_hooks", tab)
        setattr(cls, "_fwport_attribute_hooks", any(name.count("_") >= 2 for name in found))
    return tab


def _bound(name: str, visitor, *args):  # a static method or another descriptor: looked up per call
    return getattr(visitor, name)(*args)


def hooks(cls: type, t: type) -> tuple:
    """(visit_<Type>, leave_<Type>) of visitor class ``cls`` for node type ``t`` (see :func:`table`)."""
    return (cls.__dict__.get("_fwport_hooks") or table(cls)).get(t.__name__, _NONE)


def plain_visitor(cls: type) -> bool:
    """Whether ``cls`` keeps libcst's on_visit and on_leave (a read-only visitor)."""
    return cls.on_visit is cst.CSTVisitor.on_visit and cls.on_leave is cst.CSTVisitor.on_leave


def attribute_hooks(cls: type) -> bool:
    """Whether visitor class ``cls`` defines some ``visit_<Type>_<attr>`` / ``leave_<Type>_<attr>``
    (libcst's on_visit_attribute / on_leave_attribute would call it)."""
    table(cls)
    return cls.__dict__["_fwport_attribute_hooks"]


#: visitor class → its hook table (table(cls)), for the default_* functions below: a dict keyed by the
#: class answers faster than the class's own __dict__ (a mappingproxy) and a call of hooks(). Bounded:
#: a class written inside a function is a new class at every call.
_TABLES: dict[type, dict[str, tuple]] = {}


def _table(cls: type) -> dict[str, tuple]:
    if len(_TABLES) >= 4096:
        _TABLES.clear()
    tab = _TABLES[cls] = table(cls)
    return tab


def default_visit(visitor, node: cst.CSTNode) -> bool:
    """``CSTVisitor.on_visit`` / ``CSTTransformer.on_visit``."""
    tab = _TABLES.get(visitor.__class__)
    if tab is None:
        tab = _table(visitor.__class__)
    visit = tab.get(node.__class__.__name__, _NONE)[0]
    return visit is None or visit(visitor, node) is not False


def default_leave(visitor, node: cst.CSTNode) -> None:
    """``CSTVisitor.on_leave``."""
    tab = _TABLES.get(visitor.__class__)
    if tab is None:
        tab = _table(visitor.__class__)
    leave = tab.get(node.__class__.__name__, _NONE)[1]
    if leave is not None:
        leave(visitor, node)


def default_leave_transform(transformer, original: cst.CSTNode, updated):
    """``CSTTransformer.on_leave``."""
    tab = _TABLES.get(transformer.__class__)
    if tab is None:
        tab = _table(transformer.__class__)
    leave = tab.get(original.__class__.__name__, _NONE)[1]
    return updated if leave is None else leave(transformer, original, updated)
