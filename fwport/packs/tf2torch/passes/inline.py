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
  lost by that. The channels move by ``movedim`` counted from the end (``x.movedim(-1, -3)`` for a 2-D
  layer), so an unbatched image (h, w, c), which Keras's CenterCrop takes too, moves alike;
- such a layer bound once to a module-level name (``crop = layers.CenterCrop(224, 224)``) that the file
  only calls on one tensor (``crop(image)``, at module level or in a function that does not rebind the
  name): the module is built there and each call moves the channels the same way.

A layer with weights (Conv2D, BatchNormalization...) built where it is called is left to the rule
pass, which refuses it with an error: in a function that builds a functional model's graph Keras
builds it once, but its torch module would be built (with fresh weights) at every call.
"""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.context import FileContext
from fwport.core.engine import translate_layer
from fwport.core.finding import Severity
from fwport.core.imports import string_end
from fwport.core.names import ScopedResolver, bound_names, scan
from fwport.packs.tf2torch.dims import SizedContext
from fwport.core.engine import expr

_MERGE = "merge"


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    if not _may_plan(module, ctx):
        return module  # (the walk below would find nothing: most files that match the trigger)
    finder = _Inline(ctx)
    scan(module, finder)
    for outer, rule in finder.found:
        _plan(ctx, outer, rule)
    _named(module, ctx, finder)
    return module


class _Inline(ScopedResolver, cst.CSTVisitor):
    def __init__(self, ctx: FileContext):
        self.ctx = ctx
        self._init_scopes(ctx.imports)
        self.found: list[tuple[cst.Call, object]] = []
        self.names: dict[str, list[cst.Name]] = {}  # every Name read or written, by its value
        self.called: dict[int, cst.Call] = {}  # id(Name) → the call of one positional argument it is the callee of
        self.rebound: set[str] = set()  # names some function binds locally

    def visit_Name(self, node: cst.Name) -> None:
        self.names.setdefault(node.value, []).append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        self.rebound |= bound_names(node)
        return super().visit_FunctionDef(node)

    def visit_Lambda(self, node: cst.Lambda) -> bool | None:
        self.rebound |= bound_names(node)
        return super().visit_Lambda(node)

    def visit_Call(self, node: cst.Call) -> None:
        inner = node.func
        if isinstance(inner, cst.Name) and _one_tensor(node):
            self.called[id(inner)] = node
        if not isinstance(inner, cst.Call):
            return
        q = self.qualname(inner.func)
        rule = self.ctx.pack.by_name.get(q) if q is not None and self.imports.is_source(q) else None
        if rule is None or not _inlined(rule):
            return
        if not _one_tensor(node):
            return
        ctx = self.ctx
        if any(ctx.is_settled(n) or ctx.plans.get(n) is not None for n in (node, inner)):
            return
        self.found.append((node, rule))


def _inlined(rule) -> bool:
    """A layer rule this planner writes where it is built and called: a merge layer, or a weightless one whose
    torch module takes channels-first inputs."""
    return rule.kind == "layer" and (rule.emit.get("shape") == _MERGE or (
        rule.emit.get("layout") == "channels-first" and not rule.weights))


#: per pack: (the pack, a pattern of the last names of the layers _inlined() accepts, a pattern of those names
#: imported under another name)
_GATES: dict[int, tuple] = {}
_PARENS = re.compile(r"[()'\"#]")
_GAP = re.compile(r"[\s\\]*")


def _may_plan(module: cst.Module, ctx: FileContext) -> bool:
    """Whether the walk of :func:`run` can plan anything (False: it certainly plans nothing), from the source's
    text and the module's top-level statements: (a) a layer call ``Name(...)`` of a layer :func:`_inlined`
    accepts (by its last name, or a name an import binds it to) called again, ``Name(...)(...)`` (a string
    or comment in its arguments: maybe); (b) a module-level ``name = Layer(...)`` as :func:`_named` takes
    them. The passes before this one write no Keras layer call the source does not spell."""
    pack = ctx.pack
    gate = _GATES.get(id(pack))
    if gate is None or gate[0] is not pack:
        names = sorted({re.escape(q.rsplit(".", 1)[-1]) for q, rule in pack.by_name.items() if _inlined(rule)},
                       key=len, reverse=True)
        alternatives = "|".join(names) or "(?!)"
        gate = _GATES[id(pack)] = (pack, re.compile(rf"(?:{alternatives})[\s\\]*\("),
                                   re.compile(rf"\b(?:{alternatives})\s+as\s+(\w+)"))
    _, called, renamed = gate
    source = ctx.analyses["parsed"][1]
    aliases = {m.group(1) for m in renamed.finditer(source)}
    for pattern in (called, re.compile(rf"\b(?:{'|'.join(sorted(aliases))})[\s\\]*\(") if aliases else None):
        if pattern is None:
            continue
        for m in pattern.finditer(source):
            if _called_again(source, m.end()):
                return True
    return any(True for _ in _named_candidates(module, ctx))


def _called_again(text: str, i: int) -> bool:
    """Whether the call whose arguments start at ``text[i]`` is called in turn (its closing parenthesis
    followed by an opening one, or a comment); True where it is unsure (a string that does not end)."""
    depth = 1
    while depth:
        m = _PARENS.search(text, i)
        if m is None:
            return True
        c = m.group()
        if c == "#":
            i = text.find("\n", m.end())
            if i < 0:
                return True
            continue
        if c in "'\"":  # (a prefix before the quote changes nothing here: an f-string's braces hold code, but
            # balanced parentheses)
            end = string_end(text, m.start())
            if end is None:
                return True
            i = end
            continue
        depth += 1 if c == "(" else -1
        i = m.end()
    i = _GAP.match(text, i).end()
    return text.startswith(("(", "#"), i)


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
    module = _module(ctx, em)
    moved = _mover(em)
    ctx.plans.add(inner, lambda orig, upd: module, descend=False, by="inline")
    ctx.plans.add(outer, lambda orig, upd: moved(upd), by="inline")


def _one_tensor(call: cst.Call) -> bool:
    return len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star


def _module(ctx: FileContext, em) -> cst.BaseExpression:
    if len(em.modules) == 1:
        return em.modules[0]
    return cst.Call(ctx.spell("torch.nn.Sequential"), [cst.Arg(m) for m in em.modules])


def _mover(em):
    """The call site of a channels-first module on Keras's layout: its input's channels moved before
    the spatial axes, its output's back (unless it has none left: a global pooling without keepdims)."""
    before = -(em.layout_bound - 1)  # the axis the channels take before the spatial ones, from the end
    back = em.out_shape is None or len(em.out_shape) + 1 == em.layout_bound

    def call(upd: cst.Call) -> cst.BaseExpression:
        if not em.layout_bound:  # channels-first in the source too (data_format="channels_first"): torch's own
            return upd
        arg = upd.args[0]
        out: cst.BaseExpression = upd.with_changes(args=[arg.with_changes(
            value=_movedim(arg.value, -1, before), comma=cst.MaybeSentinel.DEFAULT)])
        return _movedim(out, before, -1) if back else out
    return call


