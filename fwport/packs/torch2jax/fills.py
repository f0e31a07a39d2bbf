"""A random fill of a freshly built tensor → the draw that builds it (a planner rewriting PyTorch code).

``torch.empty(n).uniform_(a, b)`` builds a tensor and fills it with uniform numbers in [a, b): it is
``torch.rand(n) * (b - a) + a``, which the random-draw rules translate with the key machinery of keys.py (in
``__init__`` the module's key, elsewhere the call's key or a root key, with the finding that says so), as
for any ``torch.rand``. ``torch.zeros(n).normal_(mean, std)`` → ``torch.randn(n) * std + mean``. The same
distribution as PyTorch's, not the same numbers (its generator is not JAX's: the key-added findings say so).

The receiver must be a tensor no one else holds: a call of ``torch.empty`` / ``zeros`` / ``ones`` (whose
arguments ``torch.rand`` / ``torch.randn`` take as they are: the same sizes, dtype, device), optionally
followed by ``.float()`` where no dtype is given (a float32 tensor already), or ``torch.Tensor(*sizes)`` /
``torch.FloatTensor(*sizes)`` (float32; one argument that is not a whole number may be data, not a size: then
the draw takes the shape of the tensor it builds, ``torch.rand(torch.Tensor(x).shape)``, which is exact
either way). A fill of anything else (a field, a parameter, a name) is left to the passes that rebuild
fields (passes/modules.py) and to the tensor-method pass's error.
"""
from __future__ import annotations

import ast

import libcst as cst

from fwport.core.direction import fast
from fwport.core.engine import code, expr
from fwport.core.rewrite import rewrite

TRIGGER = fast(r"\.(?:uniform_|normal_)\s*\(")
#: constructors whose arguments torch.rand / torch.randn take unchanged (sizes, dtype, device, requires_grad ...)
_SIZED = {"torch.empty", "torch.zeros", "torch.ones"}
#: the keywords of _SIZED that torch.rand / torch.randn take too
_KEYWORDS = {"size", "dtype", "device", "requires_grad", "layout", "pin_memory"}
#: legacy constructors: Tensor(*sizes) of float32 (Tensor(data) when its one argument is data)
_LEGACY = {"torch.Tensor", "torch.FloatTensor"}
#: fill → (the draw, its parameters with their defaults)
_FILLS = {"uniform_": ("rand", (("from", 0.0), ("to", 1.0))), "normal_": ("randn", (("mean", 0.0), ("std", 1.0)))}


def _number(node: cst.BaseExpression):
    try:
        v = ast.literal_eval(code(node))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _operand(text: str, node: cst.BaseExpression | None) -> str:
    if node is None or isinstance(node, (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.Call, cst.Subscript)):
        return text
    return f"({text})"


class _Fills(cst.CSTTransformer):
    def __init__(self, ctx):
        super().__init__()
        self.ctx, self.changed = ctx, False
        self.made: set[cst.CSTNode] = set()  # the sums written, parenthesised

    def _draw(self, receiver: cst.BaseExpression, draw: str) -> str | None:
        """The torch call drawing a tensor shaped as ``receiver`` builds it, or None where it is not a fresh one."""
        tail = ""
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) \
                and receiver.func.attr.value == "float" and not receiver.args:
            tail, receiver = ".float()", receiver.func.value
        if not isinstance(receiver, cst.Call) or not isinstance(receiver.func, cst.Attribute) \
                or any(a.star == "**" for a in receiver.args):
            return None
        q = self.ctx.imports.resolve(receiver.func)
        if self.ctx.imports.resolve(receiver.func.value) != "torch":
            return None
        prefix = code(receiver.func.value)
        args = receiver.args
        if q in _SIZED:
            if any(a.keyword is not None and a.keyword.value not in _KEYWORDS for a in args):
                return None
            if tail and any(a.keyword is not None and a.keyword.value == "dtype" for a in args):
                return None
            inner = ", ".join(code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for a in args)
            return f"{prefix}.{draw}({inner}){tail}"
        if q in _LEGACY and args and all(a.keyword is None and not a.star for a in args):
            if len(args) > 1 or isinstance(_number(args[0].value), int):
                inner = ", ".join(code(a.value) for a in args)
                return f"{prefix}.{draw}({inner}){tail}"
            if not args[0].star:
                return f"{prefix}.{draw}({code(receiver)}.shape){tail}"
        return None

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        f = updated.func
        if not isinstance(f, cst.Attribute) or f.attr.value not in _FILLS or any(a.star for a in updated.args):
            return updated
        draw_name, params = _FILLS[f.attr.value]
        names = [p for p, _ in params]
        bound: dict[str, cst.BaseExpression] = {}
        pos = [a for a in updated.args if a.keyword is None]
        if len(pos) > len(names):
            return updated
        for n, a in zip(names, pos):
            bound[n] = a.value
        for a in updated.args:
            if a.keyword is not None:
                if a.keyword.value not in names or a.keyword.value in bound:
                    return updated  # generator=: a torch.Generator, left to the error
                bound[a.keyword.value] = a.value
        draw = self._draw(f.value, draw_name)
        if draw is None:
            return updated
        lo_name, hi_name = names
        lo, hi = bound.get(lo_name), bound.get(hi_name)
        lo_v, hi_v = (0.0 if lo is None else _number(lo)), (1.0 if hi is None else _number(hi))
        text = draw
        if f.attr.value == "uniform_":
            if hi_v != 1.0 or lo_v != 0.0:  # u * (b - a) + a, as PyTorch's uniform_ computes it
                if lo_v == 0.0:
                    width = _operand(code(hi), hi)
                elif lo_v is not None and hi_v is not None:
                    width = repr(hi_v - lo_v)
                else:
                    width = f"({code(hi) if hi is not None else '1.0'} - {_operand(code(lo), lo)})"
                text = f"{text} * {width}" if width not in ("1", "1.0") else text
                if lo_v != 0.0:
                    text = _plus(text, lo, lo_v)
        else:
            if hi_v != 1.0:
                text = f"{text} * {_operand(code(hi), hi)}"
            if lo_v != 0.0:
                text = _plus(text, lo, lo_v)
        self.changed = True
        out = expr(text)
        if text != draw:  # an operand of what encloses it: kept whole (unwrapped where it is a whole value)
            out = out.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            self.made.add(out)
        return out

    def _whole(self, node):
        if node.value in self.made:
            return node.with_changes(value=node.value.with_changes(lpar=[], rpar=[]))
        return node

    def leave_Assign(self, original, updated):
        return self._whole(updated)

    def leave_Return(self, original, updated):
        return self._whole(updated) if updated.value is not None else updated

    def leave_Arg(self, original, updated):
        return self._whole(updated)


def _plus(text: str, node: cst.BaseExpression, value) -> str:
    """``text + node``; ``text - 0.5`` for a negative number."""
    if isinstance(value, (int, float)) and value < 0:
        return f"{text} - {-value!r}"
    return f"{text} + {_operand(code(node), node)}"


def plan(module: cst.Module, ctx) -> cst.Module:
    """The planner: each random fill of a fresh tensor → the draw that builds it."""
    t = _Fills(ctx)
    out = rewrite(module, t)
    return out if t.changed else module
