"""Orchestration of ``fwport verify``: translate again, start both framework subprocesses at once,
move the weights by the rules' maps, compare, and build the certificate. Imports no framework.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fwport.verify import align
from fwport.verify.certificate import loading_results
from fwport.verify.spec import InputSpec, SpecError, default_specs, make_inputs, to_source_layout, to_target_layout
from fwport.verify.transfer import Move, TransferError, items, nested, plan, transfer

HERE = Path(__file__).resolve().parent
# default tolerances per dtype: |a - b| <= atol * scale + rtol * |b|, scale = max |b| of that tensor
TOLERANCES = {"float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}
DEFAULT_TIMEOUT = 600.0
DEFAULT_LR = 0.1
# --check train: the trained parameters and the losses, per optimizer the user code creates (found in
# the translation); measured on the fixtures, see docs/verify.md. Keras Adam's epsilon sits outside
# the bias correction and RMSprop's/Adagrad's inside the square root: torch cannot place them alike.
TRAIN_TOLERANCES = {"default": (1e-5, 1e-5), "torch.optim.Adam": (1e-5, 3e-5), "torch.optim.AdamW": (1e-5, 3e-5),
                    "torch.optim.RMSprop": (1e-5, 1e-4), "torch.optim.Adagrad": (1e-5, 1e-4)}


class VerifyError(Exception):
    """Verification could not run (usage, a crash, a timeout): exit 2, never a pass."""

    def __init__(self, message: str, side: str = "", kind: str = "error", detail: str = ""):
        super().__init__(message)
        self.side, self.kind, self.detail = side, kind, detail


# --- the framework subprocesses ------------------------------------------------------------------

class Worker:
    """One framework subprocess answering JSON requests; crashes and hangs become VerifyError."""

    def __init__(self, side: str, script: str, env: dict):
        self.side = side
        self.log = tempfile.NamedTemporaryFile("w+b", prefix=f"fwport-{side}-", suffix=".log", delete=False)
        self.t_start = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-u", str(HERE / script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=os.getcwd())
        self._buf = b""
        self._next = 0

    def send(self, req: dict) -> int:
        self._next += 1
        req = dict(req, id=self._next)
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died("it exited before the request could be sent") from None
        return self._next

    def receive(self, timeout: float) -> dict:
        """The answer to the latest request; answers to earlier ones (left after an error) are dropped."""
        deadline = time.monotonic() + timeout
        while True:
            resp = self._receive_one(deadline, timeout)
            if resp.get("id") == self._next:
                break
        if not resp.get("ok"):
            kind = "user" if resp.get("user_error") else "exception"
            raise VerifyError(f"the {self.side} side failed: {resp.get('error')}", self.side, kind,
                              resp.get("traceback", ""))
        return resp

    def _receive_one(self, deadline: float, timeout: float) -> dict:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise VerifyError(f"the {self.side} side did not answer within {timeout:g} s (hang or too slow: "
                                  "raise --timeout if the model is large)", self.side, "timeout", self.stderr_tail())
            sel = selectors.DefaultSelector()
            sel.register(fd, selectors.EVENT_READ)
            ready = sel.select(min(left, 1.0))
            sel.close()
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise self._died("it exited")
                self._buf += chunk
            elif self.proc.poll() is not None:
                raise self._died("it exited")
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def request(self, req: dict, timeout: float) -> dict:
        self.send(req)
        return self.receive(timeout)

    def _died(self, what: str) -> VerifyError:
        code = self.proc.wait(timeout=10)
        tail = self.stderr_tail()
        hint = ""
        if "ModuleNotFoundError" in tail or "ImportError" in tail:
            hint = " (an import failed: is the framework installed in this Python?)"
        return VerifyError(f"the {self.side} side crashed: {what} with status {code}{hint}", self.side, "crash", tail)

    def stderr_tail(self, n: int = 4000) -> str:
        try:
            self.log.flush()
            with open(self.log.name, "rb") as fh:
                data = fh.read()
            return data[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                if not self.proc.stdin.closed:
                    self.proc.stdin.write(b'{"op": "exit"}\n')
                    self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                self.kill()
        try:
            self.log.close()
            os.unlink(self.log.name)
        except OSError:
            pass


def _env(side: str, keras: int, device: str) -> dict:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "0"
    if side == "keras":
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env["KERAS_BACKEND"] = "tensorflow"
        env["TF_USE_LEGACY_KERAS"] = "1" if keras == 2 else "0"
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
        if device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = "-1"
    elif device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


class Session:
    """Framework subprocesses kept warm across several verifications (the test suite, batches)."""

    def __init__(self) -> None:
        self.workers: dict[tuple, Worker] = {}
        self.started: dict[tuple, float] = {}

    def worker(self, side: str, keras: int, device: str) -> Worker:
        key = (side, keras if side == "keras" else 0, device)
        w = self.workers.get(key)
        if w is None or not w.alive():
            if w is not None:
                w.close()
            w = Worker(side, f"{side}_side.py", _env(side, keras, device))
            self.workers[key] = w
        return w

    def discard(self, w: Worker) -> None:
        for k, v in list(self.workers.items()):
            if v is w:
                del self.workers[k]
        w.kill()
        w.close()

    def close(self) -> None:
        for w in self.workers.values():  # ask all to exit first, so that they wind down in parallel
            try:
                if w.alive():
                    w.proc.stdin.write(b'{"op": "exit"}\n')
                    w.proc.stdin.close()
            except OSError:
                pass
        for w in self.workers.values():
            try:
                w.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                w.kill()
            w.close()
        self.workers.clear()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- options ---------------------------------------------------------------------------------------

@dataclass
class Options:
    original: str
    translated: str
    model: str
    translated_model: str | None = None
    args: dict = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    checks: tuple[str, ...] = ("forward", "grad")
    dtype: str = "float32"
    device: str = "auto"
    rtol: float | None = None
    atol: float | None = None
    keras: int | None = None
    direction: str | None = None
    seed: int = 0
    timeout: float = DEFAULT_TIMEOUT
    lr: float = DEFAULT_LR
    pack: object = None  # a fwport.core.rule.Pack to take the weight maps from (default: the built-in pack)
    weights_file: str | None = None  # load this Keras checkpoint instead of random values
    kind: str = "model"  # "function": NAME is a plain tensor function (no weights), called with the inputs
    torch_state_file: str | None = None  # (fwport weights --check) torch loads this checkpoint, not the transfer
    eqx_file: str | None = None  # (fwport weights --to .eqx --check) JAX reads its model from this file
    train_step: str = "train_step"  # --check train: the step function of both files, called once per batch
    batch: list[str] = field(default_factory=list)  # --check train: the step function's arguments (specs)
    steps: int = 3  # --check train: optimizer steps, one batch each
    load: str = "auto"  # how each side loads its file: auto (whole, else definitions only), whole, defs
    batch_axis: str = "auto"  # torch2jax: "0" / "1" (jax.vmap over that axis), "none" (inputs whole), one per input
    # ("1,0", "0,0,none,0": none for an input the batch shares), auto (probed: axis 0, then 1, then mixes)
    defines: dict = field(default_factory=dict)  # module-level names set in both files before they load (--define)


def detect_direction(original: str, translated: str) -> str:
    from fwport.core.pipeline import mentions_source
    import re as _re
    jax_imports = _re.search(r"^\s*(?:import|from)\s+(?:jax|equinox)\b", translated, _re.M) is not None
    if mentions_source(original) and jax_imports:  # (a JAX translation's docstrings may name PyTorch)
        return "tf2jax"
    if mentions_source(original) and "torch" in translated:
        return "tf2torch"
    if "torch" in original and ("jax" in translated or "equinox" in translated):
        return "torch2jax"
    raise VerifyError("cannot tell the direction from the two files (the original should use TensorFlow/Keras, "
                      "the translation PyTorch, JAX or Equinox): give --direction", kind="user")


# --- comparing ---------------------------------------------------------------------------------------

# A parameter's gradient is compared on at least this fraction of the largest gradient of the model: a
# gradient that is zero in exact arithmetic (the bias of the score layer before a softmax, which a shift
# cannot change) comes out of float32 as rounding noise of about 1e-7 of the terms it sums, on both sides
GRAD_FLOOR = 1e-2


def compare(ref: np.ndarray, got: np.ndarray, rtol: float, atol: float, floor: float = 0.0) -> dict:
    ref = np.asarray(ref, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    if ref.shape != got.shape:
        return {"ok": False, "shape": [list(ref.shape), list(got.shape)], "max_abs": None, "max_rel": None}
    if ref.size == 0:
        return {"ok": True, "max_abs": 0.0, "max_rel": 0.0, "scale": 0.0}
    finite = np.isfinite(ref) == np.isfinite(got)
    diff = np.abs(ref - got)
    diff = np.where(np.isnan(diff) & finite & (ref == got), 0.0, diff)
    scale = max(float(np.nanmax(np.abs(ref))) if np.isfinite(ref).any() else 0.0, floor, 1e-30)
    ok = bool(np.all(finite) and np.all(diff <= atol * scale + rtol * np.abs(ref)))
    max_abs = float(np.nanmax(diff)) if diff.size else 0.0
    return {"ok": ok, "max_abs": max_abs, "max_rel": max_abs / scale, "scale": scale}


def _model_info(result, name: str):
    for m in result.models:
        if m.scope == name:
            return m
    return None


def _scope(model: str, source: str = "") -> str:
    """The scope of ``--model``'s records: the name, or the class / builder a call expression calls; for a
    builder function of the file that returns one of the file's classes (``def ResNet18(): return
    ResNet(BasicBlock, [2, 2, 2, 2])``), that class."""
    import ast
    try:
        e = ast.parse(model.strip(), mode="eval").body
    except SyntaxError:
        return model
    name = e.func.id if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) else model
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return name
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    defs = classes | {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    if name not in defs:  # `model = make_model(5)` at the top level: the records of the builder (or class) it calls
        bound = [n.value for n in tree.body if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
        if bound and isinstance(bound[-1], ast.Call) and isinstance(bound[-1].func, ast.Name) \
                and bound[-1].func.id in defs:
            return _scope(bound[-1].func.id, source)
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name == name and n.body and isinstance(n.body[-1], ast.Return):
            r = n.body[-1].value
            if isinstance(r, ast.Call) and isinstance(r.func, ast.Name) and r.func.id in classes:
                return r.func.id
    return name


def _records(result, name: str):
    return [r for r in result.layers if r.scope == name]


def _by_name(offered: dict[str, list], tstate: dict, moves: list[Move]) -> list[Move]:
    """Moves for the variables a Keras model created under names no record knows (``add_weight(name=
    "kernel%d" % i)`` in a loop; the translation registers the same names): each to the torch parameter of
    its name and shape that no other move writes. One left unmatched stays unmapped."""
    written = {m.target for m in moves}
    out = []
    for key, shape in offered.items():
        name = key.split(":", 1)[1]
        if name in tstate and name not in written and list(tstate[name]) == list(shape):
            out.append(Move(-1, "", name, name, (("copy", ()),), {}, "by-name"))
    return out


def _held_at_zero(m) -> bool:
    """A move that writes zeros: a torch parameter with no source counterpart (see transfer.py)."""
    return any(op == "zeros" for op, _ in m.ops)


def _capture_plan(original: str, translated: str, name: str, records, info) -> list[dict]:
    """The points where per-layer activations are compared, in Keras order:
    {"layer": keras path, "keras": "act"|"pre", "torch": module path, "rule": id}."""
    points: list[dict] = []
    seq_prefixes = {}
    if info is not None and info.kind == "sequential":
        seq_prefixes[""] = None
    for r in records:  # Sequential members of a class: "features.layers[2]"
        if "layers[" in r.source:
            seq_prefixes.setdefault(r.source.split("layers[")[0], None)
    rec_by_source = {r.source: r for r in records}
    done = set()
    for prefix in seq_prefixes:
        holders = {int(r.source[len(prefix) + 7:-1]): r.target[len(prefix):] for r in records
                   if r.source.startswith(prefix + "layers[") and r.source.endswith("]")
                   and r.source[len(prefix) + 7:-1].isdigit() and r.target.startswith(prefix)}
        spans = align.sequential_spans(original, translated, name, prefix.rstrip(".").split(".")[-1] if prefix else "",
                                       holders)
        if not spans:
            continue
        last = None
        for k, mods in spans:
            src = f"{prefix}layers[{k}]"
            rec = rec_by_source.get(src)
            if mods is None:  # one of several members on one line, whose modules cannot be told apart
                if rec is not None:
                    points.append({"layer": src, "keras": "pre", "torch": rec.target, "rule": rec.rule})
                last = None
                done.add(src)
                continue
            if rec is not None and mods and rec.target != f"{prefix}{mods[-1]}":
                points.append({"layer": src, "keras": "pre", "torch": rec.target, "rule": rec.rule})
            out = f"{prefix}{mods[-1]}" if mods else last
            if out is not None:
                points.append({"layer": src, "keras": "act", "torch": out, "rule": rec.rule if rec else ""})
            last = out
            done.add(src)
    for r in records:
        if r.source in done:
            continue
        if r.target.startswith(r.source + "."):
            points.append({"layer": r.source, "keras": "pre", "torch": r.target, "rule": r.rule})
            points.append({"layer": r.source, "keras": "act", "torch": r.source, "rule": r.rule})
        else:
            points.append({"layer": r.source, "keras": "pre", "torch": r.target, "rule": r.rule})
    return points


def _built_input_specs(opts: Options, session: Session, keras_major: int, name: str, info) -> list | str:
    """Input specs from the input shapes of the Keras model as built (the Keras worker builds it), or why not: a
    size unknown there too (``keras.Input(shape=(None,))``), no single declared input, a builder that fails."""
    kw = session.worker("keras", keras_major, opts.device)
    kw.send({"op": "input_shapes", "source": str(Path(opts.original).resolve()), "model": name, "args": opts.args,
             "kind": opts.kind, "load": opts.load, "define": opts.defines, "seed": opts.seed,
             "input_keys": list(info.input_keys) if info is not None and info.input_keys else None})
    try:
        shapes = _receive(session, kw, opts.timeout).get("shapes")
    except VerifyError as e:
        if e.kind in ("crash", "timeout"):
            raise
        return f"building it failed: {e}"  # a builder that needs arguments (--args), ...
    if not shapes or len(shapes) != 1:  # one input (the static shape this replaces was one)
        return "it declares no single input"
    try:
        return default_specs([tuple(shapes[0])])
    except SpecError:
        return f"its input shape is {tuple(shapes[0])}"


def _layout_like(k: np.ndarray, t: np.ndarray, layout: str) -> np.ndarray:
    """A torch activation in the Keras layout, for diagnosis (channels-first maps of an NCHW model). In an NCHW
    model a map whose shape reads the same both ways (channels == width: a 3x3x3 map) is channels-first too:
    taken as it is, every layer after it would be compared across its axes and named as diverging."""
    moved = np.moveaxis(t, 1, -1) if t.ndim >= 3 else None
    if layout == "nchw" and moved is not None and moved.shape == k.shape:
        return moved
    if k.shape == t.shape:
        return t
    if moved is not None and moved.shape == k.shape:
        return moved
    return t


# --- the run -------------------------------------------------------------------------------------------

def verify(opts: Options, session: Session | None = None) -> dict:
    """Run one verification; returns the certificate (a dict). Raises VerifyError for exit-2 cases."""
    own = session is None
    session = session or Session()
    try:
        return _verify(opts, session)
    finally:
        if own:
            session.close()


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise VerifyError(f"cannot read the {what} {path}: {e}", kind="user") from None


def _verify(opts: Options, session: Session, keep_state: str | None = None, keep: dict | None = None) -> dict:
    """``keep_state``: copy the torch state the Keras weights became there; ``keep``: receives the inputs in
    torch's layout (``xs_target``), Keras's outputs and their layout (tf2jax verifies on from them)."""
    from fwport.core.rule import load_pack
    from fwport.core.pipeline import translate_source
    from fwport.packs.tf2torch import detect_keras_version

    t0 = time.perf_counter()
    times: dict[str, float] = {}
    original = _read(opts.original, "original")
    translated = _read(opts.translated, "translation")
    direction = opts.direction or detect_direction(original, translated)
    if direction == "torch2jax":
        from fwport.verify import torch2jax
        return torch2jax.verify(opts, session)
    if direction == "tf2jax":
        from fwport.verify import tf2jax
        return tf2jax.verify(opts, session)
    if direction != "tf2torch":
        raise VerifyError(f"direction {direction!r} is not supported yet (tf2torch is)", kind="user")
    keras_major, keras_why = detect_keras_version(original, opts.keras)
    pack = opts.pack or load_pack("tf2torch")
    result = translate_source(original, opts.original, pack, {"keras": keras_major})
    name, tname = opts.model, opts.translated_model or opts.model
    scope = _scope(name, original)  # a call expression's records are those of the class or builder it calls
    if scope != _scope(name) and _model_info(result, _scope(name)) is not None:
        scope = _scope(name)  # a builder of a functional model of a file's class (`return EmbeddingModel(x, y)`)
    records = _records(result, scope)
    info = _model_info(result, scope)
    try:
        moves = plan(records, pack)
        # the moves of every other class of the file, for its instances nested in the model (a block
        # built in a loop or a helper, held in a list or a Sequential): the Keras side finds them
        class_moves = {s: plan(_records(result, s), pack) for s in {r.scope for r in result.layers} if s != scope}
    except TransferError as e:
        raise VerifyError(str(e), kind="user") from None
    layout = info.layout if info else "same"
    out_layout = info.output_layout if info else "same"
    rtol, atol = TOLERANCES[opts.dtype]
    rtol = opts.rtol if opts.rtol is not None else rtol
    atol = opts.atol if opts.atol is not None else atol
    try:
        specs = [InputSpec.parse(s) for s in opts.inputs] if opts.inputs else (
            default_specs([info.input_shape]) if info and info.input_shape else None)
    except SpecError as e:
        # a size the translation cannot read (a builder's default, an expression): the built Keras model has it
        specs = _built_input_specs(opts, session, keras_major, name, info)
        if isinstance(specs, str):
            raise VerifyError(f"{e} (read from the Keras model {name} builds: {specs})", kind="user") from None
    if not specs:
        raise VerifyError(f"the input shape of {name!r} is not declared in the code (no keras.Input / input_shape): "
                          "give it with --input, e.g. --input 'float32[2,28,28,1]'", kind="user")
    specs = [s.with_dtype(opts.dtype) for s in specs]
    xs = make_inputs(specs, opts.seed)
    # (a record over a list of unknown length, cells[*], names no single layer to capture)
    points = _capture_plan(original, translated, scope, [r for r in records if "*" not in r.source], info)
    train_tol = _train_tolerance(translated, opts) if "train" in opts.checks else None
    times["translate"] = time.perf_counter() - t0

    tmp = tempfile.TemporaryDirectory(prefix="fwport-verify-")
    d = Path(tmp.name)
    try:
        np.savez(d / "x_keras.npz", **{f"x{i}": x for i, x in enumerate(xs)})
        np.savez(d / "x_torch.npz", **{f"x{i}": to_target_layout(x, layout) for i, x in enumerate(xs)})
        train = _train_batches(opts, d, layout) if "train" in opts.checks else {}
        kw = session.worker("keras", keras_major, opts.device)
        tw = session.worker("torch", 0, opts.device)
        t_start = time.perf_counter()
        common = {"dtype": opts.dtype, "device": opts.device, "seed": opts.seed, "args": opts.args,
                  "kind": opts.kind, "load": opts.load, "define": opts.defines,
                  "input_keys": list(info.input_keys) if info is not None and info.input_keys else None}
        # both sides start at once: torch imports and builds while Keras runs
        tw.send(dict(common, op="build", source=str(Path(opts.translated).resolve()), model=tname,
                     inputs=str(d / "x_torch.npz")))
        kreq = dict(common, op="run", source=str(Path(opts.original).resolve()), model=name,
                    inputs=str(d / "x_keras.npz"), out=str(d / "keras.npz"),
                    moves=[{"key": m.key, "layer": m.layer, "var": m.var, "rule": m.rule} for m in moves],
                    nested={c: [{"key": m.key, "layer": m.layer, "var": m.var, "rule": m.rule} for m in ms]
                            for c, ms in class_moves.items() if ms},
                    capture=sorted({p["layer"] for p in points}), checks=list(opts.checks), lr=opts.lr,
                    weights_file=opts.weights_file, **train)
        if info is not None and info.calls is not None:  # records that name layers by the order of calls
            kreq["calls"] = info.calls
        kresp = _ask(session, kw, kreq, opts.timeout)
        times["keras"] = time.perf_counter() - t_start
        tbuild = _receive(session, tw, opts.timeout)
        times["torch_build"] = time.perf_counter() - t_start
        with np.load(d / "keras.npz") as z:
            K = {k: z[k] for k in z.files}
        if keep is not None:
            keep.update(xs_target=[to_target_layout(x, layout) for x in xs], out_layout=out_layout,
                        outputs=[K[f"out{i}"] for i in range(kresp["outputs"])])
        for kpath, tpath, cls in kresp.get("instances", []):
            # a block held directly (self.attention = Attention(...)) is in the model's own records already
            named = {(m.layer, m.var) for m in moves}
            moves = moves + [m for m in nested(class_moves[cls], kpath, tpath) if (m.layer, m.var) not in named]
        moves = items(moves, kresp.get("lengths", {}))
        by_name = _by_name(kresp.get("offered", {}), tbuild["state"], moves)
        moves = moves + by_name
        unmapped = list(kresp["unmapped"]) + sorted(k.split(":", 1)[1] for k in kresp.get("offered", {})
                                                    if k not in {m.key for m in by_name})
        moves = [m for m in moves if m.key not in set(kresp.get("absent", []))]

        t1 = time.perf_counter()
        problems: list[str] = []
        if unmapped:
            problems.append("Keras variables no weight map moves: " + ", ".join(unmapped) +
                            " (a layer the translation did not record, or a rule without a [[weights]] entry)")
        try:
            state = transfer(K, moves, "w:")
        except TransferError as e:
            raise VerifyError(str(e), kind="user") from None
        tstate = tbuild["state"]
        missing = [n for n in tstate if n not in state]
        extra = [n for n in state if n not in tstate]
        by_target = {m.target: m for m in moves}
        if missing:
            problems.append("torch parameters/buffers no weight map writes: " + ", ".join(missing))
        for n in extra:
            m = by_target.get(n)
            problems.append(f"the map of {m.source_name if m else n} [{m.rule if m else '?'}] writes {n}, "
                            "which the translated model does not have")
        first_bad = None
        for n in tstate:
            if n in state and tuple(state[n].shape) != tuple(tstate[n]):
                m = by_target.get(n)
                problems.append(f"{n}: the map of {m.source_name if m else n} [{m.rule if m else '?'}] gives shape "
                                f"{tuple(state[n].shape)}, the translated module has {tuple(tstate[n])}")
                if m is not None and first_bad is None:
                    first_bad = {"layer": m.layer, "point": "weights", "torch": n, "rule": m.rule,
                                 "max_abs": None, "max_rel": None}
        cert = _certificate_base(opts, direction, keras_major, keras_why, specs, rtol, atol, kresp, tbuild,
                                 records, layout, out_layout)
        if train_tol is not None:
            cert["train"] = {"step": opts.train_step, "steps": opts.steps, "batch": list(opts.batch),
                             "optimizer": train_tol[0], "rtol": train_tol[1], "atol": train_tol[2]}
            if any(n in train_tol[0] for n in ("Adam", "RMSprop", "Adagrad")):
                cert["train"]["note"] = ("Keras ran with torch's epsilon placement (Adam: epsilon·sqrt(1-beta_2**t) per "
                                         "step; RMSprop/Adagrad: epsilon**2 inside the root); the translation's "
                                         "approximate warning states that difference")
        if problems:
            cert.update(verdict="mismatch", problems=problems, first_diverging=first_bad)
            times["transfer"] = time.perf_counter() - t1
            cert["timing"] = times
            return cert
        np.savez(d / "state.npz", **{k: v.astype(np.float64 if opts.dtype == "float64" else np.float32)
                                     if v.dtype.kind == "f" else v for k, v in state.items()})
        if keep_state:
            import shutil
            shutil.copyfile(d / "state.npz", keep_state)
        n_out = kresp["outputs"]
        np.savez(d / "R.npz", **{f"R{i}": to_target_layout(K[f"R{i}"], out_layout) for i in range(n_out)})
        times["transfer"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        tresp = _ask(session, tw, {"op": "run", "weights": opts.torch_state_file or str(d / "state.npz"), "R": str(d / "R.npz"),
                                   "out": str(d / "torch.npz"), "checks": list(opts.checks), "lr": opts.lr,
                                   "constant_draws": bool(kresp.get("stochastic")),
                                   "capture": sorted({p["torch"] for p in points}),
                                   **({**train, "batches": train["batches_torch"]} if train else {})}, opts.timeout)
        times["torch_run"] = time.perf_counter() - t2
        if "load_error" in tresp:
            cert.update(verdict="mismatch", problems=[f"loading the transferred state: {tresp['load_error']}"])
            return cert
        with np.load(d / "torch.npz") as z:
            T = {k: z[k] for k in z.files}
        t3 = time.perf_counter()
        _compare_all(cert, K, T, moves, kresp, tresp, points, n_out, out_layout, layout, xs, rtol, atol, opts)
        times["compare"] = time.perf_counter() - t3
        times["total"] = time.perf_counter() - t0
        cert["timing"] = times
        return cert
    finally:
        tmp.cleanup()


def _ask(session: Session, w: Worker, req: dict, timeout: float) -> dict:
    w.send(req)
    return _receive(session, w, timeout)


def _receive(session: Session, w: Worker, timeout: float) -> dict:
    try:
        return w.receive(timeout)
    except VerifyError as e:
        if e.kind in ("crash", "timeout"):
            session.discard(w)
        raise


def _certificate_base(opts, direction, keras_major, keras_why, specs, rtol, atol, kresp, tbuild, records,
                      layout, out_layout) -> dict:
    import platform
    return {
        "fwport_verify": 1,
        "original": opts.original, "translated": opts.translated,
        "model": opts.model, "translated_model": opts.translated_model or opts.model, "args": opts.args,
        "direction": direction, "keras": {"major": keras_major, "why": keras_why},
        "versions": {**kresp["versions"], **tbuild["versions"], "python": platform.python_version(),
                     "numpy": np.__version__},
        "device": {"keras": kresp["device"], "torch": tbuild["device"], "tf32": "off"},
        "dtype": opts.dtype, "seed": opts.seed,
        "inputs": [s.render() for s in specs], "layout": {"inputs": layout, "outputs": out_layout},
        "checks": list(opts.checks),
        "tolerance": {"rtol": rtol, "atol": atol,
                      "rule": "|keras - torch| <= atol * max|keras| + rtol * |keras|, per tensor"},
        "lr": opts.lr if "step" in opts.checks else None,
        "weights": [r.to_dict() for r in records],
        "loaded": {side: r.get("loaded") for side, r in (("original", kresp), ("translated", tbuild)) if r.get("loaded")},
        "source_weights": opts.weights_file,
        **({"stochastic": {"detected": True, "draws": "constant on both sides: normal draws mean + 0.5 stddev, float "
                           "uniform draws the middle of their range (tf.random.*, keras.random.*, the Keras backend's "
                           "random_normal/random_uniform; torch.randn/randn_like/rand/rand_like/normal/normal_/uniform_)",
                           "why": "two inference calls of the original give different outputs"}}
           if kresp.get("stochastic") else {}),
    }


def _compare_all(cert, K, T, moves, kresp, tresp, points, n_out, out_layout, layout, xs, rtol, atol, opts) -> None:
    results: dict[str, list] = {"outputs": [], "gradients": [], "input_gradients": [], "step": [], "train": [],
                                "layers": []}
    for i in range(n_out):
        k = K[f"out{i}"]
        t = to_source_layout(T[f"out{i}"], out_layout) if f"out{i}" in T else np.zeros(0)
        results["outputs"].append({"name": f"output {i}", **compare(k, t, rtol, atol)})
    if n_out != tresp["outputs"]:
        results["outputs"].append({"name": "output count", "ok": False,
                                   "detail": f"Keras returns {n_out} outputs, the translation {tresp['outputs']}"})
    by_key = {m.key: m for m in moves}
    if "grad" in opts.checks:
        G = transfer(K, [m for m in moves if m.key in set(kresp["trainable"])], "g:")
        scale = max([float(np.abs(v).max()) for v in G.values() if v.size] + [0.0])
        trained = {k[2:] for k in T if k.startswith("g:")}
        for m in moves:
            if m.target not in G or _held_at_zero(m):
                continue  # a parameter the source does not have (an RNN's second bias): no source gradient
            r = compare(G[m.target], T.get(f"g:{m.target}", np.zeros(0)), rtol, atol, GRAD_FLOOR * scale)
            results["gradients"].append({"name": m.target, "source": m.source_name, "rule": m.rule, **r})
        for n in sorted(trained - set(G)):
            g = T[f"g:{n}"]
            if np.any(g != 0):
                results["gradients"].append({"name": n, "ok": False, "detail": "a torch parameter receives a gradient "
                                             "but its Keras variable is not trainable"})
        for i, x in enumerate(xs):
            if f"gx{i}" in K:
                # (the same floor as the parameters': an input the outputs do not depend on in exact arithmetic,
                # e.g. through a normalization that removes what the input changes, has a gradient of rounding noise)
                r = compare(K[f"gx{i}"], to_source_layout(T[f"gx{i}"], layout), rtol, atol, GRAD_FLOOR * scale)
                results["input_gradients"].append({"name": f"input {i}", **r})
        near_zero = [r["name"] for r in results["gradients"] + results["input_gradients"]
                     if not r["ok"] and r.get("scale") is not None and scale > 0 and r["scale"] <= GRAD_FLOOR * scale]
        if near_zero and opts.dtype == "float32":
            cert.setdefault("warnings", []).append(
                f"the gradients of {', '.join(near_zero[:4])}{' ...' if len(near_zero) > 4 else ''} differ where they "
                f"are below {GRAD_FLOOR:g} of the model's largest gradient on the Keras side: they may be zero in "
                "exact arithmetic (a bias or shift just before a normalization that removes it, a layer whose output "
                "the loss does not depend on), where float32 leaves only rounding noise; run again with "
                "--dtype float64 to tell rounding from a bug")
        if results["gradients"] and scale == 0.0:
            cert.setdefault("warnings", []).append(
                "every parameter gradient is exactly zero on the Keras side: the outputs saturate at these weights "
                "and inputs (a softmax of very large logits), so the gradient checks compare zeros; the forward "
                "check and the per-layer pre-activations still count")
    if "step" in opts.checks:
        S = dict(K)
        for key, bn in kresp.get("batchnorm", {}).items():
            # Keras's moving variance follows Keras's momentum and the batch variance; torch stores the
            # *unbiased* batch variance: the expected torch value uses Keras's momentum with n/(n-1)
            mom, n = bn["momentum"], bn["n"]
            S[f"s:{key}"] = mom * K[f"w:{key}"] + (1 - mom) * K[f"bvar:{key}"] * n / max(n - 1, 1)
        P = transfer(S, moves, "s:")
        for m in moves:
            if m.target in P and not _held_at_zero(m):
                r = compare(P[m.target], T.get(f"s:{m.target}", np.zeros(0)), rtol, atol)
                note = "torch running_var = unbiased (n/(n-1))" if f"bvar:{m.key}" in K else ""
                results["step"].append({"name": m.target, "source": m.source_name, "rule": m.rule, **r,
                                        **({"note": note} if note else {})})
    if "train" in opts.checks:
        _compare_train(results["train"], K, T, moves, kresp, cert["train"])
    first = None
    prev_t = None  # the torch activation before this point (to undo a channels-first Flatten's order)
    flat_map = None
    for p in points:
        kk = f"{p['keras']}:{p['layer']}"
        fell_back = kk not in K and p["keras"] == "pre"
        if fell_back:
            kk = f"act:{p['layer']}"
        tk = f"act:{p['torch']}"
        if kk not in K or tk not in T:
            continue
        k = K[kk]
        t = T[tk]
        if fell_back and k.size != t.size:
            continue  # a module after the weight module finishes the layer (a transposed conv's crop): its output point follows
        if p["keras"] == "pre" or (flat_map is not None and flat_map[1:] and int(np.prod(flat_map[1:])) != k.shape[-1]):
            flat_map = None  # a weight layer consumed the flattened map: features are in the same order again
        if (layout == "nchw" and k.ndim == 2 and t.shape == k.shape and prev_t is not None and prev_t.ndim >= 3
                and prev_t.size == t.size):
            flat_map = prev_t.shape  # a Flatten of a channels-first map: (c,h,w) order, until a weight layer
        if flat_map is not None and k.ndim == 2 and t.shape == k.shape and t.size == int(np.prod(flat_map)):
            t_flat = np.moveaxis(t.reshape(flat_map), 1, -1).reshape(t.shape)  # (c,h,w) → (h,w,c) order
            if not compare(k, t_flat, rtol, atol)["ok"] and compare(k, t, rtol, atol)["ok"]:
                t_flat, flat_map = t, None  # flattened in Keras's order already (ChannelsLastReshape((-1,)))
        else:
            t_flat = _layout_like(k, t, layout)
        prev_t = T[tk]
        t = t_flat
        r = compare(k, t, rtol, atol)
        entry = {"layer": p["layer"], "point": "pre-activation" if kk.startswith("pre:") else "output",
                 "torch": p["torch"], "rule": p["rule"], **r}
        results["layers"].append(entry)
        if first is None and not r["ok"]:
            first = entry
    results["loading"] = loading_results(cert.get("loaded"))
    cert["results"] = results
    failed = [(g, e) for g, es in results.items() if g != "layers" for e in es if not e.get("ok")]
    cert["verdict"] = "pass" if not failed else "mismatch"
    # per-layer differences are diagnosis: with matching outputs, gradients and steps they name nothing
    cert["first_diverging"] = first if failed else None
    names = {}
    for e in results["layers"]:
        names.setdefault(e["layer"], e)
    if failed and first is None:
        # a mismatch no activation shows (gradients, step): name the layer of the first failing parameter
        for g, e in failed:
            src = e.get("source")
            if src:
                layer = src.rsplit(".", 1)[0] if "." in src else src
                cert["first_diverging"] = {"layer": layer, "point": g, "torch": e["name"], "rule": e.get("rule", ""),
                                           "max_abs": e.get("max_abs"), "max_rel": e.get("max_rel")}
                break
    cert["problems"] = [f"{g}: {e.get('name')}" + (f" (from {e['source']})" if e.get("source") else "") +
                        (f": {e['detail']}" if e.get("detail") else "") for g, e in failed]


# --- --check train ------------------------------------------------------------------------------------

def _train_tolerance(translated: str, opts: Options) -> tuple[str, float, float]:
    """(optimizer, rtol, atol) for --check train: the loosest of the optimizers the translation creates,
    unless --rtol/--atol say otherwise."""
    import re as _re
    found = sorted(set(_re.findall(r"\b(?:torch\.)?optim\.(\w+)\(", translated)))
    names = [f"torch.optim.{n}" for n in found]
    tol = max((TRAIN_TOLERANCES.get(n, TRAIN_TOLERANCES["default"]) for n in names), default=TRAIN_TOLERANCES["default"])
    return (", ".join(names) or "none found", opts.rtol if opts.rtol is not None else tol[0],
            opts.atol if opts.atol is not None else tol[1])


def _train_batches(opts: Options, d: Path, layout: str) -> dict:
    """The batches of --check train, one .npz per side (float inputs of an NCHW model channels-first)."""
    if not opts.batch:
        raise VerifyError("--check train needs the step function's arguments: --batch 'float32[8,20]' "
                          "--batch 'int64[8]:10' (one per argument)", kind="user")
    if opts.steps < 1:
        raise VerifyError("--steps must be at least 1", kind="user")
    try:
        specs = [InputSpec.parse(s).with_dtype(opts.dtype) for s in opts.batch]
    except SpecError as e:
        raise VerifyError(str(e), kind="user") from None
    keras_b, torch_b = {}, {}
    for step in range(opts.steps):
        for i, x in enumerate(make_inputs(specs, opts.seed + 1000 + step)):
            keras_b[f"b{step}_{i}"] = x
            torch_b[f"b{step}_{i}"] = to_target_layout(x, layout) if x.dtype.kind == "f" else x
    np.savez(d / "batches_keras.npz", **keras_b)
    np.savez(d / "batches_torch.npz", **torch_b)
    return {"train_step": opts.train_step, "steps": opts.steps, "n_args": len(specs),
            "batches": str(d / "batches_keras.npz"), "batches_torch": str(d / "batches_torch.npz")}


def _compare_train(out: list, K: dict, T: dict, moves, kresp, train: dict) -> None:
    """The loss of every step, then every trainable parameter after the last step."""
    rtol, atol = train["rtol"], train["atol"]
    k_loss, t_loss = K.get("train_loss"), T.get("train_loss")
    if k_loss is not None and t_loss is not None and k_loss.size and not np.isnan(k_loss).all():
        for i, (a, b) in enumerate(zip(k_loss, t_loss)):
            out.append({"name": f"loss at step {i + 1}", **compare(np.asarray(a), np.asarray(b), rtol, atol)})
    trainable = set(kresp.get("trainable", []))
    P = transfer(K, [m for m in moves if m.key in trainable], "t:")
    for m in moves:
        if m.target in P:
            r = compare(P[m.target], T.get(f"t:{m.target}", np.zeros(0)), rtol, atol)
            out.append({"name": m.target, "source": m.source_name, "rule": m.rule, **r})
    if not out:
        out.append({"name": "train", "ok": False, "detail": "no trainable parameter was compared"})


# --- fwport weights --------------------------------------------------------------------------------------

def convert(checkpoint: str, source: str, model: str, to: list[str], translated: str | None = None,
            args: dict | None = None, inputs: list[str] | None = None, keras: int | None = None,
            device: str = "cpu", timeout: float = DEFAULT_TIMEOUT, session: Session | None = None,
            pack=None) -> dict:
    """A Keras checkpoint → a torch state_dict (.pt / .safetensors) for the translated model, through
    the same weight maps as verify. Returns a report (dict); raises VerifyError when it cannot."""
    from fwport.core.pipeline import translate_source

    own = session is None
    session = session or Session()
    tmp = tempfile.TemporaryDirectory(prefix="fwport-weights-")
    try:
        if not Path(checkpoint).is_file():
            raise VerifyError(f"no checkpoint at {checkpoint}", kind="user")
        if translated is None:
            text = _read(source, "original")
            res = translate_source(text, source, pack, {"keras": keras} if keras else None)
            translated = str(Path(tmp.name) / "translated.py")
            Path(translated).write_text(res.output, encoding="utf-8")
        opts = Options(source, translated, model, args=args or {}, inputs=inputs or [], checks=(), keras=keras,
                       device=device, timeout=timeout, pack=pack, weights_file=str(Path(checkpoint).resolve()))
        state_file = str(Path(tmp.name) / "state.npz")
        cert = _verify(opts, session, keep_state=state_file)
        if cert.get("verdict") != "pass":
            return {"ok": False, "problems": cert.get("problems", []), "certificate": cert}
        tw = session.worker("torch", 0, device)
        resp = _ask(session, tw, {"op": "save", "weights": state_file, "to": [str(Path(t).resolve()) for t in to]},
                    timeout)
        if "load_error" in resp:
            return {"ok": False, "problems": [f"loading the converted state: {resp['load_error']}"]}
        return {"ok": True, "keys": resp["keys"], "to": to, "translated": translated if not own else None,
                "records": cert.get("weights")}
    finally:
        if own:
            session.close()
        tmp.cleanup()
