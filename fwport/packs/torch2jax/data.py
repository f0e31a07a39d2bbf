"""Helpers the translation writes into a file that loads data (the output never depends on fwport or
PyTorch): ``torch.utils.data.TensorDataset`` → ``ArrayDataset``, ``DataLoader`` → ``NumpyLoader``, and
``torch.load`` / ``torch.save`` of a file of numpy data → ``load_pickled_arrays`` / ``save_pickled_arrays`` (the
training pass decides which), and
checkpoint dicts (``torch.save({'model': model.state_dict(), 'epoch': e}, f)`` and their loads) →
``save_checkpoint`` / ``load_checkpoint``: the pytrees with eqx.tree_serialise_leaves, the rest pickled.

Why a loader written into the file rather than a library: a JAX user batches numpy arrays by hand or
with a small generator; ``NumpyLoader`` is that generator with DataLoader's interface (``len``,
``.dataset``, ``batch_size``, ``shuffle``, ``drop_last``), so the loops over it stay as written.
Shuffling draws from a numpy ``Generator`` seeded with ``seed`` (explicit, like a JAX key), which
gives PyTorch's distribution of orders, not its order. Batches are tuples of JAX arrays, one per
field of the examples; an ``ArrayDataset`` is sliced a batch at a time (its arrays kept as numpy,
so that no batch copies the whole array from the device), any other indexable dataset (a
torchvision dataset, a list of pairs) is read example by example and stacked, as PyTorch's default
collate stacks it.

The call transform ``data-helper`` (ops.py) asks for a helper; the training pass's finishing step writes
the definitions of those the output calls and does not define, after the imports (:func:`finish`).
"""
from __future__ import annotations

import functools

import libcst as cst

from fwport.core import written
from fwport.core.finding import Severity
from fwport.core.names import ValueVisitor, scan
from fwport.core.parse import parse_module
from fwport.core.position import share
from fwport.packs.torch2jax import clashes, vision
from fwport.packs.torch2jax.ops import HELPERS

_ARRAY_DATASET = '''
class ArrayDataset:
    """PyTorch's TensorDataset: example i is the tuple of the i-th rows of arrays of one length."""

    def __init__(self, *arrays):
        assert all(len(a) == len(arrays[0]) for a in arrays), "arrays of different lengths"
        self.arrays = tuple({np}asarray(a) for a in arrays)

    def __len__(self):
        return len(self.arrays[0])

    def __getitem__(self, i):
        return tuple(a[i] for a in self.arrays)
'''

_NUMPY_LOADER = '''
class NumpyLoader:
    """PyTorch's DataLoader batching: batch_size examples at a time, the last batch smaller
    unless drop_last; with shuffle=True a new permutation each pass, drawn from a numpy Generator
    seeded with `seed` (not PyTorch's order). Each batch is a tuple of JAX arrays, one per field of
    the examples (an ArrayDataset is sliced, another dataset read example by example and stacked)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=0):
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self.rng = {np}random.default_rng(seed)

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.dataset)
        order = self.rng.permutation(n) if self.shuffle else {np}arange(n)
        for b in range(len(self)):
            idx = order[b * self.batch_size:(b + 1) * self.batch_size]
            if isinstance(self.dataset, ArrayDataset):
                yield tuple({jnp}asarray(a[idx]) for a in self.dataset.arrays)
                continue
            examples = [self.dataset[int(i)] for i in idx]
            if isinstance(examples[0], (tuple, list)):
                yield tuple({jnp}asarray({np}stack([{np}asarray(e[k]) for e in examples]))
                            for k in range(len(examples[0])))
            else:
                yield {jnp}asarray({np}stack([{np}asarray(e) for e in examples]))
'''

_LOAD_PICKLED_ARRAYS = '''
def load_pickled_arrays(path):
    """What torch.save wrote when it saved no tensor (numpy arrays, numbers, lists, dicts of them): the pickle
    in its zip archive, read without PyTorch. A tensor inside is an error (reading it needs PyTorch)."""
    import pickle
    import zipfile

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if module == "torch" or module.startswith("torch."):
                self.persistent_load(None)
            return super().find_class(module, name)

        def persistent_load(self, pid):
            raise ValueError(f"{{path}} holds a PyTorch tensor: save it as numpy (tensor.numpy()) and load that")

    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith("data.pkl"))
        with archive.open(name) as f:
            return Unpickler(f).load()
'''

