"""The weight-map interpreter: a source variable → a target parameter, by the ops a rule lists.

numpy only. The vocabulary is closed (``fwport.core.rule.WEIGHT_OPS``); each op's parameters are integers
or symbols (``H``, ``W``, ``C``, ``O`` ...) bound from the translation's ``LayerRecord.symbols``:

- ``copy``                      the array as it is
- ``transpose``                 reverse the axes (``.T``); ``transpose(1, 0)`` names them
- ``permute(a0, a1, ...)``      ``np.transpose(x, (a0, a1, ...))``
- ``reshape(d0, d1, ...)``      C-order reshape; one ``-1`` allowed
- ``take(axis, index)``           one slice along ``axis`` (Keras GRU's bias row 0 → torch's bias_ih)
- ``zeros``                     an array of zeros of the source's shape: a torch parameter the source model
  does not have and that must be zero to compute the same (an RNN's second bias); it has no source
  gradient, so the verifier compares no gradient or step for it
- ``reorder-blocks(axis, i0, i1, ...)``  split ``axis`` into as many equal blocks as indices follow and
  concatenate them in that order (gate blocks: Keras GRU z,r,h → torch r,z,n is
  ``reorder-blocks(1, 1, 0, 2)`` on a (in, 3u) kernel)

Every op but ``zeros`` is an index permutation, a reshape or a selection, so the same ops map a *gradient* with respect to
the source variable onto the gradient with respect to the target parameter: the verifier uses
this to compare gradients and post-step values through the very maps that moved the weights.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


class TransferError(ValueError):
    """A weight map cannot be applied (unknown symbol, impossible reshape, bad axis)."""


def _value(param: str, symbols: dict[str, int], what: str) -> int:
    try:
        return int(param)
    except ValueError:
        pass
    if param not in symbols:
        known = ", ".join(f"{k}={v}" for k, v in sorted(symbols.items())) or "none"
        raise TransferError(f"{what}: symbol {param!r} is not bound by the translation (bound: {known})")
    return int(symbols[param])


def apply_op(x: np.ndarray, op: str, params: tuple[str, ...], symbols: dict[str, int], what: str = "") -> np.ndarray:
    vals = [_value(p, symbols, what) for p in params]
    try:
        if op == "copy":
            return x
        if op in ("transpose", "permute"):
            if not vals:
                return x.T
            if sorted(vals) != list(range(x.ndim)):
                raise TransferError(f"{what}: {op}{tuple(vals)} is not a permutation of the {x.ndim} axes of an "
                                    f"array of shape {x.shape}")
            return np.transpose(x, vals)
        if op == "reshape":
            return x.reshape(vals)
        if op == "take":
            if len(vals) != 2:
                raise TransferError(f"{what}: take needs an axis and an index")
            return np.take(x, vals[1], axis=vals[0])
        if op == "zeros":
            return np.zeros_like(x)
        if op == "reorder-blocks":
            if len(vals) < 2:
                raise TransferError(f"{what}: reorder-blocks needs an axis and a block order")
            axis, order = vals[0], vals[1:]
            if sorted(order) != list(range(len(order))):
                raise TransferError(f"{what}: reorder-blocks order {order} is not a permutation")
            if x.shape[axis] % len(order):
                raise TransferError(f"{what}: axis {axis} of shape {x.shape} does not split into {len(order)} blocks")
            blocks = np.split(x, len(order), axis=axis)
            return np.concatenate([blocks[i] for i in order], axis=axis)
    except ValueError as e:
        if isinstance(e, TransferError):
            raise
        raise TransferError(f"{what}: {op}({', '.join(params)}) on an array of shape {x.shape}: {e}") from None
    raise TransferError(f"{what}: unknown weight op {op!r}")


def apply_ops(x: np.ndarray, ops, symbols: dict[str, int], what: str = "") -> np.ndarray:
    """Apply a rule's ops (``fwport.core.rule.WeightOp`` or ``(op, params)`` pairs) in order."""
    for o in ops:
        op, params = (o.op, o.params) if hasattr(o, "op") else (o[0], tuple(o[1]))
        x = apply_op(x, op, tuple(params), symbols, what)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)  # (ascontiguousarray makes a scalar 1-D)


