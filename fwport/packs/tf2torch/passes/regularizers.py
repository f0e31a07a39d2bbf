"""Keras weight regularizers on the layers of a translated subclass → a ``regularization_loss()``
method on the torch module.

``self.conv = Conv2D(..., kernel_regularizer=l2(wd), bias_regularizer=l1(0.01))`` in ``__init__`` (and an
Embedding's ``embeddings_regularizer``, its ``.weight``):
the arguments are taken off the layer (torch layers have no regularizers) and the class gets

    def regularization_loss(self):
        return wd * self.conv.weight.square().sum() + 0.01 * self.conv.bias.abs().sum()

exactly Keras's penalties (``l2(λ)`` adds λ·Σw², with no ½; ``l1(λ)`` λ·Σ|w|; the strings "l2" and
"l1", and ``l2()`` / ``L2()`` / ``l1()`` / ``L1()`` without a factor, mean λ = 0.01). A factor that is a parameter of ``__init__`` is kept on the module at the end of
``__init__`` (``self.wd = wd``); a layer created under an ``if`` counts where it exists. Keras adds
these penalties to the loss itself (``model.losses``); torch does not: the written fit / evaluate of a
compile add the sum over ``model.modules()`` (fitloop), and an info finding says to add it in other
loops. Keras 3 sums the penalties of the trainable weights only (``Layer._get_regularization_losses`` walks
``trainable_weights``: a frozen layer's terms, or every term of a frozen model, leave model.losses and so fit's
loss); Keras 2 keeps them all. ``X.trainable = False`` becomes ``X.requires_grad_(False)`` (training.py), so in
a Keras 3 file that sets a ``trainable`` flag each term is counted under ``if <weight>.requires_grad:``, which
is Keras 3's rule whichever layer is frozen at run time; a Keras 2 file (or one that freezes nothing) counts
every term. A factor read from a local name of ``__init__`` bound there once to a number (``weight_decay = 1e-4``)
is that number in the method. A call of a function of the file that returns one (``_gen_l2_regularizer(flag)``,
``return l2(λ) if flag else None``) is what it returns, a choice with None the factor ``(λ if flag else 0.0)``.
Anything else (activity regularizers, a regularizer object built elsewhere, a factor
computed in ``__init__``) stays an error of the layer's rule.

The subclass pass calls :func:`strip` when it translates a layer; :func:`finish` writes the methods
once every finding is located (it adds lines).
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.context import FileContext
from fwport.core.engine import code
from fwport.core.finding import Severity
from fwport.core.names import find_all, scan
from fwport.packs.tf2torch.passes import data_format

MODULE = "<module>:"  # KEY's key for a model bound to a name at module level: MODULE + the name
NO_INIT = cst.parse_statement("def __init__(self):\n    pass\n")  # such a model's "__init__": no parameters
FROZEN = "tf2torch-frozen"  # ctx.analyses: the first `X.trainable = <not True>` of the file (training.py), as code
CONSTRAINTS = "tf2torch-constraints"  # ctx.analyses: class name → [(weight, constraint, conditions)]
FUNCTIONS = "tf2torch-regularizer-functions"  # ctx.analyses: the module's functions bound once (note_functions)
MODULE_NAMES = "tf2torch-regularizer-names"  # ctx.analyses: module-level names bound once to a call (note_functions)
KEY = "tf2torch-regularizers"  # ctx.analyses: class name → {"terms": [...], "store": {...}}
_ARGS = {"kernel_regularizer": "weight", "bias_regularizer": "bias", "embeddings_regularizer": "weight"}
REGULARIZER_ARGS = frozenset(_ARGS)
_KINDS = {"keras.regularizers.l2": "l2", "keras.regularizers.L2": "l2", "keras.regularizers.l1": "l1",
          "keras.regularizers.L1": "l1"}
# rules whose torch module holds the kernel as .weight and the bias as .bias (the penalty is a sum:
# the kernel's layout does not change it)
_RULES = {"dense", "conv1d", "conv2d", "conv3d", "conv1d-transpose", "conv2d-transpose", "conv3d-transpose", "embedding"}


def strip(call: cst.Call, rule, resolve, init_fn: cst.FunctionDef | None, cls: str, attr: str,
          guarded: bool, ctx: FileContext) -> tuple[cst.Call, callable | None]:
    """The layer call without the regularizer arguments this module translates, and a function to call
    with the translated module's weight path once the layer is translated (None: nothing taken); its
    ``cls`` names another class where the caller knows the class's name only later (the functional pass)."""
    if rule.id not in _RULES or init_fn is None:
        return call, None
    constrained: list[tuple[str, str, str]] = []  # (torch weight, KerasConstraint's arguments, the written argument)
    # one constraint fwport cannot read: all stay, errors of the layer's rule (the layer is left as written)
    readable = all(constraint_args(a.value, resolve) is not None for a in call.args
                   if a.keyword is not None and a.keyword.value in CONSTRAINT_ARGS)
    params = {p.name.value for p in (*init_fn.params.params, *init_fn.params.kwonly_params)}
    reassigned = _assigned_names(init_fn)
    constants = _literal_locals(init_fn, params)
    factories = ctx.analyses.get(FUNCTIONS)
    bound = {**{k: v for k, v in (ctx.analyses.get(MODULE_NAMES) or {}).items() if k not in reassigned | params},
             **_bound_once(init_fn, params)}
    # (param, kind, factor code, init names it needs, what the source calls the weight: kernel, embeddings...)
    taken: list[tuple[str, str, str, set[str], str]] = []
    kept: list[cst.Arg] = []
    for a in call.args:
        kw = a.keyword.value if a.keyword is not None else None
        if kw in CONSTRAINT_ARGS and rule.id in _CONSTRAINED and not cls.startswith(MODULE) and readable:
            c = constraint_args(a.value, resolve)
            if c != "none":
                constrained.append((CONSTRAINT_ARGS[kw], f"{c[0]}{c[1]}", f"{kw}={code(a.value)}"))
            continue
        if kw not in _ARGS:
            kept.append(a)
            continue
        term = _term(a.value, resolve, params, reassigned, constants, factories, bound)
        if term is None:
            kept.append(a)  # the rule says why
            continue
        if term != "none":
            taken.append((_ARGS[kw], *term, kw[: -len("_regularizer")]))
    if len(kept) == len(call.args):
        return call, None
    if kept:
        last = kept[-1]
        kept[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    new_call = call.with_changes(args=kept)

    def record(target: str, cls: str = cls, emitted: cst.BaseExpression | None = None) -> None:
        module = "self." + ".".join(f"{p}" for p in target.split(".") if not p.isdigit())
        module += "".join(f"[{p}]" for p in target.split(".") if p.isdigit())
        if constrained:
            _record_constraints(module, emitted, cls)
        if not taken:
            return
        entry = ctx.analyses.setdefault(KEY, {}).setdefault(cls, {"terms": [], "store": []})
        for param, kind, factor, names, _ in taken:
            entry["terms"].append((f"{factor}", kind, f"{module}.{param}", attr if guarded else None))
            entry["store"] += [n for n in sorted(names) if n not in entry["store"]]
        said = ", ".join(f"{label}: {k}({f})" for _, k, f, _, label in taken)
        home = (f"{cls}.regularization_loss()" if not cls.startswith(MODULE) else
                f"{_home(cls)[1]}_regularization_loss(), written below the model as its regularization_loss")
        ctx.report(Severity.INFO, "idiom-replaced", f"regularizers ({said}) → {home}: "
                   "Keras adds the penalty to the loss itself (model.losses), torch does not: the fit / evaluate "
                   "fwport writes for a compile add it; in a loop of your own add "
                   "sum(m.regularization_loss() for m in model.modules() if hasattr(m, 'regularization_loss')) "
                   "to the loss", call)
        if _frozen_guard(ctx):
            ctx.report(Severity.INFO, "idiom-replaced", f"regularizers ({said}) of a file that sets a trainable flag "
                       f"({ctx.analyses[FROZEN]} = ...): Keras 3 leaves the penalties of frozen weights out of "
                       "model.losses and so out of fit's loss (Keras 2 keeps them): regularization_loss() counts each "
                       "term only while its weight's requires_grad is set (trainable = False became "
                       "requires_grad_(False))", call)

    def _record_constraints(module: str, emitted, cls: str) -> None:
        from fwport.packs.tf2torch import helpers

        classes, to_keras, back = _CONSTRAINED[rule.id]
        func = emitted.func if isinstance(emitted, cst.Call) else None
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        said = ", ".join(w for _, _, w in constrained)
        if name not in classes:
            ctx.report(Severity.ERROR, "unsupported-argument", f"{said}: the layer did not become a plain "
                       f"{classes[0]} here, whose weight layout apply_constraints() knows: project the weight by hand "
                       "under torch.no_grad() after each optimizer.step()", call)
            return
        helper = helpers.use(ctx, "KerasConstraint")
        is_lazy = ctx.spell_text("torch.nn.parameter.is_lazy")
        for param, args, _ in constrained:
            weight = f"{module}.{param}"
            conds = [f"{module}.{param} is not None", f"not {is_lazy}({weight})", f"{weight}.requires_grad"]
            if param == "weight":
                value = f"{helper}({args})({weight}{to_keras}){back}"
            else:
                value = f"{helper}({args})({weight})"
            ctx.analyses.setdefault(CONSTRAINTS, {}).setdefault(cls, []).append((weight, value, conds, True))
        ctx.report(Severity.INFO, "idiom-replaced", f"{said} → {cls}.apply_constraints() projects the layer's "
                   "weights as Keras does (in Keras's kernel layout), after each optimizer.step() of the loop fwport "
                   "writes and of the GradientTape steps it translates (torch layers have no constraints); call it "
                   "in a loop of your own", call)

    record.refuse = lambda: constrained and _record_constraints("", None, cls)  # no plain module: an error
    return new_call, record


def note_functions(module: cst.Module, ctx: FileContext) -> None:
    """Keep the module's own functions bound once (``def _gen_l2_regularizer(flag): return l2(1e-4) if flag else
    None``) for :func:`_term`, which follows a regularizer such a function returns (once per file)."""
    if FUNCTIONS in ctx.analyses:
        return
    counts: dict[str, int] = {}
    for stmt in module.body:
        for t in find_all(stmt, cst.AssignTarget) if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else ():
            if isinstance(t.target, cst.Name):
                counts[t.target.value] = counts.get(t.target.value, 0) + 1
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            counts[stmt.name.value] = counts.get(stmt.name.value, 0) + 1
    ctx.analyses[FUNCTIONS] = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)
                               and counts.get(s.name.value) == 1 and not s.decorators}
    names = {}
    for stmt in module.body:  # (a regularizer bound once to a module-level name: _term follows it)
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                and counts.get(small.targets[0].target.value) == 1 and isinstance(small.value, cst.Call):
            names[small.targets[0].target.value] = small.value
    ctx.analyses[MODULE_NAMES] = names


