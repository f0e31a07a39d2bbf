"""Planner: ``tf.TensorSpec`` signatures of ``tf.data.Dataset.from_generator`` → the dtypes they carry.

    Dataset.from_generator(gen, output_signature=(tf.TensorSpec(shape=(None, 3), dtype=tf.float32),
                                                  tf.TensorSpec(shape=(), dtype=tf.int64)))
        →  DataPipeline.from_generator(gen, output_types=(torch.float32, torch.int64))

    sig = {"x": tf.TensorSpec([4]), "y": tf.TensorSpec((), tf.int32)}      →  sig = {"x": torch.float32, "y": torch.int32}
    Dataset.from_generator(gen, output_signature=sig)                      →  ...from_generator(gen, output_types=sig)

TensorFlow converts each element the generator yields to its spec's dtype (float32 where the spec gives none) and
checks its shape against the spec's; DataPipeline.from_generator converts to output_types the same way, and the
shapes (a check, nothing computed from them) are dropped, as output_shapes are. The signature is translated where it
is written in the call (a TensorSpec, or a tuple / list / dict of them, nested) or is a name every binding of which
in its scope is such a structure and which is read only as from_generator's output_signature (rngs.py's scope
walker); any other signature (``ds.element_spec``, a spec made elsewhere) is refused by the rule's transform
(``from-generator``, data.py), which accepts only the dtype structures this planner made.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.engine import code
from fwport.core.finding import Severity
from fwport.core.names import scan
from fwport.packs.tf2torch.rngs import _Generators

TENSOR_SPEC = "tensorflow.TensorSpec"
FROM_GENERATOR = "tensorflow.data.Dataset.from_generator"
#: ctx.analyses key: the ids of the nodes this planner's edits return (dtypes, and the names of signatures)
SIGNATURES = "tensor_spec_signatures"
_SPEC = ("shape", "dtype", "name")
_GENERATOR = ("generator", "output_types", "output_shapes", "args", "output_signature", "name")


def run(module: cst.Module, ctx) -> cst.Module:
    finder = _Specs(ctx)
    scan(module, finder)
    finder.plan()
    return module


def approved(node: cst.BaseExpression, ctx) -> bool:
    """Whether ``node`` (a translated output_signature) is a structure whose leaves are the dtypes this planner
    wrote, or a signature name it followed."""
    made = ctx.analyses.get(SIGNATURES, set())
    if isinstance(node, (cst.Tuple, cst.List)):
        return bool(node.elements) and all(
            not isinstance(e, cst.StarredElement) and approved(e.value, ctx) for e in node.elements)
    if isinstance(node, cst.Dict):
        return bool(node.elements) and all(isinstance(e, cst.DictElement) and approved(e.value, ctx)
                                           for e in node.elements)
    return id(node) in made


class _Specs(_Generators):
    def __init__(self, ctx):
        super().__init__(ctx)
        self.direct: list[cst.BaseExpression] = []  # the output_signature values written in the calls
        self.concrete: list[cst.Call] = []  # the x.get_concrete_function(...) calls with arguments

    def _leaves(self, node: cst.BaseExpression) -> list[cst.Call] | None:
        """The TensorSpec calls of a signature structure, or None when it is not one."""
        if isinstance(node, (cst.Tuple, cst.List)):
            parts = [None if isinstance(e, cst.StarredElement) else self._leaves(e.value) for e in node.elements]
        elif isinstance(node, cst.Dict):
            parts = [self._leaves(e.value) if isinstance(e, cst.DictElement) else None for e in node.elements]
        elif isinstance(node, cst.Call) and self._resolve(node.func) == TENSOR_SPEC:
            return [node] if _spec_dtype(node) is not NOT_LITERAL else None
        else:
            return None
        if not parts or any(p is None for p in parts):
            return None
        return [c for p in parts for c in p]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "get_concrete_function" and node.args:
            self.concrete.append(node)
        if self._resolve(func) != FROM_GENERATOR:
            return
        for i, a in enumerate(node.args):
            key = a.keyword.value if a.keyword is not None else (_GENERATOR[i] if i < len(_GENERATOR) else None)
            if key != "output_signature" or a.star:
                continue
            if isinstance(a.value, cst.Name):
                if id(a.value) not in self.seen:
                    self.seen.add(id(a.value))
                    self._use(a.value, "signature", a.value)
            else:
                self.direct.append(a.value)

    def plan(self) -> None:
        sealed = self.ctx.plans.sealed()  # inside an edit another planner made whole (a dropped decorator)
        for call in self.concrete:
            if id(call) not in sealed:
                self._plan_concrete(call)
        for value in self.direct:
            leaves = self._leaves(value)
            if leaves is not None and id(value) not in sealed:
                for c in leaves:
                    self._plan_spec(c)
        for scope in self.scopes.values():
            for name, values in scope.values.items():
                leaves = [self._leaves(v) if v is not None else None for v in values]
                uses = self.uses.get((id(scope), name), [])
                if not values or any(v is None for v in leaves) or not uses or any(
                        kind != "signature" or id(n) in sealed for kind, n in uses) or any(
                        id(v) in sealed for v in values):
                    continue
                for part in leaves:
                    for c in part:
                        self._plan_spec(c)
                made = self.ctx.analyses.setdefault(SIGNATURES, set())
                for _, n in uses:
                    def keep(orig, upd, made=made, name=name):
                        out = cst.Name(name)
                        made.add(id(out))
                        return out
                    self.ctx.plans.add(n, keep, descend=False, by="tensor_specs")

    def _plan_concrete(self, call: cst.Call) -> None:
        """``f.get_concrete_function(tf.TensorSpec(...), ...)`` → ``f`` (or ``functools.partial(f, b=2)`` for the
        keyword arguments that are no specs): the traced function of f for those inputs is f run eagerly."""
        specs, fixed = [], []
        for a in call.args:
            if a.star:
                return
            if isinstance(a.value, cst.Call) and self._resolve(a.value.func) == TENSOR_SPEC:
                if _spec_dtype(a.value) is NOT_LITERAL:
                    return
                specs.append(a.value)
            elif a.keyword is None:
                return  # a positional value fixed in the trace: its place among the specs is not kept by partial
            else:
                fixed.append(a)
        if not specs:
            return
        for spec in specs:
            self.ctx.plans.add(spec, lambda orig, upd: orig, descend=False, by="tensor_specs")
        partial = self.ctx.spell_text("functools.partial") if fixed else ""
        keys = [a.keyword.value for a in fixed]  # type: ignore[union-attr]
        receiver = code(call.func.value)  # type: ignore[union-attr]
        text = f"{partial}({receiver}, {', '.join(f'{k}=...' for k in keys)})" if fixed else receiver
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"{code(call)} → {text}: a concrete function is the function traced for inputs of those specs; "
                        "torch runs the function itself eagerly (on inputs of any shape: the specs' checks are "
                        "dropped)", call)

        def apply(orig, upd, keys=tuple(keys), partial=partial):
            fn = upd.func.value
            if not keys:
                return fn
            kept = [a for a in upd.args if a.keyword is not None and a.keyword.value in keys]
            return cst.Call(cst.parse_expression(partial), [cst.Arg(fn), *[a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                                                                          for a in kept]])
        self.ctx.plans.add(call, apply, by="tensor_specs")

    def _torch_dtype(self, call: cst.Call) -> str | None:
        """The torch dtype (its spelled text) of a TensorSpec call: float32 where it gives none, a TensorFlow dtype or
        its name through the pack's dtype constant rules; None for any other expression."""
        dtype = _spec_dtype(call)
        if dtype is None:
            return self.ctx.spell_text("torch.float32")
        lit = literal_value(dtype, NOT_LITERAL)
        q = f"tensorflow.{lit}" if isinstance(lit, str) else self._resolve(dtype)
        rule = self.ctx.pack.by_name.get(q) if q else None
        if rule is None or rule.kind != "constant":
            return None
        return self.ctx.spell_text(rule.emit["target"])

    def _plan_spec(self, call: cst.Call) -> None:
        """The spec → its torch dtype, planned whole (its shape, which is dropped, is not translated)."""
        made = self.ctx.analyses.setdefault(SIGNATURES, set())
        text = self._torch_dtype(call)
        if text is None:
            return  # the signature is then not all dtypes: the rule's transform refuses it
        self.ctx.report(Severity.INFO, "idiom-replaced",
                        f"a tf.TensorSpec of from_generator's output_signature → its dtype {text} (the elements are "
                        "converted to it, as TensorFlow converts them; the shape, which TensorFlow only checks, is "
                        "dropped)", call)

        def apply(orig, upd, made=made, text=text):
            out = cst.parse_expression(text)
            made.add(id(out))
            return out
        self.ctx.plans.add(call, apply, descend=False, by="tensor_specs")


def _spec_dtype(call: cst.Call):
    """The dtype argument of a TensorSpec call (None: not given, float32), or NOT_LITERAL where the call's
    arguments are not TensorSpec(shape, dtype, name)'s or a string dtype has no torch constant."""
    dtype = None
    for i, a in enumerate(call.args):
        key = a.keyword.value if a.keyword is not None else (_SPEC[i] if i < len(_SPEC) else None)
        if a.star or key not in _SPEC:
            return NOT_LITERAL
        if key == "dtype":
            dtype = a.value
    if dtype is not None:
        lit = literal_value(dtype, NOT_LITERAL)
        if lit is None:
            return None
        if isinstance(lit, str) and lit not in ("float16", "bfloat16", "float32", "float64", "int8", "int16",
                                                "int32", "int64", "uint8", "bool", "complex64", "complex128"):
            return NOT_LITERAL
    return dtype
