"""Layer-list helpers unrolled where a Sequential spreads them: ``nn.Sequential(*block(128, 256), ...)``.

PyTorch code often builds a Sequential from a local helper returning a list of layers (PyTorch-GAN's
``def block(in_feat, out_feat, normalize=True): layers = [nn.Linear(in_feat, out_feat)]; if normalize:
layers.append(nn.BatchNorm1d(out_feat, 0.8)); ...; return layers``). A starred call cannot be bound to the
Sequential's members statically, so each ``*block(...)`` is written out as the layers that call returns:
the helper's parameters replaced by the call's arguments, its ``if``s decided by the literal booleans they
test. The flat ``nn.Sequential(...)`` is then translated as any other (keys, BatchNorm's state, weight
records by index). Only when the helper is a plain list builder (``L = [...]``, ``L.append(x)``,
``L.extend([...])``, ``L += [...]``, ``if p:`` / ``if not p:`` on a parameter, ``return L``) and every
argument is a name, an attribute, a literal or arithmetic on those (no side effect, so evaluating it where
the helper uses it is the same); otherwise the Sequential is left
to the rule's error. The helper goes in the finishing step once nothing calls it.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.finding import Severity
from fwport.core.names import find_all, scan
from fwport.core.rewrite import rewrite

UNROLLED = "torch2jax.unrolled"  # ctx.analyses: names of helpers unrolled (removed when nothing else calls them)


def _plain(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(node, cst.Attribute):
        return _plain(node.value)
    if isinstance(node, cst.BinaryOperation):  # arithmetic on such (opt.latent_dim + opt.n_classes): no side effect
        return _plain(node.left) and _plain(node.right)
    return isinstance(node, cst.UnaryOperation) and isinstance(node.expression, (cst.Integer, cst.Float))


def _truth(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    if isinstance(node, cst.Integer):
        return int(node.value) != 0
    return None


class _Helper:
    """A list-building helper: its parameters (name → default or None) and its statements."""

    def __init__(self, fn: cst.FunctionDef):
        self.fn = fn
        ps = fn.params
        self.ok = not (ps.star_arg not in (cst.MaybeSentinel.DEFAULT, None) or ps.star_kwarg or ps.posonly_params
                       or fn.decorators or fn.asynchronous)
        self.params = [(p.name.value, p.default) for p in [*ps.params, *ps.kwonly_params]]
        body = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
        if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
                and isinstance(body[0].body[0].value, cst.SimpleString):
            body = body[1:]
        self.var = None
        if self.ok and body and _simple(body[0]) and isinstance(body[0].body[0], cst.Assign) \
                and len(body[0].body[0].targets) == 1 and isinstance(body[0].body[0].targets[0].target, cst.Name) \
                and isinstance(body[0].body[0].value, cst.List):
            self.var = body[0].body[0].targets[0].target.value
        last = body[-1] if body else None
        self.ok = self.ok and self.var is not None and _simple(last) and isinstance(last.body[0], cst.Return) \
            and isinstance(last.body[0].value, cst.Name) and last.body[0].value.value == self.var
        self.body = body[:-1]
        self.ok = self.ok and all(self._stmt_ok(s) for s in self.body[1:])

    def _stmt_ok(self, s) -> bool:
        if isinstance(s, cst.If):
            return self._cond(s.test) is not None and isinstance(s.body, cst.IndentedBlock) \
                and all(self._stmt_ok(x) for x in s.body.body) \
                and (s.orelse is None or isinstance(s.orelse, cst.Else) and all(self._stmt_ok(x) for x in s.orelse.body.body))
        return self._added(s) is not None

    def _cond(self, test) -> tuple[str, bool] | None:
        names = {n for n, _ in self.params}
        if isinstance(test, cst.Name) and test.value in names:
            return test.value, True
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) \
                and isinstance(test.expression, cst.Name) and test.expression.value in names:
            return test.expression.value, False
        return None

    def _added(self, s) -> list[cst.BaseExpression] | None:
        """The elements a statement adds to the list, or None when it is not such a statement."""
        if not _simple(s):
            return None
        small = s.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            c = small.value
            if isinstance(c.func, cst.Attribute) and isinstance(c.func.value, cst.Name) and c.func.value.value == self.var \
                    and len(c.args) == 1 and c.args[0].keyword is None and not c.args[0].star:
                if c.func.attr.value == "append":
                    return [c.args[0].value]
                if c.func.attr.value == "extend" and isinstance(c.args[0].value, (cst.List, cst.Tuple)) \
                        and not any(isinstance(e, cst.StarredElement) for e in c.args[0].value.elements):
                    return [e.value for e in c.args[0].value.elements]
        if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign) \
                and isinstance(small.target, cst.Name) and small.target.value == self.var \
                and isinstance(small.value, (cst.List, cst.Tuple)) \
                and not any(isinstance(e, cst.StarredElement) for e in small.value.elements):
            return [e.value for e in small.value.elements]
        return None

    def expand(self, call: cst.Call) -> list[cst.BaseExpression] | None:
        """The layers ``call`` returns, written with its arguments; None when they are not static."""
        bound: dict[str, cst.BaseExpression] = {}
        names = [n for n, _ in self.params]
        for i, a in enumerate(call.args):
            if a.star:
                return None
            if a.keyword is None:
                if i >= len(names):
                    return None
                bound[names[i]] = a.value
            elif a.keyword.value in names:
                bound[a.keyword.value] = a.value
            else:
                return None
        for n, default in self.params:
            if n not in bound:
                if default is None:
                    return None
                bound[n] = default
        if not all(_plain(v) for v in bound.values()):
            return None
        out: list[cst.BaseExpression] = []
        first = self.body[0].body[0].value
        if any(isinstance(e, cst.StarredElement) for e in first.elements):
            return None
        out += [e.value for e in first.elements]
        if not self._run(self.body[1:], bound, out):
            return None
        sub = _Substitute(bound)
        return [rewrite(e, sub, fresh=True) for e in out]

    def _run(self, stmts, bound, out) -> bool:
        for s in stmts:
            if isinstance(s, cst.If):
                name, polarity = self._cond(s.test)
                truth = _truth(bound[name])
                if truth is None:
                    return False
                if truth == polarity:
                    if not self._run(s.body.body, bound, out):
                        return False
                elif s.orelse is not None and not self._run(s.orelse.body.body, bound, out):
                    return False
            else:
                out += self._added(s)
        return True


def _simple(s) -> bool:
    return isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1


class _Substitute(cst.CSTTransformer):
    """The helper's parameters → the call's arguments (not attribute names nor keywords)."""

    def __init__(self, bound: dict[str, cst.BaseExpression]):
        super().__init__()
        self.bound = bound

    def visit_Attribute(self, node) -> bool:
        node.value.visit(self)
        return True

    def leave_Attribute(self, original, updated):
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original, updated):
        return updated.with_changes(keyword=original.keyword)

    def leave_Name(self, original, updated):
        return self.bound.get(original.value, updated)


class _Unroll(cst.CSTTransformer):
    def __init__(self, ctx, helpers: dict[str, _Helper]):
        super().__init__()
        self.ctx = ctx
        self.helpers = helpers
        self.done: set[str] = set()

    def leave_Call(self, original, updated):
        if self.ctx.imports.resolve(original.func) != "torch.nn.Sequential" \
                or not any(a.star == "*" and isinstance(a.value, cst.Call) and isinstance(a.value.func, cst.Name)
                           and a.value.func.value in self.helpers for a in original.args):
            return updated
        args: list[cst.Arg] = []
        used = set()
        for a in updated.args:
            if a.star == "*" and isinstance(a.value, cst.Call) and isinstance(a.value.func, cst.Name) \
                    and a.value.func.value in self.helpers:
                layers = self.helpers[a.value.func.value].expand(a.value)
                if layers is None:
                    return updated  # not static: the Sequential rule reports the starred argument
                used.add(a.value.func.value)
                for j, layer in enumerate(layers):
                    last = j == len(layers) - 1
                    comma = a.comma if last else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                    if last and a.comma is cst.MaybeSentinel.DEFAULT and a is not updated.args[-1]:
                        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                    args.append(cst.Arg(layer, comma=comma))
            elif a.star:
                return updated
            else:
                args.append(a)
        self.done |= used
        for name in sorted(used):
            self.ctx.report(Severity.INFO, "idiom-replaced", f"*{name}(...) in nn.Sequential written out as the layers "
                            f"each call returns ({name} builds a list of layers from its arguments)", original)
        return updated.with_changes(args=args)


def _calls(node) -> list[cst.Call]:
    return find_all(node, cst.Call)


class _ReadsOf(cst.CSTVisitor):
    """_named: the reads of ``name`` outside a definition of that helper, into ``found``."""

    def __init__(self, name, found):
        super().__init__()
        self.name = name
        self.found = found

    def visit_Name(self, n) -> None:
        if n.value == self.name:
            self.found.append(n)

    def visit_FunctionDef(self, n) -> bool:
        return n.name.value != self.name


def _named(node: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` is read in ``node`` outside a definition of that helper."""
    found = []
    scan(node, _ReadsOf(name, found))
    return bool(found)


