"""PyTorch's gradient-mode switches (a planner that rewrites, before the others; training.finish removes them):

- ``with torch.no_grad():`` / ``torch.inference_mode()`` / ``torch.set_grad_enabled(False)`` and ``@torch.no_grad()``
  on a function. PyTorch records no graph for what the block computes: its values are constants for backward().
  JAX has no recording to switch off (it differentiates what jax.grad is given), so where the block is in code a
  loss differentiates through (a module class's method; a function such code calls; a block followed by
  ``loss.backward()`` in its function) the values that leave it are detached: a name the block assigns and the
  function reads outside it → ``.detach()`` of its value (the only assignment, at the block's level) or
  ``name = name.detach()`` after the block; ``return v`` inside it (and in a decorated function) → ``v.detach()``
  (each element of a tuple); ``.detach()`` is jax.lax.stop_gradient's rule. Elsewhere (an evaluation loop,
  inference code: no gradient is taken there) the removal is exact. The info finding says which it was.
- ``with torch.enable_grad():`` / ``set_grad_enabled(True)`` / ``inference_mode(False)``: removed (gradients are on
  by default; inside a no_grad block what it assigns is not detached).
- ``with torch.set_grad_enabled(flag):`` (``phase == "train"``): removed where the block holds its own backward()
  or no backward() follows it (the flag then only says whether PyTorch records a graph nothing else reads);
  before a backward() it stays, its rule's error (which values are constants depends on the flag at run time).

"Differentiated" by data flow where no module is involved: the names the block (or a call of a @no_grad function)
assigns, followed through the later statements of its block and the blocks around it, reach a statement holding
a backward() (an evaluation between training steps, only logged, reaches none). A list / dict the block assigns
or fills (``outs.append(y)``, ``d[k] = y``) or a @no_grad method returns is not detached: a warning.

Errors: a write into the module's state under no_grad in its code (``self.buf.mul_(m)``, ``p.data = ...`` for ``p``
of a parameter loop: EMA / momentum updates; an eqx.Module cannot change inside its call) and a frozen parameter
(``p.requires_grad = False`` / ``.requires_grad_(False)`` on an attribute path or a ``.parameters()`` loop variable:
PyTorch's optimizer skips it, the translation's updates every array of the model)."""
from __future__ import annotations

import libcst as cst

from fwport.core.direction import Trigger
from fwport.core.finding import Severity
from fwport.core.engine import code
from fwport.core.names import dotted_text, find_all, scan
from fwport.core.rewrite import rewrite

TRIGGER = Trigger(r"\bno_grad\b|\binference_mode\b|\benable_grad\b|\bset_grad_enabled\b|\brequires_grad",
                  "no_grad", "inference_mode", "enable_grad", "set_grad_enabled", "requires_grad")
OFF = frozenset({"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad",
                 "torch.inference_mode", "torch.autograd.inference_mode", "torch.autograd.grad_mode.inference_mode"})
ON = frozenset({"torch.enable_grad", "torch.autograd.enable_grad", "torch.autograd.grad_mode.enable_grad"})
FLAG = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
                  "torch.autograd.grad_mode.set_grad_enabled"})
#: ctx.analyses: ids of the grad-mode calls this pass settled (removed by training.finish) and reported
SETTLED = "torch2jax.grad-mode"
#: calls whose value is no tensor (sizes, Python numbers): never detached
_NOT_TENSOR_CALLS = frozenset({"int", "float", "len", "str", "bool", "range", "list", "dict", "set", "tuple",
                               "isinstance", "print", "enumerate", "zip", "sorted"})
_NOT_TENSOR_METHODS = frozenset({"item", "tolist", "size", "numel", "dim", "keys", "values", "items", "format"})
_NOT_TENSOR_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "requires_grad", "is_cuda"})


