"""Configuration objects a module holds (nanoGPT's ``self.config = config``, a ``@dataclass GPTConfig``) → static
fields of the Equinox module, and the dataclass made hashable.

A PyTorch module may keep any Python object. An Equinox module is a pytree: a field that is not declared static is
a leaf, and ``eqx.filter_jit`` hashes every leaf that is not an array to key its cache. A plain ``@dataclass`` defines
``__eq__`` and so no ``__hash__``: the translated model fails under ``eqx.filter_jit`` with "unhashable type". An
Equinox user declares such a field ``eqx.field(static=True)`` (it is part of the tree's structure, neither trained nor
traced) and makes its value hashable and compared by value: ``@dataclass(frozen=True)``.

A parameter of ``__init__`` is a configuration of this file when its annotation names a dataclass or NamedTuple
class of the file whose fields are plain Python values (int, float, bool, str, None, tuples and Optionals of them),
its default builds one, or every attribute read of it (``config.n_embd`` in ``__init__``, ``self.config.block_size``
in the other methods) is a field of exactly one such class and nothing calls it or indexes it. Then:

- ``self.config = config`` → ``config: GPTConfig = eqx.field(static=True)``;
- ``self.n_head = config.n_head`` (a field annotated int, float, bool or str) → ``n_head: int = eqx.field(static=True)``;
- the dataclass, where not frozen, becomes ``@dataclass(frozen=True)`` (an info finding). A frozen dataclass cannot
  be assigned to: an assignment to a field of one held this way (``self.config.block_size = n``, or ``cfg.x = v`` of
  a name the file builds with it) is an error finding at the assignment; a dataclass whose methods set ``self.x``
  (``__post_init__``) is not frozen and its field stays a leaf, with a warning that ``eqx.filter_jit`` cannot hash it.

The same trap, a set: ``self.skip = set(...)`` (a literal, a comprehension) in ``__init__`` is no pytree node but an
unhashable leaf; where nothing changes it, it is written ``frozenset(...)`` in a static field, else a warning. (Lists,
tuples, dicts and namedtuples are pytree nodes whose Python leaves eqx.filter_jit hashes one by one: no trap.)

An object of a type the file does not tell (an ``argparse.Namespace``, a ``SimpleNamespace``: an ``__init__`` parameter
without annotation or default) held as ``self.config = config`` and read for plain attributes only is replaced by a
field per attribute read (``self.n_cells = config.n_cells``, read as ``self.n_cells``): static where its type is known,
else a plain field (_namespaces, copies). Read otherwise (passed whole, ``self.config.model.x``): a warning. Annotated
with a class of another file: a static field with a warning that the class must be hashable (frozen).
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import code
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, find_all, method_of

#: ctx.analyses: module class → {attribute: its field declaration} (the config fields and the scalars read from them)
HELD = "torch2jax.configs.held"
#: ctx.analyses: the dataclasses of the file to write ``frozen=True``
FREEZE = "torch2jax.configs.freeze"
#: ctx.analyses: module class → the attributes __init__ sets to a set that nothing changes (written frozenset)
SETS = "torch2jax.configs.sets"
#: ctx.analyses: module class → the attributes holding a configuration that a method replaces (surgery.py)
REPLACED = "torch2jax.configs.replaced"

_PLAIN = frozenset({"int", "float", "bool", "str", "None", "Optional", "Union", "tuple", "Tuple", "Literal",
                    "typing", "Ellipsis"})
_SCALARS = frozenset({"int", "float", "bool", "str"})


class Config:
    def __init__(self, cls: cst.ClassDef, kind: str, frozen: bool, fields: dict[str, str]):
        self.cls, self.kind, self.frozen, self.fields = cls, kind, frozen, fields
        self.name = cls.name.value
        # a method assigning `self.x` (__post_init__): it cannot be frozen as it is
        self.sets_itself = any(isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self"
                               for f in cls.body.body if isinstance(f, cst.FunctionDef)
                               for a in find_all(f, cst.AssignTarget) for t in [a.target])



def class_inits(module: cst.Module, classes: set[str]):
    """(class statement, its ``__init__``) for each class of ``classes`` at the module's top level that defines one."""
    for cls in module.body:
        if isinstance(cls, cst.ClassDef) and cls.name.value in classes and (init := method_of(cls, "__init__")) is not None:
            yield cls, init

