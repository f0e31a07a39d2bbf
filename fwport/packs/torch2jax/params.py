"""In-place updates of a model's parameters outside the module classes → the functional update an Equinox user
writes, the model rebound:

- ``for p in model.parameters(): p.data.clamp_(-c, c)`` (WGAN's weight clipping; any of add_/sub_/mul_/div_/
  clamp_/fill_/zero_ and ``p.data += v``..., on ``p`` or ``p.data``, in order) →
  ``model = jax.tree_util.tree_map(lambda p: jnp.clip(p, -c, c) if eqx.is_inexact_array(p) else p, model,
  is_leaf=lambda x: isinstance(x, eqx.nn.StateIndex))``: the same change of every floating array of the model (a
  layer's state, eqx.nn.StateIndex, is left whole: PyTorch's buffers are not parameters);
- ``model.fc.weight.data.mul_(2.0)``, ``model.fc.bias += 1``, ``model.embed.weight.data.copy_(vectors)``,
  ``model.fc.weight.data = v`` → ``model = eqx.tree_at(lambda m: m.fc.weight, model, <its new value>)``.

Exact where ``model`` is a name this scope (the module, or a function) binds to a module of the file or a torch.nn
layer (``Net(...)``, ``Net(...).to(device)``) and nothing else, no other name holds it (``d = model``), and (the
loop) the file registers no buffer nor keeps a tensor in a plain attribute (PyTorch's parameters() leaves them out,
an Equinox module holds them as arrays), with values that do not read the parameter nor call anything (a draw would
need a key per array); (an attribute path) each attribute of the path is a submodule its class's ``__init__`` builds
(``self.fc = nn.Linear(...)``), ending in a layer whose array Equinox lays out as PyTorch does (Linear, Embedding,
LayerNorm, BatchNorm, a convolution's weight; a convolution's bias is (C, 1, 1) in Equinox: a fill alone). Anything else keeps
the tensor-method pass's error; an augmented or ``.data`` assignment to a model's array (no method call, so no other
pass's error) gets one here. A function that reads a model of the module as a global (declared ``global model``, or
read and neither bound nor aliased there) rewrites it as the module does and declares ``global model`` where PyTorch's
code did not: the global is rebound, as PyTorch's change is seen through it. Such an assignment nothing here rewrote
(a model passed as a parameter, held by an object, ``self.fc.weight.data += v``, in a nested function) is an error:
left as written it fails on a frozen Equinox module. Runs before the in-place and modules passes, on the PyTorch source."""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.bindings import BindingWalker
from fwport.core.direction import fast
from fwport.core.engine import code, expr
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, find_all, scan
from fwport.core.rewrite import rewrite

TRIGGER = fast(r"\.parameters\(\)|\.(?:weight|bias)\b")

#: in-place method → how it changes ``{p}`` (its arguments ``{0}``, ``{1}``); clamp_ and fill_/zero_/copy_ apart
_BINARY = {"add_": "+", "sub_": "-", "mul_": "*", "div_": "/"}
_AUG = {cst.AddAssign: "+", cst.SubtractAssign: "-", cst.MultiplyAssign: "*", cst.DivideAssign: "/"}
#: the arrays of these layers that Equinox lays out as PyTorch does (bias of a convolution: (C, 1, 1) in Equinox)
_SAME_LAYOUT = {"torch.nn.Linear": ("weight", "bias"), "torch.nn.Embedding": ("weight",),
                "torch.nn.LayerNorm": ("weight", "bias"), "torch.nn.Conv1d": ("weight",),
                "torch.nn.Conv2d": ("weight",), "torch.nn.Conv3d": ("weight",), "torch.nn.BatchNorm1d": ("weight", "bias"),
                "torch.nn.BatchNorm2d": ("weight", "bias"), "torch.nn.BatchNorm3d": ("weight", "bias")}
_CONV_BIAS = frozenset({"torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d"})
_CHAINED = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "double"})


def _paren(text: str) -> str:
    return text if re.fullmatch(r"[\w.]+|-?\d+(\.\d*)?(e-?\d+)?", text) else f"({text})"