_SAVE_PICKLED_ARRAYS = '''
def save_pickled_arrays(obj, f):
    """What torch.save writes of data holding no tensor (numpy arrays, numbers, lists, dicts of them): the pickle
    in a zip archive of torch.save's layout, written without PyTorch; load_pickled_arrays and
    torch.load(f, weights_only=False) read it."""
    import pickle
    import sys
    import zipfile

    with zipfile.ZipFile(f, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(obj, protocol=2))
        archive.writestr("archive/byteorder", sys.byteorder)
        archive.writestr("archive/version", "3\\n")
'''

_SAVE_CHECKPOINT = '''
def save_checkpoint(path, checkpoint, trees):
    """A checkpoint dict in one pickle: the entries named in `trees` (a model, an optimizer state: pytrees of
    arrays) as the bytes eqx.tree_serialise_leaves writes, the others (numbers, strings) as they are."""
    import io
    import pickle

    saved = dict(checkpoint)
    for k in trees:
        buffer = io.BytesIO()
        {eqx}tree_serialise_leaves(buffer, checkpoint[k])
        saved[k] = buffer.getvalue()
    with open(path, "wb") as f:
        pickle.dump((saved, tuple(trees)), f)
'''

_LOAD_CHECKPOINT = '''
def load_checkpoint(path, like):
    """The dict save_checkpoint wrote: its plain values, and each pytree asked for read into like[key], a tree of
    the same structure (the model as built, the optimizer state as initialised); the pytrees not asked for left out."""
    import io
    import pickle

    with open(path, "rb") as f:
        saved, trees = pickle.load(f)
    checkpoint = {{k: v for k, v in saved.items() if k not in trees}}
    for k in trees:
        if k in like:
            checkpoint[k] = {eqx}tree_deserialise_leaves(io.BytesIO(saved[k]), like[k])
    return checkpoint
'''

# name → its text; a helper's dependencies are written with it (vision.py: torchvision's datasets, transforms, save_image)
TEXTS = {"ArrayDataset": _ARRAY_DATASET, "NumpyLoader": _NUMPY_LOADER, "load_pickled_arrays": _LOAD_PICKLED_ARRAYS,
         "save_pickled_arrays": _SAVE_PICKLED_ARRAYS,
         "save_checkpoint": _SAVE_CHECKPOINT, "load_checkpoint": _LOAD_CHECKPOINT, **vision.TEXTS}
DEPS = {"NumpyLoader": ("ArrayDataset",), **vision.DEPS}  # NumpyLoader tests isinstance(dataset, ArrayDataset)


class _Refs(cst.CSTVisitor):
    """The helpers the output names and defines, by the names they are written under (``helper``: written name →
    helper; fwport/core/written.py)."""

    def __init__(self, helper: dict[str, str]):
        self.helper = helper
        self.names: set[str] = set()
        self.defined: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.helper:
            self.names.add(self.helper[node.value])

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if node.name.value in self.helper:
            self.defined.add(self.helper[node.name.value])

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value in self.helper:
            self.defined.add(self.helper[node.name.value])