def _dataclass_decorator(cls: cst.ClassDef, ctx) -> cst.Decorator | None:
    for d in cls.decorators:
        f = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if ctx.imports.resolve(f) == "dataclasses.dataclass":
            return d
    return None


def _frozen(d: cst.Decorator) -> bool:
    return isinstance(d.decorator, cst.Call) and any(
        a.keyword and a.keyword.value == "frozen" and code(a.value) == "True" for a in d.decorator.args)


def _plain(ann: cst.BaseExpression) -> bool:
    """The annotation admits plain hashable Python values only (``int``, ``Optional[str]``, ``tuple[int, ...]``)."""
    return all(n.value in _PLAIN for n in find_all(ann, cst.Name)) and not find_all(ann, cst.Call)


def _fields(cls: cst.ClassDef) -> dict[str, str] | None:
    """The class's fields → their annotation, or None when one may hold something else than a plain value."""
    out: dict[str, str] = {}
    for st in cls.body.body:
        if isinstance(st, cst.SimpleStatementLine):
            for small in st.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    ann = small.annotation.annotation
                    if "ClassVar" in code(ann):
                        continue
                    if not _plain(ann) or isinstance(small.value, cst.Call):  # field(default_factory=list)
                        return None
                    out[small.target.value] = code(ann)
    return out or None


def analyse(module: cst.Module, ctx) -> dict[str, Config]:
    """The configuration classes of the file: dataclasses and NamedTuple subclasses of plain fields."""
    out: dict[str, Config] = {}
    for s in module.body:
        if not isinstance(s, cst.ClassDef):
            continue
        d = _dataclass_decorator(s, ctx)
        named = any(ctx.imports.resolve(b.value) == "typing.NamedTuple" for b in s.bases)
        if d is None and not named:
            continue
        fields = _fields(s)
        if fields is not None:
            out[s.name.value] = Config(s, "namedtuple" if named else "dataclass", named or _frozen(d), fields)
    return out


def _reads(node: cst.CSTNode, name: str) -> tuple[set[str], bool]:
    """The attributes read of ``name`` (``name.x``) in ``node``, and whether it is also called or indexed."""
    attrs = {a.attr.value for a in find_all(node, cst.Attribute) if isinstance(a.value, cst.Name) and a.value.value == name}
    odd = any(isinstance(c.func, cst.Name) and c.func.value == name for c in find_all(node, cst.Call)) or any(
        isinstance(s.value, cst.Name) and s.value.value == name for s in find_all(node, cst.Subscript))
    return attrs, odd


def _held_reads(cls: cst.ClassDef, attr: str) -> tuple[set[str], bool]:
    """The attributes read of ``self.<attr>`` in the class's methods, and whether it is called or indexed there."""
    text = "self." + attr
    attrs = {a.attr.value for a in find_all(cls, cst.Attribute) if dotted_text(a.value) == text}
    odd = any(dotted_text(c.func) == text for c in find_all(cls, cst.Call)) or any(
        dotted_text(s.value) == text for s in find_all(cls, cst.Subscript))
    return attrs, odd


def _param_config(p: cst.Param, init: cst.FunctionDef, configs: dict[str, Config]) -> Config | None:
    if p.annotation is not None:
        ann = p.annotation.annotation
        name = ann.evaluated_value if isinstance(ann, cst.SimpleString) else code(ann)
        return configs.get(name)
    if isinstance(p.default, cst.Call) and isinstance(p.default.func, cst.Name):
        return configs.get(p.default.func.value)
    if p.default is not None:
        return None
    attrs, odd = _reads(init.body, p.name.value)
    if odd or not attrs:
        return None
    fits = [c for c in configs.values() if attrs <= set(c.fields)]
    return fits[0] if len(fits) == 1 else None


