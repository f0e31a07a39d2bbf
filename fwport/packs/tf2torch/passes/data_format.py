"""``data_format`` / ``padding`` given to a subclass's layers as a constructor parameter, resolved statically.

Keras code written for both layouts passes ``data_format=data_format`` (or ``self.data_format``) to
its layers and computes ``axis = -1 if data_format == "channels_last" else 1`` for its
BatchNormalization. fwport needs the channel axis when it translates each layer, so the value is
resolved where the class is built in this file:

- the parameter's literal default (``data_format="channels_last"``), or
- the value every instantiation of the class in this file passes (a literal, or the caller's own
  resolved parameter: ``ConvBlock(growth_rate, self.data_format)`` inside a resolved class).

The layers are then translated for that value: ``data_format=`` and the names computed from it
(``axis``, ``self.axis``) read as the literals they are, and the class gets a check at the end of
``__init__`` that raises for any other value (so a caller from outside this file cannot get a
silently wrong model). Where no value can be resolved (no default and no instantiation, or
instantiations that disagree) the layers keep their precise refusal.

``padding`` is resolved the same way (keras-io's depth_estimation: ``Conv2D(filters, kernel_size,
strides, padding)`` with ``padding="same"`` a parameter of the block): torch fixes a convolution's
padding when the module is built, and 'same' / 'valid' / 'causal' are translated differently, so the
layers are translated for the value the file builds the class with, and __init__ raises for another.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, bind_call, literal_value
from fwport.core.context import FileContext
from fwport.core.finding import Severity
from fwport.core.names import method_of, scan

KEY = "tf2torch-data-format"  # ctx.analyses: class name → (parameter, value) guarded at the end of __init__
_VALUES = ("channels_last", "channels_first")
_PADDINGS = ("same", "valid", "causal")  # Keras's padding strings (any case)
# the layer arguments resolved: keyword → (the values a class may be translated for, the value None means)
_ARGUMENTS = {"data_format": (_VALUES, "channels_last"), "padding": (_PADDINGS, NOT_LITERAL)}




class _FormatArguments(cst.CSTVisitor):
    """_format_params: the parameters ``__init__`` passes as ``data_format=`` or as a layer's ``padding``, into
    ``out``."""

    def __init__(self, ctx, param_of, out):
        super().__init__()
        self.ctx = ctx
        self.param_of = param_of
        self.out = out

    def visit_Arg(self, n: cst.Arg) -> None:
        if n.keyword is not None and n.keyword.value == "data_format":
            name = self.param_of(n.value)
            if name is not None:
                self.out.setdefault(name, "data_format")

    def visit_Call(self, n: cst.Call) -> None:
        rule = self.ctx.pack.by_name.get(self.ctx.imports.resolve(n.func) or "") if self.ctx is not None else None
        if rule is None or rule.kind != "layer":
            return
        node = bind_call(n, rule).values.get("padding")
        name = self.param_of(node) if node is not None else None
        if name is not None:
            self.out.setdefault(name, "padding")


def _format_params(cls: cst.ClassDef, ctx: FileContext | None = None) -> dict[str, str]:
    """The __init__ parameters passed as ``data_format=`` to a call in __init__, or as the ``padding``
    of a Keras layer built there (bound by the layer's rule: ``Conv2D(f, k, s, padding)``), directly or
    through ``self.<attr> = <param>``: parameter → the argument it gives."""
    init = method_of(cls, "__init__")
    if init is None:
        return {}
    params = [p.name.value for p in init.params.params if p.name.value != "self"]
    attrs = _self_params(init)
    out: dict[str, str] = {}

    def param_of(v: cst.BaseExpression) -> str | None:
        name = v.value if isinstance(v, cst.Name) else (
            attrs.get(v.attr.value) if isinstance(v, cst.Attribute) and isinstance(v.value, cst.Name)
            and v.value.value == "self" else None)
        return name if name in params else None

    scan(init.body, _FormatArguments(ctx, param_of, out))
    for argument in _ARGUMENTS:  # handed on to the classes it builds (ConvBlock(n, data_format))
        if argument in params and argument not in out:
            out[argument] = argument
    return out


class _SelfAssigns(cst.CSTVisitor):
    """_self_params: ``self.<attr>`` → the values assigned to it, into ``seen``."""

    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def visit_Assign(self, n: cst.Assign) -> None:
        for t in n.targets:
            tg = t.target
            if isinstance(tg, cst.Attribute) and isinstance(tg.value, cst.Name) and tg.value.value == "self":
                self.seen.setdefault(tg.attr.value, []).append(n.value)


def _self_params(init: cst.FunctionDef) -> dict[str, str]:
    """self.<attr> → the parameter assigned to it, for attributes assigned exactly once, from a parameter."""
    seen: dict[str, list] = {}
    scan(init.body, _SelfAssigns(seen))
    return {a: vs[0].value for a, vs in seen.items() if len(vs) == 1 and isinstance(vs[0], cst.Name)}


def resolve(classes: dict[str, cst.ClassDef], module: cst.Module, ctx: FileContext) -> dict[str, dict[str, str]]:
    """class name → {parameter: the value its layers are translated for}."""
    wanted = {name: _format_params(c, ctx) for name, c in classes.items()}
    wanted = {k: v for k, v in wanted.items() if v}
    if not wanted:
        return {}
    sites = _instantiations(module, set(wanted))
    out: dict[str, dict[str, str]] = {}
    changed = True
    while changed:
        changed = False
        for name, params in wanted.items():
            init = method_of(classes[name], "__init__")
            for param in params:
                if param in out.get(name, {}):
                    continue
                value = _resolved_value(name, param, init, sites.get(name, []), classes, out, params[param])
                if value is not None:
                    out.setdefault(name, {})[param] = value
                    changed = True
    return out


def _resolved_value(name, param, init, sites, classes, known, argument="data_format") -> str | None:
    plist = [p for p in init.params.params if p.name.value != "self"]
    index = next(i for i, p in enumerate(plist) if p.name.value == param)
    default = literal_value(plist[index].default, NOT_LITERAL) if plist[index].default is not None else NOT_LITERAL
    values = set()
    for call, owner in sites:
        node = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == param), None)
        if node is None:
            positional = [a for a in call.args if a.keyword is None]
            if any(a.star for a in call.args):
                return None
            node = positional[index].value if index < len(positional) else None
        if node is None:
            if default is NOT_LITERAL:
                return None
            values.add(default)
            continue
        v = literal_value(node, NOT_LITERAL)
        if v is NOT_LITERAL and owner is not None:  # the calling class's own resolved parameter
            o_init = method_of(classes[owner], "__init__")
            pname = node.value if isinstance(node, cst.Name) else (
                _self_params(o_init).get(node.attr.value) if isinstance(node, cst.Attribute)
                and isinstance(node.value, cst.Name) and node.value.value == "self" and o_init is not None else None)
            v = known.get(owner, {}).get(pname, NOT_LITERAL) if pname else NOT_LITERAL
            if v is NOT_LITERAL:
                return None  # not resolved (yet)
        if v is NOT_LITERAL:
            return None
        values.add(v)
    if not sites:
        if default is NOT_LITERAL:
            return None
        values.add(default)
    if len(values) != 1:
        return None
    value = values.pop()
    allowed, none = _ARGUMENTS[argument]
    if value is None:
        value = none
    return value if isinstance(value, str) and value.lower() in allowed else None


class _Instantiations(cst.CSTVisitor):
    """_instantiations: every call of a class in ``names``, with the class whose method makes it, into ``out``."""

    def __init__(self, names, out, owner):
        super().__init__()
        self.names = names
        self.out = out
        self.owner = owner

    def visit_ClassDef(self, n: cst.ClassDef) -> None:
        self.owner.append(n.name.value)

    def leave_ClassDef(self, n) -> None:
        self.owner.pop()

    def visit_Call(self, n: cst.Call) -> None:
        if isinstance(n.func, cst.Name) and n.func.value in self.names:
            self.out.setdefault(n.func.value, []).append((n, self.owner[-1] if self.owner else None))


def _instantiations(module: cst.Module, names: set[str]) -> dict[str, list[tuple[cst.Call, str | None]]]:
    """class name → [(call, the class whose method makes it, or None)] for every call of the class."""
    out: dict[str, list] = {}
    owner: list[str] = []
    scan(module, _Instantiations(names, out, owner))
    return out


class Assumed:
    """Reads an __init__ expression under the resolved parameters: a literal, or NOT_LITERAL."""

    def __init__(self, init: cst.FunctionDef, values: dict[str, str]):
        self.values = values
        self.locals: dict[str, list] = {}
        self.attrs: dict[str, list] = {}
        locals_, attrs = self.locals, self.attrs

        class _V(cst.CSTVisitor):
            def visit_Assign(self, n: cst.Assign) -> None:
                for t in n.targets:
                    tg = t.target
                    if isinstance(tg, cst.Name):
                        locals_.setdefault(tg.value, []).append(n.value)
                    elif isinstance(tg, cst.Attribute) and isinstance(tg.value, cst.Name) and tg.value.value == "self":
                        attrs.setdefault(tg.attr.value, []).append(n.value)

            def visit_AugAssign(self, n: cst.AugAssign) -> None:
                if isinstance(n.target, cst.Name):
                    locals_.setdefault(n.target.value, []).extend([None, None])

        scan(init.body, _V())

    def value(self, node: cst.BaseExpression, depth: int = 0):
        """(value, whether it depends on a resolved parameter)."""
        if depth > 8:
            return NOT_LITERAL, False
        lit = literal_value(node, NOT_LITERAL)
        if lit is not NOT_LITERAL:
            return lit, False
        if isinstance(node, cst.Name):
            if node.value in self.values and node.value not in self.locals:
                return self.values[node.value], True
            vs = self.locals.get(node.value)
            if vs and len(vs) == 1 and vs[0] is not None:
                return self.value(vs[0], depth + 1)
            return NOT_LITERAL, False
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
            vs = self.attrs.get(node.attr.value)
            if vs and len(vs) == 1:
                return self.value(vs[0], depth + 1)
            return NOT_LITERAL, False
        if isinstance(node, cst.IfExp):
            test, d = self.value(node.test, depth + 1)
            if test is NOT_LITERAL:
                return NOT_LITERAL, False
            v, d2 = self.value(node.body if test else node.orelse, depth + 1)
            return v, d or d2
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            a, d1 = self.value(node.left, depth + 1)
            b, d2 = self.value(node.comparisons[0].comparator, depth + 1)
            op = type(node.comparisons[0].operator)
            if a is NOT_LITERAL or b is NOT_LITERAL or op not in (cst.Equal, cst.NotEqual):
                return NOT_LITERAL, False
            return (a == b) if op is cst.Equal else (a != b), d1 or d2
        return NOT_LITERAL, False

    def substitute(self, call: cst.Call) -> cst.Call:
        """The call with the arguments that depend on a resolved parameter written as literals."""
        args = []
        changed = False
        for a in call.args:
            if not isinstance(a.value, (cst.Name, cst.Attribute)) or a.star:
                args.append(a)
                continue
            v, depends = self.value(a.value)
            if depends and isinstance(v, (str, int)) and not isinstance(v, bool):
                args.append(a.with_changes(value=cst.parse_expression(repr(v).replace("'", '"'))))
                changed = True
            else:
                args.append(a)
        return call.with_changes(args=args) if changed else call


def record_guard(ctx: FileContext, cls: str, values: dict[str, str], node: cst.CSTNode) -> None:
    guards = ctx.analyses.setdefault(KEY, {})
    if cls in guards:
        return
    guards[cls] = dict(values)
    shown = ", ".join(f"{p}={v!r}" for p, v in values.items())
    ctx.report(Severity.INFO, "layout-kept", f"{cls} is translated for {shown} (the value it gets where it is built "
               f"in this file, or its default): its layers' channel axis or padding must be known when torch builds "
               "them; __init__ raises ValueError for another value", node)


def guard_lines(values: dict[str, str]) -> list[str]:
    return [f'if {p} != "{v}":\n    raise ValueError(f"translated for {p}={v!r} only, got {{{p}!r}}")\n'
            for p, v in values.items()]


IMAGE_FORMAT_READS = frozenset({"keras.backend.image_data_format", "keras.config.image_data_format"})
_IMAGE_FORMAT_SETS = frozenset({"keras.backend.set_image_data_format", "keras.config.set_image_data_format"})


def image_format_set(ctx: FileContext) -> cst.Call | None:
    """The first call of the file that sets Keras's image data format (``K.set_image_data_format(...)``,
    ``keras.config.set_image_data_format(...)``), None where it never does: then ``image_data_format()`` reads
    keras.json, which says 'channels_last' unless the user changed it (what fwport assumes for Conv2D's
    ``data_format=None`` too)."""
    key = "tf2torch-image-format-set"
    if key not in ctx.analyses:
        module = ctx.analyses.get("parsed", (None,))[0]
        found = None
        if module is not None:
            class _V(cst.CSTVisitor):
                def visit_Call(self, n: cst.Call) -> None:
                    nonlocal found
                    if found is None and not isinstance(n.func, cst.Call) \
                            and ctx.imports.resolve(n.func) in _IMAGE_FORMAT_SETS:
                        found = n
            scan(module, _V())
        ctx.analyses[key] = found
    return ctx.analyses[key]


def image_format_message(call_text: str) -> str:
    """The warning where ``image_data_format()`` is read as 'channels_last'."""
    return (f"{call_text} reads Keras's configuration: decided as 'channels_last', Keras's default, which this file "
            "never changes (keras.json could say 'channels_first': then the translation computes another model)")