def finish(module: cst.Module, ctx) -> cst.Module:
    """The helpers the output uses and does not define, after the imports at the top of the file."""
    if not ctx.analyses.get(HELPERS):
        return module
    refs = _Refs({written.name(ctx, n): n for n in TEXTS})  # (a helper the file's names leave free: its own)
    scan(module, refs)
    todo = {n for n in refs.names - refs.defined}
    todo |= {d for n in todo for d in DEPS.get(n, ()) if d not in refs.defined}
    if not todo:
        return module
    order = [n for n in TEXTS if n in todo]  # dependencies first
    used = "".join(TEXTS[n] for n in order)
    prefixes = (("jnp", "jax.numpy."), ("eqx", "equinox."))
    spelled = {k: ctx.spell_text(v) if "{" + k + "}" in used else "" for k, v in prefixes}
    # numpy through a name the file does not bind (`np = 3` would be read by the helpers): clashes.py
    spelled["np"] = clashes.numpy_name(ctx) + "." if "{np}" in used else ""
    new = written.check(ctx, written.rename(_helper_statements("\n\n".join(TEXTS[n].strip("\n").format(**spelled) for n in order) + "\n"),
                         written.renamed(ctx)))
    body = list(module.body)
    at = 0
    while at < len(body) and isinstance(body[at], cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) or isinstance(s, cst.Expr) and isinstance(
                s.value, (cst.SimpleString, cst.ConcatenatedString)) for s in body[at].body):
        at += 1
    blank = [cst.EmptyLine(), cst.EmptyLine()]
    if at < len(body):
        body[at] = body[at].with_changes(leading_lines=[*blank, *[ln for ln in body[at].leading_lines
                                                                   if ln.comment is not None]])
    return module.with_changes(body=[*body[:at], *new, *body[at:]])


@functools.lru_cache(maxsize=256)
def _helper_statements(text: str) -> tuple[cst.BaseStatement, ...]:
    """The statements of the helpers' ``text``, each with two blank lines above it: parsed once per process (a parse
    was ~2% of a torch2jax fixture's time) and inserted as they are into every output that needs them, as the
    import fixer's definitions are (shared: rendered once per process; nodes never change)."""
    blank = [cst.EmptyLine(), cst.EmptyLine()]
    new = tuple(s.with_changes(leading_lines=blank) for s in parse_module(text).body)
    share(new)
    return new


# --- DataLoader(dataset, **kwargs): the dict built in the file -------------------------------------------

LOADERS = "torch2jax.loader-kwargs"  # ctx.analyses: ids of the DataLoader calls whose **dict this planner binds


def loader_kwargs(module: cst.Module, ctx) -> cst.Module:
    """A read-only planner: ``DataLoader(dataset, **train_kwargs)`` where ``train_kwargs`` is a dict the
    file builds from dict displays (``{'batch_size': 64}``, ``{...} if c else {...}``) and ``.update(...)``
    with such a display or another such dict (not keywords, not ``d['key'] = v``). The keys the dict can
    hold (their union over the branches) are bound to DataLoader's signature as written arguments would
    be: those the loader keeps (batch_size, shuffle, drop_last) stay in the dict and the call becomes
    ``NumpyLoader(dataset, **train_kwargs)``; those the rule drops (num_workers, pin_memory, ...) leave
    the dict displays (an info finding each), and a dict left with no key in any branch leaves the file
    with its statements (``**kwargs`` removed from the calls). Values may be any expression; a key the
    rule refuses (sampler=...) refuses the call with its reason. A dict whose every use is not one of
    these (passed to a function, read, assigned twice, shared with another scope that binds the name) is not followed:
    the call is refused as before (*args/**kwargs cannot be bound statically)."""
    from fwport.core.engine import build_call, map_call

    rule = next((ctx.pack.by_name[n] for n in ("torch.utils.data.DataLoader",) if n in ctx.pack.by_name), None)
    if rule is None:
        return module
    uses = _DictUses(ctx, set(rule.names))
    uses.scan(module)
    for call, star, scope in uses.calls:
        group = uses.group(star, scope)
        if group is None:
            continue
        decisions, refused = _decide(group, rule)
        if refused:
            message = f"{rule.names[0].rsplit('.', 1)[-1]}(..., **{star}): {refused}"
            ctx.plans.add(call, _refuse(ctx, rule, message), by="loader-kwargs")
            continue
        empty = all(decisions[k] is None for k in group["keys"])
        ctx.plans.add(call, _bind(ctx, rule, star, empty, map_call, build_call), by="loader-kwargs")
        for d in group["displays"]:
            if id(d) not in uses.planned:
                uses.planned.add(id(d))
                for el in d.elements:
                    key = el.key.evaluated_value
                    if decisions[key] is None and key in uses.reasons(rule):
                        ctx.report(Severity.INFO, "dropped-argument", f"{key} dropped: {uses.reasons(rule)[key]}",
                                   el, rule)
                ctx.plans.add(d, _edit_display(decisions), by="loader-kwargs")
        if empty:
            for st in group["statements"]:
                if id(st) not in uses.planned:
                    uses.planned.add(id(st))
                    ctx.plans.add(st, lambda o, u: cst.RemovalSentinel.REMOVE, by="loader-kwargs")
            for block in group["ifs"]:
                if id(block) not in uses.planned:
                    uses.planned.add(id(block))
                    ctx.plans.add(block, lambda o, u: cst.RemovalSentinel.REMOVE, by="loader-kwargs")
    return module


