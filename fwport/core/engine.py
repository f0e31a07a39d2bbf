"""The rule engine: one interpreter for every rule file.

``map_call`` binds a call to its rule's source signature and applies the argument verbs;
``build_call`` / ``translate_layer`` turn the mapped call into output code; ``RuleTransformer``
applies the function and constant rules across a module. Structural passes (``fwport.packs.tf2torch.passes``)
call ``translate_layer`` with what they know about the layer's input.
"""
from __future__ import annotations

import bisect
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import libcst as cst

from fwport.core.hooks import default_leave_transform, default_visit
from fwport.core.bind import NOT_LITERAL, BoundCall, bind_call, literal_value
from fwport.core.context import FileContext, LayerRecord
from fwport.core.finding import CODES, Severity
from fwport.core.names import (_CHILD_FIELDS, _IS_NODE, IS_SKIPPABLE, ScopedResolver, _child_fields, _is_node, children,
                               dotted_text, scan)
from fwport.core.parse import parse_expression, parse_statement
from fwport.core.position import render
from fwport.core.rewrite import fresh_copy
from fwport.core.rule import Rule


@dataclass
class MappedCall:
    """A source call after binding and argument mapping, before it is turned into code."""

    rule: Rule
    call: cst.Call
    bound: BoundCall
    node: cst.CSTNode  # where findings point
    kwargs: dict[str, cst.BaseExpression] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    failed: bool = False

    def fail(self, ctx: FileContext, code: str, message: str) -> None:
        self.failed = True
        ctx.report(Severity.ERROR, code, message, self.node, self.rule)

    def written(self, name: str) -> str:
        """Source text of the argument bound to parameter ``name`` as the user wrote it (the call
        being mapped may already have translated arguments: quote this in error messages)."""
        original = self.node if isinstance(self.node, cst.Call) and self.node is not self.call else None
        bound = bind_call(original, self.rule) if original is not None else self.bound
        value = bound.values.get(name, self.bound.values.get(name))
        return "" if value is None else code(value)

    def literal(self, target_kw: str, default=NOT_LITERAL):
        node = self.kwargs.get(target_kw)
        return default if node is None else literal_value(node, default)


def expr(text: str) -> cst.BaseExpression:
    """``cst.parse_expression(text)``: the same templates are parsed again and again, so each text
    is parsed once per process and every call gets a fresh copy (nodes of its own)."""
    return fresh_copy(_parsed_expression(text))


@functools.lru_cache(maxsize=4096)
def _parsed_expression(text: str) -> cst.BaseExpression:
    return parse_expression(text)


def statement(text: str) -> cst.BaseStatement:
    """``cst.parse_statement(text)``, each text parsed once per process (as :func:`expr`): a fresh
    copy costs a fraction of a parse, which builds and validates every node of the line again."""
    return fresh_copy(_parsed_statement(text))


@functools.lru_cache(maxsize=4096)
def _parsed_statement(text: str) -> cst.BaseStatement:
    return parse_statement(text)


def code(node: cst.CSTNode) -> str:
    return render(node)


def map_call(call: cst.Call, rule: Rule, ctx: FileContext, node: cst.CSTNode | None = None) -> MappedCall:
    """Bind ``call`` to ``rule`` and apply each argument's verb. Never raises on user code."""
    bound = bind_call(call, rule)
    m = MappedCall(rule, call, bound, node or call)
    if bound.error:
        m.fail(ctx, "unsupported-construct", f"cannot bind the call to {rule.names[0]}: {bound.error}")
        return m
    transform = rule.emit.get("transform")
    if bound.star_args or (bound.starred and transform is not None
                           and transform not in ctx.direction.transforms.starred):
        m.fail(ctx, "unsupported-construct",
               f"*args/**kwargs in a call to {rule.names[0]} cannot be bound statically; spell the arguments out")
        return m

    for kw, value in bound.extra.items():
        what = ctx.direction.layer_base_kwargs.get(kw) if rule.kind == "layer" else None
        if rule.emit.get("kwargs") == "keep":  # the target takes them as they are (Checkpoint(model=...))
            m.kwargs[kw] = value
        elif what == "shape":
            m.extras[kw] = value
        elif what == "drop":
            pass
        elif what == "trainable":
            lit = literal_value(value, NOT_LITERAL)
            if lit is False and ctx.direction.frozen_layer is not None:
                m.extras["frozen"] = True  # translate_layer freezes the module it emits
            elif lit is not True:
                m.fail(ctx, "unsupported-argument", f"trainable={code(value)}"
                       + (": not a literal True / False, so whether the layer trains is not known here"
                          if lit is NOT_LITERAL else ": freeze the module with requires_grad_(False) after translation"))
        else:
            m.fail(ctx, "unsupported-argument", f"{rule.names[0]} got the keyword {kw!r}, which the rule does not map")

    # pinned defaults go through the same verbs as written arguments
    values = dict(bound.values)
    for d in rule.defaults.values():
        if d.pin and d.name not in values:
            src = d.keras2 if (ctx.version == 2 and d.keras2) else d.source
            values[d.name] = expr(src)
            target_note = f"; {d.target} in the target" if d.target else ""
            ctx.report(Severity.INFO, "default-differs",
                       f"{d.name} defaults to {src} in {_source_label(rule, ctx)}{target_note}: pinned explicitly",
                       m.node, rule)

    for name, value in values.items():
        spec = rule.args.get(name)
        if spec is None:  # cannot happen for validated rules; keep the call rather than guess
            m.fail(ctx, "unsupported-argument", f"no mapping for argument {name!r}")
            continue
        lit = literal_value(value, NOT_LITERAL)
        if lit is not NOT_LITERAL and spec.unsupported_values and _in(lit, spec.unsupported_values):
            m.fail(ctx, "unsupported-argument", f"{name}={lit!r} is not supported: {spec.value if spec.verb == 'unsupported' else 'no exact target equivalent'}")
            continue
        if spec.verb == "rename":
            m.kwargs[spec.value] = ctx.as_argument(value, spec.value) if ctx.argument_hooks else value
        elif spec.verb == "transform":
            ctx.direction.transforms.values[spec.value](value, spec, m, ctx)
        elif spec.verb == "drop":
            default = next((p.default for p in rule.params if p.name == name), None)
            if default is not None and lit is not NOT_LITERAL and lit == literal_value(expr(default), NOT_LITERAL):
                continue
            ctx.report(Severity.INFO, "dropped-argument", f"{name} dropped: {spec.value}", m.node, rule)
        elif spec.verb == "unsupported":
            if lit is not NOT_LITERAL and spec.supported_values and _in(lit, spec.supported_values):
                if spec.to:
                    m.kwargs[spec.to] = value
                continue
            default = next((p.default for p in rule.params if p.name == name), None)
            if default is not None and lit is not NOT_LITERAL and lit == literal_value(expr(default), NOT_LITERAL):
                continue
            m.fail(ctx, "unsupported-argument", f"{name}={m.written(name) or code(value)}: {spec.value}")
        elif spec.verb == "approximate":
            ctx.report(Severity.WARNING, "approximate", f"{name}: {spec.value}", m.node, rule)
            if spec.to:
                m.kwargs[spec.to] = value
    return m