def _is_sequential(node) -> bool:
    """A call of something named ...Sequential (keras.Sequential in the source, nn.Sequential in the output)."""
    return isinstance(node, cst.Call) and code(node.func).split(".")[-1] == "Sequential"


def sequential_homes(module: cst.Module, ctx: FileContext) -> dict[int, tuple[str, str, cst.FunctionDef]]:
    """id(keras.Sequential call) → (KEY's key, the name the model is held in, the function that builds it) for the
    Sequentials whose layers' regularizers a function written beside them can count: ``name = keras.Sequential(...)``
    at module level (the k-th such statement of the name: ``MODULE + name#k``; the function takes the model as a
    default argument, so a later rebinding of the name changes nothing), and in a top-level function bound once
    ``MODULE + fn/name``), statements of its body's top level, ``name = keras.Sequential(...)`` (the name bound once
    there) or ``return keras.Sequential(...)`` (``MODULE + fn/name!``: the model is bound to ``name`` before the
    return, a name the function does not use)."""
    out: dict[int, tuple[str, str, cst.FunctionDef]] = {}
    seen: dict[str, int] = {}
    functions = ctx.analyses.get(FUNCTIONS) or {}
    for stmt in module.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                and _is_sequential(small.value):
            name = small.targets[0].target.value
            k = seen[name] = seen.get(name, -1) + 1
            out[id(small.value)] = (MODULE + name + (f"#{k}" if k else ""), name, NO_INIT)
        if isinstance(stmt, cst.FunctionDef) and functions.get(stmt.name.value) is stmt \
                and isinstance(stmt.body, cst.IndentedBlock):
            counts = _binding_counts(stmt)
            used = {n.value for n in find_all(stmt, cst.Name)}
            for inner in stmt.body.body:
                small = inner.body[0] if isinstance(inner, cst.SimpleStatementLine) and len(inner.body) == 1 else None
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and _is_sequential(small.value) \
                        and isinstance(small.targets[0].target, cst.Name) \
                        and counts.get(small.targets[0].target.value) == 1:
                    name = small.targets[0].target.value
                    out[id(small.value)] = (f"{MODULE}{stmt.name.value}/{name}", name, stmt)
                elif isinstance(small, cst.Return) and _is_sequential(small.value):
                    name = next(n for n in ("model", "sequential_model", "model_") if n not in used)
                    out[id(small.value)] = (f"{MODULE}{stmt.name.value}/{name}!", name, stmt)
    return out