def _change(value: str, call_or_aug, spell) -> str | None:
    """The new value of an array ``value`` (text) after one in-place method call or augmented assignment, else None."""
    if isinstance(call_or_aug, cst.AugAssign):
        op = _AUG.get(type(call_or_aug.operator))
        return None if op is None else f"{value} {op} {_paren(code(call_or_aug.value))}"
    call = call_or_aug
    name = call.func.attr.value
    args = [a for a in call.args if a.keyword is None and not a.star]
    kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if any(a.star for a in call.args):
        return None
    if name in _BINARY:
        if len(args) != 1 or set(kw) - {"alpha"}:
            return None
        v = _paren(code(args[0].value))
        if "alpha" in kw:
            v = f"{_paren(code(kw['alpha']))} * {v}"
        return f"{value} {_BINARY[name]} {v}"
    if name == "clamp_":
        lo = code(args[0].value) if args else code(kw["min"]) if "min" in kw else "None"
        hi = code(args[1].value) if len(args) > 1 else code(kw["max"]) if "max" in kw else "None"
        if len(args) > 2 or set(kw) - {"min", "max"} or lo == hi == "None":
            return None
        return f"{spell('jax.numpy.clip')}({value}, {lo}, {hi})"
    if name == "fill_" and len(args) == 1 and not kw:
        return f"{spell('jax.numpy.full_like')}({value}, {code(args[0].value)})"
    if name == "zero_" and not call.args:
        return f"{spell('jax.numpy.zeros_like')}({value})"
    if name == "copy_" and len(args) == 1 and not kw:
        return (f"{spell('jax.numpy.broadcast_to')}({spell('jax.numpy.asarray')}({code(args[0].value)}, "
                f"dtype={value}.dtype), {value}.shape)")
    return None


def _array(node: cst.BaseExpression) -> cst.BaseExpression:
    """``x.data`` → ``x`` (the array itself)."""
    return node.value if isinstance(node, cst.Attribute) and node.attr.value == "data" else node


def _update(small: cst.BaseSmallStatement) -> tuple[cst.BaseExpression, object] | None:
    """(the array an in-place statement changes, the call or augmented assignment) of ``x.add_(v)`` /
    ``x.data.mul_(v)`` / ``x += v`` / ``x.data += v``, else None."""
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) \
            and isinstance(small.value.func, cst.Attribute) and small.value.func.attr.value.endswith("_"):
        return _array(small.value.func.value), small.value
    if isinstance(small, cst.AugAssign):
        return _array(small.target), small
    return None


def _root(node: cst.BaseExpression) -> str | None:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


class _File:
    """What the file says of its module classes: each class's submodules (``self.fc = nn.Linear(...)`` in
    __init__ → "torch.nn.Linear", ``self.block = Block(...)`` → "Block")."""

    def __init__(self, module: cst.Module, ctx):
        from fwport.packs.torch2jax.passes.modules import is_module_class
        self.ctx = ctx
        self.classes: dict[str, dict[str, str | None]] = {}
        self.names = {s.name.value for s in module.body if isinstance(s, cst.ClassDef) and is_module_class(s, ctx)}
        for s in module.body:
            if isinstance(s, cst.ClassDef) and s.name.value in self.names:
                fields: dict[str, str | None] = {}
                for fn in s.body.body if isinstance(s.body, cst.IndentedBlock) else ():
                    if not (isinstance(fn, cst.FunctionDef) and fn.name.value == "__init__"):
                        continue
                    for a in find_all(fn, cst.Assign):
                        for t in a.targets:
                            d = dotted_text(t.target) or ""
                            if d.startswith("self.") and d.count(".") == 1:
                                kind = self.built(a.value)
                                fields[d[5:]] = kind if d[5:] not in fields or fields[d[5:]] == kind else None
                self.classes[s.name.value] = fields
        source = ctx.analyses["parsed"][1] if "parsed" in ctx.analyses else module.code
        # PyTorch's parameters() leave out buffers and tensors kept in plain attributes; Equinox holds them as arrays
        self.non_parameters = bool(re.search(r"\bregister_buffer\s*\(|\bself\.\w+\s*=\s*torch\.(?!nn\b)", source))

    def built(self, value: cst.BaseExpression) -> str | None:
        """The class a call builds (a module class of the file by name, or a torch.nn layer), through .to()/.cuda()."""
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value in _CHAINED:
            value = value.func.value
        if not isinstance(value, cst.Call):
            return None
        if isinstance(value.func, cst.Name) and value.func.value in self.names:
            return value.func.value
        q = self.ctx.imports.resolve(value.func) or ""
        return q if q.startswith("torch.nn.") and q[9:10].isupper() and q.count(".") == 2 else None

    def path_layer(self, cls: str, path: list[str]) -> str | None:
        """The layer at the end of ``path`` (attributes) from a module of class ``cls``, else None."""
        for attr in path:
            fields = self.classes.get(cls)
            if fields is None or fields.get(attr) is None:
                return None
            cls = fields[attr]
        return cls