def _source_label(rule: Rule, ctx: FileContext) -> str:
    return ctx.direction.source_label(rule.names[0], ctx.version)


def _in(value, options) -> bool:
    return any(value == o and type(value) is type(o) or (isinstance(o, str) and value == o) for o in options)


def build_call(m: MappedCall, ctx: FileContext, target: str | None = None,
               positional: list[str] | None = None) -> cst.BaseExpression | None:
    """``target(positional..., keyword=...)`` from a mapped call; method emits call on ``self_arg``.

    ``target`` / ``positional`` override the rule's (e.g. a lazy module whose first positional
    parameter is a different one)."""
    emit = m.rule.emit
    if m.failed:
        return None
    if "transform" in emit and target is None:
        return ctx.direction.transforms.calls[emit["transform"]](m, ctx)
    positional = list(emit.get("positional", []) if positional is None else positional)
    args: list[cst.Arg] = []
    rest = dict(m.kwargs)
    for p in positional:
        if p in rest:
            args.append(cst.Arg(rest.pop(p)))
        else:
            break
    else:  # the source's *args (tf.einsum's operands) follow the named positionals
        args += m.bound.vararg_args()
    if m.bound.varargs and len(args) < len(positional) + len(m.bound.varargs):
        m.fail(ctx, "unsupported-construct", f"{m.rule.names[0]}: positional arguments after a missing one")
        return None
    args += [cst.Arg(v, keyword=cst.Name(k), equal=_EQ) for k, v in rest.items()]
    args = _with_commas(args)
    if "method" in emit and target is None:
        receiver = m.bound.values.get(emit["self_arg"])
        if receiver is None:
            m.fail(ctx, "unsupported-construct", f"{emit['self_arg']} is required")
            return None
        if _is_number(receiver):
            # a Python number has no tensor methods: make it a tensor first (tf ops accept numbers)
            receiver = cst.Call(ctx.spell("torch.tensor"), [cst.Arg(receiver)])
        elif _is_sequence(receiver):
            _unknown_sequence(m, ctx, emit["self_arg"])
            return None
        return cst.Call(cst.Attribute(_atom(receiver), cst.Name(emit["method"])), args)
    number = m.kwargs.get("input")
    if target is None and number is not None and _is_number(number) and args and args[0].value is number:
        # torch.square(1e-3) raises (its input must be a tensor), tf.square(1e-3) converts the number
        args[0] = args[0].with_changes(value=cst.Call(ctx.spell("torch.tensor"), [cst.Arg(number)]))
    elif target is None and number is not None and _is_sequence(number) and args and args[0].value is number:
        _unknown_sequence(m, ctx, "input")
        return None
    return cst.Call(ctx.spell(target or emit["target"]), args)


def _is_number(node: cst.BaseExpression) -> bool:
    """A Python number, or a (nested) list / tuple display of numbers: a source op takes it where a target
    tensor method or function needs a tensor (``tf.expand_dims([1.0, 2.0], -1)``, ``tf.reduce_sum([1, 2])``)."""
    value = literal_value(node, None)
    return _numbers(value)


def _is_sequence(node: cst.BaseExpression) -> bool:
    """A list / tuple display or comprehension (not one of numbers only, see :func:`_is_number`)."""
    return isinstance(node, (cst.List, cst.Tuple, cst.ListComp)) and not _is_number(node)


def _unknown_sequence(m: MappedCall, ctx: FileContext, param: str) -> None:
    """A Python list given where the source op converts it to a tensor and the target needs one: its
    elements may be numbers (a new tensor of them) or tensors (stacked, gradients kept), which the
    source tells apart at run time; the translation cannot, so the call is refused."""
    m.fail(ctx, "unsupported-construct",
           f"{m.rule.names[0].rsplit('.', 1)[-1]}({m.written(param)}, ...): TensorFlow converts the list to a "
           "tensor, the target needs a tensor there and fwport cannot tell what the list holds: write "
           "torch.tensor([...]) around it for Python numbers (TensorFlow makes ints int32: dtype=torch.int32), "
           "torch.stack([...]) for tensors")


def _numbers(value) -> bool:
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_numbers(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_EQ = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))


def _with_commas(args: list[cst.Arg]) -> list[cst.Arg]:
    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]


def _atom(node: cst.BaseExpression) -> cst.BaseExpression:
    """Parenthesise an expression used as a method receiver when it is not an atom (an int
    literal is not one: ``1.transpose()`` does not parse)."""
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Float)) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


# --- layers ----------------------------------------------------------------------------------------

@dataclass
class LayerContext:
    """What a structural pass knows about a layer's input.

    ``in_shape`` is in the *source* layout without the batch axis ((28, 28, 1) for NHWC), or None.
    ``layout`` is "nchw" when the pass converts a channels-last chain to channels-first, "keep"
    when the region stays as the source wrote it.
    """

    in_shape: tuple | None = None
    layout: str = "keep"
    scope: str = ""
    source_path: str = ""
    flatten_of: tuple | None = None  # (H, W, C) when the input is a flattened channels-last map