def _movedim(node: cst.BaseExpression, a: int, b: int) -> cst.BaseExpression:
    if not isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not node.lpar:
        node = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(cst.Attribute(node, cst.Name("movedim")), [cst.Arg(expr(str(a))), cst.Arg(expr(str(b)))])


def _named_candidates(module: cst.Module, ctx: FileContext):
    """(target, value, rule) of each module-level ``name = Layer(...)`` of a weightless channels-first layer."""
    for stmt in module.body:
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                and isinstance(stmt.body[0], cst.Assign) and len(stmt.body[0].targets) == 1):
            continue
        target, value = stmt.body[0].targets[0].target, stmt.body[0].value
        if not isinstance(target, cst.Name) or not isinstance(value, cst.Call):
            continue
        q = ctx.imports.resolve(value.func)
        rule = ctx.pack.by_name.get(q) if q is not None and ctx.imports.is_source(q) else None
        if rule is None or rule.kind != "layer" or rule.weights or rule.emit.get("layout") != "channels-first" \
                or ctx.is_settled(value) or ctx.plans.get(value) is not None:
            continue
        yield target, value, rule


def _named(module: cst.Module, ctx: FileContext, finder: _Inline) -> None:
    """``name = layers.CenterCrop(...)`` at module level, the name bound nowhere else and only called on
    one tensor: the module built there, each call moving the channels."""
    for target, value, rule in _named_candidates(module, ctx):
        if target.value in finder.rebound:
            continue
        uses = [n for n in finder.names.get(target.value, []) if n is not target]
        calls = [finder.called.get(id(n)) for n in uses]
        if not uses or any(c is None or ctx.is_settled(c) or ctx.plans.get(c) is not None for c in calls) \
                or sum(1 for s in module.body if target.value in _assigned(s)) != 1:
            continue
        mark = len(ctx.pending)
        em = translate_layer(value, rule, ctx, SizedContext(None, "keep", call_site=True), value)
        if em.failed:
            if not any(p.finding.severity is Severity.ERROR for p in ctx.pending[mark:]):
                del ctx.pending[mark:]
            else:
                ctx.settle(value)
            continue
        built, moved = _module(ctx, em), _mover(em)
        ctx.plans.add(value, lambda orig, upd, built=built: built, descend=False, by="inline")
        for c in calls:
            ctx.plans.add(c, lambda orig, upd, moved=moved: moved(upd), by="inline")


def _assigned(stmt: cst.CSTNode) -> set[str]:
    """Names a module-level statement binds by plain assignment."""
    out: set[str] = set()
    if isinstance(stmt, cst.SimpleStatementLine):
        for b in stmt.body:
            if isinstance(b, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                targets = [t.target for t in b.targets] if isinstance(b, cst.Assign) else [b.target]
                out |= {t.value for t in targets if isinstance(t, cst.Name)}
    return out