def _home(key: str) -> tuple[str | None, str, int, bool]:
    """(the function, the model's name, k, returned) of a MODULE key (sequential_homes)."""
    rest = key[len(MODULE):]
    returned = rest.endswith("!")
    rest = rest.rstrip("!")
    fn, _, rest = rest.rpartition("/")
    name, _, k = rest.partition("#")
    return fn or None, name, int(k or 0), returned


def _returned(value: cst.BaseExpression, factories: dict | None) -> cst.BaseExpression | None:
    """``_gen_l2_regularizer(use_l2)`` (resnet_model.py), a call of a function of the file whose body is one
    ``return <expression>`` (a docstring aside) of its parameters and module-level names: that expression, each
    parameter replaced by the call's argument (or its default), parenthesised; None for anything else."""
    if not factories or not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
        return None
    fn = factories.get(value.func.value)
    if fn is None or not isinstance(fn.body, cst.IndentedBlock) or fn.asynchronous:
        return None
    body = list(fn.body.body)
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) and \
            isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        body = body[1:]  # the docstring
    if (len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1
            or not isinstance(body[0].body[0], cst.Return) or body[0].body[0].value is None):
        return None
    p = fn.params
    if p.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or p.star_kwarg is not None or p.posonly_params:
        return None
    given: dict[str, cst.BaseExpression] = {}
    positional = list(p.params)
    for i, a in enumerate(value.args):
        if a.star:
            return None
        if a.keyword is None:
            if i >= len(positional):
                return None
            given[positional[i].name.value] = a.value
        else:
            given[a.keyword.value] = a.value
    names = [x.name.value for x in (*p.params, *p.kwonly_params)]
    if set(given) - set(names):
        return None
    for x in (*p.params, *p.kwonly_params):
        if x.name.value not in given:
            if x.default is None:
                return None
            given[x.name.value] = x.default
    out = body[0].body[0].value
    if find_all(out, cst.Lambda) or find_all(out, cst.NamedExpr) or any(
            find_all(out, k) for k in (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
        return None  # (names of their own)
    return out.visit(_Substituted({k: cst.parse_expression(f"({code(v)})") for k, v in given.items()}))


class _Substituted(cst.CSTTransformer):
    """A function's expression with its parameters replaced (an attribute's name and a keyword kept)."""

    def __init__(self, values: dict[str, cst.BaseExpression]):
        super().__init__()
        self.values = values

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.values.get(original.value, updated)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def _term(value: cst.BaseExpression, resolve, params: set[str], reassigned: set[str],
          constants: dict[str, str] | None = None, factories: dict | None = None, bound: dict | None = None):
    """(kind, factor code, __init__ parameters it reads) for a regularizer fwport translates; "none"
    for None; None for anything else. A factor that reads a local name of ``__init__`` bound once to a number
    (``weight_decay = 1e-4``, ``constants``) reads that number. A call of a function of the file (``factories``,
    :func:`note_functions`) is what it returns (:func:`_returned`); ``A if c else B`` of a regularizer and None (or
    two of one kind) is that kind with the factor ``(a if c else 0.0)``: a zero factor adds 0, as no regularizer
    adds nothing, exactly. A name bound once (``bound``: in the function that builds the layer, or at module level
    and not rebound there) to a regularizer is that regularizer (``regularizer = keras.regularizers.l2(1e-4)``, then
    ``kernel_regularizer=regularizer``)."""
    if isinstance(value, cst.Name) and bound and value.value in bound:
        return _term(bound[value.value], resolve, params, reassigned, constants, factories)
    returned = _returned(value, factories)
    if returned is not None:
        return _term(returned, resolve, params, reassigned, constants)
    if isinstance(value, cst.IfExp):
        decided = literal_value(value.test, NOT_LITERAL)
        if decided is not NOT_LITERAL:  # _gen_l2_regularizer(False): the branch it takes
            return _term(value.body if decided else value.orelse, resolve, params, reassigned, constants)
        a, b = (_term(v, resolve, params, reassigned, constants) for v in (value.body, value.orelse))
        test = _factor(value.test, params, reassigned, constants)
        if a is None or b is None or test is None:
            return None
        if a == "none" and b == "none":
            return "none"
        kind = (a if a != "none" else b)[0]
        if a != "none" and b != "none" and a[0] != b[0]:
            return None  # two kinds
        fa, fb = (t[1] if t != "none" else "0.0" for t in (a, b))
        return kind, f"({fa} if {test[0]} else {fb})", set().union(*(t[2] for t in (a, b) if t != "none"), test[1])
    lit = literal_value(value, NOT_LITERAL)
    if lit is None:
        return "none"
    if lit in ("l2", "l1"):
        return lit, "0.01", set()
    if not isinstance(value, cst.Call):
        return None
    kind = _KINDS.get(resolve(value.func) or "")
    if kind is not None and not value.args:
        return kind, "0.01", set()  # l2() / L2(): the factor defaults to 0.01 (Keras 2 and 3)
    if kind is None or len(value.args) != 1 or value.args[0].star:
        return None
    arg = value.args[0]
    if arg.keyword is not None and arg.keyword.value != kind:
        return None
    factor = _factor(arg.value, params, reassigned, constants)
    return None if factor is None else (kind, *factor)


def _factor(factor: cst.BaseExpression, params: set[str], reassigned: set[str],
            constants: dict[str, str] | None) -> tuple[str, set[str]] | None:
    """(code, __init__ parameters it reads) of a value regularization_loss() reads (a factor, a condition);
    None where it reads a value computed in __init__."""
    names = {n for n in _free_names(factor) if not n.startswith("self.")}
    local = names & reassigned
    if local and constants and local <= set(constants):
        text = code(factor)
        for n in sorted(local):
            text = _rename(text, n, constants[n])
        factor, names = cst.parse_expression(text), names - local
    elif local:
        return None  # computed in __init__: the method cannot read it
    needs = names & params  # kept on the module; other names are module-level, readable anywhere
    return code(factor), needs


def _free_names(node: cst.CSTNode) -> set[str]:
    out: set[str] = set()
    class _V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> bool:
            if isinstance(n.value, cst.Name) and n.value.value == "self":
                out.add(f"self.{n.attr.value}")
                return False
            return True

        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

        def visit_Arg(self, n: cst.Arg) -> bool:
            scan(n.value, self)
            return False

    scan(node, _V())
    return out


class _AssignedNames(cst.CSTVisitor):
    """_assigned_names: the names assigned (plainly or augmented), into ``out``."""

    def __init__(self, out):
        super().__init__()
        self.out = out

    def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
        if isinstance(n.target, cst.Name):
            self.out.add(n.target.value)

    def visit_AugAssign(self, n: cst.AugAssign) -> None:
        if isinstance(n.target, cst.Name):
            self.out.add(n.target.value)


def _literal_locals(fn: cst.FunctionDef, params: set[str]) -> dict[str, str]:
    """The local names of ``fn`` bound once, by a statement of its body's top level, to a number literal
    (``weight_decay = 0.0005``), and nowhere else in it: name → the number's code."""
    counts = _binding_counts(fn)
    out: dict[str, str] = {}
    for stmt in fn.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                    and isinstance(literal_value(small.value, NOT_LITERAL), (int, float))
                    and not isinstance(literal_value(small.value, NOT_LITERAL), bool)):
                name = small.targets[0].target.value
                if counts.get(name) == 1 and name not in params:
                    out[name] = code(small.value)
    return out


def _bound_once(fn: cst.FunctionDef, params: set[str]) -> dict[str, cst.BaseExpression]:
    """The local names of ``fn`` bound once, by a statement of its body's top level, to a call (``regularizer =
    keras.regularizers.l2(1e-4)``), and nowhere else in it: name → that call."""
    counts = _binding_counts(fn)
    out: dict[str, cst.BaseExpression] = {}
    for stmt in fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ():
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                    and isinstance(small.value, cst.Call) and counts.get(small.targets[0].target.value) == 1
                    and small.targets[0].target.value not in params):
                out[small.targets[0].target.value] = small.value
    return out