#: ctx.analyses: id(a layer's construction call bound to a name) → [(scope, source path, target path)]: the places a
#: structural pass put that name as a model's member, where the rule pass records the layer it translates there
NAMED_LAYER_RECORDS = "named-layer-records"


@dataclass
class LayerEmission:
    modules: list[cst.BaseExpression]  # in order; usually one
    out_shape: tuple | None = None  # source layout, without batch
    weight_module: int = 0  # index in ``modules`` of the module that holds the weights
    variant: str | None = None
    symbols: dict[str, int] = field(default_factory=dict)
    layout_bound: int = 0  # rank of the channels-first input the module needs (0: layout-free)
    flatten_of: tuple | None = None  # set by Flatten for the layer after it
    failed: bool = False
    # Layers with no torch module (Add, Concatenate, Multiply): the call's argument expression
    # (usually a list literal) -> the output expression, for the pass that rewrites the call site.
    functional: Callable[[cst.BaseExpression], cst.BaseExpression] | None = None


def translate_layer(call: cst.Call, rule: Rule, ctx: FileContext, lctx: LayerContext,
                    node: cst.CSTNode | None = None) -> LayerEmission:
    mark = len(ctx.pending)
    m = map_call(call, rule, ctx, node)
    if m.failed:
        drop_undone_findings(ctx, mark)
        return LayerEmission([call], failed=True)
    observed = ctx.analyses.get("observed_shapes")
    if observed and ctx.direction.observed_shape is not None:  # shapes seen by running the source (--trace)
        seen = observed.get(id(node), observed.get(id(call)))
        if seen is not None:
            shape = ctx.direction.observed_shape(lctx, seen, call, rule)
            if shape != lctx.in_shape:
                lctx = dataclasses.replace(lctx, in_shape=shape)
    shape_fn = rule.emit.get("shape")
    if shape_fn:
        em = ctx.direction.transforms.shapes[shape_fn](m, ctx, lctx)
    else:
        built = build_call(m, ctx)
        em = LayerEmission([built] if built is not None else [call], lctx.in_shape, failed=built is None)
    if m.extras.get("frozen") and not (m.failed or em.failed):
        em = ctx.direction.frozen_layer(m, em, ctx)  # trainable=False (map_call)
    if m.failed or em.failed:
        drop_undone_findings(ctx, mark)
        return LayerEmission([call], failed=True)
    if rule.weights and lctx.source_path:
        target_idx = em.weight_module
        ctx.layers.append(LayerRecord(lctx.scope, lctx.source_path, str(target_idx), rule.id, em.variant, em.symbols))
    return em


def comment_text(finding) -> str:
    """The ``# fwport:`` comment for a finding: one line (a message may quote multi-line code)."""
    return " ".join(f"# fwport: {finding.code}: {finding.message}".split())


def comment_error(stmt: cst.CSTNode | None, about: str = "") -> tuple[str, str] | None:
    """(code, message) of an error a ``# fwport:`` comment above ``stmt`` records (residue aside),
    preferring one that mentions ``about``: what an earlier translation said of a construct it left
    as written, to be said again when its output is translated (the comment is then not repeated)."""
    found: list[tuple[str, str]] = []
    comments: list[str] = []
    stack = [stmt] if stmt is not None else []
    while stack:  # above the statement, or inside it above an argument or element of its own line
        node = stack.pop()
        if type(node) is cst.Comment:
            comments.append(node.value)
        stack.extend(reversed(children(node)))
    for text in comments:
        if text.startswith("# fwport: "):
            code_, _, message = text[len("# fwport: "):].partition(": ")
            if code_ in CODES and code_ != "residue" and message:
                found.append((code_, message))
    return next((f for f in found if about and about in f[1]), found[0] if found else None)


def drop_undone_findings(ctx: FileContext, mark: int) -> None:
    """Forget the info/warning findings reported since ``mark`` (a pinned default, a dropped
    argument): they describe a translation that a refusal has just undone. Errors stay."""
    ctx.pending[mark:] = [p for p in ctx.pending[mark:] if p.finding.severity is Severity.ERROR]


# --- the rule pass ---------------------------------------------------------------------------------

_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
#: the concrete statement classes: a set lookup per node instead of an ABC isinstance check
_STATEMENT_TYPES = frozenset({cst.SimpleStatementLine, cst.If, cst.For, cst.While, cst.With, cst.Try, cst.TryStar,
                              cst.FunctionDef, cst.ClassDef, cst.Match})

#: expressions that never need parentheses where a call stood
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.Imaginary,
          cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.List, cst.Dict, cst.Set)

#: what the rule pass may leave unvisited when nothing inside has work (never a statement: the
#: comments of earlier passes go above statements); and the nodes such comments may go above
#: (names.IS_SKIPPABLE: expressions, arguments, elements)
_COMMENTED = frozenset({cst.Arg, cst.Element})


class _Requote(cst.CSTTransformer):
    """Strings quoted with ``quote`` → the other quote (where their text holds neither unescaped)."""

    def __init__(self, quote: str):
        super().__init__()
        self.quote, self.other = quote, '"' if quote == "'" else "'"

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> cst.SimpleString:
        value = updated_node.value
        prefix = value[: len(value) - len(value.lstrip("rRbBuU"))]
        body = value[len(prefix):]
        if body[:1] != self.quote or body[:3] == self.quote * 3 or self.other in body[1:-1]:
            return updated_node
        return updated_node.with_changes(value=f"{prefix}{self.other}{body[1:-1]}{self.other}")


def requote_in_fstring(node: cst.FormattedString) -> cst.FormattedString:
    """``node`` with the strings in its ``{...}`` parts quoted unlike the f-string itself (see
    RuleTransformer.leave_FormattedString); a triple-quoted f-string is left as it is."""
    if node.end in ('"""', "'''"):
        return node
    fix = _Requote(node.end)
    parts = [p.with_changes(expression=p.expression.visit(fix)) if isinstance(p, cst.FormattedStringExpression) else p
             for p in node.parts]
    return node.with_changes(parts=parts)


