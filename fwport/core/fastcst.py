"""Two of libcst's generic paths, which every pass takes, made cheaper for the process: the same answers.

- ``isinstance(node, cst.X)``: libcst's node classes are ABCs, and an ``isinstance`` against one that is
  not the node's own class runs ``ABCMeta.__instancecheck__`` (a Python frame, then the ABC registry and
  caches: ~0.3 µs, over a thousand per torch2jax fixture program, nearly all in pack code). libcst
  registers no virtual subclass and defines no ``__subclasshook__``, so the answer is the class
  hierarchy's: :func:`install` gives each node class a metaclass (:class:`_NodeMeta`, a subclass of
  ``ABCMeta``: abstract methods are enforced as before) whose checks are ``type``'s own, in C. A class
  with something registered is left as it was, and ``register`` is refused on the others.
- ``node.with_changes(**changes)``: libcst's is ``dataclasses.replace``, which looks every field's kind
  up at each call; :func:`_with_changes` keeps each class's ``__init__`` fields and calls the
  constructor with the same arguments (the node is built and validated as before).

Installed once, when ``fwport.core.pipeline`` is imported. tests/test_fastcst.py checks both against
libcst's own on the nodes of the fixtures.
"""
from __future__ import annotations

import abc
import dataclasses

import libcst as cst


class _NodeMeta(abc.ABCMeta):
    """ABCMeta with ``type``'s isinstance / issubclass checks (no virtual subclasses, so the same answers)."""

    __instancecheck__ = type.__instancecheck__
    __subclasscheck__ = type.__subclasscheck__

    def register(cls, subclass):
        raise TypeError(f"fwport.core.fastcst: {cls.__name__} checks isinstance by its class hierarchy alone; "
                        "a virtual subclass cannot be registered")


_INIT_FIELDS: dict[type, tuple[str, ...]] = {}


def _with_changes(self, **changes):
    """``CSTNode.with_changes``: ``dataclasses.replace(self, **changes)``."""
    cls = self.__class__
    names = _INIT_FIELDS.get(cls)
    if names is None:
        names = _INIT_FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    for name in names:
        if name not in changes:
            changes[name] = getattr(self, name)
    return cls(**changes)


_with_changes.__doc__ = cst.CSTNode.with_changes.__doc__
_LIBCST_WITH_CHANGES = cst.CSTNode.__dict__["with_changes"]


def node_classes() -> list[type]:
    """libcst's node classes (CSTNode and every class under it), each once."""
    out, todo = [], [cst.CSTNode]
    seen = set()
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.add(c)
        out.append(c)
        todo.extend(c.__subclasses__())
    return out


def _registered(cls: type) -> bool:
    try:
        return bool(abc._get_dump(cls)[0])  # (the registry of the C implementation of abc)
    except (AttributeError, TypeError):
        return True  # not known: left as it was


_installed = False


def install() -> None:
    """Put both in place (once per process; node classes created later inherit the metaclass)."""
    global _installed
    if _installed:
        return
    _installed = True
    if cst.CSTNode.__dict__.get("with_changes") is _LIBCST_WITH_CHANGES:
        cst.CSTNode.with_changes = _with_changes
    for c in node_classes():
        if type(c) is abc.ABCMeta and "__subclasshook__" not in c.__dict__ and not _registered(c):
            try:
                c.__class__ = _NodeMeta
            except TypeError:  # (a Python that refuses the assignment: the checks stay libcst's)
                return