class _Scope(BindingWalker):
    """The model names one scope (a module's or a function's statements, not nested ones) binds (the shared binding
    walker's bindings): bound by a plain assignment to a module call and by nothing else, held by no other name."""

    def __init__(self, body, params: set[str], file: _File):
        super().__init__(lambdas=False)
        self.file = file
        self.models: dict[str, str] = {}
        self.other: set[str] = set(params)
        self.globals: set[str] = set()  # the names a `global` statement declares (nonlocal ones are in other)
        for node in body:
            scan(node, self)
        for n in self.other:
            self.models.pop(n, None)

    def visit_Assign(self, node: cst.Assign) -> None:
        values = node.value.elements if isinstance(node.value, (cst.Tuple, cst.List)) else [node.value]
        for v in values:  # `d = model`, `w = model.fc.weight`, `a, b = model, x`: another name holds it
            v = v.value if isinstance(v, cst.BaseElement) else v
            if isinstance(v, (cst.Name, cst.Attribute)):
                self.other.add(_root(v) or "")
        super().visit_Assign(node)

    def visit_Global(self, node: cst.Global) -> None:
        self.globals.update(n.name.value for n in node.names)

    def bound(self, target, how, value) -> None:
        if not isinstance(target, cst.Name):
            return
        name = target.value
        kind = self.file.built(value) if how == "assign" and value is not None else None
        if kind is None or self.models.get(name, kind) != kind:
            self.other.add(name)
        else:
            self.models[name] = kind


class _Rewrite(cst.CSTTransformer):
    """The statements of one scope (nested functions and classes are scopes of their own)."""

    def __init__(self, ctx, file: _File, scope: _Scope, top: cst.CSTNode):
        super().__init__()
        self.ctx, self.file, self.scope, self.top = ctx, file, scope, top
        self.changed = 0
        self.rebound: set[str] = set()  # the model names a rewrite rebinds
        self.seen: set[int] = set()  # the statements (ids of the originals) rewritten or given an error here

    def visit_FunctionDef(self, node) -> bool:
        return node is self.top

    def visit_ClassDef(self, node) -> bool:
        return False

    def visit_Lambda(self, node) -> bool:
        return False

    def leave_For(self, original: cst.For, updated: cst.For):
        it = original.iter
        if not (isinstance(it, cst.Call) and not it.args and isinstance(it.func, cst.Attribute)
                and it.func.attr.value == "parameters" and isinstance(it.func.value, cst.Name)
                and isinstance(original.target, cst.Name) and original.orelse is None
                and isinstance(original.body, cst.IndentedBlock)):
            return updated
        model, p = it.func.value.value, original.target.value
        if model not in self.scope.models or self.file.non_parameters:
            return updated
        spell = self.ctx.spell_text
        value = p
        for line in original.body.body:
            if not isinstance(line, cst.SimpleStatementLine):
                return updated
            for small in line.body:
                found = _update(small)
                if found is None or code(found[0]) != p:
                    return updated
                change = found[1]
                reads = change.args if isinstance(change, cst.Call) else [change.value]
                if any(find_all(a, cst.Call) or any(n.value == p for n in find_all(a, cst.Name)) for a in reads):
                    return updated  # (reads the parameter, or calls something: a draw would need a key per array)
                new = _change(value, change, spell)
                if new is None:
                    return updated
                value = new
        if value == p:
            return updated
        self.changed += 1
        self.rebound.add(model)
        self.ctx.report(Severity.INFO, "idiom-replaced", f"for {p} in {model}.parameters(): in-place changes of each "
                        f"parameter → {model} rebuilt with the same change of each floating array "
                        "(jax.tree_util.tree_map; a layer's state left whole): a JAX array is immutable", original)
        text = (f"{spell('jax.tree_util.tree_map')}(lambda {p}: {value} if "
                f"{spell('equinox.is_inexact_array')}({p}) else {p}, {model}, "
                f"is_leaf=lambda x: isinstance(x, {spell('equinox.nn.StateIndex')}))")
        return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(model))], expr(text))],
                                       leading_lines=updated.leading_lines)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        if len(original.body) != 1:
            return updated
        small = original.body[0]
        found = _update(small)
        assign = isinstance(small, cst.Assign) and len(small.targets) == 1 \
            and isinstance(small.targets[0].target, cst.Attribute) and small.targets[0].target.attr.value == "data"
        target = small.targets[0].target.value if assign else found[0] if found else None
        if target is None or not isinstance(target, cst.Attribute) or target.attr.value not in ("weight", "bias"):
            return updated
        model = _root(target)
        path = (dotted_text(target) or "").split(".")[1:]
        if model not in self.scope.models or not path:
            return updated
        layer = self.file.path_layer(self.scope.models[model], path[:-1])
        what = code(target)
        fill = found is not None and isinstance(found[1], cst.Call) and found[1].func.attr.value in ("fill_", "zero_")
        exact = layer is not None and (path[-1] in _SAME_LAYOUT.get(layer, ()) or fill and layer in _CONV_BIAS
                                       and path[-1] == "bias")
        spell = self.ctx.spell_text
        new = code(small.value) if assign else _change(what, found[1], spell) if exact else None
        self.seen.add(id(original))
        if not exact or new is None:
            if assign or isinstance(small, cst.AugAssign):  # (no method call: no other pass says anything)
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(small.targets[0].target) if assign else what}"
                                f" {'=' if assign else code(small.operator).strip()} ...: an Equinox module and its arrays "
                                f"are immutable, and fwport cannot prove how Equinox lays out this array of {model} "
                                f"(a layer {'of class ' + layer.rsplit('.', 1)[-1] if layer else 'it does not follow'}): "
                                f"rebuild the model, `{model} = eqx.tree_at(lambda m: m.{'.'.join(path)}, {model}, "
                                "<new value>)`", original)
            return updated
        self.changed += 1
        self.rebound.add(model)
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{what} changed in place → {model} rebuilt with its new value "
                        f"(eqx.tree_at): a JAX array is immutable", original)
        text = f"{spell('equinox.tree_at')}(lambda m: m.{'.'.join(path)}, {model}, {new})"
        return updated.with_changes(body=[cst.Assign([cst.AssignTarget(cst.Name(model))], expr(text))])


