"""The request loop of a framework subprocess (numpy only; imported by keras_side / torch_side).

Requests and responses are JSON lines; arrays travel in ``.npz`` files named in them. The response
channel is a duplicate of the original stdout: fd 1 itself is pointed at stderr, so that whatever the
user's code or the framework prints (C++ logs included) cannot corrupt the protocol.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback


class UserError(Exception):
    """An error in what the verifier was asked to do (no such model, bad path): reported, not a crash."""


def serve(handle) -> None:
    resp_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out = os.fdopen(resp_fd, "w", buffering=1)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("op") == "exit":
            break
        t0 = time.perf_counter()
        try:
            resp = handle(req) or {}
            resp["ok"] = True
        except BaseException as e:  # report everything, the parent decides
            line = _failing_line(e, req["source"]) if not isinstance(e, UserError) and req.get("source") else None
            where = f" (at {req['source']}:{line})" if line else ""  # where in the user's file it raised
            resp = {"ok": False, "error": f"{type(e).__name__}: {e}{where}", "kind": type(e).__name__,
                    "user_error": isinstance(e, UserError), "traceback": traceback.format_exc()}
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                out.write(json.dumps(resp) + "\n")
                raise
        resp["seconds"] = time.perf_counter() - t0
        resp["id"] = req.get("id")
        out.write(json.dumps(resp) + "\n")
        out.flush()


def parse_path(path: str) -> list:
    """``features.layers[2].conv`` → ["features", "layers", 2, "conv"] (a record's attribute path)."""
    parts: list = []
    for token in path.split("."):
        if not token:
            continue
        name, _, rest = token.partition("[")
        if name:
            parts.append(name)
        while rest:
            idx, _, rest = rest.partition("]")
            parts.append(int(idx))
            rest = rest.lstrip("[")
    return parts


def resolve(root, path: str):
    obj = root
    walked = []
    for p in parse_path(path):
        try:
            obj = obj[p] if isinstance(p, int) else getattr(obj, p)
        except (AttributeError, IndexError, KeyError, TypeError):
            where = ".".join(map(str, walked)) or "the model"
            raise UserError(f"{path!r}: {where} has no {'item' if isinstance(p, int) else 'attribute'} {p!r}") from None
        walked.append(p)
    return obj


def match_calls(classes: list[set[str]], segments: list[dict]) -> list[list]:
    """The translation's order of calls (``ModelInfo.calls``: segments of layers called outside loops, and
    per loop over a run-time value the layers of one pass) matched to a built model's layers in the order
    they were first called (``classes``: the class names of each, its bases' included): per segment the
    positions of its layers, and for a loop one list per pass. A slot matches a layer of one of its class
    names (any, when it names none). UserError unless exactly one assignment of pass counts fits."""
    n = len(classes)

    def fits(slots: list, at: int) -> bool:
        return at + len(slots) <= n and all(not s or set(s) & classes[at + k] for k, s in enumerate(slots))

    found: list[list] = []

    def walk(seg: int, at: int, passes: list[int]) -> None:
        if len(found) > 1:
            return
        if seg == len(segments):
            if at == n:
                found.append(list(passes))
            return
        slots = segments[seg]["layers"]
        if not segments[seg]["loop"]:
            if fits(slots, at):
                walk(seg + 1, at + len(slots), passes + [1])
            return
        k, pos = 0, at
        while True:
            walk(seg + 1, pos, passes + [k])
            if not slots or not fits(slots, pos):
                return
            k, pos = k + 1, pos + len(slots)

    walk(0, 0, [])
    if len(found) != 1:
        shown = "; ".join(("(" if s["loop"] else "") + ", ".join("|".join(c) or "?" for c in s["layers"]) +
                          (")*" if s["loop"] else "") for s in segments)
        raise UserError(f"the layers of the built model ({n}, in the order they were called) "
                        f"{'fit no' if not found else 'fit more than one'} reading of the translation's order of "
                        f"calls [{shown}]: the loops over run-time values cannot be matched to its layers")
    out, at = [], 0
    for seg, count in zip(segments, found[0]):
        width = len(seg["layers"])
        if seg["loop"]:
            out.append([list(range(at + i * width, at + (i + 1) * width)) for i in range(count)])
            at += count * width
        else:
            out.append(list(range(at, at + width)))
            at += width
    return out


def build_object(ns: dict, name: str, args: dict, is_model, kind: str = "model", wrap=None) -> object:
    """NAME in a module namespace: a class (instantiated), a builder function (called) or a model object;
    or a call expression whose names resolve there (``Net(Block, [2, 2])``, ``args`` added to its keywords)."""
    call = model_call(ns, name) if kind != "function" else None
    if call is not None:
        callee, pos, kw = call
        return callee(*pos, **kw, **args)
    if name not in ns:
        candidates = [k for k, v in ns.items() if not k.startswith("_") and (isinstance(v, type) or callable(v) or is_model(v))]
        raise UserError(f"no {name!r} in the file; it defines: {', '.join(sorted(candidates)[:20]) or 'nothing usable'}")
    obj = ns[name]
    if kind == "function":
        if not callable(obj):
            raise UserError(f"{name!r} is a {type(obj).__name__}, not a function")
        return wrap(obj, args)
    if is_model(obj):
        if args:
            raise UserError(f"{name!r} is a model object; --args applies to classes and builder functions")
        return obj
    if callable(obj):
        return obj(**args)
    raise UserError(f"{name!r} is a {type(obj).__name__}, not a model class, builder function or model")


# --- loading a source file: the whole script, or only its model definitions --------------------------

LOADS = ("auto", "whole", "defs")


class _Stub:
    """What an import that failed binds in definitions-only loading, when only the script's own top-level
    code (not run) uses the name: touching it says so."""

    def __init__(self, name: str, why: str):
        self._name, self._why = name, why

    def __getattr__(self, attr):
        raise ImportError(f"{self._name} is a stand-in for an import that failed ({self._why})")

    def __call__(self, *a, **k):
        raise ImportError(f"{self._name} is a stand-in for an import that failed ({self._why})")


def _failing_line(e: BaseException, path: str) -> int | None:
    """The last line of ``path`` the traceback of ``e`` passes through (or a SyntaxError's line)."""
    target = os.path.realpath(path)
    lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if os.path.realpath(f.filename) == target]
    return lines[-1] if lines else (e.lineno if isinstance(e, SyntaxError) else None)