def kind(call: cst.BaseExpression, ctx) -> str | None:
    """"off" / "on" / "flag" for a grad-mode call (a value ``set_grad_enabled(True)`` / ``inference_mode(False)``
    settles), None for anything else."""
    if not isinstance(call, cst.Call):
        return None
    q = ctx.imports.resolve(call.func)
    if q not in OFF | ON | FLAG:
        return None
    args = [a for a in call.args if a.keyword is None or a.keyword.value in ("mode", "enabled")]
    if len(args) != len(call.args) or len(args) > 1:
        return None
    value = None
    if args:
        v = args[0].value
        value = v.value if isinstance(v, cst.Name) and v.value in ("True", "False") else "?"
    if q in FLAG:
        return None if value is None else {"True": "on", "False": "off"}.get(value, "flag")
    if q in ON:
        return "on" if value is None else None
    return "off" if value in (None, "True") else "on" if value == "False" else "flag"


def _has_backward(node: cst.CSTNode, ctx) -> bool:
    for c in find_all(node, cst.Call):
        f = c.func
        if isinstance(f, cst.Attribute) and f.attr.value == "backward" or ctx.imports.resolve(f) == "torch.autograd.grad":
            return True
    return False


def _blocks(stmt) -> list[list]:
    """The statement lists inside a compound statement (not a function's or class's)."""
    out = []
    for name in ("body", "orelse", "finalbody"):
        b = getattr(stmt, name, None)
        if isinstance(b, (cst.Else, cst.Finally)):
            b = b.body
        if isinstance(b, cst.If):  # elif
            out.extend([[b]])
            continue
        if isinstance(b, cst.IndentedBlock):
            out.append(list(b.body))
    for h in getattr(stmt, "handlers", ()) or ():
        if isinstance(h.body, cst.IndentedBlock):
            out.append(list(h.body.body))
    return out


class _Site:
    def __init__(self, node, kind, owner, chain, decorated=False):
        self.node, self.kind, self.owner, self.chain, self.decorated = node, kind, owner, chain, decorated


class _Survey:
    """The grad-mode blocks and decorators, each with its owner (a method (class, name) or a top-level function's
    name, None at module level) and its chain of enclosing (statement list, index) up to its function; the calls of
    the file's top-level functions the same way."""

    def __init__(self, module, ctx):
        self.ctx = ctx
        self.functions = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)}
        self.module_classes: set[str] = set()
        self.sites: list[_Site] = []
        self.calls: list[tuple[str, object, list]] = []  # (callee, owner, chain)
        self.scopes: dict[int, cst.CSTNode] = {}  # id(site node) → its function (or the module)
        self.self_calls: dict[tuple, set[str]] = {}  # method → the self.<name>(...) it calls
        self.walk(list(module.body), None, [], module)

    def is_module_class(self, cls: cst.ClassDef) -> bool:
        for b in cls.bases:
            q = self.ctx.imports.resolve(b.value)
            if q is not None and q.startswith("torch.nn.") or dotted_text(b.value) in self.module_classes:
                return True
        return False

    def walk(self, stmts, owner, chain, scope):
        for i, s in enumerate(stmts):
            here = chain + [(stmts, i)]
            if isinstance(s, cst.ClassDef):
                if self.is_module_class(s):
                    self.module_classes.add(s.name.value)
                if isinstance(s.body, cst.IndentedBlock):
                    for m in s.body.body:
                        if isinstance(m, cst.FunctionDef):
                            self.function(m, (s.name.value, m.name.value), scope)
                            self.self_calls[(s.name.value, m.name.value)] = {
                                c.func.attr.value for c in find_all(m, cst.Call) if isinstance(c.func, cst.Attribute)
                                and isinstance(c.func.value, cst.Name) and c.func.value.value == "self"}
                continue
            if isinstance(s, cst.FunctionDef):
                self.function(s, owner if owner is not None else s.name.value, scope)
                continue
            if isinstance(s, cst.With) and s.items and all(i.asname is None for i in s.items):
                kinds = {kind(i.item, self.ctx) for i in s.items}
                if len(kinds) == 1 and None not in kinds:
                    self.sites.append(_Site(s, kinds.pop(), owner, here))
                    self.scopes[id(s)] = scope
                else:
                    chosen = self.chosen(s, stmts[:i], scope)
                    if chosen is not None:
                        site = _Site(s, "cond", owner, here)
                        site.assign, site.test, site.call = chosen
                        self.sites.append(site)
                        self.scopes[id(s)] = scope
            if isinstance(s, cst.SimpleStatementLine):
                for c in find_all(s, cst.Call):
                    if isinstance(c.func, cst.Name) and c.func.value in self.functions:
                        self.calls.append((c.func.value, owner, here))
            for block in _blocks(s):
                self.walk(block, owner, here, scope)

    def chosen(self, w: cst.With, before, scope):
        """``with ctx():`` after ``ctx = torch.no_grad if flag else nullcontext`` (the name's only assignment in
        its function, the flag a name or attribute nothing in the block assigns, no return in the block): (that
        assignment's statement, the flag, torch.no_grad's node); None otherwise."""
        item = w.items[0].item if len(w.items) == 1 else None
        if not (isinstance(item, cst.Call) and not item.args and isinstance(item.func, cst.Name)):
            return None
        name = item.func.value
        assigns = [a for a in find_all(scope, cst.Assign) if any(_names(t.target) == [name] for t in a.targets)]
        line = next((st for st in before if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1
                     and len(assigns) == 1 and st.body[0] is assigns[0]), None)
        if line is None:
            return None
        v = line.body[0].value
        if not (isinstance(v, cst.IfExp) and self.ctx.imports.resolve(v.body) in OFF
                and dotted_text(v.orelse) in ("nullcontext", "contextlib.nullcontext")
                and isinstance(v.test, (cst.Name, cst.Attribute)) and not find_all(w.body, cst.Return)):
            return None
        flag = _root(v.test)
        found = _Assigned(self.ctx)
        scan(w.body, found)
        return None if flag in found.found else (line, v.test, v.body)

    def function(self, fn: cst.FunctionDef, owner, scope):
        for d in fn.decorators:
            k = kind(d.decorator, self.ctx)
            if k is not None:
                self.sites.append(_Site(fn, k, owner, [], decorated=True))
                self.scopes[id(fn)] = fn
        if isinstance(fn.body, cst.IndentedBlock):
            self.walk(list(fn.body.body), owner, [], fn)


