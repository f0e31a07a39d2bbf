"""Planner (read-only, after the rewriting passes): Keras layers built and called in one expression,
``layers.Add()([a, b])`` / ``layers.MaxPooling2D()(x)``, where no model pass followed them (a plain
function, a Layer subclass's ``call`` body, module-level code).

- a merge layer (Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate) has no torch module:
  the call becomes the operation on its list (``a + b``, ``torch.cat([a, b], dim=axis)``), which is
  what the layer computes whatever the tensors are (the code around keeps Keras's layout, so
  Concatenate's axis is Keras's);
- a layer without weights whose torch module takes channels-first inputs (pooling, up-sampling,
  padding and cropping, CenterCrop, spatial dropout) is called on its input moved to channels-first
  and its output moved back: ``nn.MaxPool2d(2)(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)``. The
  module is built at each call, as Keras builds the layer at each call: without weights nothing is
  lost by that.

A layer with weights (Conv2D, BatchNormalization...) built where it is called is left to the rule
pass, which refuses it with an error: in a function that builds a functional model's graph Keras
builds it once, but its torch module would be built (with fresh weights) at every call.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.context import FileContext
from fwport.core.engine import translate_layer
from fwport.core.finding import Severity
from fwport.core.names import ScopedResolver, scan
from fwport.packs.tf2torch.dims import SizedContext
from fwport.packs.tf2torch.passes.subclass import _permute, _to_first, _to_last

_MERGE = "merge"


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    finder = _Inline(ctx)
    scan(module, finder)
    for outer, rule in finder.found:
        _plan(ctx, outer, rule)
    return module


class _Inline(ScopedResolver, cst.CSTVisitor):
    def __init__(self, ctx: FileContext):
        self.ctx = ctx
        self._init_scopes(ctx.imports)
        self.found: list[tuple[cst.Call, object]] = []

    def visit_Call(self, node: cst.Call) -> None:
        inner = node.func
        if not isinstance(inner, cst.Call):
            return
        q = self.qualname(inner.func)
        rule = self.ctx.pack.by_name.get(q) if q is not None and self.imports.is_source(q) else None
        if rule is None or rule.kind != "layer":
            return
        shape_fn = rule.emit.get("shape")
        if shape_fn != _MERGE and (rule.emit.get("layout") != "channels-first" or rule.weights):
            return
        if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
            return
        ctx = self.ctx
        if any(ctx.is_settled(n) or ctx.plans.get(n) is not None for n in (node, inner)):
            return
        self.found.append((node, rule))


def _plan(ctx: FileContext, outer: cst.Call, rule) -> None:
    inner = outer.func
    mark = len(ctx.pending)
    em = translate_layer(inner, rule, ctx, SizedContext(None, "keep", call_site=True), inner)
    if em.failed or (rule.emit.get("shape") == _MERGE) != (em.functional is not None):
        if not any(p.finding.severity is Severity.ERROR for p in ctx.pending[mark:]):
            del ctx.pending[mark:]  # the rule pass translates it again and says why not
            return
        ctx.settle(inner)  # left as written: its rule said why here, where the call site is known
        return
    if em.functional is not None:
        merge = em.functional
        ctx.plans.add(inner, lambda orig, upd: orig, descend=False, by="inline")
        ctx.plans.add(outer, lambda orig, upd: merge(upd.args[0].value), by="inline")
        return
    if len(em.modules) == 1:
        module = em.modules[0]
    else:
        module = cst.Call(ctx.spell("torch.nn.Sequential"), [cst.Arg(m) for m in em.modules])
    rank = em.layout_bound
    back = em.out_shape is None or len(em.out_shape) + 1 == rank

    def call(orig: cst.Call, upd: cst.Call) -> cst.BaseExpression:
        arg = upd.args[0]
        out: cst.BaseExpression = cst.Call(upd.func, [arg.with_changes(value=_permute(arg.value, _to_first(rank)),
                                                                        comma=cst.MaybeSentinel.DEFAULT)])
        return _permute(out, _to_last(rank)) if back else out

    ctx.plans.add(inner, lambda orig, upd: module, descend=False, by="inline")
    ctx.plans.add(outer, call, by="inline")