def _kind(stmt) -> str:
    """import | def | value (an assignment without calls: a constant, a tuple of them, an alias) | other."""
    import ast
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return "import"
    if isinstance(stmt, ast.Try) and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in stmt.body):
        return "import"  # try: import x / except ImportError: x = None
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return "def"
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None \
            and not any(isinstance(n, (ast.Call, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr))
                        for n in ast.walk(stmt.value)):
        return "value"
    return "other"


#: the methods of an argparse parser (or of an argument group) a script's setup calls
PARSER_METHODS = frozenset({"add_argument", "add_argument_group", "add_mutually_exclusive_group", "set_defaults",
                            "parse_args", "parse_known_args"})


def _argparse_setup(tree) -> set[int]:
    """The top-level statements (by line) that set up a command line: ``p = argparse.ArgumentParser(...)``,
    ``p.add_argument(...)`` (and groups, set_defaults), ``opt = p.parse_args()`` / ``parse_known_args()``.
    A definitions-only load runs them (with an empty command line), so that classes reading a module-level
    namespace (``opt.latent_dim``) find it holding the defaults."""
    import ast
    parsers: set[str] = set()
    lines: set[int] = set()
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
        if not isinstance(value, ast.Call):
            continue
        f = value.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name == "ArgumentParser" and (isinstance(f, ast.Name) or isinstance(f.value, ast.Name)):
            created = True
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in parsers \
                and name in PARSER_METHODS:
            created = name in ("add_argument_group", "add_mutually_exclusive_group")
        else:
            continue
        if isinstance(stmt, ast.Assign) and created:
            parsers.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        lines.add(stmt.lineno)
    return lines


def _bound(stmt) -> list[str]:
    import ast
    out = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.alias):
            out.append(node.asname or node.name.split(".")[0])
    return out


def _names(node) -> set[str]:
    import ast
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


_BUILDING_METHODS = {"add", "build", "append", "extend", "insert", "update"}


def _top_bound(stmt) -> set[str]:
    """The names a top-level statement binds in the module (assignment, loop and ``with`` targets)."""
    import ast
    targets = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    out = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):  # assignments in a block's body
        out |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return out


def _built(stmt) -> set[str]:
    """``model.add(layer)`` / ``model.build(shape)``: the name a top-level call statement builds up."""
    import ast
    if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr in _BUILDING_METHODS and isinstance(stmt.value.func.value, ast.Name)):
        return {stmt.value.func.value.id}
    return set()


