"""Named transforms: the Python escape hatches a rule file may refer to by name.

Each pack has one :class:`Transforms` (``Direction.transforms``) with three tables, filled by
decorators in the pack's modules:

- ``values``: one source argument → target keywords (``one-minus``, ``keras-activation``).
  Signature: ``fn(value, spec, mapped, ctx) -> None``; it writes into ``mapped.kwargs`` /
  ``mapped.extras`` or marks ``mapped`` failed with a finding.
- ``calls``: a mapped call → the output expression, for calls that are not a plain
  ``target(**kwargs)`` (``tf.matmul`` with transpose flags, ``tf.cast``...). Signature:
  ``fn(mapped, ctx) -> cst.BaseExpression | None`` (None: leave the call unchanged; the transform
  reported why). A call transform registered with ``starred=True`` also gets calls that unpack an
  iterable into the source's ``*args`` (``nn.Sequential(*layers)``: ``mapped.bound.starred`` says which
  of ``mapped.bound.varargs`` were written ``*x``); the others never see one (the call is refused).
- ``shapes``: a mapped layer call + what is known of its input → the module(s) to emit, the output
  shape and the weight-map variant. Signature: ``fn(mapped, ctx, lctx) -> LayerEmission``.

The core interprets rules with these tables and never imports the modules that fill them.
"""
from __future__ import annotations

from typing import Callable


class Transforms:
    def __init__(self, pack: str):
        self.pack = pack
        self.values: dict[str, Callable] = {}
        self.calls: dict[str, Callable] = {}
        self.shapes: dict[str, Callable] = {}
        self.starred: set[str] = set()  # call transforms that handle `*x` bound to *args

    def _register(self, table: dict[str, Callable], name: str):
        def deco(fn: Callable) -> Callable:
            if name in table:
                raise ValueError(f"transform {name!r} registered twice in pack {self.pack}")
            table[name] = fn
            return fn

        return deco

    def value(self, name: str):
        """Register a value transform (``args.X.transform = "name"`` in a rule)."""
        return self._register(self.values, name)

    def call(self, name: str, starred: bool = False):
        """Register a call transform (``emit.transform = "name"``); ``starred``: it handles ``*x`` given
        to the source's ``*args`` (:attr:`BoundCall.starred`)."""
        if starred:
            self.starred.add(name)
        return self._register(self.calls, name)

    def shape(self, name: str):
        """Register a shape function (``emit.shape = "name"``)."""
        return self._register(self.shapes, name)