def _assigned_by(stmt) -> set[str]:
    out = set()
    for a in find_all(stmt, cst.Assign):
        for t in a.targets:
            out.update(_names(t.target))
    for a in find_all(stmt, cst.AugAssign):
        out.update(_names(a.target))
    for f in find_all(stmt, cst.For):
        out.update(_names(f.target))
    return out


def _feeds_backward(chain, names: set[str], ctx) -> bool:
    """Whether what the statement at the end of ``chain`` gives ``names`` reaches a backward() after it: a later
    statement (in its block, then in the blocks around it) reading a name so given assigns its names in turn; a
    backward() in a statement reading one is reached (an evaluation between training steps reaches none)."""
    taint = set(names)
    for stmts, i in reversed(chain):
        for s in stmts[i + 1:]:
            reads = {n.value for n in find_all(s, cst.Name)}
            if not reads & taint:
                continue
            if _has_backward(s, ctx):
                return True
            taint |= _assigned_by(s)
    return False


def _differentiated(survey: _Survey, ctx) -> dict:
    """owner → why its code is differentiated (a text), for the owners that are."""
    why: dict = {}

    def closure(cls, start):
        seen, todo = set(), list(start)
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(survey.self_calls.get((cls, m), ()))
        return seen

    called: dict = {}  # module class → its methods the forward side may call (not only __init__'s helpers)
    for cls in survey.module_classes:
        methods = {m for c, m in survey.self_calls if c == cls}
        init = closure(cls, ["__init__"])
        called[cls] = closure(cls, methods - init)
    for owner in {o for o in [s.owner for s in survey.sites] + [c[1] for c in survey.calls]}:
        if isinstance(owner, tuple) and owner[0] in survey.module_classes and owner[1] in called[owner[0]]:
            why[owner] = f"{owner[0]}.{owner[1]} is module code, which a loss differentiates through"
    changed = True
    while changed:
        changed = False
        for callee, owner, chain in survey.calls:
            if callee in why:
                continue
            if owner in why:
                why[callee] = f"{callee} is called from {_owner_text(owner)}, which a loss differentiates through"
            elif _has_backward(chain[-1][0][chain[-1][1]], ctx) \
                    or _feeds_backward(chain, _assigned_by(chain[-1][0][chain[-1][1]]), ctx):
                why[callee] = f"{callee} is called before a backward() in {_owner_text(owner)}"
            else:
                continue
            changed = True
    return why


