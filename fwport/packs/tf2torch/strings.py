"""tf.strings calls on Python strings: ``tf.strings.reduce_join`` (the ``reduce-join`` call transform) and the
planner of its eager chain.

Strings stay Python str in a translation (texthelpers.py): the ``reduce_join`` helper gives a str for a whole
reduction, which is what TensorFlow's ``tf.strings.reduce_join(x).numpy().decode("utf-8")`` gives. The planner
finds that chain (``.numpy()`` then ``.decode()`` with no argument or a literal UTF-8 encoding) and leaves the
helper's call alone in its place; a call outside such a chain becomes the helper call with a warning (a later
``.numpy()`` on its result, a str, has nothing to call). A RaggedTensor method (``.to_tensor()``) called on
``tf.strings.split`` / ``unicode_split`` / ``to_number`` (whose translations give Python lists of lists where
TensorFlow gives ragged rows) is an error finding.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.engine import code
from fwport.core.finding import Severity
from fwport.core.names import scan
from fwport.packs.tf2torch.data import helper
from fwport.packs.tf2torch.registry import call_transform

REDUCE_JOIN = "tensorflow.strings.reduce_join"
#: calls whose translation is a Python list (of lists) or a tensor where TensorFlow may give a RaggedTensor
_RAGGED_SOURCES = ("tensorflow.strings.split", "tensorflow.strings.unicode_split", "tensorflow.strings.to_number")
_RAGGED_METHODS = frozenset({"to_tensor", "to_list", "to_sparse", "row_lengths", "row_splits", "merge_dims",
                             "bounding_shape", "nested_row_lengths", "with_flat_values", "flat_values"})
_CHAINED = "reduce_join_chained"  # ctx.analyses: ids of the reduce_join calls inside a .numpy().decode() chain


def _method(node: cst.BaseExpression, name: str) -> cst.Call | None:
    """``node`` is ``<receiver>.<name>(...)``: the call, else None."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == name:
        return node
    return None


def _utf8_decode(call: cst.Call) -> bool:
    """``.decode()``, ``.decode("utf-8")`` or ``.decode(encoding="utf8")``: the UTF-8 decoding of the bytes."""
    if not call.args:
        return True
    if len(call.args) != 1 or call.args[0].star or (call.args[0].keyword is not None
                                                     and call.args[0].keyword.value != "encoding"):
        return False
    value = literal_value(call.args[0].value, NOT_LITERAL)
    return isinstance(value, str) and value.lower().replace("_", "-") in ("utf-8", "utf8")


class _Chains(cst.CSTVisitor):
    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (isinstance(func, cst.Attribute) and func.attr.value in _RAGGED_METHODS and isinstance(func.value, cst.Call)
                and self.ctx.imports.resolve(func.value.func) in _RAGGED_SOURCES):
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f".{func.attr.value}() on {self.ctx.imports.resolve(func.value.func)}(...): TensorFlow's "
                            "RaggedTensor method; the translated string ops give Python lists of lists for ragged rows "
                            "(and to_number refuses them), which have no such method: pad the rows by hand (e.g. "
                            "[row + [pad] * (width - len(row)) for row in rows])",
                            node)
            return
        decode = _method(node, "decode")
        numpy = decode is not None and _utf8_decode(decode) and _method(decode.func.value, "numpy")
        if not numpy or numpy.args:
            return
        inner = numpy.func.value
        if not (isinstance(inner, cst.Call) and self.ctx.imports.resolve(inner.func) == REDUCE_JOIN) or (
                self.ctx.plans.get(node) is not None or self.ctx.plans.get(numpy) is not None):
            return
        self.ctx.analyses.setdefault(_CHAINED, set()).add(id(inner))
        receiver = lambda orig, upd: upd.func.value  # noqa: E731  (.numpy() / .decode(): their translated receiver)
        self.ctx.plans.add(numpy, receiver, by="strings")
        self.ctx.plans.add(node, receiver, by="strings")


def run(module: cst.Module, ctx) -> cst.Module:
    """(read-only) ``tf.strings.reduce_join(x).numpy().decode("utf-8")`` → the helper's call alone; a RaggedTensor
    method on a string op's rows refused."""
    scan(module, _Chains(ctx))
    return module


@call_transform("reduce-join")
def reduce_join(m, ctx):
    """``tf.strings.reduce_join`` → the ``reduce_join`` helper (texthelpers.py), Python strings in and out; a
    warning where its result is not decoded at once (a str, where TensorFlow gives a string tensor)."""
    out = helper(m, ctx)
    if out is not None and id(m.node) not in ctx.analyses.get(_CHAINED, ()):
        ctx.report(Severity.WARNING, "approximate",
                   "tf.strings.reduce_join → reduce_join: its result is a Python str (a numpy array of str for a "
                   "partial reduction), where TensorFlow gives a string tensor: a later .numpy().decode() on it "
                   "is the str itself (drop it)", m.node, m.rule)
    return out


# --- `x.dtype == tf.string` ------------------------------------------------------------------------------------
STRING_DTYPES = ("tensorflow.string", "tensorflow.dtypes.string")
#: NumPy's dtype kinds of string arrays: object (what a translated string constant is), bytes, str
_STRING_KINDS = '("O", "S", "U")'


class _StringChecks(cst.CSTVisitor):
    """``<expr>.dtype == tf.string`` (``!=``, either side): whether a value is a string tensor. Strings are Python
    strings in a translation, a string tensor a NumPy array of them (an object array for a translated tf.constant,
    ops.py), and a tensor's dtype is a torch.dtype, which has no ``kind``: the test becomes
    ``getattr(<expr>.dtype, "kind", None) in ("O", "S", "U")`` (``not in``), True for such an array and False for a
    torch tensor, as TensorFlow's is for a string and a numeric tensor."""

    def __init__(self, ctx):
        self.ctx = ctx

    def _is_string(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, (cst.Attribute, cst.Name)) and self.ctx.imports.resolve(node) in STRING_DTYPES

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1:
            return
        target = node.comparisons[0]
        if not isinstance(target.operator, (cst.Equal, cst.NotEqual)):
            return
        left, right = node.left, target.comparator
        if self._is_string(left):
            left, right = right, left
        if not (self._is_string(right) and isinstance(left, cst.Attribute) and left.attr.value == "dtype"):
            return
        ctx = self.ctx
        negated = isinstance(target.operator, cst.NotEqual)
        ctx.report("info", "idiom-replaced", f"{code(node)}: strings are Python strings in a translation and a "
                   "string tensor a NumPy array of them (a torch tensor has a torch.dtype, no string dtype): the "
                   "test is whether the dtype is a NumPy string or object kind", node)
        flipped = left is not node.left
        op = "not in" if negated else "in"

        def edit(orig, upd):
            from fwport.core.engine import expr
            dtype = upd.comparisons[0].comparator if flipped else upd.left
            return expr(f"getattr({code(dtype)}, \"kind\", None) {op} {_STRING_KINDS}").with_changes(
                lpar=upd.lpar, rpar=upd.rpar)

        ctx.settle(right)  # (the edit replaces it: not residue)
        ctx.plans.add(node, edit, by="string_checks")


def run_string_checks(module: cst.Module, ctx) -> cst.Module:
    """Planner (read-only): ``x.dtype == tf.string`` → a NumPy dtype-kind test (:class:`_StringChecks`)."""
    scan(module, _StringChecks(ctx))
    return module