def _model_slice(body: list, roots: set[str], defined: set[str]) -> dict[int, str]:
    """The top-level statements beyond definitions and values that compute ``roots`` (a model built among a
    script's statements: ``inputs = keras.Input(...)``, ``x = layers.Dense(8)(inputs)``, ``model =
    keras.Model(inputs, x)``): a backward slice over names, with ``model.add(...)`` counting as building
    ``model``. {id(statement): the root name it serves}."""
    import ast
    needed = {r: r for r in roots if r not in defined}
    keep: dict[int, str] = {}
    for stmt in reversed(body):
        if _kind(stmt) != "other":
            continue
        binds, built = _top_bound(stmt), _built(stmt)
        hit = (binds | built) & set(needed)
        if not hit:
            continue
        root = needed[sorted(hit)[0]]
        keep[id(stmt)] = root
        if isinstance(stmt, ast.Assign):
            for n in binds:
                needed.pop(n, None)
        for n in _names(stmt) - defined:
            needed.setdefault(n, root)
    return keep


def load_definitions(path: str, run_name: str, roots: set[str] | None = None,
                     defines: dict | None = None) -> tuple[dict, list[str]]:
    """Run only a script's definitions: imports, functions, classes, assignments without calls and the
    argparse setup (_argparse_setup: parse_args with an empty command line), each top-level statement on
    its own (line numbers kept). An import that fails is replaced by a stand-in when
    the model's definitions do not use the names it binds (those ``roots`` reach, following the names each
    definition reads; all definitions when None), e.g. a dataset library only ``main()`` uses; else it is
    an error naming the file, the line and the definition that needs it. Returns the namespace and notes."""
    import ast
    import builtins
    import types
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        tree = ast.parse(text, path)
    except SyntaxError as e:
        raise UserError(f"{path}:{e.lineno}: not valid Python ({e.msg})") from None
    defs = {s.name: s for s in tree.body if _kind(s) == "def"}
    values = {t.id: s for s in tree.body if _kind(s) == "value"
              for t in (s.targets if isinstance(s, ast.Assign) else [s.target]) if isinstance(t, ast.Name)}
    # a model built by top-level statements (a Sequential, a functional graph): those statements run too
    defines = dict(defines or {})
    sliced = _model_slice(tree.body, set(roots or ()), set(defs) | set(values) | set(defines)) if roots else {}
    slice_names = {n for s in tree.body if id(s) in sliced for n in _names(s)}
    reached = set(defs) if roots is None else set()
    todo = list(roots or ()) + sorted(slice_names)
    while todo:  # the definitions the model reaches, through the names each reads
        n = todo.pop()
        if n in reached or (n not in defs and n not in values):
            continue
        reached.add(n)
        todo += _names(defs.get(n) or values[n])
    used: dict[str, tuple[str, int]] = {}  # name → (the definition that reads it, its line)
    for n in sorted(reached, key=lambda n: (defs.get(n) or values[n]).lineno):
        for m in _names(defs.get(n) or values[n]):
            used.setdefault(m, (n, (defs.get(n) or values[n]).lineno))
    module = types.ModuleType(run_name)  # a real module: dataclasses (eqx.Module) look their module up
    module.__dict__.update(__file__=path, __builtins__=builtins, **defines)
    ns = module.__dict__
    notes: list[str] = []
    skipped: list[int] = []
    setup = _argparse_setup(tree)
    ran_setup: list[int] = []
    saved, argv = sys.modules.get(run_name), sys.argv
    sys.modules[run_name] = module
    try:
        for stmt in tree.body:
            kind = "argparse" if stmt.lineno in setup else _kind(stmt)
            if kind == "other" and id(stmt) not in sliced:
                skipped.append(stmt.lineno)
                continue
            code = compile(ast.Module([stmt], type_ignores=[]), path, "exec")
            if kind == "argparse":  # the command line's defaults: parse_args() reads an empty argv
                sys.argv = [path]
                try:
                    exec(code, ns)
                    ran_setup.append(stmt.lineno)
                except (Exception, SystemExit) as e:  # a required argument: argparse exits
                    notes.append(f"line {stmt.lineno}: argparse setup failed with an empty command line "
                                 f"({type(e).__name__}: {str(e)[:200]})")
                finally:
                    sys.argv = argv
                continue
            try:
                exec(code, ns)
            except Exception as e:
                why = f"{type(e).__name__}: {str(e)[:200]}"
                if kind == "other":
                    raise UserError(f"{path}:{_failing_line(e, path) or stmt.lineno}: {why} (a top-level statement "
                                    f"that builds {sliced[id(stmt)]}: the model is built among code that cannot run "
                                    "here; build it in a function and give that to --model)") from None
                if kind == "import":
                    names = _bound(stmt)
                    needed = [(n, used[n]) for n in names if n in used]
                    if needed:
                        n, (d, line) = needed[0]
                        raise UserError(f"{path}:{stmt.lineno}: {why}; the model's definitions need {n} "
                                        f"({d}, line {line})") from None
                    for n in names:
                        ns[n] = _Stub(n, why)
                    notes.append(f"line {stmt.lineno}: {why}; {', '.join(names)} stubbed (not used by the model's "
                                 "definitions)")
                elif kind == "value":
                    skipped.append(stmt.lineno)
                elif stmt.name not in reached:  # a definition the model does not reach (an IPython magic)
                    notes.append(f"line {stmt.lineno}: {why}; {stmt.name} left undefined (the model does not use it)")
                else:
                    raise UserError(f"{path}:{_failing_line(e, path) or stmt.lineno}: {why} (defining "
                                    f"{getattr(stmt, 'name', '?')})") from None
    finally:
        if saved is None:
            sys.modules.pop(run_name, None)
        else:
            sys.modules[run_name] = saved
    if sliced:
        lines = [s.lineno for s in tree.body if id(s) in sliced]
        notes.append(f"{len(lines)} top-level statements that build {', '.join(sorted(set(sliced.values())))} run "
                     f"(lines {', '.join(map(str, lines[:12]))}{', ...' if len(lines) > 12 else ''})")
    if ran_setup:
        notes.append(f"argparse setup run with an empty command line (lines {ran_setup[0]}-{ran_setup[-1]}): "
                     "the parsed namespace holds the defaults")
    if skipped:
        shown = ", ".join(map(str, skipped[:12])) + (", ..." if len(skipped) > 12 else "")
        notes.append(f"{len(skipped)} top-level statements not run (lines {shown})")
    return dict(ns), notes