def _owner_text(owner) -> str:
    return "module-level code" if owner is None else ".".join(owner) if isinstance(owner, tuple) else owner


#: values that hold arrays without being one (a list of per-image dicts): not detached (.detach() is no method of
#: them; the batch pass reads them as they are), a warning where they leave differentiated no_grad code
_CONTAINERS = (cst.List, cst.ListComp, cst.Dict, cst.DictComp, cst.Set, cst.SetComp, cst.GeneratorExp)


def _containers(scope: cst.CSTNode) -> set[str]:
    """The names ``scope`` assigns a list, dict or set (comprehensions too)."""
    return {t.target.value for a in find_all(scope, cst.Assign) if isinstance(a.value, _CONTAINERS)
            for t in a.targets if isinstance(t.target, cst.Name)}


def _kept(value, containers: set[str]) -> bool:
    return isinstance(value, _CONTAINERS) or isinstance(value, cst.Name) and value.value in containers


def _not_tensor(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString,
                          cst.Dict, cst.DictComp, cst.Lambda)):
        return True
    if isinstance(value, cst.Name):
        return value.value in ("True", "False", "None")
    if isinstance(value, cst.Attribute):
        return value.attr.value in _NOT_TENSOR_ATTRS
    if isinstance(value, cst.Call):
        f = value.func
        return isinstance(f, cst.Name) and f.value in _NOT_TENSOR_CALLS \
            or isinstance(f, cst.Attribute) and f.attr.value in _NOT_TENSOR_METHODS
    return False


def _names(target) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return []


class _Assigned(cst.CSTVisitor):
    """The names a block assigns (not in nested functions, classes or enable_grad blocks): name → [(statement
    line, the value or None where unknown)]."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.found: dict[str, list] = {}
        self.line = None

    def add(self, names, value):
        for n in names:
            self.found.setdefault(n, []).append((self.line, value))

    def visit_FunctionDef(self, node):
        return False

    def visit_ClassDef(self, node):
        return False

    def visit_Lambda(self, node):
        return False

    def visit_With(self, node):
        return not all(kind(i.item, self.ctx) == "on" for i in node.items)

    def visit_SimpleStatementLine(self, node):
        self.line = node

    def visit_Assign(self, node):
        for t in node.targets:
            names = _names(t.target)
            self.add(names, node.value if isinstance(t.target, cst.Name) and len(node.targets) == 1 else None)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.add(_names(node.target), node.value)

    def visit_AugAssign(self, node):
        self.add(_names(node.target), node.value)

    def visit_NamedExpr(self, node):
        self.add(_names(node.target), None)


def _reads(scope: cst.CSTNode, block: cst.CSTNode) -> set[str]:
    """The names read in ``scope`` outside ``block`` (assignment targets not counted; more than read is harmless)."""
    inside = {id(n) for n in find_all(block, cst.Name)}
    stored = set()
    for a in find_all(scope, cst.Assign):
        for t in a.targets:
            if isinstance(t.target, cst.Name):
                stored.add(id(t.target))
    return {n.value for n in find_all(scope, cst.Name) if id(n) not in inside and id(n) not in stored}


def _detached(value: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(value, cst.Tuple) and not value.lpar:
        return value.with_changes(elements=[e if isinstance(e, cst.StarredElement) or _not_tensor(e.value)
                                            else e.with_changes(value=_detached(e.value)) for e in value.elements])
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(cst.Attribute(value, cst.Name("detach")), [])


class _Returns(cst.CSTTransformer):
    """``return v`` → ``return v.detach()`` (not in nested functions)."""

    def __init__(self, containers: set[str]):
        super().__init__()
        self.containers = containers

    def visit_FunctionDef(self, node):
        return False

    def visit_Lambda(self, node):
        return False

    def leave_Return(self, original, updated):
        if updated.value is None or _not_tensor(updated.value) or _kept(updated.value, self.containers):
            return updated
        return updated.with_changes(value=_detached(updated.value))


class _Rewrite(cst.CSTTransformer):
    def __init__(self, plans):
        super().__init__()
        self.plans = plans  # id(With / FunctionDef) → (wrap: {id(statement line)}, rebind: [names]) or "returns"

    def leave_FunctionDef(self, original, updated):
        plan = self.plans.get(id(original))
        if not (isinstance(plan, tuple) and plan[0] == "returns"):
            return updated
        return updated.with_changes(body=rewrite(updated.body, _Returns(plan[1])))

    def leave_SimpleStatementLine(self, original, updated):
        if self.plans.get(id(original)) == "remove":
            return cst.RemovalSentinel.REMOVE
        for plan in self.plans.values():
            if isinstance(plan, tuple) and plan[0] not in ("cond", "returns") and id(original) in plan[0]:
                a = updated.body[0]
                return updated.with_changes(body=[a.with_changes(value=_detached(a.value)), *updated.body[1:]])
        return updated

    def leave_With(self, original, updated):
        plan = self.plans.get(id(original))
        if plan is None:
            return updated
        if plan[0] == "cond":
            body = list(updated.body.body)
            body[0] = body[0].with_changes(leading_lines=[*updated.leading_lines, *body[0].leading_lines])
            if plan[2]:
                test = code(plan[1])
                body.append(cst.parse_statement(f"if {test}:\n" + "".join(f"    {n} = {n}.detach()\n" for n in plan[2])))
            return cst.FlattenSentinel(body)
        updated = updated.with_changes(body=rewrite(updated.body, _Returns(plan[2])))
        if not plan[1]:
            return updated
        rebinds = [cst.parse_statement(f"{n} = {n}.detach()\n") for n in plan[1]]
        return cst.FlattenSentinel([updated, *rebinds])


def _root(node) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if isinstance(node, cst.Name) else None


def _state_writes(body: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements of a module's no_grad code that write into the module's state (``self.buf = v``,
    ``self.buf.mul_(m)``, ``p.data = ...`` / ``p.copy_(...)`` for ``p`` of a loop: EMA and momentum-encoder updates):
    an eqx.Module cannot change inside its call."""
    loops = {n for f in find_all(body, cst.For) for n in _names(f.target)}
    roots = loops | {"self"}
    out = []
    for line in find_all(body, cst.SimpleStatementLine):
        hit = False
        for a in find_all(line, cst.Assign):
            hit |= any(isinstance(t.target, (cst.Attribute, cst.Subscript)) and _root(t.target) in roots
                       for t in a.targets)
        for a in find_all(line, cst.AugAssign):
            hit |= isinstance(a.target, (cst.Attribute, cst.Subscript)) and _root(a.target) in roots
        for c in find_all(line, cst.Call):
            f = c.func
            hit |= isinstance(f, cst.Attribute) and f.attr.value.endswith("_") and not f.attr.value.startswith("_") \
                and _root(f.value) in roots
        if hit:
            out.append(line)
    return out