def _bare_names(target: cst.BaseExpression) -> list[cst.Name]:
    """The names an assignment target binds (``a``, ``a, b``), not those of an attribute or subscript."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _bare_names(e.value)]
    return []


def _assigned_once(cls: cst.ClassDef) -> dict[str, int]:
    n: dict[str, int] = {}
    for a in find_all(cls, cst.AssignTarget):
        t = dotted_text(a.target) or ""
        if t.startswith("self.") and t.count(".") == 1:
            n[t[5:]] = n.get(t[5:], 0) + 1
    for a in find_all(cls, cst.AugAssign):
        t = dotted_text(a.target) or ""
        if t.startswith("self.") and t.count(".") == 1:
            n[t[5:]] = n.get(t[5:], 0) + 2
    return n


def plan(module: cst.Module, ctx, classes: set[str]) -> None:
    """Which attributes of the module classes hold a configuration (or a scalar read of one), into ctx.analyses."""
    _sets(module, ctx, classes)
    configs = analyse(module, ctx)
    if not configs:
        _namespaces(module, ctx, classes, configs)
        return
    held: dict[str, dict[str, str]] = ctx.analyses.setdefault(HELD, {})
    used: dict[str, Config] = {}
    holders: dict[str, dict[str, str]] = {}  # module class → {attribute holding a configuration: its class}
    static = f" = {ctx.spell_text('equinox.field')}(static=True)"
    for cls, init in class_inits(module, classes):
        rebound = {n.value for a in find_all(init, cst.AssignTarget) for n in _bare_names(a.target)}
        params = {p.name.value: c for p in (*init.params.params, *init.params.kwonly_params)
                  if p.name.value not in rebound for c in [_param_config(p, init, configs)] if c is not None}
        if not params:
            continue
        once = _assigned_once(cls)
        mine: dict[str, str] = {}
        for st in init.body.body:
            if not (isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign)
                    and len(st.body[0].targets) == 1):
                continue
            t, v = dotted_text(st.body[0].targets[0].target) or "", st.body[0].value
            if not (t.startswith("self.") and t.count(".") == 1 and once.get(t[5:]) == 1):
                continue
            attr = t[5:]
            if isinstance(v, cst.Name) and v.value in params:
                c = params[v.value]
                attrs, odd = _held_reads(cls, attr)
                if odd or not attrs <= set(c.fields):
                    continue
                if c.kind == "dataclass" and not c.frozen and c.sets_itself:
                    ctx.report(Severity.WARNING, "unsupported-construct", f"self.{attr} holds a {c.name}, a dataclass "
                               "whose methods assign its fields: it stays a leaf of the Equinox module, which "
                               "eqx.filter_jit cannot hash (unhashable type); make it frozen (set fields in "
                               "__post_init__ with object.__setattr__) and declare the field eqx.field(static=True)",
                               st)
                    continue
                mine[attr] = c.name + static  # (quoted where the class comes later: _quote_forward_fields)
                used[c.name] = c
                holders.setdefault(cls.name.value, {})[attr] = c.name
            elif isinstance(v, cst.Attribute) and isinstance(v.value, cst.Name) and v.value.value in params:
                kind = params[v.value.value].fields.get(v.attr.value)
                if kind in _SCALARS:
                    mine[attr] = kind + static
        if mine:
            held.setdefault(cls.name.value, {}).update(mine)
    freeze = {n for n, c in used.items() if c.kind == "dataclass" and not c.frozen}
    ctx.analyses[FREEZE] = freeze
    for n in sorted(freeze):
        ctx.report(Severity.INFO, "idiom-replaced", f"@dataclass {n} → @dataclass(frozen=True): a module holds it as a "
                   "static field (eqx.field(static=True)), which eqx.filter_jit hashes and compares by value; a "
                   "frozen dataclass is hashable", configs[n].cls)
    for cls in module.body:
        if isinstance(cls, cst.ClassDef) and cls.name.value in held:
            _replaced(cls, ctx, held[cls.name.value], {a: used[h] for a, h in holders.get(cls.name.value, {}).items()
                                                       if h in freeze})
    for n in sorted(freeze):
        _mutations(module, ctx, configs[n])
    _namespaces(module, ctx, classes, configs)


def _field_assignments(node: cst.CSTNode, base: set[str], fields) -> list[tuple[cst.CSTNode, cst.Attribute]]:
    """The assignments (and augmented ones) to ``<base>.<a field>`` in ``node``: (statement part, target)."""
    out = []
    for a in (*find_all(node, cst.Assign), *find_all(node, cst.AugAssign)):
        for t in ([x.target for x in a.targets] if isinstance(a, cst.Assign) else [a.target]):
            if isinstance(t, cst.Attribute) and t.attr.value in fields and dotted_text(t.value) in base:
                out.append((a, t))
    return out


def _replaced(cls: cst.ClassDef, ctx, held: dict[str, str], frozen: dict[str, Config]) -> None:
    """A frozen configuration assigned to in a method (nanoGPT's crop_block_size: ``self.config.block_size = n``):
    model surgery (surgery.py) writes the method as one returning a new model, the configuration replaced by
    ``dataclasses.replace``; the field is a leaf (eqx.tree_at replaces leaves only; eqx.filter_jit hashes it) and
    REPLACED names it. An assignment in ``__init__`` (frozen at once) is an error."""
    for attr, c in frozen.items():
        for fn in cls.body.body:
            if not isinstance(fn, cst.FunctionDef):
                continue
            hits = _field_assignments(fn, {"self." + attr}, c.fields)
            if not hits:
                continue
            if fn.name.value == "__init__":
                for node, t in hits:
                    _refuse(ctx, node, t, c)
                continue
            held[attr] = c.name  # a leaf, not static
            ctx.analyses.setdefault(REPLACED, {}).setdefault(cls.name.value, set()).add(attr)


def _refuse(ctx, node, t: cst.Attribute, c: Config) -> None:
    ctx.report(Severity.ERROR, "unsupported-construct", f"{code(t)} = ... assigns a field of a {c.name}, which the "
               "translation makes frozen (a module holds it as a static field, which eqx.filter_jit must hash): "
               f"build the configuration with its final values, e.g. `dataclasses.replace(config, {t.attr.value}=...)`, "
               "and the model from it", node)


def _mutations(module: cst.Module, ctx, c: Config) -> None:
    """Assignments to a field of a name the file builds with the frozen class (``cfg = GPTConfig(); cfg.n_layer =
    4``): error findings."""
    built = {dotted_text(a.target) for asg in find_all(module, cst.Assign)
             if isinstance(asg.value, cst.Call) and isinstance(asg.value.func, cst.Name) and asg.value.func.value == c.name
             for a in asg.targets}
    for node, t in _field_assignments(module, built, c.fields):
        _refuse(ctx, node, t, c)


def freeze(body: list, ctx) -> list:
    """``@dataclass`` → ``@dataclass(frozen=True)`` for the classes plan() chose."""
    names = ctx.analyses.get(FREEZE)
    if not names:
        return body
    out = []
    for s in body:
        if isinstance(s, cst.ClassDef) and s.name.value in names:
            decs = []
            for d in s.decorators:
                f = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
                if ctx.imports.resolve(f) == "dataclasses.dataclass":
                    frozen = cst.Arg(keyword=cst.Name("frozen"), value=cst.Name("True"),
                                     equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
                    call = d.decorator if isinstance(d.decorator, cst.Call) else cst.Call(func=d.decorator)
                    args = [a for a in call.args if not (a.keyword and a.keyword.value == "frozen")]
                    if args:
                        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                    d = d.with_changes(decorator=call.with_changes(args=[*args, frozen]))
                decs.append(d)
            s = s.with_changes(decorators=decs)
        out.append(s)
    return out


_SET_CHANGES = frozenset({"add", "update", "discard", "remove", "pop", "clear", "intersection_update",
                          "difference_update", "symmetric_difference_update"})


def _is_set(v: cst.BaseExpression) -> bool:
    return isinstance(v, (cst.Set, cst.SetComp)) or isinstance(v, cst.Call) and dotted_text(v.func) == "set"


def _sets(module: cst.Module, ctx, classes: set[str]) -> None:
    """``self.names = set(...)`` (a literal, a comprehension) in ``__init__``: a set is no pytree node, so it would be
    a leaf that eqx.filter_jit cannot hash. Where nothing changes it (``.add``, ``|=``, another assignment) it is
    written ``frozenset(...)``, a static field; else a warning."""
    static = f" = {ctx.spell_text('equinox.field')}(static=True)"
    for cls, init in class_inits(module, classes):
        once = _assigned_once(cls)
        for st in init.body.body:
            if not (isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign)
                    and len(st.body[0].targets) == 1 and _is_set(st.body[0].value)):
                continue
            t = dotted_text(st.body[0].targets[0].target) or ""
            if not (t.startswith("self.") and t.count(".") == 1):
                continue
            changed = once.get(t[5:]) != 1 or any(
                isinstance(c.func, cst.Attribute) and dotted_text(c.func.value) == t and c.func.attr.value in _SET_CHANGES
                for c in find_all(cls, cst.Call))
            if changed:
                ctx.report(Severity.WARNING, "unsupported-construct", f"{t} is a set that the module changes: a leaf "
                           "of the Equinox module, which eqx.filter_jit cannot hash (unhashable type: 'set'); keep it "
                           "outside the module, or build it once as a frozenset (eqx.field(static=True))", st)
                continue
            ctx.analyses.setdefault(HELD, {}).setdefault(cls.name.value, {})[t[5:]] = "frozenset" + static
            ctx.analyses.setdefault(SETS, {}).setdefault(cls.name.value, set()).add(t[5:])
            ctx.report(Severity.INFO, "idiom-replaced", f"{t} = set → frozenset, a static field: a set is a leaf of "
                       "an Equinox module that eqx.filter_jit cannot hash; nothing changes this one", st)


class _Frozensets(cst.CSTTransformer):
    def __init__(self, attrs: set[str]):
        super().__init__()
        self.attrs = attrs

    def visit_FunctionDef(self, node) -> bool:
        return node.name.value == "__init__"

    def leave_Assign(self, original, updated):
        t = dotted_text(updated.targets[0].target) or "" if len(updated.targets) == 1 else ""
        if not (t[5:] in self.attrs and t.startswith("self.") and _is_set(updated.value)):
            return updated
        v = updated.value
        if isinstance(v, cst.Call):  # set(x) → frozenset(x)
            return updated.with_changes(value=v.with_changes(func=cst.Name("frozenset")))
        return updated.with_changes(value=cst.Call(cst.Name("frozenset"), [cst.Arg(v)]))


def frozensets(cls: cst.ClassDef, ctx) -> cst.ClassDef:
    """The sets _sets chose, in the class's ``__init__``, written ``frozenset(...)``."""
    attrs = ctx.analyses.get(SETS, {}).get(cls.name.value)
    return cls.visit(_Frozensets(attrs)) if attrs else cls


# --- an object of another kind read for its attributes (argparse.Namespace, SimpleNamespace, an imported config) ---

#: ctx.analyses: module class → {attribute holding such an object: {attribute read of it: the field holding a copy}}
COPIED = "torch2jax.configs.copied"

#: attributes of a tensor or a layer: an object read for these is no configuration
_NOT_CONFIG = frozenset({"shape", "dtype", "device", "weight", "bias", "data", "grad", "T", "ndim", "training",
                         "requires_grad", "in_features", "out_features", "num_embeddings", "embedding_dim"})
_NAMESPACES = frozenset({None, "argparse.Namespace", "types.SimpleNamespace"})
_ARGPARSE_TYPES = {"int": "int", "float": "float", "str": "str"}


def _argparse_types(module: cst.Module, ctx) -> dict[str, str]:
    """``parser.add_argument("--n_embed", type=int)`` of the file (``action="store_true"``: bool) → {dest: type};
    an argument taking several values (``nargs``) is left out."""
    out: dict[str, str] = {}
    for c in find_all(module, cst.Call):
        if not (isinstance(c.func, cst.Attribute) and c.func.attr.value == "add_argument"):
            continue
        names = [a.value.evaluated_value for a in c.args if a.keyword is None and isinstance(a.value, cst.SimpleString)]
        kw = {a.keyword.value: a.value for a in c.args if a.keyword is not None}
        longs = [n for n in names if isinstance(n, str) and n.startswith("--")] or names
        dest = kw["dest"].evaluated_value if isinstance(kw.get("dest"), cst.SimpleString) else \
            longs[0].lstrip("-").replace("-", "_") if longs and isinstance(longs[0], str) else None
        if dest is None or "nargs" in kw:
            continue
        action = kw["action"].evaluated_value if isinstance(kw.get("action"), cst.SimpleString) else None
        if action in ("store_true", "store_false"):
            out[dest] = "bool"
        elif action is None and isinstance(kw.get("type"), cst.Name) and kw["type"].value in _ARGPARSE_TYPES:
            out[dest] = _ARGPARSE_TYPES[kw["type"].value]
    return out


class _Parents(cst.CSTVisitor):
    def __init__(self):
        super().__init__()
        self.parent: dict[int, cst.CSTNode] = {}
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node) -> bool:
        if self.stack:
            self.parent[id(node)] = self.stack[-1]
        self.stack.append(node)
        return True

    def on_leave(self, original) -> None:
        self.stack.pop()


