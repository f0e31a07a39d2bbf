"""Planner: ``.astype(dtype)`` chained on a call of TensorFlow's NumPy API (``tf.experimental.numpy``, tnp).

    tnp.random.randn(n, 64).astype(tnp.float32)    →  torch.randn(n, 64, dtype=torch.float64).to(torch.float32)
    tnp.ones((2, 3)).astype(np.int32)              →  torch.ones((2, 3), dtype=torch.float64).to(torch.int32)

TensorFlow's ndarray (a tensor with NumPy behaviour) has ``astype``; a torch tensor has not: ``.to(dtype)`` casts the
same way. The dtype is a dtype of tnp, tf or NumPy, or its name as a string (``"float32"``), of those in
``_DTYPES``; any other (a name bound elsewhere, ``float``) is an error finding, the call left as written. The call
before it is translated by its rule (where it has none its own error stands, and ``.astype`` is left with it). A
call so cast needs no default float dtype: tnp's prefer_float32 (which makes the default float32, where NumPy's is
float64) changes nothing after the cast, so the rule's refusal for it is lifted (``CAST``, read by the tnp-float64
transform: a random draw's values differ from TensorFlow's all the same).
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.engine import code
from fwport.core.finding import Severity

TNP = "tensorflow.experimental.numpy."
#: ctx.analyses key: the ids of the tnp calls cast by a chained .astype (their default dtype does not matter)
CAST = "tnp_cast_calls"
#: the dtype names astype takes that have a torch dtype of the same name
_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
           "complex64", "complex128")
_PREFIXES = ("tensorflow.experimental.numpy.", "tensorflow.", "numpy.")
#: other spellings of those dtypes
_ALIASES = {"bool_": "bool", "double": "float64", "half": "float16"}


def run(module: cst.Module, ctx) -> cst.Module:
    finder = _Casts(ctx)
    module.visit(finder)
    return module


class _Casts(cst.CSTVisitor):
    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx
        self.sealed = ctx.plans.sealed()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "astype" and isinstance(func.value, cst.Call)):
            return
        inner = func.value
        if not (self.ctx.imports.resolve(inner.func) or "").startswith(TNP) or id(node) in self.sealed:
            return
        if self.ctx.plans.get(node) is not None:
            return
        dtype = self._dtype(node)
        if dtype is None:
            self.ctx.report(Severity.ERROR, "unsupported-argument",
                            f"{code(node)}: a torch tensor has no astype: .to(dtype) casts it, with a torch dtype; "
                            f"fwport maps the dtypes {', '.join(_DTYPES)} of tnp, tf or NumPy (or their names as "
                            "strings), not this one: write .to(torch.<dtype>)", node)
            return
        self.ctx.analyses.setdefault(CAST, set()).add(id(inner))
        target = self.ctx.spell_text(f"torch.{dtype}")
        written = code(inner.func)

        ctx = self.ctx

        def apply(orig: cst.Call, upd: cst.Call, target=target, written=written) -> cst.BaseExpression:
            receiver = upd.func.value  # type: ignore[union-attr]
            if isinstance(receiver, cst.Call) and code(receiver.func) == written:
                return upd  # the call was not translated (its error says why): .astype left with it
            ctx.report(Severity.INFO, "idiom-replaced", f"{code(orig)}: .astype({code(orig.args[0].value)}) → "
                       f".to({target}) (a torch tensor casts with .to)", orig)
            return upd.with_changes(func=upd.func.with_changes(attr=cst.Name("to")),  # type: ignore[union-attr]
                                    args=[cst.Arg(cst.parse_expression(target))])

        self.ctx.plans.add(node, apply, by="ndarrays")

    def _dtype(self, node: cst.Call) -> str | None:
        """The torch dtype name of astype's one argument (``dtype=`` or positional), or None."""
        if len(node.args) != 1 or node.args[0].star or (node.args[0].keyword is not None
                                                         and node.args[0].keyword.value != "dtype"):
            return None
        value = node.args[0].value
        text = literal_value(value, NOT_LITERAL)
        if isinstance(text, str):
            text = _ALIASES.get(text, text)
            return text if text in _DTYPES else None
        q = self.ctx.imports.resolve(value) or ""
        for prefix in _PREFIXES:
            name = _ALIASES.get(q[len(prefix):], q[len(prefix):]) if q.startswith(prefix) else None
            if name in _DTYPES:
                return name
        return None