_PARAMETER_LOOPS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers"})


def _freezes(module: cst.Module, ctx) -> None:
    """``p.requires_grad = False`` / ``p.requires_grad_(False)`` on a model's parameter (an attribute path, or the
    variable of a loop over ``.parameters()``): PyTorch's optimizer then leaves it alone, the translation's updates
    every array of the model. An error (a requires_grad_ on a local tensor is the training pass's: removed)."""
    loops = set()
    for f in find_all(module, cst.For):
        it = f.iter.args[0].value if isinstance(f.iter, cst.Call) and dotted_text(f.iter.func) == "enumerate" \
            and f.iter.args else f.iter
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in _PARAMETER_LOOPS:
            loops.update(_names(f.target))

    def parameter(node) -> bool:
        return isinstance(node, cst.Attribute) or isinstance(node, cst.Name) and node.value in loops

    def frozen(value) -> bool:
        return not (isinstance(value, cst.Name) and value.value == "True")

    from fwport.packs.torch2jax import frozen as frozen_parameters
    taken = frozen_parameters.plan(module, ctx)  # (those read as the optimizer's zero updates: frozen.py)
    message = ("freezes a parameter: PyTorch's optimizer skips it, where the translation's updates every array of the "
               "model (eqx.filter(model, eqx.is_array)); not translated: keep it out of the update (optax.multi_transform"
               " with optax.set_to_zero() for its label, or eqx.partition with a filter spec marking it False; fwport writes the "
               "former for a freeze of a model's part by its attribute path, a statement of its own before the training "
               "loop of the model's only optimizer, where nothing sets requires_grad True again)")
    held = {id(n) for st in find_all(module, cst.For) if id(st) in taken for n in find_all(st, cst.SimpleStatementLine)}
    for line in find_all(module, cst.SimpleStatementLine):
        if id(line) in taken or id(line) in held:
            continue
        for a in find_all(line, cst.Assign):
            for t in a.targets:
                if isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad" \
                        and parameter(t.target.value) and frozen(a.value):
                    ctx.report(Severity.ERROR, "unsupported-construct", f"{dotted_text(t.target) or 'requires_grad'}"
                               f" = ...: {message}", line)
        for c in find_all(line, cst.Call):
            f = c.func
            if isinstance(f, cst.Attribute) and f.attr.value == "requires_grad_" and parameter(f.value) \
                    and len(c.args) == 1 and frozen(c.args[0].value):
                ctx.report(Severity.ERROR, "unsupported-construct", f".requires_grad_(...): {message}", line)


