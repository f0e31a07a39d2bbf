"""Structural pass: ``keras.Sequential`` → ``nn.Sequential``, with shapes propagated through the chain.

Two forms, both on the lines they were written on:

- ``keras.Sequential([layer, ...])`` → ``nn.Sequential(module, ...)``; a layer that becomes several
  modules (a conv and its activation) puts them side by side on its line;
- ``model = keras.Sequential()`` followed by ``model.add(layer)`` statements in the same block →
  ``model = nn.Sequential()`` and ``model.append(module)`` (``model.extend([...])`` for several).

The input size (``keras.Input(shape=...)`` first, ``InputLayer``, or ``input_shape=`` / ``input_dim=``
on the first layer) is followed through the chain so that concrete modules (``nn.Linear(784, 64)``)
are emitted; lazy modules only where a size is unknowable. A chain holding channels-last
convolutions or pooling becomes channels-first (NCHW): every axis-dependent layer is remapped or
refused with an error finding, and ``ctx.models`` records the layout change for the verifier.
Each layer with variables gets a ``LayerRecord``: ``layers[i]`` (Keras's ``model.layers``, which
never includes the InputLayer) → the index of its weight-holding module in the ``nn.Sequential``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from fwport.bind import NOT_LITERAL, literal_value
from fwport.context import FileContext, LayerRecord, ModelInfo
from fwport.engine import LayerContext, LayerEmission, code, translate_layer
from fwport.finding import Severity
from fwport.names import ScopedResolver, dotted_text

SEQUENTIAL = "keras.Sequential"
INPUTS = ("keras.Input", "keras.layers.InputLayer")
_SEQUENTIAL_KWARGS = {"layers", "name", "trainable"}


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    return module.visit(_SequentialPass(ctx))


@dataclass
class _Chain:
    """One Sequential model: its elements in Keras order and what each became."""

    call: cst.Call  # the keras.Sequential(...) call (input tree)
    target: str  # "model", "self.features", "" (returned / passed directly)
    elements: list[cst.BaseExpression] = field(default_factory=list)  # list elements, then .add args
    # id(element) → modules to emit; [] for an input spec (removed); missing: left as written
    out: dict[int, list[cst.BaseExpression]] = field(default_factory=dict)
    input_note: str = ""  # the comment that takes the place of a removed keras.Input line
    bad_args: bool = False


class _SequentialPass(ScopedResolver, cst.CSTTransformer):
    def __init__(self, ctx: FileContext):
        super().__init__()
        self.ctx = ctx
        self._init_scopes(ctx.imports)
        self.classes: list[str] = []
        self.functions: list[tuple[str, set[str]]] = []  # (name, names it returns)
        self.chains: dict[int, _Chain] = {}  # id(Sequential call) → chain
        self.adds: dict[int, tuple[_Chain, cst.BaseExpression]] = {}  # id(add statement) → chain, element

    # --- where we are -----------------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node.name.value)

    def leave_ClassDef(self, original_node, updated_node):
        self.classes.pop()
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        returned = _ReturnedNames()
        node.body.visit(returned)
        self.functions.append((node.name.value, returned.names))

    def leave_FunctionDef(self, original_node, updated_node):
        self.functions.pop()
        return super().leave_FunctionDef(original_node, updated_node)

    def _is_sequential(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Call) and self.qualname(node.func) == SEQUENTIAL

    # --- finding the chains (top-down, so that a model's .add statements are known first) ----------
    def visit_Module(self, node: cst.Module) -> None:
        self._plan_block(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._plan_block(node.body)

    def _plan_block(self, body) -> None:
        open_chains: dict[str, _Chain] = {}
        started: list[_Chain] = []
        for stmt in body:
            if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
                _close_reassigned(stmt, open_chains)
                continue
            small = stmt.body[0]
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and self._is_sequential(small.value):
                target = dotted_text(small.targets[0].target) or ""
                chain = self._start(small.value, target)
                started.append(chain)
                if target:
                    open_chains[target] = chain
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                call = small.value
                if (isinstance(call.func, cst.Attribute) and call.func.attr.value == "add"
                        and dotted_text(call.func.value) in open_chains and len(call.args) == 1
                        and call.args[0].keyword is None and not call.args[0].star):
                    chain = open_chains[dotted_text(call.func.value)]  # type: ignore[index]
                    chain.elements.append(call.args[0].value)
                    self.adds[id(stmt)] = (chain, call.args[0].value)
                    continue
            _close_reassigned(stmt, open_chains)
        for chain in started:
            self._translate(chain)

    def _start(self, call: cst.Call, target: str) -> _Chain:
        chain = _Chain(call, target)
        self.chains[id(call)] = chain
        layers = None
        for i, arg in enumerate(call.args):
            kw = arg.keyword.value if arg.keyword else ("layers" if i == 0 else None)
            if arg.star or kw not in _SEQUENTIAL_KWARGS:
                chain.bad_args = True
            elif kw == "layers":
                layers = arg.value
            elif kw == "trainable" and literal_value(arg.value, None) is not True:
                chain.bad_args = True
        if isinstance(layers, (cst.List, cst.Tuple)) and not any(isinstance(e, cst.StarredElement)
                                                                 for e in layers.elements):
            chain.elements = [e.value for e in layers.elements]
        elif layers is not None:
            chain.bad_args = True
        return chain

    # --- translating a chain -------------------------------------------------------------------------
    def _scope(self, target: str) -> tuple[str, str, str]:
        """(scope, path prefix, model key) for a Sequential assigned to ``target``."""
        if target.startswith("self.") and self.classes:
            attr = target[len("self."):]
            return self.classes[-1], f"{attr}.", f"{self.classes[-1]}.{attr}"
        if self.functions:
            fn, returned = self.functions[-1]
            if not target or target in returned:
                return fn, "", fn
            return f"{fn}.{target}", "", f"{fn}.{target}"
        name = target or "Sequential"
        return name, "", name

    def _translate(self, chain: _Chain) -> None:
        ctx = self.ctx
        if chain.bad_args:
            ctx.report(Severity.ERROR, "unsupported-construct", "keras.Sequential with arguments other than a "
                       "literal list of layers (and name=) cannot be followed statically; list the layers",
                       chain.call)
            ctx.settled.add(id(chain.call))
            return
        scope, prefix, key = self._scope(chain.target)
        elements = list(chain.elements)
        in_shape: tuple | None = None
        layers: list[tuple[cst.BaseExpression, object]] = []  # (element, rule or None)
        for i, el in enumerate(elements):
            q = self.qualname(el.func) if isinstance(el, cst.Call) else None
            if q in INPUTS:
                shape = _input_spec_shape(el)
                if layers or shape is NOT_LITERAL:
                    ctx.report(Severity.ERROR, "unsupported-construct", "an input specification must come first "
                               "and give a literal shape", el)
                    ctx.settled.add(id(el))
                    continue
                in_shape = shape
                chain.out[id(el)] = []
                chain.input_note = f"{code(el)}"
                continue
            rule = ctx.pack.by_name.get(q) if q else None
            layers.append((el, rule if rule is not None and rule.kind == "layer" else None))
        if in_shape is None and layers and layers[0][1] is not None:
            in_shape = _first_layer_shape(layers[0][0])

        nchw = any(rule is not None and rule.emit.get("layout") == "channels-first"
                   and _literal_kw(el, "data_format") != "channels_first" for el, rule in layers)
        layout = "nchw" if nchw else "keep"
        if nchw:
            shown = f" (batch, {', '.join(map(str, in_shape))})" if in_shape else ""
            ctx.report(Severity.INFO, "layout-changed", f"this Sequential model takes channels-last inputs{shown}; "
                       "the translation is channels-first (NCHW): permute inputs with x.permute(0, 3, 1, 2)"
                       if in_shape is None or len(in_shape) == 3 else
                       f"this Sequential model takes channels-last inputs{shown}; the translation is "
                       "channels-first: move the channel axis to dim 1", chain.call)
        if chain.input_note:
            chain.input_note = _input_note(in_shape, nchw)

        shape = in_shape
        flatten_of = None
        index = 0  # position in the nn.Sequential
        for k, (el, rule) in enumerate(layers):
            if rule is None:
                if layout == "nchw" and (shape is None or len(shape) > 1):
                    ctx.report(Severity.ERROR, "unsupported-construct", f"{code(el.func) if isinstance(el, cst.Call) else code(el)} "
                               "inside a Sequential converted to channels-first would receive NCHW instead of "
                               "NHWC tensors; translate it by hand or make it layout-aware", el)
                    ctx.settled.add(id(el))
                shape, flatten_of = None, None
                index += 1
                continue
            lctx = LayerContext(shape, layout, scope, "", flatten_of)
            em: LayerEmission = translate_layer(el, rule, ctx, lctx, el)
            if em.failed or em.functional is not None:
                if em.functional is not None:
                    ctx.report(Severity.ERROR, "unsupported-construct", f"{rule.names[0]} merges several inputs "
                               "and cannot be a member of a Sequential model", el, rule)
                ctx.settled.add(id(el))
                shape, flatten_of = None, None
                index += 1
                continue
            chain.out[id(el)] = em.modules
            if rule.weights:
                ctx.layers.append(LayerRecord(scope, f"{prefix}layers[{k}]", f"{prefix}{index + em.weight_module}",
                                              rule.id, em.variant, dict(em.symbols)))
            index += len(em.modules)
            shape, flatten_of = em.out_shape, em.flatten_of
        out_layout = "nchw" if nchw and (shape is None or len(shape) > 1) else "same"
        ctx.models[key] = ModelInfo(key, "sequential", in_shape, "nchw" if nchw else "same", out_layout)

    # --- rewriting (bottom-up) -------------------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        chain = self.chains.get(id(original_node))
        if chain is None and self._is_sequential(original_node):
            # not assigned in a statement of its own (returned, passed, nested): a chain of its own
            chain = self._start(original_node, "")
            self._translate(chain)
        if chain is None or chain.bad_args:
            return updated_node
        return self._rewrite_sequential(chain, original_node, updated_node)

    def _module_args(self, chain: _Chain, orig: cst.BaseExpression, new: cst.BaseExpression) -> list[cst.BaseExpression]:
        if id(orig) in self.ctx.settled:
            return [orig]  # the very node that was reported, so that later passes leave it alone
        return chain.out.get(id(orig), [new])

    def _rewrite_sequential(self, chain: _Chain, original: cst.Call, updated: cst.Call) -> cst.Call:
        seq = self.ctx.spell("torch.nn.Sequential")
        orig_list = next((a.value for a in original.args if (a.keyword is None or a.keyword.value == "layers")
                          and isinstance(a.value, (cst.List, cst.Tuple))), None)
        if orig_list is None:
            return cst.Call(seq, [])
        i_list = next(i for i, a in enumerate(original.args) if a.value is orig_list)
        new_list = updated.args[i_list].value
        list_arg = updated.args[i_list]
        elements: list[cst.Element] = []
        lead = _bracket_ws(new_list, "after")  # whitespace before the next element
        for o, n in zip(orig_list.elements, new_list.elements):
            mods = self._module_args(chain, o.value, n.value)
            comma = n.comma
            if not mods:  # an input specification: its line becomes a comment
                after = comma.whitespace_after if isinstance(comma, cst.Comma) else cst.SimpleWhitespace("")
                lead = _fold_comment(lead if not elements else _ws_after(elements[-1]), after, chain.input_note)
                if elements:
                    elements[-1] = _with_ws_after(elements[-1], lead)
                continue
            parts = [cst.Element(m, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for m in mods[:-1]]
            parts.append(cst.Element(mods[-1], comma=comma))
            elements += parts
        args: list[cst.Arg] = [cst.Arg(e.value, comma=e.comma) for e in elements]
        if args:
            last = args[-1]
            tail = _bracket_ws(new_list, "before")
            args[-1] = last.with_changes(whitespace_after_arg=_join_ws(tail, list_arg.whitespace_after_arg))
        return cst.Call(seq, args, whitespace_before_args=_join_ws(updated.whitespace_before_args, lead))

    def leave_SimpleStatementLine(self, original_node, updated_node):
        item = self.adds.get(id(original_node))
        if item is None:
            return updated_node
        chain, el = item
        if chain.bad_args or id(el) not in chain.out:
            return updated_node  # left as written; the chain reported why
        mods = chain.out[id(el)]
        expr_stmt = updated_node.body[0]
        call = expr_stmt.value
        if not mods:
            return updated_node  # replaced by a comment in leave of the block
        if len(mods) == 1:
            new_call = call.with_changes(func=call.func.with_changes(attr=cst.Name("append")),
                                         args=[call.args[0].with_changes(value=mods[0])])
        else:
            lst = cst.List([cst.Element(m, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                            for m in mods[:-1]] + [cst.Element(mods[-1])])
            new_call = call.with_changes(func=call.func.with_changes(attr=cst.Name("extend")),
                                         args=[call.args[0].with_changes(value=lst)])
        return updated_node.with_changes(body=[expr_stmt.with_changes(value=new_call)])

    def _drop_input_adds(self, original_body, updated_body) -> list:
        out = list(updated_body)
        for i in range(len(original_body) - 1, -1, -1):
            item = self.adds.get(id(original_body[i]))
            if item is None or item[1] is None:
                continue
            chain, el = item
            if chain.out.get(id(el)) != []:
                continue
            stmt = out[i]
            note = cst.EmptyLine(comment=cst.Comment(f"# {chain.input_note}"))
            lines = [*stmt.leading_lines, note]
            if i + 1 < len(out):
                out[i + 1] = out[i + 1].with_changes(leading_lines=[*lines, *out[i + 1].leading_lines])
                del out[i]
            else:
                out[i] = cst.SimpleStatementLine([cst.Pass()], leading_lines=stmt.leading_lines,
                                                 trailing_whitespace=cst.TrailingWhitespace(
                                                     cst.SimpleWhitespace("  "), cst.Comment(f"# {chain.input_note}")))
        return out

    def leave_IndentedBlock(self, original_node, updated_node):
        return updated_node.with_changes(body=self._drop_input_adds(original_node.body, updated_node.body))

    def leave_Module(self, original_node, updated_node):
        return updated_node.with_changes(body=self._drop_input_adds(original_node.body, updated_node.body))


class _ReturnedNames(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_Return(self, node: cst.Return) -> None:
        if isinstance(node.value, cst.Name):
            self.names.add(node.value.value)


def _close_reassigned(stmt: cst.CSTNode, open_chains: dict) -> None:
    """A statement other than ``model.add(...)`` that mentions the model ends its chain here
    (an ``add`` after a fit or inside a branch cannot be followed in order)."""
    if not open_chains:
        return
    text = cst.Module([]).code_for_node(stmt)
    for name in list(open_chains):
        if name in text:
            open_chains.pop(name)


def _literal_kw(call: cst.BaseExpression, name: str):
    if not isinstance(call, cst.Call):
        return None
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return literal_value(a.value, None)
    return None


def _shape_value(v) -> tuple | object:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,)
    if isinstance(v, (tuple, list)) and all(x is None or isinstance(x, int) and not isinstance(x, bool) for x in v):
        return tuple(v)
    return NOT_LITERAL


def _input_spec_shape(call: cst.Call):
    """The shape (without batch) a keras.Input / InputLayer call gives, or NOT_LITERAL."""
    for i, a in enumerate(call.args):
        kw = a.keyword.value if a.keyword else ("shape" if i == 0 else None)
        v = literal_value(a.value, NOT_LITERAL)
        if kw in ("shape", "input_shape"):
            return _shape_value(v)
        if kw in ("batch_shape", "batch_input_shape"):
            s = _shape_value(v)
            return s[1:] if isinstance(s, tuple) else s
    return NOT_LITERAL


def _first_layer_shape(call: cst.Call) -> tuple | None:
    for name in ("input_shape", "batch_input_shape", "input_dim"):
        v = _literal_kw(call, name)
        if v is None:
            continue
        s = _shape_value(v)
        if not isinstance(s, tuple):
            return None
        return s[1:] if name == "batch_input_shape" else s
    return None


def _input_note(shape: tuple | None, nchw: bool) -> str:
    if shape is None:
        return "input: shape unknown"
    if nchw and len(shape) > 1:
        shape = (shape[-1], *shape[:-1])
    dims = ", ".join("N" if d is None else str(d) for d in ("batch", *shape) if d != "batch")
    return f"input: (batch, {dims})" + (" channels-first" if nchw and len(shape) > 1 else "")


# --- whitespace: a pass keeps the line structure ----------------------------------------------------

def _bracket_ws(node: cst.List | cst.Tuple, which: str):
    if isinstance(node, cst.List):
        return node.lbracket.whitespace_after if which == "after" else node.rbracket.whitespace_before
    if which == "after":
        return node.lpar[0].whitespace_after if node.lpar else cst.SimpleWhitespace("")
    return node.rpar[0].whitespace_before if node.rpar else cst.SimpleWhitespace("")


def _ws_after(el: cst.Element):
    return el.comma.whitespace_after if isinstance(el.comma, cst.Comma) else cst.SimpleWhitespace("")


def _with_ws_after(el: cst.Element, ws) -> cst.Element:
    comma = el.comma if isinstance(el.comma, cst.Comma) else cst.Comma()
    return el.with_changes(comma=comma.with_changes(whitespace_after=ws))


def _fold_comment(before, after, note: str):
    """The whitespace around a removed element, with a comment where its line was."""
    if not isinstance(after, cst.ParenthesizedWhitespace):
        return before  # it shared a line with its neighbours: nothing to keep
    text = f"# {note}"
    if after.first_line.comment is not None:
        text += "  " + after.first_line.comment.value
    if isinstance(before, cst.ParenthesizedWhitespace):
        line = cst.EmptyLine(indent=before.indent, whitespace=before.last_line, comment=cst.Comment(text))
        return cst.ParenthesizedWhitespace(before.first_line, [*before.empty_lines, line, *after.empty_lines],
                                           after.indent, after.last_line)
    first = cst.TrailingWhitespace(cst.SimpleWhitespace("  "), cst.Comment(text))
    return cst.ParenthesizedWhitespace(first, list(after.empty_lines), after.indent, after.last_line)


def _join_ws(a, b):
    """Two whitespaces that become adjacent when list brackets go away, with no line lost."""
    a_nl = isinstance(a, cst.ParenthesizedWhitespace)
    b_nl = isinstance(b, cst.ParenthesizedWhitespace)
    if a_nl and b_nl:
        extra = cst.EmptyLine(indent=b.indent, whitespace=cst.SimpleWhitespace(""), comment=b.first_line.comment)
        return cst.ParenthesizedWhitespace(a.first_line, [*a.empty_lines, extra, *b.empty_lines], b.indent, b.last_line)
    if a_nl:
        return a
    if b_nl:
        return b
    return a if getattr(a, "value", "") else b
