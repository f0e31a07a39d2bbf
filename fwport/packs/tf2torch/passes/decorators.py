"""Planner: ``@tf.function`` (and autograph's ``do_not_convert``) removed, or ``@torch.compile``
with the ``compile`` option; Keras's registering decorators (``@keras_export(...)``,
``@register_keras_serializable(...)``), which return the object unchanged, removed.

Every spelling is resolved through the file's imports with local shadowing respected
(``@tf.function``, ``@tf.function(jit_compile=True)``, ``from tensorflow import function``;
``tf.function(fn)`` as a call becomes ``fn``).

A read-only planner (fwport/core/plan.py): it walks only the top-level statements that mention a
removable decorator, reports, and records an edit per decorator (the rule pass does not look
inside it) and per ``tf.function(fn)`` call (the rule pass translates ``fn`` first, then the call
becomes it). The rule pass applies them in its one walk over the tree.

Removing a decorator removes a line, and findings and ``# fwport:`` comments are placed by line,
so the edit only *marks* a decorator for removal (it becomes ``@__fwport_drop__`` on the same line)
and :func:`finish` deletes the marked lines once every finding is located and every comment is
inserted (``translate_source`` calls it last, before the imports are fixed).
"""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.context import FileContext
from fwport.core.finding import Severity
from fwport.core.names import ScopedResolver, scan
from fwport.core.position import render
from fwport.core.rewrite import rewrite

#: Decorators that only matter to TensorFlow's graph tracing; eager PyTorch needs none of them.
REMOVED = {
    "tensorflow.function": "@tf.function traces a TensorFlow graph; PyTorch runs eagerly "
                           "(use --compile to get @torch.compile instead)",
    "tensorflow.autograph.experimental.do_not_convert": "autograph does not exist in PyTorch",
}
#: Decorators that record the decorated class or function in one of Keras's registries of names and return it
#: unchanged (checked against TensorFlow 2.21 / Keras 3 in tests/test_decorators.py); torch has no such registry.
_EXPORT = ("registers the name as Keras's public API (Keras's own library code) and returns the object unchanged: "
           "torch has no registry of public names")
_SERIALIZABLE = ("registers the object under 'package>name' for Keras's model saving (get_config / from_config) and "
                 "returns it unchanged: torch saves state dicts, with no registry of classes")
REGISTERING = {
    "tensorflow.python.util.tf_export.keras_export": _EXPORT,  # Keras 2, inside TensorFlow
    "keras.api_export.keras_export": _EXPORT,  # Keras 3's keras.src.api_export
    "keras.saving.register_keras_serializable": _SERIALIZABLE,
    "keras.utils.register_keras_serializable": _SERIALIZABLE,
    "keras.saving.object_registration.register_keras_serializable": _SERIALIZABLE,
}
REMOVED.update(REGISTERING)
COMPILABLE = {"tensorflow.function"}
MARK = "__fwport_drop__"