def _helpers(scope_body) -> dict[str, _Helper]:
    out = {}
    for s in scope_body:
        if isinstance(s, cst.FunctionDef):
            h = _Helper(s)
            if h.ok:
                out[s.name.value] = h
    return out


def run(module: cst.Module, ctx) -> cst.Module:
    """Unroll ``*helper(...)`` in the nn.Sequential calls of each class's methods (helpers defined in the
    method, or at module level)."""
    top = _helpers(module.body)
    done: set[str] = set()
    body = []
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef):
            members = []
            for m in stmt.body.body:
                if isinstance(m, cst.FunctionDef) and isinstance(m.body, cst.IndentedBlock):
                    helpers = {**top, **_helpers(m.body.body)}
                    if helpers:
                        u = _Unroll(ctx, helpers)
                        m = rewrite(m, u)
                        done |= u.done
                        for s in m.body.body:  # the helper's own layers are not translated (it goes, unused)
                            if isinstance(s, cst.FunctionDef) and s.name.value in u.done \
                                    and not _named(m.body, s.name.value):
                                ctx.settle(*_calls(s))
                members.append(m)
            stmt = stmt.with_changes(body=stmt.body.with_changes(body=members))
        body.append(stmt)
    if done:
        ctx.analyses.setdefault(UNROLLED, set()).update(done)
    return module.with_changes(body=body)


def finish(module: cst.Module, ctx) -> cst.Module:
    """The unrolled helpers that nothing calls any more, removed (in the method that defines them or at
    module level)."""
    names = ctx.analyses.get(UNROLLED)
    if not names:
        return module

    def prune(stmts, scope) -> list:
        return [s for s in stmts if not (isinstance(s, cst.FunctionDef) and s.name.value in names
                                         and not _named(scope, s.name.value))]

    body = []
    for stmt in prune(list(module.body), module):
        if isinstance(stmt, cst.ClassDef):
            members = []
            for m in stmt.body.body:
                if isinstance(m, cst.FunctionDef) and isinstance(m.body, cst.IndentedBlock):
                    inner = prune(list(m.body.body), m)
                    if len(inner) != len(m.body.body):
                        if inner and not inner[0].leading_lines == ():
                            inner[0] = inner[0].with_changes(leading_lines=[l for l in inner[0].leading_lines
                                                                            if l.comment is not None])
                        m = m.with_changes(body=m.body.with_changes(body=inner))
                members.append(m)
            stmt = stmt.with_changes(body=stmt.body.with_changes(body=members))
        body.append(stmt)
    return module.with_changes(body=body)
