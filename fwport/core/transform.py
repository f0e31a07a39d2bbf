"""Named transforms: the Python escape hatches a rule file may refer to by name.

Three registries, each filled by decorators in the modules imported at the bottom:

- ``VALUE_TRANSFORMS``: one source argument → target keywords (``one-minus``, ``keras-activation``).
  Signature: ``fn(value, spec, mapped, ctx) -> None``; it writes into ``mapped.kwargs`` /
  ``mapped.extras`` or marks ``mapped`` failed with a finding.
- ``CALL_TRANSFORMS``: a mapped call → the output expression, for calls that are not a plain
  ``target(**kwargs)`` (``tf.matmul`` with transpose flags, ``tf.cast``...). Signature:
  ``fn(mapped, ctx) -> cst.BaseExpression | None`` (None: leave the call unchanged; the transform
  reported why).
- ``SHAPES``: a mapped layer call + what is known of its input → the module(s) to emit, the output
  shape and the weight-map variant. Signature: ``fn(mapped, ctx, lctx) -> LayerEmission``.
"""
from __future__ import annotations

from typing import Callable

VALUE_TRANSFORMS: dict[str, Callable] = {}
CALL_TRANSFORMS: dict[str, Callable] = {}
SHAPES: dict[str, Callable] = {}


def _register(table: dict[str, Callable], name: str):
    def deco(fn: Callable) -> Callable:
        if name in table:
            raise ValueError(f"transform {name!r} registered twice")
        table[name] = fn
        return fn

    return deco


def value_transform(name: str):
    return _register(VALUE_TRANSFORMS, name)


def call_transform(name: str):
    return _register(CALL_TRANSFORMS, name)


def shape(name: str):
    return _register(SHAPES, name)


_loaded = False


def load() -> None:
    """Import the modules that register transforms (once; they import the engine, hence lazily)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    from fwport.packs.tf2torch import layer, ops, values  # noqa: F401