def _refuse(ctx, rule, message):
    def apply(original, updated):
        ctx.report(Severity.ERROR, "unsupported-construct", message, original, rule)
        return None
    return apply


def _bind(ctx, rule, star: str, empty: bool, map_call, build_call):
    """The call's edit: its written arguments mapped by the rule, then ``**star`` (unless the dict is left empty)."""
    def apply(original, updated):
        args = [a for a in updated.args if a.star != "**"]
        probe = updated.with_changes(args=[a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args])
        out = build_call(map_call(probe, rule, ctx, original), ctx)
        if out is None or empty or not isinstance(out, cst.Call):
            return out
        return out.with_changes(args=[*[a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                                        for a in out.args], cst.Arg(cst.Name(star), star="**")])
    return apply


def _edit_display(decisions: dict):
    def apply(original, updated):
        kept = []
        for el in updated.elements:
            new = decisions[el.key.evaluated_value]
            if new is None:
                continue
            if new != el.key.evaluated_value:
                el = el.with_changes(key=cst.SimpleString(repr(new)))
            kept.append(el)
        if len(kept) == len(updated.elements) and all(
                decisions[e.key.evaluated_value] == e.key.evaluated_value for e in kept):
            return updated
        if kept:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(elements=kept, lbrace=cst.LeftCurlyBrace(), rbrace=cst.RightCurlyBrace())
    return apply


def _decide(group: dict, rule) -> tuple[dict, str | None]:
    """Each key the dict can hold → the keyword it stays as in the dict (None: it leaves the dict), or
    why the call is refused."""
    from fwport.core.engine import NOT_LITERAL, literal_value

    params = {p.name: p for p in rule.params if p.kind in ("positional", "keyword")}
    out: dict = {}
    for key, values in group["keys"].items():
        spec = rule.arg_for_keyword(key) if key not in params else rule.args.get(key)
        if spec is None or spec.name not in params:
            return out, f"{key!r} is not an argument of {rule.names[0]}"
        lits = [literal_value(v, NOT_LITERAL) for v in values]
        default = params[spec.name].default
        at_default = default is not None and all(
            v is not NOT_LITERAL and v == literal_value(cst.parse_expression(default), NOT_LITERAL) for v in lits)
        if spec.verb == "rename":
            if any(v is not NOT_LITERAL and v in spec.unsupported_values for v in lits):
                return out, f"{key} can be {next(v for v in lits if v in spec.unsupported_values)!r}, which is not supported"
            out[key] = spec.value
        elif spec.verb == "drop":
            out[key] = None
        elif spec.verb == "unsupported" and (at_default or all(
                v is not NOT_LITERAL and v in spec.supported_values for v in lits)):
            out[key] = spec.to
        else:
            return out, f"the dict can hold {key!r}: {spec.value}"
    return out, None


