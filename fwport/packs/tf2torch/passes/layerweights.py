"""Planner (read-only, after the rewriting passes): a Keras layer's weights read by their Keras names on the torch
module the layer became.

``dense.kernel`` is Keras's (in, out) matrix; the ``nn.Linear`` it became has ``weight``, (out, in), and no
``kernel``: the translation raised AttributeError with no finding. The rule's weight map (``[[weights]]`` of
rules/tf2torch/<rule>.toml, which ``fwport weights`` uses to move Keras's values into torch's) says how each Keras
variable is stored; read backwards:

    self.fc.kernel      →  self.fc.weight.T                   (Dense: transpose(1, 0))
    self.conv.kernel    →  self.conv.weight.permute(2, 3, 1, 0)   (Conv2D: transpose(3, 2, 0, 1))
    model[0].bias       →  model[0].bias                      (copy: the same tensor)
    self.bn.moving_mean →  self.bn.running_mean

The value is Keras's (a view of torch's parameter: gradients flow, an in-place write reaches the parameter). A
weight whose map is not one permutation (a Dense after a Flatten of a channels-first map, an LSTM's gates) or a
Keras weight name the rule has no map for is an error naming what torch stores instead. The layer is found from
the layer records the model passes wrote (ctx.layers: the class or model variable, the module's path):
``self.<path>`` inside a translated class, ``<instance>.<path>`` of a name bound only to such a class's
instances, ``<model>[i]`` / ``<model>.<path>`` of a translated model variable. Other receivers are left as
written (a custom layer's own ``self.kernel`` is its own attribute).
"""
from __future__ import annotations

import libcst as cst

from fwport.core.context import FileContext
from fwport.core.direction import fast
from fwport.core.finding import Severity
from fwport.core.names import scan
from fwport.core.position import render

#: the weight names of Keras's built-in layers
KERAS_WEIGHTS = frozenset({"kernel", "bias", "embeddings", "gamma", "beta", "moving_mean", "moving_variance",
                           "recurrent_kernel", "depthwise_kernel", "pointwise_kernel"})
#: (ctx.analyses) ids of the ``layer.get_weights`` / ``layer.kernel`` attributes this pass translates (valuekinds
#: leaves them to it)
HANDLED = "layer_weights.handled"
TRIGGER = fast(r"\.\s*(?:" + "|".join(sorted(KERAS_WEIGHTS | {"get_weights", "set_weights"})) + r")\b")


def _path(node: cst.BaseExpression) -> tuple[str, list[str]] | None:
    """``head.a.b[0]`` → ("head", ["a", "b", "0"]); None for anything else."""
    parts: list[str] = []
    while True:
        if isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
                and isinstance(node.slice[0].slice.value, cst.Integer):
            parts.append(node.slice[0].slice.value.value)
            node = node.value
        elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
                and isinstance(node.slice[0].slice.value, cst.UnaryOperation) \
                and isinstance(node.slice[0].slice.value.operator, cst.Minus) \
                and isinstance(node.slice[0].slice.value.expression, cst.Integer):
            parts.append("-" + node.slice[0].slice.value.expression.value)  # model.layers[-1]
            node = node.value
        elif isinstance(node, cst.Name):
            return node.value, parts[::-1]
        else:
            return None


