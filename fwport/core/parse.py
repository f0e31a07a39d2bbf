"""libcst's parsers without the validation of every node they build.

Each libcst node runs ``_validate()`` when it is constructed (``CSTNode.__post_init__``): it checks
what a tree built by hand may get wrong (a missing space after ``not``, a keyword argument before a
positional one). The parser builds only what its grammar accepts, so the checks never fail there
(libcst's own note on ``__post_init__`` says so), yet they cost a sixth of a parse. These functions
parse with the checks off for the duration of the call; nodes the passes build afterwards are
validated as before.

``with_changes`` is libcst's ``CSTNode.with_changes`` without ``dataclasses.replace``'s cost (its
per-field bookkeeping and a keyword call of the constructor): the same node, validated the same way.
``translate_source`` installs it on ``CSTNode`` while it runs (``fast_changes``), as it pauses the
garbage collector, and puts libcst's back after. The swap is counted under a lock: translations that
overlap (threads, or one inside another: a chained direction) install it once, and what was there
before is put back when the last of them ends, never earlier and never left behind. Meanwhile other
code of the process that calls ``with_changes`` gets the same nodes (the same fields, the same
validation), only sooner.
"""
from __future__ import annotations

import dataclasses
import threading
from contextlib import contextmanager

import libcst as cst

_VALIDATE = cst.CSTNode.__dict__["__post_init__"]


def _no_validation(self) -> None:
    return None


def _unvalidated(parser, text: str):
    cst.CSTNode.__post_init__ = _no_validation
    try:
        return parser(text)
    finally:
        cst.CSTNode.__post_init__ = _VALIDATE


def parse_module(text: str) -> cst.Module:
    """``cst.parse_module(text)``: the same tree, the same ``ParserSyntaxError``."""
    return _unvalidated(cst.parse_module, text)


def parse_statement(text: str) -> cst.BaseStatement:
    """``cst.parse_statement(text)``."""
    return _unvalidated(cst.parse_statement, text)


def parse_expression(text: str) -> cst.BaseExpression:
    """``cst.parse_expression(text)``."""
    return _unvalidated(cst.parse_expression, text)


_FIELDS: dict[type, tuple[tuple[str, ...], frozenset[str]]] = {}
_set = object.__setattr__


def with_changes(self, **changes):
    """``self.with_changes(**changes)`` as libcst's (``dataclasses.replace``): a new node of the same class
    holding ``changes`` and ``self``'s other fields as they are, then ``__post_init__`` (the validation,
    as a constructor runs it); a name that is not a field raises TypeError, as the constructor does."""
    cls = self.__class__
    known = _FIELDS.get(cls)
    if known is None:  # (libcst's nodes: every field is an init field, none a ClassVar or an InitVar)
        names = tuple(f.name for f in dataclasses.fields(cls))
        known = _FIELDS[cls] = (names, frozenset(names))
    names, fields = known
    if changes and not fields.issuperset(changes):
        raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument "
                        f"{next(n for n in changes if n not in fields)!r}")
    new = object.__new__(cls)
    for name in names:
        _set(new, name, changes[name] if name in changes else getattr(self, name))
    new.__post_init__()
    return new


_SWAP = threading.Lock()
_swap = {"depth": 0, "previous": None}  # translations running now; what CSTNode.with_changes was before the first


@contextmanager
def fast_changes():
    """``CSTNode.with_changes`` is :func:`with_changes` meanwhile: installed by the first of overlapping
    callers, and whatever was there before put back by the last one to leave (an exception included)."""
    with _SWAP:
        if _swap["depth"] == 0:
            _swap["previous"] = cst.CSTNode.__dict__["with_changes"]
            cst.CSTNode.with_changes = with_changes
        _swap["depth"] += 1
    try:
        yield
    finally:
        with _SWAP:
            _swap["depth"] -= 1
            if _swap["depth"] == 0:
                cst.CSTNode.with_changes = _swap["previous"]
                _swap["previous"] = None
