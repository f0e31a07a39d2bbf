"""Model surgery (nanoGPT's ``crop_block_size``: a method outside ``__init__`` and ``forward`` that assigns arrays
into the module's submodules, ``self.transformer.wpe.weight = nn.Parameter(...[:n])`` and each block's
``block.attn.bias = ...``) → a method returning a new model.

An Equinox module is an immutable pytree once ``__init__`` returns, so an Equinox user writes surgery with
``eqx.tree_at``, one replacement per array, and the caller rebinds: ``model = model.crop_block_size(n)``. The
method keeps its statements; from the first assignment into a submodule on, ``self`` reads the new model
(``model``), each such assignment becomes ``model = eqx.tree_at(lambda m: m.<path>, model, <value>)``, a loop over
a list of submodules (``for block in self.transformer.h:``) is enumerated so that the path reaches its member
(``m.transformer["h"][i].attn.bias``), ``hasattr(<module>, "name")`` becomes ``getattr(<module>, "name", None) is
not None`` (a translated module declares every field, None where PyTorch never set the attribute), and the method
returns the model. Assignments to plain Python objects the module holds (``self.config.block_size = n``) stay as
written: they mutate the same object, as in PyTorch. Calls in the file, ``model.crop_block_size(n)`` as a
statement, are rebound (``model = model.crop_block_size(n)``); callers elsewhere are told to rebind by a finding.

What it does not follow (a return of its own, a loop over something else than a submodule list, an assignment
into a loop's member inside a nested loop) stays an error naming the method.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import code, expr
from fwport.core.names import dotted_text, find_all, scan


def _root(node: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return node


def _field(node: cst.BaseExpression) -> str | None:
    """The first attribute of ``self.<a>...`` (through attributes and subscripts), else None."""
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        if isinstance(node.value, cst.Name) and node.value.value == "self" and isinstance(node, cst.Attribute):
            return node.attr.value
        node = node.value
    return None


class _Replace(cst.CSTTransformer):
    """``self`` → another name (a Name node), not inside a nested function or class."""

    def __init__(self, old: str, new: str):
        super().__init__()
        self.old, self.new = old, new

    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_ClassDef(self, node) -> bool:
        return False

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.new) if updated.value == self.old else updated


def _renamed(node, old: str, new: str):
    return node.visit(_Replace(old, new))


def _is_surgery(target: cst.BaseExpression, modules: frozenset[str], members: dict[str, cst.BaseExpression]) -> bool:
    if not isinstance(target, (cst.Attribute, cst.Subscript)):
        return False
    root = _root(target)
    if not isinstance(root, cst.Name):
        return False
    if root.value in members:
        return True
    return root.value == "self" and _field(target) in modules


def _surgery_target(st: cst.CSTNode, modules, members) -> cst.BaseExpression | None:
    if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign) \
            and len(st.body[0].targets) == 1 and _is_surgery(st.body[0].targets[0].target, modules, members):
        return st.body[0].targets[0].target
    return None


class _Surgeries(cst.CSTVisitor):
    """_holds_surgery: the assignments of surgery targets, into ``found``."""

    def __init__(self, modules, members, found):
        super().__init__()
        self.modules = modules
        self.members = members
        self.found = found

    def visit_Assign(self, n: cst.Assign) -> None:
        if any(_is_surgery(t.target, self.modules, self.members) for t in n.targets):
            self.found.append(n)


def _holds_surgery(node: cst.CSTNode, modules, members) -> bool:
    found = []
    scan(node, _Surgeries(modules, members, found))
    return bool(found)


class _Refusals(cst.CSTVisitor):
    """refused: why the surgery of method ``fn`` cannot be written as a method returning a new model, into ``why``."""

    def __init__(self, fn, modules, why):
        super().__init__()
        self.fn = fn
        self.modules = modules
        self.why = why
        self.loops: list[cst.For | cst.While] = []
        self.members: dict[str, cst.BaseExpression] = {}

    def visit_Return(self, node) -> None:
        self.why.append("it returns a value of its own (the rewritten method returns the new model)")

    def visit_FunctionDef(self, node) -> bool:
        return node is self.fn

    def visit_For(self, node: cst.For) -> None:
        self.loops.append(node)
        if isinstance(node.target, cst.Name) and _field(node.iter) in self.modules \
                and isinstance(_root(node.iter), cst.Name) and _root(node.iter).value == "self":
            self.members[node.target.value] = node.iter

    def leave_For(self, node) -> None:
        self.loops.pop()

    def visit_While(self, node) -> None:
        self.loops.append(node)

    def leave_While(self, node) -> None:
        self.loops.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name) \
                    and t.target.value.value == "self" and t.target.attr.value not in self.modules:
                self.why.append(f"{code(t.target)} is a field of the module itself (a hyperparameter is a static "
                                "field, which eqx.tree_at cannot replace)")
        hits = [t.target for t in node.targets if _is_surgery(t.target, self.modules, self.members)]
        if not hits:
            return
        if len(node.targets) != 1:
            self.why.append(f"{code(hits[0])} is one of several targets of one assignment")
            return
        root = _root(hits[0]).value
        if root == "self" and self.loops:
            self.why.append(f"{code(hits[0])} is assigned in a loop")
        elif root != "self" and (len(self.loops) != 1 or not isinstance(self.loops[0], cst.For)
                                 or self.loops[0].target.value != root or self.loops[0].orelse is not None):
            self.why.append(f"{code(hits[0])} is assigned in a nested loop or one with an else")

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if _is_surgery(node.target, self.modules, self.members):
            self.why.append(f"{code(node.target)} is updated in place")


def refused(fn: cst.FunctionDef, modules: frozenset[str]) -> str | None:
    """Why the method's surgery cannot be written as a method returning a new model, else None."""
    why: list[str] = []
    scan(fn, _Refusals(fn, modules, why))
    return why[0] if why else None