def _binding_counts(fn: cst.FunctionDef) -> dict[str, int]:
    """How many times each name is bound in ``fn`` (assignments, for and with targets, walrus)."""
    counts: dict[str, int] = {}
    targets: list[cst.BaseExpression] = []
    for kind, get in ((cst.AssignTarget, lambda n: n.target), (cst.AugAssign, lambda n: n.target),
                      (cst.AnnAssign, lambda n: n.target), (cst.For, lambda n: n.target),
                      (cst.NamedExpr, lambda n: n.target),
                      (cst.WithItem, lambda n: n.asname.name if n.asname is not None else None)):
        targets += [get(n) for n in find_all(fn.body, kind)]
    for t in targets:
        for n in ([t] if isinstance(t, cst.Name) else find_all(t, cst.Name) if t is not None else []):
            counts[n.value] = counts.get(n.value, 0) + 1
    return counts


def _assigned_names(fn: cst.FunctionDef) -> set[str]:
    out: set[str] = set()

    scan(fn.body, _AssignedNames(out))
    return out


# built-in layers' kernel_constraint= / bias_constraint=: rule → (the torch module classes it must have become, the
# torch weight → Keras's kernel layout, and back): Keras reduces a constraint's axes of its own layout (Dense
# (in, out), ConvND (*kernel, in, out)), torch holds (out, in) / (out, in, *kernel)
_CONSTRAINED = {"dense": (("Linear", "LazyLinear"), ".T", ".T"),
                "conv1d": (("Conv1d", "LazyConv1d"), ".permute(2, 1, 0)", ".permute(2, 1, 0)"),
                "conv2d": (("Conv2d", "LazyConv2d"), ".permute(2, 3, 1, 0)", ".permute(3, 2, 0, 1)"),
                "conv3d": (("Conv3d", "LazyConv3d"), ".permute(2, 3, 4, 1, 0)", ".permute(4, 3, 0, 1, 2)")}
