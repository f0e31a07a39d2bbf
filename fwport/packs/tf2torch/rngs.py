"""Planner: ``tf.random.Generator.from_seed(seed)`` bound to a name, and its draws.

    g = tf.random.Generator.from_seed(42)        →  g = torch.Generator().manual_seed(42)
    g.normal(shape)                              →  torch.randn(shape, generator=g)
    g.normal(shape, mean=m, stddev=s)            →  m + s * torch.randn(shape, generator=g)
    g.uniform(shape)                             →  torch.rand(shape, generator=g)
    g.uniform(shape, minval=a, maxval=b)         →  a + (b - a) * torch.rand(shape, generator=g)
    g.uniform(shape, a, b, dtype=tf.int32)       →  torch.randint(a, b, shape, generator=g, dtype=torch.int32)
    g.make_seeds(count)                          →  torch.randint(-2 ** 63, 2 ** 63 - 1, (2, count), generator=g,
                                                                  dtype=torch.int64)
    g.reset_from_seed(s)                         →  g.manual_seed(s)
    g = tf.random.get_global_generator()         →  g = global_generator()   (a helper: one torch.Generator for
                                                     the file, seeded from the OS on first use, as TensorFlow's)
    g = tf.random.Generator.from_non_deterministic_state()
                                                 →  g = torch.Generator().manual_seed(secrets.randbits(63))

A generator is a name every binding of which in its scope (the module or a function) is such a call; its draws
are found wherever the name is read from that scope or a function inside it that does not bind it. The streams
differ: torch's generator is another algorithm (Philox / ThreeFry in TensorFlow, Mersenne Twister in torch), so
the same seed gives other numbers, reproducibly within torch (a warning on the generator says so). Any other use
of the generator (``g.truncated_normal``, ``g.split``, ``g.state``, the
generator passed to a function or stored, where its draws are not followed) is an error finding, the generator then left as written (with the error of
its call: no torch.Generator stands half-translated). A generator bound otherwise (``self.rng = ...``) keeps the
call's no-rule error.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, call_argument, literal_value
from fwport.core.engine import code
from fwport.core.finding import Severity
from fwport.core.names import scan

FROM_SEED = "tensorflow.random.Generator.from_seed"
GLOBAL = "tensorflow.random.get_global_generator"
NON_DETERMINISTIC = "tensorflow.random.Generator.from_non_deterministic_state"
#: the calls that make a generator this planner follows
MAKERS = (FROM_SEED, GLOBAL, NON_DETERMINISTIC)
TRIGGER_WORD = "from_seed"

#: TensorFlow dtypes a draw may ask for → torch's, and whether it is an integer type
_DTYPES = {"float16": ("torch.float16", False), "bfloat16": ("torch.bfloat16", False),
           "float32": ("torch.float32", False), "float64": ("torch.float64", False), "double": ("torch.float64", False),
           "int32": ("torch.int32", True), "int64": ("torch.int64", True)}
#: the parameters of Generator.normal / .uniform, in order (TensorFlow 2.21)
_NORMAL = ("shape", "mean", "stddev", "dtype", "name")
_UNIFORM = ("shape", "minval", "maxval", "dtype", "name")
#: the generator's methods translated (the others are errors)
_METHODS = ("normal", "uniform", "make_seeds", "reset_from_seed")


def run(module: cst.Module, ctx) -> cst.Module:
    finder = _Generators(ctx)
    scan(module, finder)
    finder.plan()
    return module


class _Scope:
    def __init__(self, node: cst.CSTNode, is_class: bool = False):
        self.node = node
        self.is_class = is_class
        self.values: dict[str, list] = {}  # name → the value of each binding (None: not `name = value`)

    def generators(self, resolve, qualname: str | tuple = MAKERS) -> set[str]:
        """The names every binding of which here is a call of ``qualname`` (or one of them; shapes.py asks for
        tf.TensorShape)."""
        names = (qualname,) if isinstance(qualname, str) else qualname
        return {n for n, vs in self.values.items()
                if vs and all(isinstance(v, cst.Call) and resolve(v.func) in names for v in vs)}


class _Generators(cst.CSTVisitor):
    """Walks the module once: each scope's bindings (model_api's binding walker), then each read of a name
    resolved to the scope that binds it."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx
        self.stack: list[_Scope] = []
        self.uses: dict[tuple[int, str], list] = {}  # (id(scope), name) → [(kind, node)] kind: draw | other | pass
        self.scopes: dict[int, _Scope] = {}
        self.seen: set[int] = set()  # id(Name) already counted as a draw's receiver

    def _resolve(self, func: cst.BaseExpression) -> str | None:
        return self.ctx.imports.resolve(func)

    def _enter(self, node: cst.CSTNode, body, params=(), is_class: bool = False) -> None:
        from fwport.packs.tf2torch.passes.model_api import _bindings
        scope = _Scope(node, is_class)
        for p in params:
            scope.values.setdefault(p, []).append(None)
        for stmt in body:
            assigned, _ = _bindings(stmt, True)
            for name, values in assigned.items():
                scope.values.setdefault(name, []).extend(values)
        self.stack.append(scope)
        self.scopes[id(scope)] = scope

    def visit_Module(self, node: cst.Module) -> None:
        self._enter(node, node.body)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = [p.name.value for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)]
        for star in (node.params.star_arg, node.params.star_kwarg):
            if isinstance(star, cst.Param):
                params.append(star.name.value)
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
        self._enter(node, body, params)

    def leave_FunctionDef(self, original_node) -> None:
        self.stack.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
        self._enter(node, body, is_class=True)

    def leave_ClassDef(self, original_node) -> None:
        self.stack.pop()

    def _owner(self, name: str) -> _Scope | None:
        for i, s in enumerate(reversed(self.stack)):
            if s.is_class and i > 0:
                continue  # a class body's names are not visible in its methods
            if name in s.values:
                return s
        return None

    def _use(self, name: cst.Name, kind: str, node: cst.CSTNode) -> None:
        owner = self._owner(name.value)
        if owner is not None:
            self.uses.setdefault((id(owner), name.value), []).append((kind, node))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value in _METHODS:
            self.seen.add(id(func.value))
            self._use(func.value, "draw", node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.seen.add(id(node.attr))
        if isinstance(node.value, cst.Name) and id(node.value) not in self.seen:
            self.seen.add(id(node.value))
            self._use(node.value, "other", node)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.seen.add(id(node.target))  # a binding, not a read

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.seen.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        self.seen.add(id(node.name))

    def visit_Name(self, node: cst.Name) -> None:
        """Any other read of a generator (passed to a function, stored): its draws there are not followed."""
        if id(node) not in self.seen:
            self._use(node, "other", node)

    def plan(self) -> None:
        resolve = self._resolve
        for scope in self.scopes.values():
            for name in sorted(scope.generators(resolve)):
                uses = self.uses.get((id(scope), name), [])
                others = [n for kind, n in uses if kind == "other"]
                draws = [(n, self._draw(name, n)) for kind, n in uses if kind == "draw"]
                refused = [n for n, d in draws if d is None]
                if (others or refused) and self._plan_segments(scope, name, uses):
                    continue
                if others or refused:
                    for n in others:
                        self.ctx.report(Severity.ERROR, "unsupported-construct",
                                        f"{code(n)}: a use of tf.random.Generator fwport does not translate (it "
                                        "translates the generator's normal and uniform draws, in the scope that "
                                        f"binds it, onto torch.Generator): the generator {name} is left as written",
                                        n)
                    for n in refused:
                        self.ctx.settle(n)
                    continue  # the from_seed call keeps its no-rule error
                for call in scope.values[name]:
                    self._plan_seed(name, call)
                for n, (text, why) in draws:
                    self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(n)} → {text}: {why}", n)
                    self.ctx.plans.add(n, lambda orig, upd, t=text: cst.parse_expression(t), descend=False,
                                       by="rngs")

    def _plan_segments(self, scope: _Scope, name: str, uses: list) -> bool:
        """A name bound several times in straight-line code (a notebook's cells: ``g = ...from_seed(1)`` here,
        ``g = ...from_seed(2)`` further down), some of whose bindings are used otherwise: each binding with the
        reads that follow it up to the next binding is decided alone (its draws translated, or its other uses
        errors and its call left). Only where the text order is the order they run in: every binding at the top
        level of the scope's body (or in a ``with`` block there), no read before the first binding nor in a
        function, class or generator expression, nor in a lambda but one passed straight to a call (``_Order``).
        Returns False (the whole name decided together) else."""
        calls = scope.values[name]
        body = scope.node.body
        body = body.body if isinstance(body, cst.IndentedBlock) else body
        if len(calls) < 2 or not isinstance(body, (list, tuple)):
            return False
        walk = _Order({id(c) for c in calls}, {id(n) for _, n in uses})
        for stmt in body:
            scan(stmt, walk)
        if walk.unsafe or len(walk.seq) != len(calls) + len(uses):
            return False
        segments: list[list] = []  # per binding, in text order: [call, [(kind, node)]]
        kinds = {id(n): kind for kind, n in uses}
        nodes = {id(n): n for _, n in uses} | {id(c): c for c in calls}
        for key in walk.seq:
            if key in kinds:
                if not segments:
                    return False  # read before the first binding
                segments[-1][1].append((kinds[key], nodes[key]))
            else:
                segments.append([nodes[key], []])
        for call, seg in segments:
            others = [n for kind, n in seg if kind == "other"]
            draws = [(n, self._draw(name, n)) for kind, n in seg if kind == "draw"]
            refused = [n for n, d in draws if d is None]
            if others or refused:
                for n in others:
                    self.ctx.report(Severity.ERROR, "unsupported-construct",
                                    f"{code(n)}: a use of tf.random.Generator fwport does not translate (it "
                                    "translates the generator's normal and uniform draws, in the scope that binds "
                                    f"it, onto torch.Generator): the generator {name} bound here is left as "
                                    "written", n)
                for n in refused:
                    self.ctx.settle(n)
                continue  # this binding's call keeps its no-rule error
            self._plan_seed(name, call)
            for n, (text, why) in draws:
                self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(n)} → {text}: {why}", n)
                self.ctx.plans.add(n, lambda orig, upd, t=text: cst.parse_expression(t), descend=False, by="rngs")
        return True

    def _plan_seed(self, name: str, call: cst.Call) -> None:
        maker = self._resolve(call.func)
        if maker == GLOBAL:
            from fwport.packs.tf2torch import helpers
            self.ctx.spell_text("torch.Generator")  # the draws' torch names
            text = f"{helpers.use(self.ctx, 'global_generator')}()"
            self.ctx.report(Severity.INFO, "random-stream",
                            f"{name} = {code(call)} → {text}: one torch generator for the file, seeded from the "
                            "operating system's randomness the first time it is asked for, as TensorFlow's global "
                            "generator is (tf.random.set_seed does not seed it, nor torch.manual_seed this one): "
                            "other numbers on each run", call)
            self.ctx.plans.add(call, lambda orig, upd: cst.parse_expression(text), descend=False, by="rngs")
            return
        if maker == NON_DETERMINISTIC:
            alg = call_argument(call, "alg", 0)
            text = (f"{self.ctx.spell_text('torch.Generator')}()"
                    f".manual_seed({self.ctx.spell_text('secrets.randbits')}(63))")
            self.ctx.report(Severity.INFO, "random-stream",
                            f"{name} = {code(call)} → {text}: a torch generator seeded from the operating system's "
                            "randomness, other numbers on each run as in TensorFlow"
                            + (f" (alg={code(alg)} is not carried over: torch's is Mersenne Twister)"
                               if alg is not None else ""), call)
            self.ctx.plans.add(call, lambda orig, upd: cst.parse_expression(text), descend=False, by="rngs")
            return
        seed = call_argument(call, "seed", 0)
        alg = call_argument(call, "alg", 1)
        text = f"{self.ctx.spell_text('torch.Generator')}().manual_seed({code(seed) if seed is not None else ''})"
        self.ctx.report(Severity.WARNING, "random-stream",
                        f"{name} = {code(call)} → {text}: torch's generator is another algorithm "
                        f"({'alg=' + code(alg) + ' is not carried over; ' if alg is not None else ''}Mersenne Twister, "
                        "where TensorFlow uses Philox): the same seed gives other numbers than TensorFlow's, the same "
                        "ones on each run of the translation", call)
        self.ctx.plans.add(call, lambda orig, upd: cst.parse_expression(text), descend=False, by="rngs")

    def _draw(self, name: str, call: cst.Call) -> tuple[str, str] | None:
        """The torch text of ``name.normal(...)`` / ``name.uniform(...)`` and why, or None (an error reported). Its
        torch names are those of ``import torch``, which planning the generator's from_seed asks for."""
        method = call.func.attr.value  # type: ignore[union-attr]
        if method in ("make_seeds", "reset_from_seed"):
            return self._seeds(name, call, method)
        params = _NORMAL if method == "normal" else _UNIFORM
        args: dict[str, cst.BaseExpression] = {}
        for i, a in enumerate(call.args):
            key = a.keyword.value if a.keyword is not None else (params[i] if i < len(params) else None)
            if a.star or key not in params:
                return self._refuse(call, f"{code(call)}: its arguments are not those of "
                                          f"tf.random.Generator.{method}{params}")
            args[key] = a.value
        if "shape" not in args:
            return self._refuse(call, f"{code(call)}: no shape given")
        shape = code(args["shape"])
        dtype_text, integer = "", False
        if "dtype" in args:
            q = self._resolve(args["dtype"]) or ""
            short = q.rsplit(".", 1)[-1] if q.startswith("tensorflow.") else literal_value(args["dtype"], NOT_LITERAL)
            if short not in _DTYPES:
                return self._refuse(call, f"{code(call)}: dtype={code(args['dtype'])} is not one fwport maps "
                                          f"({', '.join(_DTYPES)})")
            torch_dtype, integer = _DTYPES[short]
            if torch_dtype != "torch.float32":
                dtype_text = f", dtype={torch_dtype}"
        g = f"generator={name}"
        if method == "normal":
            if integer:
                return self._refuse(call, f"{code(call)}: an integer dtype has no normal samples")
            base = f"torch.randn({shape}, {g}{dtype_text})"
            mean, std = args.get("mean"), args.get("stddev")
            text = base
            if std is not None and literal_value(std, NOT_LITERAL) != 1:
                text = f"{_atom(std)} * {text}"
            if mean is not None and literal_value(mean, NOT_LITERAL) != 0:
                text = f"{_atom(mean)} + {text}"
            return text, "normal samples from the torch generator (other values than TensorFlow's stream)"
        low, high = args.get("minval"), args.get("maxval")
        if integer:
            if high is None:
                return self._refuse(call, f"{code(call)}: an integer uniform draw needs maxval (TensorFlow's "
                                          "full-range draw, maxval=None, is not translated)")
            text = (f"torch.randint({code(low) if low is not None else '0'}, {code(high)}, "
                    f"{shape}, {g}{dtype_text})")
            return text, "integers in [minval, maxval) from the torch generator (other values than TensorFlow's)"
        text = f"torch.rand({shape}, {g}{dtype_text})"
        lo = literal_value(low, NOT_LITERAL) if low is not None else 0
        hi = literal_value(high, NOT_LITERAL) if high is not None else 1
        if hi != 1 or lo != 0:
            hi_t = code(high) if high is not None else "1"
            width = _atom(high) if lo == 0 else f"({hi_t} - {_atom(low)})"
            text = f"{width} * {text}" if lo == 0 else f"{_atom(low)} + {width} * {text}"
        return text, "floats in [minval, maxval) from the torch generator (other values than TensorFlow's stream)"

    def _seeds(self, name: str, call: cst.Call, method: str) -> tuple[str, str] | None:
        """``g.make_seeds(count=1)`` → a (2, count) int64 draw over the whole int64 range (TensorFlow's seeds for
        stateless ops); ``g.reset_from_seed(seed)`` → ``g.manual_seed(seed)`` (the stream restarted from the seed)."""
        param = "count" if method == "make_seeds" else "seed"
        if len(call.args) > 1 or any(a.star or (a.keyword is not None and a.keyword.value != param)
                                     for a in call.args):
            return self._refuse(call, f"{code(call)}: its arguments are not those of tf.random.Generator.{method}"
                                      f"({param})")
        value = code(call.args[0].value) if call.args else None
        if method == "reset_from_seed":
            if value is None:
                return self._refuse(call, f"{code(call)}: no seed given")
            return f"{name}.manual_seed({value})", "the torch generator restarted from the seed"
        return (f"torch.randint(-2 ** 63, 2 ** 63 - 1, (2, {value or 1}), generator={name}, dtype=torch.int64)",
                "seeds for stateless ops, int64 over the whole range, from the torch generator (other values than "
                "TensorFlow's)")

    def _refuse(self, call: cst.Call, why: str) -> None:
        self.ctx.report(Severity.ERROR, "unsupported-argument", f"{why}: not translated", call)
        return None