class _Method(cst.CSTTransformer):
    """One method's surgery, its statements from the first on read ``self`` as ``new`` (the new model) → ``new =
    eqx.tree_at(lambda m: m.<path>, new, <value>)`` (see the module docstring)."""

    def __init__(self, modules: frozenset[str], tree_at: str, index: str, new: str):
        super().__init__()
        self.modules, self.tree_at, self.index, self.new = modules, tree_at, index, new
        self.members: dict[str, cst.BaseExpression] = {}  # a loop's name → its iterable (self read as new)
        self.configs: frozenset[str] = frozenset()  # the fields holding a frozen configuration (configs.py)
        self.replace = ""  # how dataclasses.replace is spelled

    def visit_FunctionDef(self, node) -> bool:
        return False

    def _own(self, node):
        return _renamed(node, self.new, "self")

    def visit_For(self, node: cst.For) -> None:
        it = self._own(node.iter)
        if isinstance(node.target, cst.Name) and _field(it) in self.modules and _root(it).value == "self":
            self.members[node.target.value] = it

    def leave_For(self, original, updated):
        if not isinstance(original.target, cst.Name) or original.target.value not in self.members:
            return updated
        self.members.pop(original.target.value)
        if not _holds_surgery(original.body, self.modules, {original.target.value: None}):
            return updated
        return updated.with_changes(
            target=cst.Tuple([cst.Element(cst.Name(self.index)), cst.Element(updated.target)], lpar=[], rpar=[]),
            iter=cst.Call(cst.Name("enumerate"), [cst.Arg(updated.iter)]))

    def leave_Call(self, original, updated):
        if dotted_text(updated.func) == "hasattr" and len(updated.args) == 2:
            return expr(f"getattr({code(updated.args[0].value)}, {code(updated.args[1].value)}, None) is not None")
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        target = _surgery_target(self._own(original), self.modules, dict.fromkeys(self.members))
        if target is None:
            return updated
        root = _root(target).value
        if isinstance(target, cst.Attribute) and (dotted_text(target.value) or "")[5:] in self.configs:
            # a field of a frozen configuration (configs.py): the new model holds a copy with that field replaced
            held = code(_renamed(target.value, "self", self.new))
            line = (f"{self.new} = {self.tree_at}(lambda m: {code(_renamed(target.value, 'self', 'm'))}, {self.new}, "
                    f"{self.replace}({held}, {target.attr.value}={code(updated.body[0].value)}))")
            return updated.with_changes(body=[cst.parse_statement(line).body[0]])
        if root == "self":
            path = code(_renamed(target, "self", "m"))
        else:  # a loop's member: its place in the list the loop runs over
            path = f"{code(_renamed(self.members[root], 'self', 'm'))}[{self.index}]" + code(target)[len(root):]
        line = f"{self.new} = {self.tree_at}(lambda m: {path}, {self.new}, {code(updated.body[0].value)})"
        return updated.with_changes(body=[cst.parse_statement(line).body[0]])