CONSTRAINT_ARGS = {"kernel_constraint": "weight", "bias_constraint": "bias"}
# keras.constraints constructors → (KerasConstraint's class name, their positional parameters)
_CONSTRAINT_CLASSES = {
    **{f"keras.constraints.{n}": ("MaxNorm", ("max_value", "axis")) for n in ("max_norm", "MaxNorm", "maxnorm")},
    **{f"keras.constraints.{n}": ("MinMaxNorm", ("min_value", "max_value", "rate", "axis"))
       for n in ("min_max_norm", "MinMaxNorm")},
    **{f"keras.constraints.{n}": ("NonNeg", ()) for n in ("non_neg", "NonNeg", "nonneg")},
    **{f"keras.constraints.{n}": ("UnitNorm", ("axis",)) for n in ("unit_norm", "UnitNorm", "unitnorm")}}
_CONSTRAINT_NAMES = {"max_norm", "MaxNorm", "min_max_norm", "MinMaxNorm", "non_neg", "NonNeg", "unit_norm", "UnitNorm"}


def constraint_args(value: cst.BaseExpression, resolve) -> tuple[str, str] | str | None:
    """A built-in layer's constraint argument fwport translates: ("NonNeg", ", ...config") for a literal name or
    a keras.constraints constructor called with literal arguments; "none" for None; None for anything else."""
    lit = literal_value(value, NOT_LITERAL)
    if lit is None:
        return "none"
    if isinstance(lit, str):
        return (f"{lit!r}".replace("'", '"'), "") if lit in _CONSTRAINT_NAMES else None
    if not isinstance(value, cst.Call):
        return None
    known = _CONSTRAINT_CLASSES.get(resolve(value.func) or "")
    if known is None:
        return None
    name, positional = known
    config = []
    for i, a in enumerate(value.args):
        if a.star or literal_value(a.value, NOT_LITERAL) is NOT_LITERAL:
            return None
        key = a.keyword.value if a.keyword is not None else (positional[i] if i < len(positional) else None)
        if key not in positional:
            return None
        config.append(f", {key}={code(a.value)}")
    return f'"{name}"', "".join(config)


