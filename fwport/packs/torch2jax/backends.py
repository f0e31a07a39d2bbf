"""PyTorch's global backend switches, set by assignment (``torch.backends.cudnn.benchmark = True``) or by a call
(``torch.set_float32_matmul_precision("high")``): a read-only planner; the rule pass applies the edits.

- float32 precision of matmuls and convolutions on GPU: ``torch.backends.cuda.matmul.allow_tf32 = v``,
  ``torch.backends.cudnn.allow_tf32 = v`` (and the 2.9+ spelling ``....fp32_precision = "tf32" | "ieee"``) →
  ``jax.config.update("jax_default_matmul_precision", "tensorfloat32" | "float32")``;
  ``torch.set_float32_matmul_precision("highest" | "high" | "medium")`` → ``"float32" | "tensorfloat32" |
  "bfloat16"``. JAX has one setting for dots and convolutions alike, where PyTorch keeps two (matmuls default to
  float32, cuDNN convolutions to TF32): a file that sets only one of them, or the two to different values, gets a
  warning saying which operations now follow the other; the second of two same-valued flags in one block is
  dropped (it would repeat the first line). On CPU both frameworks compute in float32 whatever the setting.
- ``torch.backends.cudnn.benchmark = v`` / ``torch.backends.cudnn.enabled = v``: removed (XLA chooses its
  convolution algorithms itself when it compiles; there is no switch).
- ``torch.backends.cudnn.deterministic = v`` / ``torch.use_deterministic_algorithms(v)``: removed; a true value
  gets a warning: XLA on GPU is deterministic only with ``XLA_FLAGS=--xla_gpu_deterministic_ops=true`` set in the
  environment before JAX starts (on CPU it is deterministic).

- ``model = torch.compile(model)``: removed (the translated train step is jitted; other calls are the rule's,
  which gives the function itself); ``@torch.compile`` on a function: removed (info);
- ``model = torch.jit.script(model)``, ``torch.jit.script(model)`` as a statement (a check that it scripts) and
  ``@torch.jit.script``: removed, with a warning saying where jax.jit goes (other calls are jit-script.toml's: the
  function or module itself, as Python);
- ``@autocast(...)`` on a function: removed (exact with ``enabled=False``, else an approximate warning); autocast
  as a context manager is its rule's (contextlib.nullcontext()).

A removed statement that was the only one of its block becomes ``pass``. Anything else under ``torch.backends``
(reading a flag, a statement sharing its line with others) is left to the residue scan, which reports it."""
from __future__ import annotations

import libcst as cst

from fwport.core.direction import Trigger
from fwport.core.finding import Severity
from fwport.core.names import scan

TRIGGER = Trigger(r"\bcudnn\b|\ballow_tf32\b|\bfp32_precision\b|\bset_float32_matmul_precision\b"
                  r"|\buse_deterministic_algorithms\b|@\s*[\w.]*autocast\b|\bcompile\b|\bscript\b",
                  "cudnn", "allow_tf32", "fp32_precision", "set_float32_matmul_precision", "use_deterministic_algorithms",
                  "autocast", "compile", "script")  # (searched only in a text holding one of its words)
#: autocast, whose rule writes contextlib.nullcontext() for a `with`; as a decorator it is removed here
AUTOCAST = frozenset({"torch.amp.autocast", "torch.autocast", "torch.cuda.amp.autocast"})
CONFIG = "jax_default_matmul_precision"
#: flags whose value chooses TF32 (True) or full float32 (False), and which operations each governs in PyTorch
TF32_FLAGS = {"torch.backends.cuda.matmul.allow_tf32": "matmuls", "torch.backends.cudnn.allow_tf32": "convolutions"}
#: the 2.9+ spelling: a string, "tf32" or "ieee"
FP32_PRECISION = {"torch.backends.cuda.matmul.fp32_precision": "matmuls",
                  "torch.backends.cudnn.conv.fp32_precision": "convolutions"}
FP32_VALUES = {"tf32": "tensorfloat32", "ieee": "float32"}
#: torch.set_float32_matmul_precision's values → JAX's
MATMUL_PRECISION = {"highest": "float32", "high": "tensorfloat32", "medium": "bfloat16"}
#: flags with no JAX counterpart, removed, and why
REMOVED = {"torch.backends.cudnn.benchmark": "cuDNN autotuning has no JAX switch: XLA chooses its convolution "
                                             "algorithms itself when it compiles",
           "torch.backends.cudnn.enabled": "JAX has no switch to bypass cuDNN: XLA chooses its convolution "
                                           "implementations itself"}
DETERMINISTIC = ("torch.backends.cudnn.deterministic", "torch.use_deterministic_algorithms")
#: `model = torch.compile(model)`: removed (other calls of torch.compile are its rule's: the function itself)
COMPILE = "torch.compile"
#: `model = torch.jit.script(model)` / `torch.jit.script(model)` as a statement, `@torch.jit.script`: removed (other
#: calls are its rule's, jit-script.toml: the function or module itself)
JIT_SCRIPT = "torch.jit.script"
JIT_ADVICE = ("TorchScript compiled it; JAX compiles where a function is jitted: wrap the calls of a function of arrays "
              "in jax.jit (eqx.filter_jit for a module) where its control flow does not read their values (the "
              "translated train step already is)")