class _Instances(cst.CSTVisitor):
    """Module-level names bound only to calls of one class (``net = Net()``)."""

    def __init__(self) -> None:
        self.of: dict[str, set[str]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                v = node.value
                cls = v.func.value if isinstance(v, cst.Call) and isinstance(v.func, cst.Name) else "?"
                self.of.setdefault(t.target.value, set()).add(cls)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


#: a Keras variable's methods → what to write on the torch parameter (its Keras-layout view, as this pass reads it)
_VARIABLE_METHODS = {
    "assign": "write it in place under torch.no_grad(), w.copy_(value), on the view this pass reads (a view of the "
              "parameter: the write reaches it)",
    "assign_add": "w.add_(value) under torch.no_grad()",
    "assign_sub": "w.sub_(value) under torch.no_grad()",
    "get_shape": "w.shape (of the Keras-layout view, which exists once a Lazy module has had its first call)",
}


class _Bindings(cst.CSTVisitor):
    """The names one function body (or the module's top level) binds, nested functions and classes left out:
    name → the values assigned to it (None for a binding that is not a plain assignment: a parameter, a for
    target, augmented assignment, an import, a with/except name, a walrus)."""

    def __init__(self, params: list[str]) -> None:
        self.values: dict[str, list] = {p: [None] for p in params}

    def _other(self, target) -> None:
        for n in _names(target):
            self.values.setdefault(n, []).append(None)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.values.setdefault(t.target.value, []).append(node.value)
            else:
                self._other(t.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._other(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._other(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._other(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._other(node.asname.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._other(node.target)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        self._other(node.asname.name if node.asname is not None else cst.Name(node.name.value.split(".")[0])
                    if isinstance(node.name, cst.Name) else cst.Name("_"))

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._other(node.name.name)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self._other(node.name)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self._other(node.name)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _names(target) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return []


class _Reads(cst.CSTVisitor):
    def __init__(self, ctx: FileContext, records: dict, instances: dict[str, str]) -> None:
        super().__init__()
        self.ctx, self.records, self.instances = ctx, records, instances
        self.classes: list[str] = []
        # per function being visited: name → the layer rule's id, or ("instance", class) for a translated class's instance
        self.local_layers: list[dict] = []
        self.bound: dict[str, cst.Call] = {}  # a local layer name → the call it is bound to (see _kept)

    def _layers_bound(self, body, params: list[str]) -> dict:
        """Names bound once, by a plain assignment, to a Keras layer with a weight map (``dense = layers.Dense(4)``):
        the torch module that call became is what the name holds."""
        b = _Bindings(params)  # (scan, not libcst's visit: the same hooks, without rebuilding every node)
        if isinstance(body, cst.Module):
            for stmt in body.body:
                scan(stmt, b)
        else:
            scan(body, b)
        out = {}
        for name, values in b.values.items():
            if len(values) == 1 and isinstance(values[0], cst.Subscript) \
                    and isinstance(values[0].value, cst.Attribute) and values[0].value.attr.value == "layers":
                record = self._record(values[0])  # e = model.layers[0]: the module holding that layer's weights
                if record is not None:
                    out[name] = ("alias", record)
                continue
            if len(values) == 1 and isinstance(values[0], cst.Call) and isinstance(values[0].func, cst.Attribute) \
                    and values[0].func.attr.value == "get_layer":
                record = self._named(values[0])  # layer = model.get_layer("conv"): the same
                if record is not None:
                    out[name] = ("alias", record)
                continue
            if len(values) != 1 or not isinstance(values[0], cst.Call):
                continue
            func = values[0].func
            if isinstance(func, cst.Name) and any(s == func.value for s, _ in self.records):
                out[name] = ("instance", func.value)  # net = Net(): an instance of a translated class
                continue
            q = self.ctx.imports.resolve(func)
            rule = self.ctx.pack.by_name.get(q) if q else None
            if rule is not None and rule.kind == "layer" and rule.weights:
                out[name] = (rule.id, values[0])
        return out

    def visit_Module(self, node: cst.Module) -> None:
        self.local_layers.append(self._layers_bound(node, []))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        p = node.params
        params = [x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)]
        params += [x.name.value for x in (p.star_arg, p.star_kwarg) if isinstance(x, cst.Param)]
        self.local_layers.append(self._layers_bound(node.body, params))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.local_layers.pop()

    def _instance(self, name: str) -> str | None:
        """The class of a translated model a name of the enclosing function is bound to once (``net = Net()``)."""
        found = self.local_layers[-1].get(name) if len(self.local_layers) > 1 else None
        return found[1] if isinstance(found, tuple) and found[0] == "instance" else None

    def _local(self, receiver: cst.BaseExpression):
        """A record for a name the enclosing function binds to a Keras layer's call: its module as written alone
        (the default variant of the rule's weight map: a layer held in a name is one fwport does not remap inside
        the models it follows, see the sequential pass's layout-kept findings)."""
        if not isinstance(receiver, cst.Name):
            return None
        scopes = self.local_layers[-1:] if len(self.local_layers) > 1 else self.local_layers
        for scope in scopes:
            found = scope.get(receiver.value)
            if isinstance(found, tuple) and found[0] == "alias":
                return found[1]
            if isinstance(found, tuple) and found[0] != "instance":
                from fwport.core.result import LayerRecord
                self.bound[receiver.value] = found[1]
                rule = self.ctx.pack.rules.get(found[0])
                # a layer with an activation became nn.Sequential(layer, activation): its weights are in [0]
                below = ".0" if rule is not None and _activated(found[1], rule) else ""
                return LayerRecord("", receiver.value, receiver.value + below, found[0])
        return None

    def _kept(self, record) -> cst.Call | None:
        """The call a local layer name is bound to (``dense = layers.Dense(4)``), for a record of one."""
        return self.bound.get(record.source) if record.scope == "" else None

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node.name.value)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.line = node

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.classes.pop()

    def _record(self, receiver: cst.BaseExpression):
        found = _path(receiver)
        if found is None:
            return None
        head, parts = found
        if head == "self" and self.classes:
            scope = self.classes[-1]
        elif head in self.instances or self._instance(head):
            scope = self.instances.get(head) or self._instance(head)
        elif any(s == head for s, _ in self.records):
            scope = head
        else:
            return self._local(receiver)
        return self.records.get((scope, ".".join(parts))) or self._local(receiver)

    def _named(self, call: cst.Call):
        """The record of ``model.get_layer("name")`` / ``get_layer(index=k)`` on a translated model variable (the
        name its model pass gave the layer: LAYER_NAMES)."""
        from fwport.core.bind import call_argument, literal_value
        from fwport.packs.tf2torch.passes.sequential import LAYER_NAMES
        receiver = call.func.value  # type: ignore[attr-defined]
        if not isinstance(receiver, cst.Name):
            return None
        head = receiver.value
        scope = self.instances.get(head) or self._instance(head) or (
            head if any(s == head for s, _ in self.records) else None)
        name, index = call_argument(call, "name", 0), call_argument(call, "index", 1)
        key = literal_value(name, None) if name is not None else None
        at = literal_value(index, None) if index is not None else None
        if isinstance(key, str) and index is None:
            source = self.ctx.analyses.get(LAYER_NAMES, {}).get((scope, key))
        else:
            source = f"layers[{at}]" if type(at) is int and name is None else None
        if scope is None or source is None:
            return None
        return self.records.get((scope, source.replace("[", ".").replace("]", "")))

    def visit_Call(self, node: cst.Call) -> None:
        """Keras methods on what the torch module has no counterpart of: a Keras variable's methods on a layer's
        weight read by its Keras name (``self.conv.kernel.assign(...)``, ``.get_shape()``), and a layer's
        ``build(input_shape)`` on the module it became (keras-io pixelcnn builds its wrapped Conv2D by hand)."""
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if self.ctx.plans.get(node) is not None or self.ctx.plans.get(func) is not None:
            return  # translated by an earlier planner (variables.py: `net.fc.kernel.assign(v)` → data.copy_)
        if method in _VARIABLE_METHODS and isinstance(func.value, cst.Attribute) \
                and func.value.attr.value in KERAS_WEIGHTS and self._record(func.value.value) is not None:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{render(func.value)}.{method}(...): a Keras variable's method on a layer's weight, "
                            f"which the torch module stores as a tensor: {_VARIABLE_METHODS[method]}", node)
        elif method in ("get_weights", "set_weights") and self._record(func.value) is not None:
            record = self._record(func.value)
            rule = self.ctx.pack.rules.get(record.rule)
            if rule is None:
                return
            if self._weights_call(node, record, rule):
                return
            shown = receiver = render(func.value)
            if record.scope == "" and record.target != record.source:
                receiver += "".join(f"[{p}]" if p.isdigit() else f".{p}"
                                    for p in record.target[len(record.source) + 1:].split("."))
            maps: dict[str, list] = {}
            for w in rule.weights_for(record.variant):
                maps.setdefault(w.source, []).append(w)
            where = "; ".join(f"{src} → {_text(receiver, ms[0])}" if len(ms) == 1 and _invertible(ms[0].ops) else
                              f"{src} → " + ", ".join(f".{w.target} ({', '.join(o.render() for o in w.ops)})"
                                                      for w in ms) for src, ms in maps.items())
            message = (f"{shown}.{method}(...): a Keras layer's method, which the torch module this "
                            f"{rule.names[0].rsplit('.', 1)[-1]} became has not: torch keeps its weights as "
                            f"parameters by name, in torch's layout ({where}); "
                            + ("read those, e.g. [w.detach().cpu().numpy() for w in (...)] in Keras's order"
                               if method == "get_weights" else
                               "copy each array into its parameter under torch.no_grad(), param.copy_("
                               "torch.as_tensor(array)), transposed or permuted as said"))
            self._when_translated(node, record, lambda: self.ctx.report(Severity.ERROR, "unsupported-construct",
                                                                         message, node))
        elif method == "build" and self._record(func.value) is not None:
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{render(func.value)}.build(...): a Keras layer's build, which the torch module this "
                            "layer became has not: torch creates the weights when the module is constructed (a "
                            "Lazy module at its first call): drop the call, and create what build() derives from "
                            "the weights' shapes after the module's first call (or from the sizes it is built with)",
                            node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        name = node.attr.value
        if name not in KERAS_WEIGHTS:
            return
        record = self._record(node.value)
        if record is None:
            return
        rule = self.ctx.pack.rules.get(record.rule)
        if rule is None:
            return
        maps = [w for w in rule.weights_for(record.variant) if w.source == name]
        receiver = render(node.value)
        found = _path(node.value)
        path = ".".join(found[1]) if found else ""
        if record.scope == "":  # a local layer name: its record's paths start with the name
            path = record.source
        if found and record.target != path and record.target.startswith(path + "."):
            # the layer became a wrapper (nn.Sequential(SamePad2d(...), nn.Conv2d(...))): its weights are below it
            extra = record.target[len(path) + 1:].split(".")
            receiver += "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in extra)
        if len(maps) != 1 or not _invertible(maps[0].ops):
            stored = ", ".join(sorted({f".{w.target} ({', '.join(o.render() for o in w.ops)} of Keras's "
                                       f"{w.source})" for w in rule.weights_for(record.variant)}))
            self.ctx.report(Severity.ERROR, "unsupported-construct",
                            f"{receiver}.{name}: the torch module this {rule.names[0].rsplit('.', 1)[-1]} became has no "
                            f"{name}" + (f"; it stores {stored}: read those" if stored else "") , node)
            return
        info = (f"{render(node.value)}.{name} → {_text(receiver, maps[0])}: the torch module stores Keras's {name} as "
                f".{maps[0].target}" + ("" if maps[0].ops[0].op == "copy" else
                                        f" ({maps[0].ops[0].render()} of it); the value read is Keras's"))
        call = self._kept(record)
        self.ctx.analyses.setdefault(HANDLED, set()).add(id(node))
        if call is None:
            self.ctx.plans.add(node, _reader(maps[0], receiver[len(render(node.value)):]), descend=True,
                               by="layer_weights")
            self.ctx.report(Severity.INFO, "idiom-replaced", info, node)
            return
        read, ctx = _reader(maps[0], receiver[len(render(node.value)):]), self.ctx

        def apply(original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
            if _refused(ctx, call):
                return updated_node  # the layer stays a Keras layer (its refusal says why): so does its kernel
            ctx.report(Severity.INFO, "idiom-replaced", info, original_node)
            return read(original_node, updated_node)
        self.ctx.plans.add(node, apply, descend=True, by="layer_weights")

    def _layer_call(self, record) -> cst.Call | None:
        """The Keras call a model's layer was made by, where known."""
        from fwport.packs.tf2torch.passes.sequential import LAYER_CALLS
        return self.ctx.analyses.get(LAYER_CALLS, {}).get((record.scope, record.source))

    def _weights_call(self, node: cst.Call, record, rule) -> bool:
        """``layer.get_weights()`` → the parameters in Keras's order and layout as NumPy arrays; a statement
        ``layer.set_weights([k, b])`` (or of a name holding the list) → each array copied into its parameter under
        torch.no_grad(), moved to torch's layout: for a layer whose list fwport knows (model_api._weight_list).
        False: not one of these (the error stands)."""
        from fwport.packs.tf2torch.passes.model_api import _keras_layout_of, _torch_layout_of, _weight_list
        method, ctx = node.func.attr.value, self.ctx
        if self._kept(record) is not None:
            return False  # a layer made alone (dense = layers.Dense(4)): a Lazy module until called, unlike Keras's
        entries = _weight_list(rule, record.variant, self._layer_call(record))
        if isinstance(entries, str):
            return False
        shown = ", ".join(w.source for w in entries)
        if method == "get_weights":
            if node.args:
                return False

            def apply(orig: cst.Call, upd: cst.Call) -> cst.BaseExpression:
                path = render(upd.func.value)
                out = "[" + ", ".join(f"{_keras_layout_of(f'{path}.{w.target}', w.ops)}.detach().cpu().numpy()"
                                      for w in entries) + "]"
                ctx.report(Severity.INFO, "idiom-replaced", f"{render(orig.func.value)}.get_weights() → {out}: copies "
                           f"of the parameters as NumPy arrays in Keras's order ({shown}) and layout", orig)
                return cst.parse_expression(out)
            ctx.plans.add(node, apply, descend=True, by="layer_weights")
            ctx.analyses.setdefault(HANDLED, set()).add(id(node.func))
            return True
        line = getattr(self, "line", None)
        if not (len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star
                and isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1
                and isinstance(line.body[0], cst.Expr) and line.body[0].value is node and ctx.plans.get(line) is None):
            return False
        arrays = node.args[0].value
        if isinstance(arrays, cst.List):
            if not all(isinstance(e, cst.Element) for e in arrays.elements):
                return False
            if len(arrays.elements) != len(entries):
                ctx.report(Severity.ERROR, "unsupported-construct",
                           f"{render(node.func.value)}.set_weights(...) of {len(arrays.elements)} array"
                           f"{'s' * (len(arrays.elements) != 1)}; the "
                           f"{rule.names[0].rsplit('.', 1)[-1]} has {len(entries)} ({shown}): Keras raises here", node)
                ctx.analyses.setdefault(HANDLED, set()).add(id(node.func))
                return True
        elif not isinstance(arrays, cst.Name):
            return False

        ctx.analyses.setdefault(HANDLED, set()).add(id(node.func))

        def apply_line(orig: cst.SimpleStatementLine, upd: cst.SimpleStatementLine) -> cst.BaseStatement:
            set_call = upd.body[0].value
            path = render(set_call.func.value)
            given = set_call.args[0].value
            values = ([render(e.value) for e in given.elements] if isinstance(given, cst.List)
                      else [f"{render(given)}[{i}]" for i in range(len(entries))])
            as_tensor = ctx.spell_text("torch.as_tensor")
            body = "".join(f"    {path}.{w.target}.copy_({_torch_layout_of(f'{as_tensor}({v})', w.ops)})\n"
                           for w, v in zip(entries, values))
            ctx.report(Severity.INFO, "idiom-replaced", f"{render(orig.body[0].value.func.value)}.set_weights(...) → "
                       f"each array ({shown}) copied into its parameter in torch's layout under torch.no_grad()", orig)
            block = cst.parse_statement(f"with {ctx.spell_text('torch.no_grad')}():\n{body}")
            return block.with_changes(leading_lines=orig.leading_lines)
        ctx.plans.add(line, apply_line, descend=True, by="layer_weights")
        return True

    def _when_translated(self, node: cst.Call, record, report) -> None:
        """``report()`` now, or for a layer held in a local name, in the rewrite once its call is known translated
        (a refused layer stays Keras's, whose get_weights() works)."""
        call = self._kept(record)
        if call is None:
            report()
            return
        ctx = self.ctx

        def apply(original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
            if not _refused(ctx, call):
                report()
            return updated_node
        self.ctx.plans.add(node, apply, descend=True, by="layer_weights")


def _activated(call: cst.Call, rule) -> bool:
    """Whether the layer call names an activation other than None / "linear" (keyword, or positional by the
    rule's signature)."""
    from fwport.core.bind import NOT_LITERAL, call_argument, literal_value
    names = [p.name for p in rule.params if p.kind == "positional"]
    value = call_argument(call, "activation", names.index("activation") if "activation" in names else None)
    if value is None:
        return False
    return literal_value(value, NOT_LITERAL) not in (None, "linear")


def _refused(ctx: FileContext, call: cst.Call) -> bool:
    """Whether an error was reported at ``call`` (its rule refused it, or a pass left it as written): the rewrite
    reaches a name's binding before the reads that follow it."""
    return ctx.is_settled(call) or any(p.node is call and p.finding.severity is Severity.ERROR for p in ctx.pending)


def _invertible(ops) -> bool:
    return len(ops) == 1 and (ops[0].op == "copy" or (ops[0].op == "transpose" and all(
        p.isdigit() for p in ops[0].params)))


def _inverse(ops) -> list[int] | None:
    if ops[0].op == "copy":
        return None
    perm = [int(p) for p in ops[0].params]
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _suffix(m) -> str:
    inv = _inverse(m.ops)
    if inv is None:
        return ""
    if inv == [1, 0]:
        return ".T"
    return f".permute({', '.join(map(str, inv))})"


def _text(receiver: str, m) -> str:
    return f"{receiver}.{m.target}{_suffix(m)}"


def _reader(m, below: str = ""):
    """The edit: ``<receiver>.kernel`` → ``<receiver><below>.weight.permute(...)`` (``below``: the path from the
    layer's attribute to the torch module holding its weights, ``[1]`` in a padding wrapper)."""
    def apply(original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        return cst.parse_expression(_text(render(updated_node.value) + below, m))
    return apply


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Records the edits and errors (module docstring); returns ``module`` itself."""
    records = {}
    for r in ctx.layers:
        records.setdefault((r.scope, r.target), r)
    for r in ctx.layers:  # model.layers[0] (Keras's path, where model_api's edit is not applied yet)
        records.setdefault((r.scope, r.source.replace("[", ".").replace("]", "")), r)
    from fwport.packs.tf2torch.passes.sequential import SPANS
    for scope, found in ctx.analyses.get(SPANS, {}).items():  # model.layers[-1] of a Sequential: counted from its end
        spans = found[0] if found else None
        for r in ctx.layers if spans else ():
            if r.scope == scope and r.source.startswith("layers[") and r.source[7:-1].isdigit():
                records.setdefault((scope, f"layers.{int(r.source[7:-1]) - len(spans)}"), r)
    from fwport.packs.tf2torch.passes.sequential import LAYER_COUNTS
    for scope, count in ctx.analyses.get(LAYER_COUNTS, {}).items():  # model.layers[-1] of a functional model
        for r in ctx.layers:
            if r.scope == scope and r.source.startswith("layers[") and r.source[7:-1].isdigit():
                records.setdefault((scope, f"layers.{int(r.source[7:-1]) - count}"), r)
    scopes = {s for s, _ in records}
    inst = _Instances()
    scan(module, inst)
    instances = {n: next(iter(cs)) for n, cs in inst.of.items() if len(cs) == 1 and next(iter(cs)) in scopes}
    scan(module, _Reads(ctx, records, instances))
    return module