_PENALTY = {"l2": "{w}.square().sum()", "l1": "{w}.abs().sum()"}


def finish(module: cst.Module, ctx: FileContext) -> cst.Module:
    """The lines the subclass pass asked for at the end of a class: the regularization_loss() method
    (and the factors it keeps), and the data_format checks at the end of __init__ (data_format.py)."""
    found = ctx.analyses.get(KEY) or {}
    guards = ctx.analyses.get(data_format.KEY) or {}
    constrained = ctx.analyses.get(CONSTRAINTS) or {}
    if not found and not guards and not constrained:
        return module
    body = _drop_followed_names(list(module.body), ctx) if found else list(module.body)
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.ClassDef) and stmt.name.value in constrained:
            body[i] = _with_constraints(stmt, constrained[stmt.name.value], ctx)
    for key in [k for k in found if k.startswith(MODULE)]:
        fn, name, k, returned = _home(key)
        if fn is None:
            body = _with_function(body, name, found[key], _frozen_guard(ctx), k)
            continue
        for i, stmt in enumerate(body):  # a model built in a top-level function: the lines go into its body
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == fn and isinstance(stmt.body, cst.IndentedBlock):
                inner = _with_function(list(stmt.body.body), name, found[key], _frozen_guard(ctx), k, returned, True)
                body[i] = stmt.with_changes(body=stmt.body.with_changes(body=inner))
                break
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.ClassDef) and stmt.name.value in guards:
            stmt = body[i] = _with_init_lines(stmt, data_format.guard_lines(guards[stmt.name.value]))
        if isinstance(stmt, cst.ClassDef) and stmt.name.value in found:
            body[i] = _with_method(stmt, found[stmt.name.value], _frozen_guard(ctx))
    return module.with_changes(body=body)


def _with_constraints(cls: cst.ClassDef, entries: list, ctx: FileContext) -> cst.ClassDef:
    """``apply_constraints()`` at the end of the class: each weight's Keras constraint, projected in place."""
    no_grad = ctx.spell_text("torch.no_grad")
    lines = ["def apply_constraints(self):",
             '    """Keras\'s weight constraints of this module\'s own weights: Keras\'s optimizer assigns',
             '        constraint(w) to each trainable weight after its update; call after each optimizer.step()."""',
             f"    with {no_grad}():"]
    for weight, constraint, conds, *whole in entries:
        value = constraint if whole else f"{constraint}({weight})"  # whole: the projected value, written out
        if conds:
            lines += [f"        if {' and '.join(conds)}:", f"            {weight}.copy_({value})"]
        else:
            lines.append(f"        {weight}.copy_({value})")
    method = cst.parse_statement("\n".join(lines) + "\n").with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    return cls.with_changes(body=cls.body.with_changes(body=[*cls.body.body, method]))