def _unprovable(small: cst.BaseSmallStatement) -> str | None:
    """The target (text) of an assignment changing a parameter's values in place that no rewrite here translated:
    ``a.b.weight += v`` / ``a.b.bias -= v`` (through two attributes or more), ``x.<attr>.data = v`` / ``... += v``;
    else None."""
    if isinstance(small, cst.AugAssign):
        target = small.target
    elif isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if not (isinstance(target, cst.Attribute) and target.attr.value == "data"):
            return None
    else:
        return None
    array = _array(target)
    if not isinstance(array, cst.Attribute) or _root(array) is None:
        return None
    if array is not target or isinstance(array.value, cst.Attribute) and array.attr.value in ("weight", "bias"):
        return code(target)
    return None


class _Leftovers(cst.CSTVisitor):
    """The in-place changes of a model's arrays (_unprovable) anywhere in the file, nested functions and classes too,
    that the rewrite neither translated nor refused (``seen``): a model read as a global by a function that also binds
    or aliases it, a model passed as a parameter, one held by an object (``self.model.fc.weight += v``)."""

    def __init__(self, ctx, seen: set[int]):
        super().__init__()
        self.ctx, self.seen = ctx, seen

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        if id(node) in self.seen:
            return False
        for small in node.body:
            target = _unprovable(small)
            if target is not None:
                op = "=" if isinstance(small, cst.Assign) else code(small.operator).strip()
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"{target} {op} ...: changes an array of a "
                                "PyTorch module in place, wherever the module is held; an Equinox module and its arrays "
                                "are immutable, and fwport translates this only on a model the same scope builds "
                                "(`model = Net()`, or a global one the function reads and does not alias): rebuild the "
                                "model where it is held, `model = eqx.tree_at(lambda m: m.<path>, model, <new value>)`, "
                                "and return or pass on the new one", node)
        return False


def run(module: cst.Module, ctx) -> cst.Module:
    """The planner (see the module docstring)."""
    file = _File(module, ctx)
    out = []
    changed = 0
    seen: set[int] = set()
    top = _Scope(module.body, set(), file)
    for s in module.body:
        if isinstance(s, cst.ClassDef):
            out.append(s)
            continue
        if isinstance(s, cst.FunctionDef):
            params = {p.name.value for p in (*s.params.params, *s.params.kwonly_params, *s.params.posonly_params)}
            for star in (s.params.star_arg, s.params.star_kwarg):
                if isinstance(star, cst.Param):
                    params.add(star.name.value)
            body = s.body.body if isinstance(s.body, cst.IndentedBlock) else ()
            scope = _Scope(body, params, file)
            # a model of the module read as a global (declared so, or read and never bound nor aliased here): the
            # rewrite rebinds the global, as PyTorch's change is seen by every reader of the global name
            free = {n: k for n, k in top.models.items()
                    if n not in params and n not in scope.other and n not in scope.models}
            local = set(scope.models)
            scope.models = {**free, **scope.models}
        else:
            scope, local = top, set()
        if not scope.models:
            out.append(s)
            continue
        t = _Rewrite(ctx, file, scope, s)
        # (a copy, as libcst's visit gives, whose every node the walk enters is a new object; trivia shared)
        new = rewrite(s, t, fresh=True)
        seen |= t.seen
        changed += t.changed
        declare = sorted(n for n in t.rebound if isinstance(s, cst.FunctionDef) and n not in scope.globals
                         and n not in local)
        if declare and isinstance(new, cst.FunctionDef) and isinstance(new.body, cst.IndentedBlock):
            line = cst.SimpleStatementLine([cst.Global([cst.NameItem(cst.Name(n)) for n in declare])])
            new = new.with_changes(body=new.body.with_changes(body=[line, *new.body.body]))
        out.append(new)
    scan(module, _Leftovers(ctx, seen))
    return module.with_changes(body=out) if changed else module