class _MarkApplied(cst.CSTVisitor):
    """Marks applied the planned edits of the nodes it meets (RuleTransformer._drop_plans; a class of the
    module: creating a class per call costs several times its walk)."""

    def __init__(self, planned: set[int], plans) -> None:
        self.planned, self.plans = planned, plans

    def on_visit(self, n: cst.CSTNode) -> bool:
        if id(n) in self.planned:
            edit = self.plans.get(n)
            if edit is not None:
                edit.applied = True
        return True


class RuleTransformer(ScopedResolver, cst.CSTTransformer):
    """Applies function, constant and (context-free) layer rules wherever they appear."""

    def __init__(self, ctx: FileContext, line_comments: dict[int, list] | None = None,
                 spans: dict[int, tuple[int, int]] | None = None, relevant_lines: list[int] | None = None):
        """``line_comments``: error findings of earlier passes by line of this pass's input, to be
        left as ``# fwport:`` comments above the innermost statement spanning that line
        (``spans``: statement line spans of the input, from :func:`fwport.core.position.statement_spans`).
        ``relevant_lines`` (sorted): the only lines that mention an imported name; statements
        spanning none of them have nothing to translate and are not descended into (None: all)."""
        super().__init__()
        self.ctx = ctx
        self._relevant = relevant_lines
        self._init_scopes(ctx.imports)
        self._line_comments = dict(line_comments or {})
        self._spans = spans or {}
        # per open statement: index into ctx.pending when it was entered (its findings follow)
        self._statements: list[int] = []
        # leave_* results that were not the node as rebuilt from its children (a change), and
        # their count when each open statement was entered
        self._changes = 0
        self._change_marks: list[int] = []
        self._claimed: set[int] = set()
        # ids of the expressions, arguments and elements of the open top-level statement with
        # something to do inside (an imported name, or a line an earlier pass's comment is for):
        # the others are not descended into (the transformer would rebuild them unchanged)
        self._hot: set[int] | None = None
        # name nodes that are not references (attribute names, keywords, parameters, definitions),
        # and the funcs of calls (a call with no rule is reported as such, not as residue)
        self._not_refs: set[int] = set()
        self._funcs: set[int] = set()
        # per open argument/element: the pending index when it was entered; and the notes of
        # those left (findings to comment on), keyed by the id of the element as returned
        self._element_marks: list[int] = []
        self._first_statement: int | None = None
        self._header_comments: set[str] = set()
        self._element_notes: dict[int, tuple[list, list[int]]] = {}
        # per open call: (findings so far, imports needed so far), to undo its subtree on refusal
        self._marks: list[tuple[int, frozenset[str]]] = []
        # ids of translations parenthesised because they are operations (`a + b` for tf.add_n):
        # where the parent cannot mis-bind them (a statement's value, an argument) the parentheses go
        self._wrapped: dict[int, cst.CSTNode] = {}  # held: an id is only unique while its node lives
        # open statements (input tree), and the layer calls a structural pass left as members of a
        # torch container (nn.Sequential(...) / nn.ModuleList(...) / model.append(...) on one)
        self._statement_nodes: list[cst.CSTNode] = []
        self._members: set[int] = set()
        self._containers: set[str] = set()  # dotted names bound to a torch container
        # the edits read-only planners recorded (fwport/core/plan.py): applied here, on leaving
        self._plans = ctx.plans
        self._planned = ctx.plans.ids()
        # source functions and classes used as values, not called (``return F.relu``,
        # ``isinstance(m, nn.Linear)``): their translation by id of the reference (_as_value)
        self._values: dict[int, cst.BaseExpression] = {}
        self._source_args: set[int] = set()  # arguments of source calls: their rule decides what they become
        self._class_checks: set[int] = set()  # the classes isinstance / issubclass test against

    def visit_Module(self, node: cst.Module) -> bool:
        self._first_statement = id(node.body[0]) if node.body else None
        self._header_comments = {l.comment.value for l in node.header if l.comment is not None}
        return True

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if isinstance(node.names, cst.ImportStar) and not node.relative and node.module is not None \
                and self.ctx.imports.is_source(dotted_text(node.module) or ""):
            # the names it brings cannot be resolved, so nothing they spell would be translated
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"from {dotted_text(node.module)} import *: the names it brings cannot be resolved "
                            "(and would be left untranslated); import the names you use explicitly", node)
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        self._marks.append((len(self.ctx.pending), frozenset(self.ctx.needed_imports)))
        self._funcs.add(id(node.func))
        if isinstance(node.func, (cst.Name, cst.Attribute)):
            q = self.qualname(node.func)
            if q is not None and self.imports.is_source(q):
                self._source_args.update(id(a.value) for a in node.args)
            elif isinstance(node.func, cst.Name) and node.func.value in ("isinstance", "issubclass") \
                    and len(node.args) == 2:
                kinds = node.args[1].value
                self._class_checks.update(id(e.value) for e in kinds.elements) if isinstance(kinds, cst.Tuple) \
                    else self._class_checks.add(id(kinds))
        if self._is_container(node):
            for a in node.args:
                values = [e.value for e in a.value.elements] if isinstance(a.value, (cst.List, cst.Tuple)) else [a.value]
                self._members.update(id(v) for v in values)
        if id(node) in self._members and isinstance(node.func, (cst.Name, cst.Attribute)):
            q = self.qualname(node.func)
            rule = self.ctx.pack.by_name.get(q) if q is not None and self.imports.is_source(q) else None
            if rule is not None and rule.kind == "layer" and not self._holds_plan(node):
                # refused whole by _refuse_member, as the structural pass that left it there refused it: what
                # its arguments hold is not reported apart (it was not the first time either). Not where a
                # planner planned an edit inside it: every planned edit is applied where the rule pass walks
                return False
        return not self.ctx.is_settled(node)

    def _holds_plan(self, node: cst.CSTNode) -> bool:
        """Whether a planner planned an edit of ``node`` or of a node inside it."""
        if not self.ctx.plans:
            return False
        planned, todo = self.ctx.plans.ids(), [node]
        while todo:
            n = todo.pop()
            if id(n) in planned and self.ctx.plans.get(n) is not None:
                return True
            todo.extend(children(n))
        return False

    _CONTAINERS = ("torch.nn.Sequential", "torch.nn.ModuleList")

    def _is_container(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend"):
            return dotted_text(func.value) in self._containers
        return self.qualname(func) in self._CONTAINERS

    def visit_Assign(self, node: cst.Assign) -> bool:
        if isinstance(node.value, cst.Call) and self.qualname(node.value.func) in self._CONTAINERS:
            self._containers.update(t for t in (dotted_text(a.target) for a in node.targets) if t)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
                and isinstance(node.value, (cst.Name, cst.Attribute)):
            alias = self.imports.aliases.get(node.targets[0].target.value)
            if alias is not None and self.imports.is_source(alias) and self.qualname(node.value) == alias:
                # `mnist = tf.keras.datasets.mnist`: an import in disguise, not a reference; its uses
                # are translated (or reported) where they stand, and a direction's finishing step
                # may remove the statement once nothing uses the name
                self._not_refs.add(id(node.targets[0].target))
                self._funcs.add(id(node.value))
        return True

    def _refuse_member(self, node: cst.Call, q: str, rule) -> None:
        """A Keras layer inside a torch container: a structural pass left it there with an error (its
        input is not what a context-free translation assumes). Refused again with that same error, read
        from the statement's ``# fwport:`` comment, so that translating a translation changes nothing."""
        short = q.rsplit(".", 1)[-1]
        stmt = self._statement_nodes[-1] if self._statement_nodes else None
        chosen = comment_error(stmt, short)
        if chosen is None:
            chosen = ("unsupported-construct", f"{short} inside a torch container was left as written: the "
                      "structural pass that builds the container decides how its layers translate; translate "
                      "the model from its Keras source, or this layer by hand")
        self.ctx.report(Severity.ERROR, chosen[0], chosen[1], node, rule)

    # --- statements: where `# fwport:` comments go ----------------------------------------------
    def _mark_hot(self, node: cst.CSTNode) -> bool:
        """Adds to ``_hot`` the nodes below ``node`` (itself included) with work inside."""
        t = node.__class__
        hot = (t is cst.Name and node.value in self.imports.aliases) or id(node) in self._planned
        for name in _CHILD_FIELDS.get(t) or _child_fields(t):
            value = getattr(node, name)
            c = value.__class__
            if c is tuple or c is list:
                for child in value:
                    if self._child_hot(child):
                        hot = True
            elif (_IS_NODE.get(c) or (c not in _IS_NODE and _is_node(value))) and self._child_hot(value):
                hot = True
        if not hot and self._line_comments and type(node) in _COMMENTED:
            span = self._spans.get(id(node))
            hot = span is None or any(span[0] <= l <= span[1] for l in self._line_comments)
        if hot:
            self._hot.add(id(node))  # type: ignore[union-attr]
        return hot

    def _child_hot(self, node: cst.CSTNode) -> bool:
        """``_mark_hot(node)``, answered here for a node with no child fields (a name, a number, an operator:
        about half the nodes), which is hot only as a source alias's name or a planned node."""
        t = node.__class__
        fields = _CHILD_FIELDS.get(t)
        if fields is None:
            fields = _child_fields(t)
        if fields or t in _COMMENTED:
            return self._mark_hot(node)
        if (t is cst.Name and node.value in self.imports.aliases) or id(node) in self._planned:
            self._hot.add(id(node))  # type: ignore[union-attr]
            return True
        return False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._planned and id(node) in self._planned:
            edit = self._plans.get(node)
            if edit is not None and not edit.descend:  # the planner's alone: its hooks, not its children
                if type(node) in _STATEMENT_TYPES:  # on_leave pops what a statement pushes
                    self._statements.append(len(self.ctx.pending))
                    self._statement_nodes.append(node)
                    self._change_marks.append(self._changes)
                default_visit(self, node)
                return False
        if self._hot is not None and id(node) not in self._hot and type(node) not in _STATEMENT_TYPES \
                and IS_SKIPPABLE[node.__class__]:
            default_visit(self, node)  # its own hooks run (and their leave_ counterparts): not its children
            return False
        if type(node) in _STATEMENT_TYPES:
            top = not self._statement_nodes
            self._statements.append(len(self.ctx.pending))
            self._statement_nodes.append(node)
            self._change_marks.append(self._changes)
            descend = default_visit(self, node)  # always: scopes are pushed here and popped on leave
            # (a span starts at the `def`/`class` line: decorators above it are always looked at)
            # (and `from <source> import *`, which mentions no imported name, is always looked at)
            if descend and self._relevant is not None and not getattr(node, "decorators", None) \
                    and not (type(node) is cst.SimpleStatementLine and any(type(s) is cst.ImportFrom for s in node.body)):
                span = self._spans.get(id(node))
                if span is not None:
                    i = bisect.bisect_left(self._relevant, span[0])
                    descend = i < len(self._relevant) and self._relevant[i] <= span[1]
                    # an earlier pass's comment for a line inside goes above the innermost statement
                    descend = descend or any(span[0] <= l <= span[1] for l in self._line_comments)
            if descend and top:
                self._hot = set()
                self._mark_hot(node)
            return descend
        return default_visit(self, node)

    def on_leave(self, original_node, updated_node):
        planned = False
        if self._planned and id(original_node) in self._planned and type(original_node) is not cst.Call:
            edit = self._plans.get(original_node)
            if edit is not None:  # (a call's edit takes the place of its rule: _translate_call)
                edit.applied = True
                new = edit.apply(original_node, updated_node)
                planned = new is not updated_node
                updated_node = new
        out = default_leave_transform(self, original_node, updated_node)
        if planned:
            self._changes += 1
        if type(original_node) in _STATEMENT_TYPES:
            self._element_notes.clear()  # elements left unplaced: their statement takes the comments
            mark = self._statements.pop()
            self._statement_nodes.pop()
            if isinstance(out, _STATEMENTS):
                out = self._attach_comments(original_node, out, mark)
            changes = self._change_marks.pop()
            if out is updated_node and self._changes == changes:
                # nothing inside changed: the rebuilt statement equals the input, which keeps its
                # identity (and so its rendering, positions and spans: fwport.core.position.Layout)
                return original_node
        if out is not updated_node:
            self._changes += 1
        return out

    def _attach_comments(self, original, updated, mark: int):
        texts = []
        for p in self.ctx.pending[mark:]:
            if p.comment and id(p) not in self._claimed:
                self._claimed.add(id(p))
                texts.append(p.finding)
        span = self._spans.get(id(original)) if self._line_comments else None
        if span is not None:
            for line in [l for l in self._line_comments if span[0] <= l <= span[1]]:
                texts.extend(self._line_comments.pop(line))
        if any(f.code != "residue" for f in texts):
            # the statement's own error says what was left: its leftover references are no news
            texts = [f for f in texts if f.code != "residue"]
        if not texts:
            return updated
        have = {l.comment.value for l in updated.leading_lines if l.comment is not None}
        if id(original) == self._first_statement:
            have |= self._header_comments  # comments above a file's first statement parse as its header
        new = []
        for f in texts:
            text = comment_text(f)
            if text not in have:  # already there when translating a translation: the fixpoint
                have.add(text)
                new.append(cst.EmptyLine(indent=True, whitespace=cst.SimpleWhitespace(""), comment=cst.Comment(text)))
        if not new:
            return updated
        return updated.with_changes(leading_lines=[*updated.leading_lines, *new])

    # --- the residue scan: source-framework references left in the output -----------------------
    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self._not_refs.add(id(node.attr))
        head = node.value
        while isinstance(head, cst.Attribute):
            head = head.value
        if not isinstance(head, cst.Name) or head.value not in self.imports.aliases:
            return True
        if self.ctx.is_settled(node):  # a pass reported what is left here (a base class it cannot translate)
            return False
        q = self.qualname(node)
        if q is None or not self.imports.is_source(q):
            return True
        if id(node) not in self._funcs:
            rule = self.ctx.pack.by_name.get(q)
            if (rule is None or rule.kind != "constant") and self._constant_prefix(node) is None \
                    and not self._as_value(node, q, rule):
                self._residue(node, q)
        return False  # one finding for the whole chain; the rest of it is not a reference

    def visit_Name(self, node: cst.Name) -> bool:
        key = id(node)
        if node.value in self.imports.aliases and key not in self._not_refs and key not in self._funcs \
                and not self.ctx.is_settled(node):
            q = self.qualname(node)
            if q is not None and self.imports.is_source(q):
                rule = self.ctx.pack.by_name.get(q)
                if rule is not None and rule.kind == "constant":  # `from torch import Tensor` ... `x: Tensor`
                    self._values[key] = self.ctx.spell(rule.emit["target"])
                elif not self._as_value(node, q, rule):
                    self._residue(node, q)
        return False

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        return self._values.pop(id(original_node), updated_node)

    _VALUE = "__fwport_value__"

    def _as_value(self, node: cst.CSTNode, q: str, rule: Rule | None) -> bool:
        """A source function or class used as a value, not called: its translation, kept for the leave_
        hook, where one exists that is exact for every call of the value.

        A function (``return F.gelu``): the rule's translation of a call with the first argument alone,
        when that is the target called with it first and fixed keywords after (``jax.nn.relu``;
        ``functools.partial(jax.nn.gelu, approximate=False)``). A class tested by isinstance / issubclass
        (``isinstance(m, nn.Linear)``): its rule's target, when the rule builds it directly (no transform).
        An argument of a source call is left to that call's rule."""
        if rule is None or rule.kind != "function" or id(node) in self._source_args:
            return False
        emit = rule.emit
        if q.rsplit(".", 1)[-1][:1].isupper():  # a class
            if id(node) not in self._class_checks or "transform" in emit or "method" in emit or "target" not in emit:
                return False
            self._values[id(node)] = self.ctx.spell(emit["target"])
            return True
        if id(node) in self._class_checks:
            return False
        mark, imports = len(self.ctx.pending), set(self.ctx.needed_imports)
        # as many arguments as the function requires (``ctc_batch_cost(y_true, y_pred, input_length,
        # label_length)``), each its own name: the value is the target only where they come out as they went in
        required = [p for p in rule.params if p.kind == "positional" and p.default is None]
        names = [self._VALUE] + [f"{self._VALUE}{i}" for i in range(1, len(required))]
        probe = cst.Call(node, _with_commas([cst.Arg(cst.Name(n)) for n in names]))
        try:
            m = map_call(probe, rule, self.ctx)
            out = build_call(m, self.ctx)
        except Exception:  # a transform that expects more of its call than a bare first argument
            out = None
        new_findings = len(self.ctx.pending) > mark
        del self.ctx.pending[mark:]
        given = out.args[:len(names)] if isinstance(out, cst.Call) else ()
        rest = out.args[len(names):] if isinstance(out, cst.Call) else ()
        plain = isinstance(out, cst.Call) and not new_findings and isinstance(out.func, (cst.Name, cst.Attribute)) \
            and dotted_text(out.func) is not None and len(given) == len(names) \
            and all(a.keyword is None and not a.star and isinstance(a.value, cst.Name) and a.value.value == n
                    for a, n in zip(given, names)) and all(a.keyword is not None and not a.star for a in rest) \
            and not any(self._VALUE in code(a.value) for a in rest)
        if not plain:
            self.ctx.needed_imports.clear()
            self.ctx.needed_imports.update(imports)
            return False
        if not rest:
            self._values[id(node)] = out.func
        else:
            partial = self.ctx.spell("functools.partial")
            self._values[id(node)] = cst.Call(partial, _with_commas([cst.Arg(out.func), *rest]))
        return True

    def _forget_consumed_residue(self, mark: int, out: cst.CSTNode) -> None:
        """A reference inside a call that was translated may have been consumed by the translation
        (``Activation(keras.ops.gelu)`` → ``nn.GELU(...)``): it is residue only if still there."""
        pending = self.ctx.pending
        if not any(p.finding.code == "residue" for p in pending[mark:]):
            return
        present: set[int] = set()
        stack = [out]
        while stack:
            n = stack.pop()
            present.add(id(n))
            stack.extend(children(n))
        pending[mark:] = [p for p in pending[mark:] if p.finding.code != "residue" or id(p.node) in present]

    def _guidance(self, q: str) -> str | None:
        return self.ctx.direction.guidance_for(q)

    def _residue(self, node: cst.CSTNode, q: str) -> None:
        shown = " ".join(code(node).split())
        advice = self._guidance(q)
        self.ctx.report(Severity.ERROR, "residue", f"still references the source framework: {shown} ({q})"
                        + (f"; no translation: {advice}" if advice else ""), node)

    def visit_Arg(self, node: cst.Arg) -> bool:
        if node.keyword is not None:
            self._not_refs.add(id(node.keyword))
        self._element_marks.append(len(self.ctx.pending))
        return True

    def visit_Element(self, node: cst.Element) -> bool:
        self._element_marks.append(len(self.ctx.pending))
        return True

    def visit_Param(self, node: cst.Param) -> bool:
        self._not_refs.add(id(node.name))
        return True

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self._not_refs.add(id(node.name))
        return True

    def visit_AsName(self, node: cst.AsName) -> bool:
        self._not_refs.add(id(node.name))
        return True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        self._not_refs.add(id(node.name))
        return super().visit_FunctionDef(node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        mark, imports = self._marks.pop()
        out = self._translate_call(original_node, updated_node)
        if out is updated_node and self._element_notes and updated_node.args:
            # a call kept as it is (nn.Sequential(...), a call with no rule): comments go above
            # the argument they are about when it has a line of its own
            args, ws = self._comment_elements(updated_node.args, updated_node.whitespace_before_args, None)
            out = updated_node = updated_node.with_changes(args=args, whitespace_before_args=ws)
        if out is not None and out is not updated_node:
            self._forget_consumed_residue(mark, out)
        if out is not None:
            if out is not updated_node and not (isinstance(out, _ATOMS) or out.lpar):
                # an operation in place of a call binds tighter than any operator around it
                out = out.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                self._wrapped[id(out)] = out
            return out
        # Refused by its rule: the call comes back exactly as written, arguments included (a
        # tf call around half-translated arguments would mix frameworks and the error would quote
        # code the user never wrote). What was done inside it is undone, findings and imports too.
        drop_undone_findings(self.ctx, mark)
        # its error covers the whole call: references inside it are not reported again as residue
        self.ctx.pending[mark:] = [p for p in self.ctx.pending[mark:] if p.finding.code != "residue"]
        self.ctx.needed_imports.intersection_update(imports)
        return original_node

    def _drop_plans(self, node: cst.CSTNode) -> None:
        """A pass left ``node`` as written and reported why (settled): the edits planned on it and inside
        it are not made (it stays exactly as written), and so not missing."""
        scan(node, _MarkApplied(self._planned, self._plans))

    def _translate_call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression | None:
        """The call's translation; ``updated_node`` when it is not this pass's to translate; None
        when its rule refused it."""
        if self.ctx.is_settled(original_node):
            if self._planned:
                self._drop_plans(original_node)
            return updated_node
        if self._planned and id(original_node) in self._planned:
            edit = self._plans.get(original_node)
            if edit is not None:
                edit.applied = True
                return edit.apply(original_node, updated_node)
        q = self.qualname(updated_node.func)
        if q is None or not self.imports.is_source(q):
            return updated_node
        rule = self.ctx.pack.by_name.get(q)
        if rule is None and isinstance(original_node.func, cst.Attribute) \
                and self._constant_prefix(original_node.func) is not None:
            return updated_node  # a method of a translated constant (tf.__version__.startswith)
        if rule is None or rule.kind == "constant":
            advice = self._guidance(q)
            self.ctx.report(Severity.ERROR, "no-rule", f"{q} has no {self.ctx.direction.name} translation: {advice}"
                            if advice else f"{q} has no {self.ctx.direction.name} rule yet; translate it by hand",
                            original_node, api=q)
            return updated_node
        if rule.kind == "layer" and id(original_node) in self._members:
            self._refuse_member(original_node, q, rule)
            return None
        if rule.kind == "layer":
            em = translate_layer(updated_node, rule, self.ctx, LayerContext(), original_node)
            if em.failed:
                return None
            for scope, source, target in (self.ctx.analyses.get(NAMED_LAYER_RECORDS) or {}).get(id(original_node), ()):
                if rule.weights:  # a layer held in a name and used as a model's member (a structural pass said where)
                    at = target if len(em.modules) == 1 else f"{target}.{em.weight_module}"
                    self.ctx.layers.append(LayerRecord(scope, source, at, rule.id, em.variant, dict(em.symbols)))
            if len(em.modules) == 1:
                return em.modules[0]
            return cst.Call(self.ctx.spell("torch.nn.Sequential"), _with_commas([cst.Arg(e) for e in em.modules]))
        m = map_call(updated_node, rule, self.ctx, original_node)
        return build_call(m, self.ctx)

    def _unwrap(self, updated_node):
        value = updated_node.value
        if value is None or self._wrapped.get(id(value)) is not value:
            return updated_node
        return updated_node.with_changes(value=value.with_changes(lpar=[], rpar=[]))

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return self._note_element(original_node, self._unwrap(updated_node))

    def leave_Element(self, original_node: cst.Element, updated_node: cst.Element) -> cst.Element:
        return self._note_element(original_node, self._unwrap(updated_node))

    # --- comments next to the element they are about, inside a multi-line call or list ----------
    def _note_element(self, original, updated):
        """Remember which comment-worthy findings lie in this argument/element: its container
        puts them on the line above it when the element starts a line of its own."""
        mark = self._element_marks.pop()
        pending = [p for p in self.ctx.pending[mark:] if p.comment and id(p) not in self._claimed]
        lines = []
        span = self._spans.get(id(original)) if self._line_comments else None
        if span is not None:
            lines = [l for l in self._line_comments if span[0] <= l <= span[1]]
        if pending or lines:
            self._element_notes[id(updated)] = (pending, lines)
        return updated

    def _comment_lines(self, ws, notes) -> cst.BaseParenthesizableWhitespace | None:
        """``ws`` (the whitespace before an element) with the notes' comments added, or None
        when the element does not start its own line (then its statement gets them)."""
        if not isinstance(ws, cst.ParenthesizedWhitespace):
            return None
        pending, lines = notes
        findings = [p.finding for p in pending if id(p) not in self._claimed]
        findings += [f for l in lines if l in self._line_comments for f in self._line_comments[l]]
        if any(f.code != "residue" for f in findings):
            findings = [f for f in findings if f.code != "residue"]
        if not findings:
            return None
        for p in pending:
            self._claimed.add(id(p))
        for l in lines:
            self._line_comments.pop(l, None)
        have = {e.comment.value for e in ws.empty_lines if e.comment is not None}
        new = []
        for f in findings:
            text = comment_text(f)
            if text not in have:
                have.add(text)
                new.append(cst.EmptyLine(indent=ws.indent, whitespace=ws.last_line, comment=cst.Comment(text)))
        return ws.with_changes(empty_lines=[*ws.empty_lines, *new]) if new else ws

    def _comment_elements(self, items: list, first_ws, set_first):
        """Comments above the items of a container that have notes; returns (items, first_ws)."""
        if not self._element_notes:
            return items, first_ws
        items = list(items)
        for i, item in enumerate(items):
            notes = self._element_notes.pop(id(item), None)
            if notes is None:
                continue
            if i == 0:
                ws = self._comment_lines(first_ws, notes)
                if ws is not None:
                    first_ws = ws
            else:
                comma = items[i - 1].comma
                if isinstance(comma, cst.Comma):
                    ws = self._comment_lines(comma.whitespace_after, notes)
                    if ws is not None:
                        items[i - 1] = items[i - 1].with_changes(comma=comma.with_changes(whitespace_after=ws))
        return items, first_ws

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.List:
        return self._comment_container(updated_node, "elements")

    def leave_Tuple(self, original_node: cst.Tuple, updated_node: cst.Tuple) -> cst.Tuple:
        return self._comment_container(updated_node, "elements")

    def leave_Set(self, original_node: cst.Set, updated_node: cst.Set) -> cst.Set:
        return self._comment_container(updated_node, "elements")

    def _comment_container(self, node, attr: str):
        if not self._element_notes or not getattr(node, attr):
            return node
        bracket = node.lbracket if hasattr(node, "lbracket") else node.lbrace if hasattr(node, "lbrace") else None
        if bracket is None:  # a tuple without brackets of its own: nowhere to put a line
            return node
        items, ws = self._comment_elements(getattr(node, attr), bracket.whitespace_after, None)
        changes = {attr: items}
        if ws is not bracket.whitespace_after:
            changes["lbracket" if hasattr(node, "lbracket") else "lbrace"] = bracket.with_changes(whitespace_after=ws)
        return node.with_changes(**changes)

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        return self._unwrap(updated_node)

    def leave_AnnAssign(self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign) -> cst.AnnAssign:
        return self._unwrap(updated_node)

    def leave_Return(self, original_node: cst.Return, updated_node: cst.Return) -> cst.Return:
        return self._unwrap(updated_node)

    def leave_Expr(self, original_node: cst.Expr, updated_node: cst.Expr) -> cst.Expr:
        return self._unwrap(updated_node)

    def leave_FormattedString(self, original_node: cst.FormattedString,
                              updated_node: cst.FormattedString) -> cst.FormattedString:
        # a translation inside an f-string's {...} may quote a string as the f-string does, which Python
        # before 3.12 cannot parse (f'{F.gelu(x, approximate='tanh')}'): those strings take the other quote
        return updated_node if updated_node is original_node else requote_in_fstring(updated_node)

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        # the hooks of ``subscript_hooks`` also see attribute access (tf.math.top_k(x, 2).indices)
        hook = self.ctx.subscript_hooks.pop(id(original_node.value), None)
        if hook is not None:
            out = hook(updated_node)
            if out is not updated_node:
                return out
        value = self._values.pop(id(original_node), None)
        if value is not None:
            return value
        q = self.qualname(original_node)
        if q is None:
            return updated_node
        rule = self.ctx.pack.by_name.get(q)
        if rule is not None and rule.kind == "constant":
            return self.ctx.spell(rule.emit["target"])
        prefix = self._constant_prefix(original_node)
        if prefix is not None:  # tf.__version__.startswith → torch.__version__.startswith
            rule, attrs = prefix
            out = self.ctx.spell(rule.emit["target"])
            for a in attrs:
                out = cst.Attribute(out, cst.Name(a))
            return out
        return updated_node

    def _constant_prefix(self, node: cst.Attribute):
        """(rule, the attribute names after it) when a proper prefix of the chain ``node`` is a source
        constant with a rule (an attribute or method of the constant, e.g. ``tf.__version__.split``)."""
        attrs: list[str] = []
        head: cst.BaseExpression = node
        while isinstance(head, cst.Attribute):
            attrs.insert(0, head.attr.value)
            head = head.value
            q = self.qualname(head) if isinstance(head, (cst.Attribute, cst.Name)) else None
            if q is None:
                return None
            rule = self.ctx.pack.by_name.get(q)
            if rule is not None and rule.kind == "constant":
                # options.attributes = false: the constant is a type whose attributes are not the target's
                # (tf.data.Dataset.list_files is no IterableDataset.list_files): they stay their own rules or errors
                return (rule, attrs) if rule.emit.get("options", {}).get("attributes", True) else None
        return None

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> cst.BaseExpression:
        # a call transform may ask to see how its result is indexed (tf.shape(x)[0] -> x.shape[0])
        hook = self.ctx.subscript_hooks.pop(id(original_node.value), None)
        return updated_node if hook is None else hook(updated_node)