@dataclass(frozen=True)
class Move:
    """One variable to move: record ``index``'s source variable ``var`` → target parameter ``target``."""

    index: int  # index of the LayerRecord
    layer: str  # the Keras attribute path of the layer (record.source)
    var: str  # the variable's attribute on that layer (kernel, gamma, ...; "." = the object itself)
    target: str  # the full torch name: record.target + "." + weight target
    ops: tuple
    symbols: dict
    rule: str
    tag: str = ""  # the instance path of a nested block of the file's own classes (see `nested`)
    item: str = ""  # the index of a layer in a list of unknown length (``cells[*]``, see `items`)

    @property
    def key(self) -> str:
        return f"{self.tag}{self.index}:{self.var}" + (f"#{self.item}" if self.item else "")

    @property
    def source_name(self) -> str:
        return self.layer if self.var in (".", "") else f"{self.layer}.{self.var}"


def plan(records, pack) -> list[Move]:
    """The moves a translation implies: every weight map of every record, by name."""
    moves: list[Move] = []
    for i, rec in enumerate(records):
        rule = pack.rules.get(rec.rule)
        if rule is None:
            raise TransferError(f"layer {rec.source}: the translation used rule {rec.rule!r}, which the pack lacks")
        for w in rule.weights_for(rec.variant):
            tgt = w.target if not rec.target or rec.target == "." else (f"{rec.target}.{w.target}" if w.target not in (".", "") else rec.target)
            moves.append(Move(i, rec.source, w.source, tgt, tuple((o.op, tuple(o.params)) for o in w.ops),
                              dict(rec.symbols), rec.rule))
    return moves


def nested(moves: list[Move], source_prefix: str, target_prefix: str) -> list[Move]:
    """The moves of a class's own records, for one instance of that class held inside the model at
    ``source_prefix`` (a Keras path: ``layer1.layers[0]``) / ``target_prefix`` (``layer1.0``): a block of
    the file's own classes, built at run time (in a loop, a helper, a list) where no record can name it."""
    def join(prefix: str, path: str) -> str:
        return path if not prefix else prefix if path in ("", ".") else f"{prefix}.{path}"
    return [replace(m, layer=join(source_prefix, m.layer), target=join(target_prefix, m.target),
                    tag=f"{source_prefix}/") for m in moves]


def items(moves: list[Move], lengths: dict[str, int]) -> list[Move]:
    """Moves of a record over a list whose length the source does not write down (``self.cells =
    [LSTMCell(n) for n in sizes]``: record ``cells[*]`` → ``cells.*``), one per item of the list the built
    model holds (``lengths``: list path → length, found by the source side)."""
    out: list[Move] = []
    for m in moves:
        if "[*]" not in m.layer:
            out.append(m)
            continue
        n = lengths.get(m.layer.split("[*]", 1)[0], 0)
        out += [replace(m, layer=m.layer.replace("[*]", f"[{i}]", 1), target=m.target.replace(".*", f".{i}", 1),
                        item=str(i)) for i in range(n)]
    return out


def transfer(arrays: dict[str, np.ndarray], moves: list[Move], prefix: str = "") -> dict[str, np.ndarray]:
    """Move ``arrays`` (keyed ``prefix + move.key``) to target names; moves whose key is absent are skipped."""
    out: dict[str, np.ndarray] = {}
    for m in moves:
        k = prefix + m.key
        if k not in arrays:
            continue
        if m.target in out:
            raise TransferError(f"{m.target} is written by two weight maps (the second: {m.source_name}, rule {m.rule})")
        out[m.target] = apply_ops(np.asarray(arrays[k]), m.ops, m.symbols, f"{m.source_name} → {m.target} [{m.rule}]")
    return out