class _OtherRefs(ValueVisitor):
    """_DictUses._other: every name in a statement is a plain reference of ``outer`` in ``scope``, except ``**name`` of
    a DataLoader call; the names it binds are bound there."""

    def __init__(self, outer: "_DictUses", scope):
        super().__init__()
        self.outer = outer
        self.scope = scope
        self.skip: set[int] = set()  # the names of `**name` arguments of DataLoader calls

    def visit_Call(self, n: cst.Call) -> None:
        star = [a for a in n.args if a.star == "**"]
        if len(star) == 1 and not any(a.star == "*" for a in n.args) and isinstance(star[0].value, cst.Name) \
                and self.outer.ctx.imports.resolve(n.func) in self.outer.loader_names:
            self.outer.calls.append((n, star[0].value.value, self.scope))
            self.outer._ref(self.scope, star[0].value.value, "loader", n, None)
            self.skip.add(id(star[0].value))

    def visit_Name(self, n: cst.Name) -> None:
        if id(n) not in self.skip:
            self.outer._ref(self.scope, n.value, "other", n, None)

    def visit_FunctionDef(self, n) -> bool:
        self.outer._block([n], self.scope, None)
        return False

    def visit_Lambda(self, n) -> bool:
        return True

    def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
        for t in _names(n.target):
            self.outer._bind(self.scope, t)

    def visit_For(self, n: cst.For) -> None:
        for t in _names(n.target):
            self.outer._bind(self.scope, t)

    def visit_AsName(self, n: cst.AsName) -> None:
        for t in _names(n.name):
            self.outer._bind(self.scope, t)

    def visit_Global(self, n: cst.Global) -> None:
        for t in n.names:
            self.outer._bind(self.scope, "global " + t.name.value)