def functional(fn: cst.FunctionDef, modules: frozenset[str], ctx, configs: frozenset[str] = frozenset()) -> cst.FunctionDef:
    """The method with its surgery written as replacements returning the new model."""
    body = list(fn.body.body)
    first = next(i for i, st in enumerate(body) if _holds_surgery(st, modules, _loop_members(st, modules)))
    used = {n.value for n in _all_names(fn)}
    index = next(n for n in ("i", "index", "i_", "i__") if n not in used)
    new = next(n for n in ("model", "new_model", "model_", "model__") if n not in used)
    rest = [_renamed(st, "self", new) for st in body[first:]]
    start = cst.parse_statement(f"{new} = self").with_changes(leading_lines=body[first].leading_lines)
    rest[0] = rest[0].with_changes(leading_lines=[])
    block = fn.body.with_changes(body=[*body[:first], start, *rest, cst.parse_statement(f"return {new}")])
    method = _Method(modules, ctx.spell_text("equinox.tree_at"), index, new)
    method.configs, method.replace = configs, ctx.spell_text("dataclasses.replace") if configs else ""
    return fn.with_changes(body=block.visit(method))


def _loop_members(st: cst.CSTNode, modules) -> dict[str, None]:
    if isinstance(st, cst.For) and isinstance(st.target, cst.Name) and _field(st.iter) in modules:
        return {st.target.value: None}
    return {}


def _all_names(node: cst.CSTNode) -> list[cst.Name]:
    return find_all(node, cst.Name)


def _statement_call(st: cst.CSTNode, methods: frozenset[str]) -> cst.Call | None:
    """``<receiver>.<a surgery method>(...)`` as a statement, else None."""
    if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Expr) \
            and isinstance(st.body[0].value, cst.Call) and isinstance(st.body[0].value.func, cst.Attribute) \
            and st.body[0].value.func.attr.value in methods:
        return st.body[0].value
    return None


class Unbound(cst.CSTVisitor):
    """The modules pass: a call of a surgery method as a statement on anything but a plain name other than self
    (``self.crop_block_size(n)``, ``a.model.crop_block_size(n)``) cannot be rebound where it is: an error (the
    finish, Rebind, rebinds the others)."""

    def __init__(self, methods: frozenset[str], ctx):
        super().__init__()
        self.methods, self.ctx = methods, ctx

    def visit_SimpleStatementLine(self, node) -> bool:
        call = _statement_call(node, self.methods)
        if call is not None and not (isinstance(call.func.value, cst.Name) and call.func.value.value != "self"):
            from fwport.core.finding import Severity
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(call)}: {call.func.attr.value}() "
                            f"returns a new model in Equinox (model surgery) and leaves {code(call.func.value)} as it "
                            f"was; rebind it where the model is held (`model = model.{call.func.attr.value}(...)`)",
                            node)
        return False


class Rebind(cst.CSTTransformer):
    """The finish: a call of a surgery method as a statement, ``model.crop_block_size(n)``, → ``model =
    model.crop_block_size(n)`` (the method returns the new model and leaves its receiver as it was); Unbound
    reported the calls on anything else."""

    def __init__(self, methods: frozenset[str]):
        super().__init__()
        self.methods = methods

    def leave_SimpleStatementLine(self, original, updated):
        call = _statement_call(updated, self.methods)
        if call is not None and isinstance(call.func.value, cst.Name) and call.func.value.value != "self":
            return updated.with_changes(body=[cst.Assign([cst.AssignTarget(cst.Name(call.func.value.value))], call)])
        return updated