class _Decorators(ScopedResolver, cst.CSTVisitor):
    """Walks a statement (read-only) and plans an edit for each removable decorator and each
    ``tf.function(fn)`` call."""

    def __init__(self, ctx: FileContext):
        super().__init__()
        self.ctx = ctx
        self._init_scopes(ctx.imports)
        self.compile = bool(ctx.options.get("compile"))

    def _decorated(self, node: cst.FunctionDef | cst.ClassDef) -> None:
        # decorators are evaluated in the enclosing scope: resolve them before the function's
        # own names (its parameters may shadow `tf`) are pushed
        for d in node.decorators:
            target = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
            q = self.qualname(target)
            if q in REGISTERING and target is d.decorator:
                continue  # `@register_keras_serializable` bare binds a decorator to the name: left to the rule pass
            if q in REMOVED:
                self._plan_decorator(d, q, render(target))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        self._decorated(node)
        return super().visit_FunctionDef(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool | None:
        self._decorated(node)
        return None

    def _plan_decorator(self, d: cst.Decorator, q: str, spelled: str) -> None:
        args = isinstance(d.decorator, cst.Call) and d.decorator.args
        dropped = " (its arguments have no PyTorch meaning and were dropped)" if args else ""
        ctx = self.ctx
        if self.compile and q in COMPILABLE:
            ctx.report(Severity.INFO, "decorator-removed", f"@{spelled} replaced by @torch.compile{dropped}", d)
            ctx.plans.add(d, lambda orig, upd: upd.with_changes(decorator=ctx.spell("torch.compile")),
                          descend=False, by="decorators")
            return
        ctx.report(Severity.INFO, "decorator-removed", f"@{spelled} removed: {REMOVED[q]}{dropped}", d)
        ctx.options["_drop_decorators"] = True
        ctx.plans.add(d, lambda orig, upd: upd.with_changes(decorator=cst.Name(MARK)), descend=False, by="decorators")

    def leave_Call(self, node: cst.Call) -> None:
        # tf.function(fn, ...) used as a function: the wrapped callable itself (or torch.compile(fn))
        if self.qualname(node.func) not in COMPILABLE:
            return
        positional = [i for i, a in enumerate(node.args) if a.keyword is None and not a.star]
        if len(positional) != 1 or any(a.star for a in node.args):
            return  # tf.function(**kw) / tf.function() factories: the rule pass reports them
        i = positional[0]
        dropped = " (its other arguments were dropped)" if len(node.args) > 1 else ""
        ctx = self.ctx
        for j, a in enumerate(node.args):
            # the dropped arguments (input_signature=[tf.TensorSpec(...)], jit_compile=...) leave with the call:
            # the rule pass does not translate (or report) what they hold
            if j != i and ctx.plans.get(a.value) is None:
                ctx.plans.add(a.value, lambda orig, upd: orig, descend=False, by="decorators")
        if self.compile:
            ctx.report(Severity.INFO, "decorator-removed",
                       f"tf.function(...) replaced by torch.compile(...){dropped}", node)
            ctx.plans.add(node, lambda orig, upd: cst.Call(ctx.spell("torch.compile"), [cst.Arg(upd.args[i].value)]),
                          by="decorators")
            return
        ctx.report(Severity.INFO, "decorator-removed",
                   f"tf.function(...) removed around the function: PyTorch runs eagerly{dropped}", node)
        ctx.plans.add(node, lambda orig, upd: upd.args[i].value, by="decorators")


class _Candidates(cst.CSTVisitor):
    """Cheap guard: does the file mention a removable decorator at all (shadowing ignored)?"""

    def __init__(self, ctx: FileContext):
        self.ctx = ctx
        self.found = False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if self.ctx.imports.resolve(node) in REMOVED:
            self.found = True
        return not self.found

    def visit_Name(self, node: cst.Name) -> bool:
        if self.ctx.imports.resolve(node) in REMOVED:
            self.found = True
        return False


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Plans the edits (see the module docstring) and returns ``module`` itself: nothing is rewritten here."""
    parsed = ctx.analyses.get("parsed")
    if parsed is not None and not _may_mention(parsed[1], ctx):
        # no spelling in the source can resolve to a removable decorator (and the passes before
        # this one write torch, never one)
        return module
    for stmt in module.body:
        guard = _Candidates(ctx)
        scan(stmt, guard)
        if guard.found:
            scan(stmt, _Decorators(ctx))
    return module


_LAST_PARTS = re.compile(r"\b(?:function|do_not_convert|keras_export|register_keras_serializable)\b")


def _may_mention(source: str, ctx: FileContext) -> bool:
    """Whether a name in ``source`` may resolve to one of REMOVED: a dotted name ends with the last
    part of one, or is an alias imported as one."""
    return _LAST_PARTS.search(source) is not None or any(
        ctx.imports.names.canonical(q) in REMOVED for q in ctx.imports.aliases.values())


class _Drop(cst.CSTTransformer):
    """Deletes the marked decorators; their leading lines (comments) go to what follows."""

    def _strip(self, node):
        kept: list[cst.Decorator] = []
        carry: list[cst.EmptyLine] = []
        for d in node.decorators:
            if isinstance(d.decorator, cst.Name) and d.decorator.value == MARK:
                carry += list(d.leading_lines)
                continue
            kept.append(d.with_changes(leading_lines=[*carry, *d.leading_lines]) if carry else d)
            carry = []
        if len(kept) == len(node.decorators):
            return node
        return node.with_changes(decorators=kept,
                                 lines_after_decorators=[*carry, *node.lines_after_decorators])

    def leave_FunctionDef(self, original_node, updated_node):
        return self._strip(updated_node)

    def leave_ClassDef(self, original_node, updated_node):
        return self._strip(updated_node)


def finish(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Remove the decorators :func:`run` marked; call after findings and comments are placed."""
    if not ctx.options.pop("_drop_decorators", False):
        return module
    return rewrite(module, _Drop())