class _DictUses:
    """Every reference to a name in the module, by scope, classified: what builds a dict, what reads it."""

    def __init__(self, ctx, loader_names: set[str]):
        self.ctx = ctx
        self.loader_names = loader_names
        self.calls: list[tuple[cst.Call, str, object]] = []  # DataLoader(..., **name) calls: (call, name, scope)
        self.refs: dict[tuple[int, str], list[tuple[str, object, object]]] = {}  # (scope, name) → (kind, node, stmt)
        self.binds: dict[int, set[str]] = {}  # scope → names it binds
        self.parents: dict[int, object] = {}  # id of a function → the scope it is defined in
        self.planned: set[int] = set()
        self._reasons = None

    def reasons(self, rule) -> dict[str, str]:
        if self._reasons is None:
            self._reasons = {k: s.value for k, s in rule.args.items() if s.verb == "drop"}
        return self._reasons

    def scan(self, module: cst.Module) -> None:
        self._block(module.body, module, None)

    # the statements of one scope, with the `if` holding each (for removal)
    def _block(self, body, scope, in_if) -> None:
        for st in body:
            if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
                self._bind(scope, st.name.value)
                if isinstance(st, cst.FunctionDef):
                    self.parents[id(st)] = scope
                    for p in [*st.params.params, *st.params.kwonly_params, *st.params.posonly_params]:
                        self._bind(st, p.name.value)
                    self._block(st.body.body, st, None)
                else:
                    self._other(st, scope)  # a class body: its names are read, not followed
                continue
            if isinstance(st, cst.SimpleStatementLine):
                for small in st.body:
                    self._small(small, st, scope, in_if)
                continue
            if isinstance(st, cst.If):
                self._other(st.test, scope)
                self._block(st.body.body, scope, st if st.orelse is None else None)
                if st.orelse is not None:
                    orelse = st.orelse
                    self._block(orelse.body.body if isinstance(orelse, cst.Else) else [orelse], scope, None)
                continue
            if isinstance(st, (cst.For, cst.While, cst.With, cst.Try)):
                self._other(st, scope)  # names bound or read there: not followed
                continue
            self._other(st, scope)

    def _bind(self, scope, name: str) -> None:
        self.binds.setdefault(id(scope), set()).add(name)

    def _ref(self, scope, name: str, kind: str, node, stmt, in_if=None) -> None:
        """A reference: (kind, node, its statement when it is one of its own, the `if` holding it)."""
        self.refs.setdefault((id(scope), name), []).append((kind, node, stmt, in_if))

    def _small(self, small, stmt, scope, in_if) -> None:
        only = len(stmt.body) == 1
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                and only:
            name = small.targets[0].target.value
            self._bind(scope, name)
            displays = _displays(small.value)
            if displays is not None:
                self._ref(scope, name, "assign", displays, stmt, in_if)
                self._other(small.value, scope)  # the values and conditions: plain references
                return
            self._ref(scope, name, "other", small, stmt)
            self._other(small.value, scope)
            return
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Subscript) \
                and isinstance(small.targets[0].target.value, cst.Name) and only:
            t = small.targets[0].target
            key = t.slice[0].slice.value if len(t.slice) == 1 and isinstance(t.slice[0].slice, cst.Index) else None
            if isinstance(key, cst.SimpleString):
                self._ref(scope, t.value.value, "setitem", (key.evaluated_value, small.value), stmt, in_if)
                self._other(small.value, scope)
                return
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and only:
            call = small.value
            f = call.func
            if isinstance(f, cst.Attribute) and f.attr.value == "update" and isinstance(f.value, cst.Name):
                name = f.value.value
                if len(call.args) == 1 and not call.args[0].star and call.args[0].keyword is None:
                    arg = call.args[0].value
                    if isinstance(arg, cst.Name):
                        self._ref(scope, name, "update-from", arg.value, stmt, in_if)
                        self._ref(scope, arg.value, "update-into", name, stmt, in_if)
                        return
                    displays = _displays(arg)
                    if displays is not None:
                        self._ref(scope, name, "update", displays, stmt, in_if)
                        self._other(arg, scope)
                        return
                if call.args and all(a.keyword is not None and not a.star for a in call.args):
                    self._ref(scope, name, "update-kw", [(a.keyword.value, a.value) for a in call.args], stmt, in_if)
                    for a in call.args:
                        self._other(a.value, scope)
                    return
        self._other(small, scope)

    def _other(self, node, scope) -> None:
        """Every name in ``node`` is a plain reference, except ``**name`` of a DataLoader call."""
        scan(node, _OtherRefs(self, scope))

    def _owner_id(self, sid: int, name: str) -> int:
        """The scope whose variable ``name`` is, read in scope ``sid``: itself, or the module (a global read)."""
        binds = self.binds.get(sid, ())
        if name in binds and "global " + name not in binds:
            return sid
        while sid in self.parents:
            sid = id(self.parents[sid])
        return sid

    def _all_refs(self, owner: int, name: str) -> list:
        """Every reference, in any scope, to the variable ``name`` of scope ``owner``."""
        return [r for (sid, n), refs in self.refs.items() if n == name and self._owner_id(sid, name) == owner
                for r in refs]

    def group(self, name: str, scope) -> dict | None:
        """The dicts that flow into ``**name`` (their displays, keys and statements), or None when one
        of them is used in a way not followed."""
        owner = self._owner_id(id(scope), name)
        todo, seen = [name], set()
        keys: dict[str, list] = {}
        displays, statements, ifs = [], [], []
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            refs = self._all_refs(owner, n)
            assigned = False
            for kind, node, stmt, in_if in refs:
                if kind == "other":
                    return None
                if kind == "assign":
                    if assigned:
                        return None  # bound twice: which binding a use sees is not followed
                    assigned = True
                if kind in ("assign", "update"):
                    for d in node:
                        displays.append(d)
                        for el in d.elements:
                            keys.setdefault(el.key.evaluated_value, []).append(el.value)
                elif kind == "setitem":
                    return None  # (a key set by subscript cannot leave the dict with its statement alone)
                elif kind == "update-kw":
                    return None
                elif kind in ("update-from", "update-into"):
                    todo.append(node)
                if stmt is not None and stmt not in statements:
                    statements.append(stmt)
                    if in_if is not None and in_if not in ifs:
                        ifs.append(in_if)
            if not assigned:
                return None
        ifs = [b for b in ifs if all(s in statements for s in b.body.body)]
        statements = [s for s in statements if not any(s in b.body.body for b in ifs)]
        return {"keys": keys, "displays": displays, "statements": statements, "ifs": ifs}


def _names(t) -> list[str]:
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for e in t.elements for n in _names(e.value)]
    return []


def _displays(node) -> list[cst.Dict] | None:
    """The dict displays an expression can be: ``{'k': v}`` (string keys), ``{...} if c else {...}``."""
    if isinstance(node, cst.Dict) and all(isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
                                          for e in node.elements):
        return [node]
    if isinstance(node, cst.IfExp):
        a, b = _displays(node.body), _displays(node.orelse)
        return None if a is None or b is None else a + b
    return None