class _Order(cst.CSTVisitor):
    """The text order of a generator's bindings (``calls``) and reads (``reads``) in its scope's body; ``unsafe``
    where that may not be the order they run in: a binding under if / for / while / try, or either inside a
    function, lambda, class or generator expression (run later, or not at all; a lambda passed straight to a call,
    ``strategy.run(lambda: g.normal([]))``, counts as run there: one kept and run after a later binding reads
    that binding's generator, which fails loudly where one is a torch.Generator and the other TensorFlow's)."""

    _LATER = (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.GeneratorExp)
    _MAYBE = (cst.If, cst.For, cst.While, cst.Try, cst.TryStar, cst.Match)

    def __init__(self, calls: set[int], reads: set[int]):
        super().__init__()
        self.calls, self.reads = calls, reads
        self.seq: list[int] = []
        self.later = self.maybe = 0
        self.unsafe = False
        self.passed: set[int] = set()  # ids of lambdas passed straight to a call

    def on_visit(self, node: cst.CSTNode) -> bool:
        key = id(node)
        if key in self.calls or key in self.reads:
            if self.later or (key in self.calls and self.maybe):
                self.unsafe = True
            if key not in self.seq:
                self.seq.append(key)
        if isinstance(node, cst.Arg) and isinstance(node.value, cst.Lambda):
            self.passed.add(id(node.value))  # strategy.run(lambda: g.normal([])): called by the call it is given to
        if isinstance(node, self._LATER) and id(node) not in self.passed:
            self.later += 1
        elif isinstance(node, self._MAYBE):
            self.maybe += 1
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, self._LATER) and id(original_node) not in self.passed:
            self.later -= 1
        elif isinstance(original_node, self._MAYBE):
            self.maybe -= 1


def _atom(node: cst.BaseExpression) -> str:
    """The node's text, in parentheses unless it is a name, a number, an attribute, a call or a subscript."""
    text = code(node)
    simple = (cst.Name, cst.Integer, cst.Float, cst.Attribute, cst.Call, cst.Subscript)
    return text if isinstance(node, simple) else f"({text})"