_FILLING = frozenset({"append", "extend", "insert", "update", "setdefault", "add"})


def _filled(body, found: "_Assigned") -> set[str]:
    """The names a block assigns a list / dict / set, or fills (``outs.append(y)``, ``d[k] = y``)."""
    out = {n for n, assigns in found.found.items() if any(isinstance(v, _CONTAINERS) for _, v in assigns)}
    for c in find_all(body, cst.Call):
        f = c.func
        if isinstance(f, cst.Attribute) and f.attr.value in _FILLING and isinstance(f.value, cst.Name):
            out.add(f.value.value)
    for a in find_all(body, cst.Assign):
        for t in a.targets:
            if isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name):
                out.add(t.target.value.value)
    return out


def _warn_kept(body, what: str, containers: set[str], names: list[str], q: str, ctx) -> None:
    """A warning at each return of a list / dict and for the names holding one that leave differentiated no_grad
    code: their arrays are not detached."""
    for r in find_all(body, cst.Return):
        if r.value is not None and _kept(r.value, containers):
            ctx.report(Severity.WARNING, "unsupported-construct", f"{what} returns a list / dict computed under {q}(): its arrays "
                       "are not detached here (PyTorch records no gradient for them); where a loss differentiates "
                       "through them, wrap them in jax.lax.stop_gradient", r)
    if names:
        ctx.report(Severity.WARNING, "unsupported-construct", f"{', '.join(names)}: a list / dict {what} fills under {q}(): "
                   "its arrays are not detached (PyTorch records no gradient for them); where a loss differentiates "
                   "through them, wrap them in jax.lax.stop_gradient", body)


def found_for(node: cst.With, ctx) -> "_Assigned":
    found = _Assigned(ctx)
    for st in node.body.body:
        scan(st, found)
    return found


def _outflow(found: "_Assigned", read: set[str]) -> list[str]:
    """The names the block assigns that are read outside it, but those only ever given non-tensor values."""
    return [n for n, assigns in found.found.items()
            if n in read and not all(v is not None and _not_tensor(v) for _, v in assigns)]


