"""Structural pass: ``@tf.function`` (and autograph's ``do_not_convert``) removed, or
``@torch.compile`` with the ``compile`` option.

Every spelling is resolved through the file's imports with local shadowing respected
(``@tf.function``, ``@tf.function(jit_compile=True)``, ``from tensorflow import function``;
``tf.function(fn)`` as a call becomes ``fn``).

Passes must keep line structure (findings are located by line on each pass's input, and the
``# fwport:`` comments are inserted by line at the end), but removing a decorator removes a line.
So this pass only *marks* a decorator for removal (it becomes ``@__fwport_drop__`` on the same
line) and :func:`finish` deletes the marked lines once every finding is located and every comment
is inserted (``translate_source`` calls it last, before the imports are fixed).
"""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.rewrite import rewrite
from fwport.core.context import FileContext
from fwport.core.finding import Severity
from fwport.core.names import ScopedResolver, scan

#: Decorators that only matter to TensorFlow's graph tracing; eager PyTorch needs none of them.
REMOVED = {
    "tensorflow.function": "@tf.function traces a TensorFlow graph; PyTorch runs eagerly "
                           "(use --compile to get @torch.compile instead)",
    "tensorflow.autograph.experimental.do_not_convert": "autograph does not exist in PyTorch",
}
COMPILABLE = {"tensorflow.function"}
MARK = "__fwport_drop__"


class _Decorators(ScopedResolver, cst.CSTTransformer):
    def __init__(self, ctx: FileContext):
        super().__init__()
        self.ctx = ctx
        self._init_scopes(ctx.imports)
        self.decisions: dict[int, tuple[str, str]] = {}  # id(decorator) -> (qualified name, spelling)
        self.compile = bool(ctx.options.get("compile"))
        self.settled: set[int] = set()  # settled nodes of the rebuilt statements, by their new ids
        self.rebuilt: set[int] = set()  # ... by their old ids

    def on_leave(self, original_node, updated_node):
        out = super().on_leave(original_node, updated_node)
        # nodes an earlier pass settled keep that status in the rebuilt tree
        if id(original_node) in self.ctx.settled:
            self.rebuilt.add(id(original_node))
            if isinstance(out, cst.CSTNode):
                self.settled.add(id(out))
        return out

    def _decorated(self, node: cst.FunctionDef | cst.ClassDef) -> None:
        # decorators are evaluated in the enclosing scope: resolve them before the function's
        # own names (its parameters may shadow `tf`) are pushed
        for d in node.decorators:
            target = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
            q = self.qualname(target)
            if q in REMOVED:
                self.decisions[id(d)] = (q, cst.Module([]).code_for_node(target))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        self._decorated(node)
        return super().visit_FunctionDef(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool | None:
        self._decorated(node)
        return None

    def leave_Decorator(self, original_node: cst.Decorator, updated_node: cst.Decorator) -> cst.Decorator:
        decision = self.decisions.get(id(original_node))
        if decision is None:
            return updated_node
        q, spelled = decision
        args = isinstance(original_node.decorator, cst.Call) and original_node.decorator.args
        dropped = " (its arguments have no PyTorch meaning and were dropped)" if args else ""
        if self.compile and q in COMPILABLE:
            self.ctx.report(Severity.INFO, "decorator-removed",
                            f"@{spelled} replaced by @torch.compile{dropped}", original_node)
            return updated_node.with_changes(decorator=self.ctx.spell("torch.compile"))
        self.ctx.report(Severity.INFO, "decorator-removed", f"@{spelled} removed: {REMOVED[q]}{dropped}", original_node)
        self.ctx.options["_drop_decorators"] = True
        return updated_node.with_changes(decorator=cst.Name(MARK))

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        # tf.function(fn, ...) used as a function: the wrapped callable itself (or torch.compile(fn))
        if self.qualname(original_node.func) not in COMPILABLE:
            return updated_node
        positional = [a for a in updated_node.args if a.keyword is None and not a.star]
        if len(positional) != 1 or any(a.star for a in updated_node.args):
            return updated_node  # tf.function(**kw) / tf.function() factories: the rule pass reports them
        fn = positional[0].value
        dropped = " (its other arguments were dropped)" if len(updated_node.args) > 1 else ""
        if self.compile:
            self.ctx.report(Severity.INFO, "decorator-removed",
                            f"tf.function(...) replaced by torch.compile(...){dropped}", original_node)
            return cst.Call(self.ctx.spell("torch.compile"), [cst.Arg(fn)])
        self.ctx.report(Severity.INFO, "decorator-removed",
                        f"tf.function(...) removed around the function: PyTorch runs eagerly{dropped}", original_node)
        return fn


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
    parsed = ctx.analyses.get("parsed")
    if parsed is not None and not _may_mention(parsed[1], ctx):
        # no spelling in the source can resolve to a removable decorator (and the passes before
        # this one write torch, never one)
        return module
    # only the top-level statements that mention a removable decorator are rewritten; the others
    # stay the very same nodes (a transformer rebuilds every node it visits)
    relevant = []
    for i, stmt in enumerate(module.body):
        guard = _Candidates(ctx)
        scan(stmt, guard)
        if guard.found:
            relevant.append(i)
    if not relevant:
        return module  # untouched: node identities (ctx.settled) stay valid
    t = _Decorators(ctx)
    body = list(module.body)
    for i in relevant:
        body[i] = rewrite(body[i], t)
    # settled nodes of the statements left alone keep their identity; the old ids of rebuilt ones go
    ctx.settled = (ctx.settled - t.rebuilt) | t.settled
    return module.with_changes(body=body)


_LAST_PARTS = re.compile(r"\b(?:function|do_not_convert)\b")


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