def _with_init_lines(cls: cst.ClassDef, texts: list[str]) -> cst.ClassDef:
    members = list(cls.body.body)
    i = next((i for i, s in enumerate(members) if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
    if i is None:
        return cls
    init = members[i]
    members[i] = init.with_changes(body=init.body.with_changes(
        body=[*init.body.body, *(cst.parse_statement(t) for t in texts)]))
    return cls.with_changes(body=cls.body.with_changes(body=members))


def _frozen_guard(ctx: FileContext) -> bool:
    """Whether each penalty is counted only while its weight trains: Keras 3 (not 2) in a file that sets a
    trainable flag."""
    return ctx.version != 2 and FROZEN in ctx.analyses


def _with_method(cls: cst.ClassDef, entry: dict, frozen: bool = False) -> cst.ClassDef:
    members = list(cls.body.body)
    init_i = next((i for i, s in enumerate(members) if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"),
                  None)
    stored: dict[str, str] = {}
    if entry["store"] and init_i is not None:
        init = members[init_i]
        have = _self_assigned(cls)
        lines = []
        for n in entry["store"]:
            attr = n if have.get(n) in (None, n) else f"{n}_regularizer"
            stored[n] = attr
            if have.get(attr) != n:
                lines.append(cst.parse_statement(f"self.{attr} = {n}\n"))
        members[init_i] = init.with_changes(body=init.body.with_changes(body=[*init.body.body, *lines]))
    lines = ['def regularization_loss(self):',
             '    """Keras\'s weight regularizer penalties (kernel, bias, embeddings) of this module\'s own layers (add to the loss)."""']
    lines += _penalty_lines(entry, frozen, stored)
    method = cst.parse_statement("\n".join(lines) + "\n")
    method = method.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    return cls.with_changes(body=cls.body.with_changes(body=[*members, method]))


def _with_function(body: list, name: str, entry: dict, frozen: bool, k: int = 0, returned: bool = False,
                   inside: bool = False) -> list:
    """A model ``name = nn.Sequential(...)`` (at module level or in a function: ``body``, the k-th such statement)
    with regularized layers: right after the statement that builds it, ``def <name>_regularization_loss(<name>=
    <name>)`` (its penalties, of that very object) and ``<name>.regularization_loss = <name>_regularization_loss``,
    which the written fit finds in model.modules(). ``returned``: ``return nn.Sequential(...)`` of a function
    becomes ``<name> = nn.Sequential(...)``, those lines and ``return <name>``."""
    at, seen = None, -1
    for i, stmt in enumerate(body):
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if returned and isinstance(small, cst.Return) and _is_sequential(small.value):
            body = [*body[:i], stmt.with_changes(body=[cst.Assign([cst.AssignTarget(cst.Name(name))], small.value)]),
                    cst.parse_statement(f"return {name}\n"), *body[i + 1:]]
            at = i
            break
        if not returned and isinstance(small, cst.Assign) and [code(t.target) for t in small.targets] == [name] \
                and _is_sequential(small.value):
            seen += 1
            if seen == k:
                at = i
                break
    if at is None:
        return body
    fn = f"{name}_regularization_loss"
    entry = {**entry, "terms": [(f, k, name + w[len("self." + name):], *rest) for f, k, w, *rest in entry["terms"]]}
    lines = [f"def {fn}({name}={name}):",
             f'    """Keras\'s weight regularizer penalties of {name}\'s layers (kernel, bias, embeddings): Keras adds them '
             'to the loss itself, torch does not (the written fit adds them; add them in a loop of your own)."""']
    lines += _penalty_lines(entry, frozen, {})
    blank = [cst.EmptyLine(indent=False)] * (2 if k >= 0 and not inside else 1)
    new = [cst.parse_statement("\n".join(lines) + "\n").with_changes(leading_lines=blank),
           cst.parse_statement(f"{name}.regularization_loss = {fn}\n").with_changes(leading_lines=blank)]
    return [*body[:at + 1], *new, *body[at + 1:]]


def _penalty_lines(entry: dict, frozen: bool, stored: dict[str, str]) -> list[str]:
    """The body of a regularization_loss (indented once): ``loss = ...`` term by term, ``return loss``."""
    terms = []  # (the penalty, the conditions it is counted under)
    for factor, kind, weight, guard, *more in entry["terms"]:
        for n, attr in stored.items():
            factor = _rename(factor, n, f"self.{attr}")
        text = factor if kind == "text" else f"{factor} * {_PENALTY[kind].format(w=weight)}"
        conds = [f'hasattr(self, "{guard}")'] if guard is not None else []
        conds += list(more[0]) if more else []
        if frozen and f"{weight}.requires_grad" not in conds:  # Keras 3 sums the trainable weights' penalties only
            conds.append(f"{weight}.requires_grad")
        terms.append((text, conds))
    lines = []
    plain = [t for t, c in terms if not c]
    lines.append(f"    loss = {plain[0] if plain else '0.0'}")
    lines += [f"    loss = loss + {t}" for t in plain[1:]]
    for t, c in terms:
        if c:
            lines.append(f"    if {' and '.join(c)}:")
            lines.append(f"        loss = loss + {t}")
    lines.append("    return loss")
    return lines


def _self_assigned(cls: cst.ClassDef) -> dict[str, str | None]:
    """self.<attr> → the name assigned to it (``self.wd = wd``), None for another value."""
    out: dict[str, str | None] = {}

    class _V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                tg = t.target
                if isinstance(tg, cst.Attribute) and isinstance(tg.value, cst.Name) and tg.value.value == "self":
                    v = n.value.value if isinstance(n.value, cst.Name) else None
                    prev = out.get(tg.attr.value, v)
                    out[tg.attr.value] = v if prev == v else None

    scan(cls, _V())
    return out


def _rename(text: str, name: str, new: str) -> str:
    node = cst.parse_expression(text)

    class _T(cst.CSTTransformer):
        def leave_Name(self, o, u):
            return cst.parse_expression(new) if o.value == name else u

        def leave_Attribute(self, o, u):
            return u.with_changes(attr=o.attr)

    return code(node.visit(_T()))


def drop_unused_aliases(body: list, ctx: FileContext) -> list:
    """``l2 = tf.keras.regularizers.l2`` at module level, once no use of ``l2`` is left: the line
    becomes a comment (the line count stays)."""
    out = list(body)
    for i, stmt in enumerate(body):
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target,
                                                                                          cst.Name)):
            continue
        q = ctx.imports.resolve(small.value)
        if not q or not q.startswith("keras.regularizers."):
            continue
        name = small.targets[0].target.value
        if any(name in _free_names(other) for j, other in enumerate(out) if j != i):
            continue
        note = cst.EmptyLine(comment=cst.Comment(f"# {code(stmt).strip()}  (regularizers became "
                                                 "regularization_loss() methods)"))
        if i + 1 < len(out):
            nxt = out[i + 1]
            out[i + 1] = nxt.with_changes(leading_lines=[*stmt.leading_lines, note, *nxt.leading_lines])
            out[i] = None
    return [s for s in out if s is not None]



def _drop_followed_names(body: list, ctx: FileContext) -> list:
    """``reg = keras.regularizers.l2(1e-4)``, at module level or in a top-level function (the model's builder), whose
    every use was a layer's regularizer argument this module followed (the penalty is in a regularization_loss()):
    once no use of ``reg`` is left in its scope, its line (by then ``reg = KerasRegularizer(...)``, a helper nothing
    else calls) becomes a comment (the line count stays), so the helper is not written for it."""
    from fwport.core import written

    helper = written.name(ctx, "KerasRegularizer")
    noted = ctx.analyses.get(MODULE_NAMES) or {}
    out = _drop_dead(body, helper, noted)
    for i, stmt in enumerate(out):
        if isinstance(stmt, cst.FunctionDef) and isinstance(stmt.body, cst.IndentedBlock):
            inner = _drop_dead(list(stmt.body.body), helper, {})
            if len(inner) != len(stmt.body.body):
                out[i] = stmt.with_changes(body=stmt.body.with_changes(body=inner))
    return out


def _drop_dead(body: list, helper: str, noted: dict) -> list:
    out = list(body)
    for i, stmt in enumerate(body):
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                and isinstance(small.value, cst.Call) and isinstance(small.value.func, cst.Name)
                and small.value.func.value == helper):
            continue
        name = small.targets[0].target.value
        if i + 1 >= len(out) or any(name in _free_names(other) for j, other in enumerate(out)
                                    if j != i and other is not None):
            continue
        text = (f"# {name} = {code(noted[name])}  (a Keras regularizer: its penalty is in regularization_loss())"
                if name in noted else f"# {name}: a Keras regularizer, its penalty is in regularization_loss()")
        note = cst.EmptyLine(comment=cst.Comment(text))
        nxt = out[i + 1]
        out[i + 1] = nxt.with_changes(leading_lines=[*stmt.leading_lines, note, *nxt.leading_lines])
        out[i] = None
    return [s for s in out if s is not None]