#: every name this planner translates (bench/coverage.py counts them)
HANDLED = frozenset({*TF32_FLAGS, *FP32_PRECISION, *REMOVED, *DETERMINISTIC, "torch.set_float32_matmul_precision",
                     *AUTOCAST, COMPILE, JIT_SCRIPT})
DETERMINISM_ADVICE = ("on CPU XLA is deterministic; on GPU set XLA_FLAGS=--xla_gpu_deterministic_ops=true in the "
                      "environment before JAX starts (before `import jax`)")


def _flag(stmt: cst.BaseStatement, ctx) -> tuple[str, cst.BaseExpression, cst.CSTNode] | None:
    """(the switch's qualified name, the value it is given, the node naming it) where ``stmt`` is one line holding
    one assignment to a switch, or one call of a switching function."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        q = ctx.imports.resolve(target) if isinstance(target, cst.Attribute) else None
        if q in TF32_FLAGS or q in FP32_PRECISION or q in REMOVED or q == DETERMINISTIC[0]:
            return q, small.value, target
        v = small.value
        q = ctx.imports.resolve(v.func) if isinstance(v, cst.Call) else None
        if q in (COMPILE, JIT_SCRIPT) and v.args \
                and v.args[0].keyword is None and not v.args[0].star and code(v.args[0].value) == code(target):
            return q, v, v.func  # `model = torch.compile(model)`, `model = torch.jit.script(model)`
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
        q = ctx.imports.resolve(call.func)
        args = [a for a in call.args if a.keyword is None or a.keyword.value in ("mode", "precision")]
        if q in ("torch.set_float32_matmul_precision", DETERMINISTIC[1]) and len(args) == 1 and len(call.args) == 1:
            return q, args[0].value, call.func
        if q == JIT_SCRIPT and len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
            return q, call, call.func  # `torch.jit.script(model)`: scripted and thrown away (a check it scripts)
    return None


def _string(value: cst.BaseExpression) -> str | None:
    return value.evaluated_value if isinstance(value, cst.SimpleString) else None


class _Switches(cst.CSTVisitor):
    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx
        self.set: dict[str, set] = {}  # "matmuls" / "convolutions" → the JAX precisions the file gives them

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """``@autocast('cuda', enabled=False)``: removed (exact: JAX casts nothing by itself); with autocast on, a
        warning (the function computes in float32 where PyTorch computes float16 / bfloat16)."""
        for d in node.decorators:
            if self.ctx.imports.resolve(d.decorator) in (JIT_SCRIPT, COMPILE) and self.ctx.plans.get(d) is None:
                # @torch.jit.script / @torch.compile (bare): the function itself, run as Python
                jit = self.ctx.imports.resolve(d.decorator) == JIT_SCRIPT
                self.ctx.report(Severity.WARNING if jit else Severity.INFO, "idiom-replaced",
                                f"@{code(d.decorator)}: removed: " + (JIT_ADVICE if jit else "JAX compiles where a "
                                "function is jitted: wrap the calls of this function of arrays in jax.jit where they "
                                "are hot"), d)
                self.ctx.plans.add(d, lambda o, u: cst.RemovalSentinel.REMOVE, descend=False, by="backends")
                continue
            call = d.decorator if isinstance(d.decorator, cst.Call) else None
            if call is None or self.ctx.imports.resolve(call.func) not in AUTOCAST or self.ctx.plans.get(d) is not None:
                continue
            off = any(a.keyword is not None and a.keyword.value == "enabled" and isinstance(a.value, cst.Name)
                      and a.value.value == "False" for a in call.args)
            if off:
                self.ctx.report(Severity.INFO, "dropped-argument", f"@{code(call)}: removed: it switches autocast "
                                "off, and JAX casts nothing by itself", d)
            else:
                self.ctx.report(Severity.WARNING, "approximate", f"@{code(call)}: removed: JAX has no autocast: "
                                "the function computes in its arrays' own dtype (float32 where PyTorch computes "
                                "float16 / bfloat16)", d)
            self.ctx.plans.add(d, lambda o, u: cst.RemovalSentinel.REMOVE, descend=False, by="backends")

    def visit_Module(self, node: cst.Module) -> None:
        self.block(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.block(node.body)

    def block(self, body) -> None:
        found = [(st, f) for st in body if (f := _flag(st, self.ctx)) is not None]
        if not found:
            return
        written: set = set()  # precisions this block already sets (a second line would repeat the first)
        kept = len(body)
        edits = []
        for st, (q, value, named) in found:
            precision = self.precision(q, value)
            if precision is not None:
                ops = TF32_FLAGS.get(q) or FP32_PRECISION.get(q) or "matmuls"
                if q == "torch.set_float32_matmul_precision":
                    ops = "matmuls"
                self.set.setdefault(ops, set()).add(code(precision))
                if code(precision) in written:
                    edits.append((st, None, f"{code(st.body[0])}: dropped: the line above already sets JAX's "
                                            "precision for matmuls and convolutions alike", Severity.INFO))
                    kept -= 1
                    continue
                written.add(code(precision))
                edits.append((st, precision, f"{code(named)} → jax.config.update({CONFIG!r}, ...): float32 "
                                             "precision of matmuls and convolutions on GPU (on CPU both compute "
                                             "in float32)", Severity.INFO))
                continue
            if q in REMOVED:
                edits.append((st, None, f"{code(st.body[0])}: removed: {REMOVED[q]}", Severity.INFO))
            elif q == COMPILE:
                edits.append((st, None, f"{code(st.body[0])}: removed: JAX compiles where a function is jitted: the "
                              "translated train step is (@eqx.filter_jit); wrap other calls of the model in "
                              "eqx.filter_jit where they are hot", Severity.INFO))
            elif q == JIT_SCRIPT:  # the same function or module, run as Python
                edits.append((st, None, f"{code(st.body[0])}: removed: {JIT_ADVICE}", Severity.WARNING))
            elif q in DETERMINISTIC:
                false = isinstance(value, cst.Name) and value.value == "False"
                edits.append((st, None, f"{code(st.body[0])}: removed: "
                              + ("JAX has no switch: " + DETERMINISM_ADVICE if not false
                                 else "XLA's default (not forced deterministic) is what it asks for"),
                              Severity.INFO if false else Severity.WARNING))
            else:  # a precision fwport cannot read (fp32_precision / set_float32_matmul_precision of a variable)
                continue
            kept -= 1
        last = found[-1][0] if kept == 0 else None
        # a removed statement's blank lines and comments above it go to the statement that follows
        carry: dict[int, list] = {}
        removed = {id(st) for st, precision, _, _ in edits if precision is None and st is not last}
        lines: list = []
        for st in body:
            if lines and (id(st) not in removed):
                if any(e[0] is st for e in edits) or self.ctx.plans.get(st) is None:
                    carry[id(st)] = lines
                    if not any(e[0] is st for e in edits):
                        self.ctx.plans.add(st, lambda o, u, ls=lines: u.with_changes(
                            leading_lines=[*ls, *u.leading_lines]), by="backends")
                lines = []
            if id(st) in removed:
                lines = [*lines, *st.leading_lines]
        for st, precision, message, severity in edits:
            self.ctx.report(severity, "idiom-replaced" if precision is not None or message.endswith(JIT_ADVICE)
                            else "dropped-argument" if severity is Severity.INFO else "approximate", message, st)
            self.ctx.plans.add(st, self.apply(precision, st is last, carry.get(id(st), [])), descend=False,
                               by="backends")

    def precision(self, q: str, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """The JAX precision ``value`` sets for switch ``q`` (an expression), or None where it is not one."""
        if q in TF32_FLAGS:
            if isinstance(value, cst.Name) and value.value in ("True", "False"):
                return cst.SimpleString('"tensorfloat32"' if value.value == "True" else '"float32"')
            return cst.parse_expression(f'"tensorfloat32" if {code(value)} else "float32"')
        if q in FP32_PRECISION:
            v = FP32_VALUES.get(_string(value) or "")
            return cst.SimpleString(f'"{v}"') if v else None
        if q == "torch.set_float32_matmul_precision":
            v = MATMUL_PRECISION.get(_string(value) or "")
            return cst.SimpleString(f'"{v}"') if v else None
        return None

    def apply(self, precision, last: bool, carried: list):
        def edit(original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
            updated = updated.with_changes(leading_lines=[*carried, *updated.leading_lines])
            if precision is None:
                if last:
                    return updated.with_changes(body=[cst.Pass()])
                return cst.RemovalSentinel.REMOVE
            update = cst.Call(self.ctx.spell("jax.config.update"),
                              [cst.Arg(cst.SimpleString(f'"{CONFIG}"'), comma=cst.Comma(
                                  whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(precision)])
            return updated.with_changes(body=[cst.Expr(update)])
        return edit

    def finish(self) -> None:
        """One JAX setting for two PyTorch switches: a warning where the file leaves them apart."""
        m, c = self.set.get("matmuls", set()), self.set.get("convolutions", set())
        if not m and not c or m == c and len(m) == 1:
            return
        if m and c:
            detail = "this file gives PyTorch's matmuls and convolutions different precisions"
        elif m:
            detail = ("this file sets only matmuls' precision: convolutions, which PyTorch runs in TF32 on GPU "
                      "unless torch.backends.cudnn.allow_tf32 = False, follow the same setting")
        else:
            detail = ("this file sets only convolutions' precision: matmuls, which PyTorch runs in float32 unless "
                      "torch.backends.cuda.matmul.allow_tf32 = True, follow the same setting")
        self.ctx.report(Severity.WARNING, "approximate", f"JAX's {CONFIG} governs matmuls and convolutions alike; "
                        f"{detail} (on GPU only: CPU computes float32 either way)", None)


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def plan(module: cst.Module, ctx) -> cst.Module:
    """Record the edits of PyTorch's backend switches (see the module docstring)."""
    v = _Switches(ctx)
    scan(module, v)
    v.finish()
    return module