def _usage_type(node: cst.CSTNode, parent: dict[int, cst.CSTNode]) -> str | None:
    """What one read tells of its value's type: ``bool`` as a condition, ``str`` compared with a string, ``int`` in
    arithmetic with an integer (``2 * config.d_hidden``; not ``/`` or ``**``)."""
    p = parent.get(id(node))
    negated = False
    while isinstance(p, cst.BooleanOperation) or isinstance(p, cst.UnaryOperation) and isinstance(p.operator, cst.Not):
        negated = negated or isinstance(p, cst.UnaryOperation)
        node, p = p, parent.get(id(p))
    if negated or isinstance(p, (cst.If, cst.While, cst.IfExp)) and p.test is node:
        return "bool"
    if isinstance(p, cst.BinaryOperation) and isinstance(p.left if p.right is node else p.right, cst.Integer) \
            and not isinstance(p.operator, (cst.Divide, cst.Power)):
        return "int"
    if isinstance(p, cst.ComparisonTarget):
        p = parent.get(id(p))
    if isinstance(p, cst.Comparison) and any(isinstance(x, cst.SimpleString)
                                             for x in (p.left, *(t.comparator for t in p.comparisons))):
        return "str"
    return None


def _namespaces(module: cst.Module, ctx, classes: set[str], configs: dict[str, Config]) -> None:
    """``self.config = config`` of an ``__init__`` parameter the file cannot type (an argparse.Namespace, a
    SimpleNamespace: no annotation, no default), read for attributes only (``self.config.n_cells``): such an object
    is a leaf of the Equinox module that eqx.filter_jit cannot hash. Each attribute read is copied in its place
    (``self.n_cells = config.n_cells``) and read from the copy (``self.n_cells``): a static field where its type is
    known (an ``add_argument`` of the file, a condition: bool, a comparison with a string: str), else a plain one
    (a Python value beside the arrays, which eqx.filter_jit hashes; a list a pytree node). Annotated with a class of
    another file, or read otherwise: a warning that it must be hashable."""
    typed = None
    static = f" = {ctx.spell_text('equinox.field')}(static=True)"
    for cls, init in class_inits(module, classes):
        rebound = {n.value for a in find_all(init, cst.AssignTarget) for n in _bare_names(a.target)}
        params = {p.name.value: p for p in (*init.params.params, *init.params.kwonly_params)
                  if p.name.value not in rebound and p.default is None and _param_config(p, init, configs) is None}
        once = _assigned_once(cls)
        held = ctx.analyses.get(HELD, {}).get(cls.name.value, {})
        taken = set(once) | {f.name.value for f in cls.body.body if isinstance(f, cst.FunctionDef)}
        parent: dict[int, cst.CSTNode] | None = None  # (node → its parent in the class, built once needed)
        for st in init.body.body:
            if not (isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign)
                    and len(st.body[0].targets) == 1 and isinstance(st.body[0].value, cst.Name)
                    and st.body[0].value.value in params):
                continue
            t, p = dotted_text(st.body[0].targets[0].target) or "", params[st.body[0].value.value]
            if not (t.startswith("self.") and t.count(".") == 1 and once.get(t[5:]) == 1) or t[5:] in held:
                continue
            if p.annotation is not None and (_annotated(ctx, p) not in _NAMESPACES or _relative(module, p)):
                _imported(cls, ctx, st, t, p, held, static, _relative(module, p))
                continue
            reads, odd = _reads(init.body, p.name.value)
            if parent is None:
                parents = _Parents()
                cls.visit(parents)
                parent = parents.parent
            mentions = [a for a in find_all(cls, cst.Attribute) if dotted_text(a) == t]
            uses = [parent[id(m)] for m in mentions if isinstance(parent.get(id(m)), cst.Attribute)
                    and parent[id(m)].value is m]
            names = {u.attr.value for u in uses} | reads
            reads_of = [a for a in find_all(init.body, cst.Attribute)
                        if isinstance(a.value, cst.Name) and a.value.value == p.name.value]

            def within(n: cst.CSTNode, *kinds) -> bool:  # n is the function called, the value indexed or read of
                q = parent.get(id(n))
                return isinstance(q, kinds) and (q.func if isinstance(q, cst.Call) else q.value) is n

            if odd or not names or names & _NOT_CONFIG or any(within(n, cst.Call) for n in (*mentions, *uses, *reads_of)):
                continue  # no configuration: a layer, a tensor, a callable, a dict
            stored = any(isinstance(parent.get(id(u)), (cst.AssignTarget, cst.Del)) or isinstance(
                parent.get(id(u)), cst.AugAssign) and parent[id(u)].target is u for u in uses)
            if stored or any(within(u, cst.Attribute) for u in uses) or len(uses) != len(mentions) - 1:
                if not any(within(r, cst.Subscript) for r in (*uses, *reads_of)):  # else perhaps a layer
                    ctx.report(Severity.WARNING, "unsupported-construct", f"{t} holds {p.name.value}, an object of a "
                               "type the translation cannot tell (an argparse.Namespace?), read otherwise than for "
                               "plain attributes: it is a leaf of the Equinox module, which eqx.filter_jit must hash; "
                               "make it hashable (a frozen dataclass) and declare the field eqx.field(static=True), or "
                               "copy the values the module reads into fields of their own", st)
                continue
            if typed is None:
                typed = _argparse_types(module, ctx)
            copies: dict[str, str] = {}
            for u in uses:
                x = u.attr.value
                if x in copies:
                    continue
                copies[x] = x if x not in taken and x not in copies.values() else f"{t[5:]}_{x}"
            kinds: dict[str, set] = {}
            for u in (*uses, *reads_of):
                kinds.setdefault(u.attr.value, set()).add(_usage_type(u, parent))
            fields = ctx.analyses.setdefault(HELD, {}).setdefault(cls.name.value, {})
            for x, f in copies.items():
                told = kinds[x] - {None}  # (a read that tells nothing contradicts nothing)
                kind = typed.get(x) or (next(iter(told)) if len(told) == 1 else None)
                indexed = any(u.attr.value == x and isinstance(parent.get(id(u)), cst.Subscript) for u in uses)
                if kind and not indexed:
                    fields[f] = kind + static
            ctx.analyses.setdefault(COPIED, {}).setdefault(cls.name.value, {})[t[5:]] = copies
            ctx.report(Severity.INFO, "idiom-replaced", f"{t} = {p.name.value}, an object read for its attributes "
                       f"only (an argparse.Namespace?) → a field per attribute read ({', '.join(copies.values())}): "
                       "held whole it would be a leaf of the Equinox module that eqx.filter_jit cannot hash", st)