def model_roots(name: str) -> set[str] | None:
    """The names a ``--model`` value starts from (a name, or those a call expression reads)."""
    import ast
    try:
        return _names(ast.parse(name.strip(), mode="eval"))
    except SyntaxError:
        return None


def load_source(path: str, run_name: str, mode: str = "auto", model: str | None = None,
                defines: dict | None = None) -> tuple[dict, str]:
    """The namespace of a source file and a note saying how it was loaded ("" when whole). ``mode``:
    ``whole`` runs the file as a script; ``defs`` runs only its definitions (load_definitions);
    ``auto`` runs the whole file and, when that fails (a module it cannot import, a download, argparse
    exiting), its definitions only. ``model``: the ``--model`` value, whose definitions decide which failed
    imports may be stubbed. ``defines``: module-level names set before the file runs (``--define n_classes=2``, a
    value the script computes from its data). Errors name the file and line; no traceback."""
    import runpy
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)  # the file's own sibling modules
    try:
        why = ""
        if mode != "defs":
            try:
                return runpy.run_path(path, init_globals=dict(defines or {}), run_name=run_name), ""
            except (Exception, SystemExit) as e:
                line = _failing_line(e, path)
                why = f"{path}:{line}: {type(e).__name__}: {str(e)[:200]}" if line else \
                    f"{path}: {type(e).__name__}: {str(e)[:200]}"
                if mode == "whole":
                    raise UserError(f"running the file failed at {why} (--load defs runs only its definitions)") from None
        ns, notes = load_definitions(path, run_name, model_roots(model) if model else None, defines)
        head = f"definitions only (the whole file stops at {why})" if why else "definitions only (--load defs)"
        return ns, "; ".join([head, *notes])
    finally:
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)


def model_call(ns: dict, name: str):
    """``--model`` as a call expression (``ResNet(ResidualBlock, [2, 2, 2])``): its names resolved in the
    file's namespace → (callee, positional args, keyword args); None for a plain name."""
    import ast
    if name.isidentifier():
        return None
    try:
        expr = ast.parse(name.strip(), mode="eval").body
    except SyntaxError:
        raise UserError(f"--model {name!r}: neither a name nor a call expression") from None
    if not isinstance(expr, ast.Call):
        raise UserError(f"--model {name!r}: give a name in the file or a call, e.g. 'Net(3, [2, 2])'")

    def ev(node):
        try:
            return eval(compile(ast.Expression(node), "<--model>", "eval"), ns)
        except NameError as e:
            raise UserError(f"--model {name!r}: {e} in the file") from None

    if any(isinstance(a, ast.Starred) for a in expr.args) or any(k.arg is None for k in expr.keywords):
        raise UserError(f"--model {name!r}: no *args or **kwargs in the call")
    return ev(expr.func), [ev(a) for a in expr.args], {k.arg: ev(k.value) for k in expr.keywords}