def plan(module: cst.Module, ctx) -> cst.Module:
    if "requires_grad" in ctx.analyses["parsed"][1] if "parsed" in ctx.analyses else True:
        _freezes(module, ctx)
    survey = _Survey(module, ctx)
    if not survey.sites:
        return module
    why = _differentiated(survey, ctx)
    settled = ctx.analyses.setdefault(SETTLED, set())
    plans: dict = {}
    for site in survey.sites:
        node = site.node
        calls = [d.decorator for d in node.decorators if kind(d.decorator, ctx) is not None] if site.decorated \
            else [i.item for i in node.items]
        q = dotted_text(calls[0].func) or "the gradient switch"
        reason = why.get(site.owner)
        if reason is None and not site.decorated and site.kind in ("off", "cond", "flag") \
                and _feeds_backward(site.chain, set(found_for(node, ctx).found), ctx):
            reason = f"what it computes reaches a backward() after it in {_owner_text(site.owner)}"
        if site.kind == "cond":
            calls = [site.call]
            q = ctx.imports.resolve(site.call)
            found = found_for(node, ctx)
            read = _reads(survey.scopes[id(node)], node)
            filled = _filled(node.body, found) & read if reason else set()
            if filled:
                _warn_kept(node.body, "the block", set(), sorted(filled), q, ctx)
            out = [n for n in _outflow(found, read) if n not in filled] if reason else []
            plans[id(site.assign)] = "remove"
            plans[id(node)] = ("cond", site.test, out)
            message = (f"{code(site.assign.body[0])} and its `with` removed: "
                       + (f"{reason}; where {code(site.test)} is true PyTorch records no gradient for what the block "
                          f"computes, so what leaves it ({', '.join(out)}) is detached then (if {code(site.test)}: "
                          "... .detach(), jax.lax.stop_gradient)" if out else
                          f"{reason}; nothing the block computes is read after it" if reason else
                          "it is outside any differentiated code (not a module's method, nothing it computes reaches a "
                          "backward()), "
                          "where JAX differentiates only what jax.grad is given"))
        elif site.kind == "on":
            message = (f"{q}() removed: gradients are on by default in JAX, which differentiates what jax.grad "
                       "(eqx.filter_grad) is given")
        elif site.kind == "flag":
            inner = not site.decorated and _has_backward(node.body, ctx)
            if reason is not None and not inner:
                continue  # stays: set_grad_enabled's rule reports it (which values are constants is the flag's)
            message = (f"{q}() removed: " + ("the backward() inside it runs only where the flag is true, "
                       if inner else "no backward() differentiates what it computes, ")
                       + "so the flag only chose whether PyTorch recorded a graph; JAX differentiates what jax.grad "
                       "is given")
        elif reason is None:
            where = f"{_owner_text(site.owner)}, which only __init__ calls: construction" \
                if isinstance(site.owner, tuple) and site.owner[0] in survey.module_classes else \
                f"{_owner_text(site.owner)}: not a module's method, nothing it computes reaches a backward(), as in an " \
                "evaluation or inference loop"
            message = (f"{'@' if site.decorated else ''}{q}() removed, exactly: it is outside any differentiated code"
                       f" (in {where}), and JAX differentiates only what jax.grad (eqx.filter_grad) is given")
        elif site.decorated:
            containers = _containers(node)
            plans[id(node)] = ("returns", containers)
            _warn_kept(node, node.name.value, containers, [], q, ctx)
            message = (f"@{q}() removed: {reason}; PyTorch records no gradient for what {node.name.value} computes, "
                       "so its return values are detached (jax.lax.stop_gradient), constants for the gradient")
        else:
            found = found_for(node, ctx)
            containers = _containers(survey.scopes[id(node)])
            read = _reads(survey.scopes[id(node)], node)
            out = _outflow(found, read)
            filled = _filled(node.body, found) & read
            _warn_kept(node.body, "the block", containers, sorted(filled), q, ctx)
            out = [n for n in out if n not in filled]
            direct = {id(s) for s in node.body.body}
            wrap, rebind = set(), []
            for n in out:
                (line, value), *more = found.found[n]
                if not more and value is not None and id(line) in direct and len(line.body) == 1 \
                        and isinstance(line.body[0], cst.Assign):
                    wrap.add(id(line))
                else:
                    rebind.append(n)
            plans[id(node)] = (wrap, rebind, containers)
            returns = bool(find_all(node.body, cst.Return))
            leaving = ", ".join(out) + (" and its return values" if returns and out else "its return values"
                                        if returns else "")
            message = (f"{q}() removed: {reason}; PyTorch records no gradient for what the block computes, so "
                       + (f"what leaves it ({leaving}) is detached (jax.lax.stop_gradient), constants for the "
                          "gradient" if leaving else "nothing it computes is read after it"))
        if reason is not None and isinstance(site.owner, tuple) and site.kind == "off":
            for line in _state_writes(node.body):
                ctx.report(Severity.ERROR, "unsupported-construct", "this statement updates the module's state under "
                           f"{q}() (an EMA / momentum update, a buffer write): an eqx.Module cannot change inside its "
                           "call; not translated: compute the new value and set it outside the model's call "
                           "(model = eqx.tree_at(lambda m: m.<field>, model, new)), or keep it in an eqx.nn.State",
                           line)
        for c in calls:
            settled.add(id(c))
        ctx.report(Severity.INFO, "idiom-replaced", message, calls[0])
    return rewrite(module, _Rewrite(plans)) if plans else module