def _annotated(ctx, p: cst.Param) -> str | None:
    """The imported name a parameter's annotation resolves to (None: no annotation, or not an import)."""
    if p.annotation is None:
        return None
    ann = p.annotation.annotation
    try:
        return ctx.imports.resolve(cst.parse_expression(ann.evaluated_value) if isinstance(ann, cst.SimpleString) else ann)
    except cst.ParserSyntaxError:
        return None


def _relative(module: cst.Module, p: cst.Param) -> str | None:
    """``.configs.ModelConfig`` where the parameter's annotation names a class a relative import of the file binds
    (``from .configs import ModelConfig``), which the import table leaves out."""
    ann = p.annotation.annotation
    head = (ann.evaluated_value if isinstance(ann, cst.SimpleString) else code(ann)).split(".")[0]
    for st in module.body:
        for small in st.body if isinstance(st, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.ImportFrom) and small.relative and not isinstance(small.names, cst.ImportStar):
                for a in small.names:
                    if (a.asname.name.value if a.asname else code(a.name)) == head:
                        return "." * len(small.relative) + (code(small.module) + "." if small.module else "") + code(a.name)
    return None


def _imported(cls, ctx, st, t: str, p: cst.Param, held: dict, static: str, relative: str | None = None) -> None:
    """``self.config = config`` of a parameter annotated with a class of another file: a static field of that
    class, with a warning that eqx.filter_jit hashes it (the class must be a frozen dataclass or hashable else)."""
    ann = p.annotation.annotation
    name = ann.evaluated_value if isinstance(ann, cst.SimpleString) else code(ann)
    q = relative or _annotated(ctx, p)
    _, odd = _held_reads(cls, t[5:])
    if odd or any((dotted_text(c.func) or "").startswith(t + ".") for c in find_all(cls, cst.Call)):
        return  # called, indexed or its methods called: no configuration
    if q is None or ctx.imports.is_source(q) or q.split(".")[0] in ("typing", "builtins", "numpy", "collections"):
        return
    ctx.analyses.setdefault(HELD, {}).setdefault(cls.name.value, {})[t[5:]] = name + static
    ctx.report(Severity.WARNING, "unsupported-construct", f"{t} holds a {name} from another file ({q}): a static "
               "field of the Equinox module here, which eqx.filter_jit hashes and compares; it must be hashable and "
               f"compared by value, e.g. @dataclass(frozen=True) (a plain @dataclass fails with \"unhashable type: "
               f"'{name.split('.')[-1]}'\")", st)


class _Copies(cst.CSTTransformer):
    def __init__(self, copied: dict[str, dict[str, str]]):
        super().__init__()
        self.copied = copied
        self.depth = 0

    def visit_FunctionDef(self, node) -> bool:
        self.depth += 1
        return True

    def leave_FunctionDef(self, original, updated):
        self.depth -= 1
        return updated

    def leave_Attribute(self, original, updated):
        if isinstance(updated.value, cst.Attribute) and dotted_text(updated.value.value) == "self" \
                and updated.value.attr.value in self.copied:
            f = self.copied[updated.value.attr.value].get(updated.attr.value)
            if f is not None:
                return updated.with_changes(value=updated.value.value, attr=cst.Name(f))
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        if self.depth != 1 or len(updated.body) != 1 or not isinstance(updated.body[0], cst.Assign):
            return updated
        a = updated.body[0]
        t = dotted_text(a.targets[0].target) or "" if len(a.targets) == 1 else ""
        if not (t.startswith("self.") and t[5:] in self.copied and isinstance(a.value, cst.Name)):
            return updated
        lines = [cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Attribute(cst.Name("self"), cst.Name(f)))],
                                                     cst.Attribute(a.value, cst.Name(x)))])
                 for x, f in self.copied[t[5:]].items()]
        lines[0] = lines[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel(lines)


def copies(cls: cst.ClassDef, ctx) -> cst.ClassDef:
    """The objects _namespaces chose: ``self.config = config`` → a copy per attribute read, read from the copies."""
    copied = ctx.analyses.get(COPIED, {}).get(cls.name.value)
    return cls.visit(_Copies(copied)) if copied else cls
