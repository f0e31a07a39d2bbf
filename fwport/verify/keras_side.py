"""The Keras subprocess of ``fwport verify`` / ``fwport weights``.

Started as ``python keras_side.py`` with ``TF_USE_LEGACY_KERAS=1`` for Keras 2 code; imports
TensorFlow/Keras and nothing of torch. It builds the original model, sets its variables (seeded random
values, or a checkpoint), and writes to an ``.npz``: each mapped variable by record key, the outputs,
the gradients of ``sum(out * R)``, per-layer activations and, for the step check, the variables after
one plain SGD step in training mode together with each BatchNorm's batch statistics.
"""
from __future__ import annotations

import contextlib
import inspect
import os
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _worker_io import UserError, build_object, load_source, match_calls, resolve, serve  # noqa: E402

LEGACY = os.environ.get("TF_USE_LEGACY_KERAS") == "1"

import tensorflow as tf  # noqa: E402

if LEGACY:
    import tf_keras as keras  # noqa: E402
else:
    import keras  # noqa: E402

# reduced-precision float32 matmuls/convolutions off (TF32 is on by default on Ampere+)
tf.config.experimental.enable_tensor_float_32_execution(False)


def _trained(var) -> bool:
    """Whether the model trains a trainable variable: Keras 3 tracks only its own variables (add_weight,
    keras.Variable), so a raw tf.Variable a layer holds as an attribute is not in model.trainable_variables and
    neither fit nor an optimizer over them updates it (Keras 2 tracks it)."""
    return LEGACY or isinstance(var, keras.Variable)


def versions() -> dict:
    return {"tensorflow": tf.__version__, "keras": keras.__version__, "keras_major": 2 if LEGACY else 3}


def device() -> str:
    gpus = tf.config.list_physical_devices("GPU")
    return f"cuda ({len(gpus)} GPU)" if gpus else "cpu"


def _set_floatx(dtype: str) -> None:
    if LEGACY:
        keras.backend.set_floatx(dtype)
    else:
        keras.config.set_floatx(dtype)


def _np(t) -> np.ndarray:
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


def _flatten(out) -> list:
    if isinstance(out, dict):
        return [x for k in sorted(out) for x in _flatten(out[k])]
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in _flatten(o)]
    return [out]


def _is_linear(act) -> bool:
    return act is None or getattr(act, "__name__", "") == "linear"


def _var_id(v) -> str:
    return getattr(v, "path", None) or v.name


class _Capture:
    """Intercepts ``call`` of chosen layers (instance attribute; ``__call__`` looks it up at each call)."""

    def __init__(self, layers: dict, pre_activation: bool = True, inputs: bool = False):
        self.layers = layers
        self.out: dict[str, np.ndarray] = {}
        self.pre: dict[str, np.ndarray] = {}
        self.inp: dict[str, np.ndarray] = {}
        self.order: list[str] = []
        self._orig = {}
        for path, layer in layers.items():
            orig = layer.call
            self._orig[path] = orig

            def wrapped(*a, _o=orig, _p=path, _l=layer, **k):
                out = _o(*a, **k)
                if _p not in self.out and not isinstance(out, (list, tuple, dict)):
                    self.order.append(_p)
                    self.out[_p] = _np(out)
                    if inputs and a:
                        self.inp[_p] = _np(a[0])
                    act = getattr(_l, "activation", None)
                    # a layer whose activation is a read-only property (an RNN's is its cell's): the output only
                    settable = not isinstance(getattr(type(_l), "activation", None), property)
                    if pre_activation and settable and not _is_linear(act) and callable(act):
                        object.__setattr__(_l, "activation", keras.activations.linear)
                        try:
                            self.pre[_p] = _np(_o(*a, **k))
                        finally:
                            object.__setattr__(_l, "activation", act)
                return out

            object.__setattr__(layer, "call", wrapped)

    def close(self) -> None:
        for path, layer in self.layers.items():
            try:
                object.__delattr__(layer, "call")
            except AttributeError:
                object.__setattr__(layer, "call", self._orig[path])


def _randomize(model, seed: int) -> None:
    """Seeded values unlike any initializer: biases and BN statistics non-trivial, variances spread."""
    rng = np.random.default_rng(seed)
    for v in sorted(model.weights, key=_var_id):
        if not str(v.dtype).replace("<dtype: '", "").startswith("float") and "float" not in str(v.dtype):
            continue
        old = _np(v.value if not LEGACY else v)
        name = _var_id(v).split("/")[-1].split(":")[0]
        if "variance" in name:
            new = np.exp(rng.uniform(np.log(0.02), np.log(2.0), old.shape))
        else:
            s = float(old.std()) if old.size > 1 and old.std() > 0 else 0.0
            new = old + rng.standard_normal(old.shape) * (0.25 * s if s else 0.2)
        v.assign(new.astype(old.dtype))
    _finalize(model)


def _finalize(model) -> None:
    """Preprocessing layers (Normalization) compute from their variables once, in finalize_state: after
    the variables change they must do it again, as Keras does after loading weights."""
    layers = [model] + (list(model._flatten_layers()) if hasattr(model, "_flatten_layers") else [])
    for layer in layers:
        finalize = getattr(layer, "finalize_state", None)
        if callable(finalize):
            finalize()


def _positional_inputs(model) -> int:
    """How many positional inputs ``call`` takes (a functional model takes one list)."""
    import inspect
    try:
        params = inspect.signature(model.call).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               and p.name not in ("training", "mask") and p.default is p.empty)


class _Function:
    """A plain tensor function verified like a model without variables."""

    def __init__(self, fn, args):
        self.fn, self.args, self.weights, self.trainable_variables = fn, args, [], []

    def __call__(self, *xs, training=False):
        return self.fn(*xs, **self.args)

    def load_weights(self, path):
        raise UserError("a plain function has no weights to load")


_MISSING = object()


def _attr(obj, dotted: str, default):
    """``obj.a.b`` for a variable held by a sub-object (an RNN layer's ``cell.kernel``)."""
    for part in dotted.split("."):
        obj = getattr(obj, part, default)
        if obj is default:
            return default
    return obj


#: what a draw gives while the draws are constant (the torch side's torch_draws uses the same values)
NORMAL_DRAW = UNIFORM_DRAW = 0.5


class ConstantDraws:
    """While active, the continuous draws of TensorFlow and Keras are constants: normal and truncated-normal
    draws give mean + NORMAL_DRAW * stddev, float uniform draws minval + UNIFORM_DRAW * (maxval - minval),
    in the shape and dtype asked for. A model that draws in inference (a VAE's sampling layer) is then
    compared on its deterministic path and on the path that scales the noise, with the translation's torch
    draws made the same constants.

    Each drawing function (tf.random.normal/uniform/truncated_normal, their stateless forms, keras.random.*,
    the legacy backend's random_normal/random_uniform) is replaced wherever a loaded module holds it as an
    attribute, so a call through any alias (``tf.random.normal``, ``K.random_normal``, TensorFlow's own
    ``random_ops.random_normal``) is caught; restored on exit. Integer uniform draws stay random."""

    def _functions(self) -> list:
        found = []
        for owner, names in ((tf.random, ("normal", "truncated_normal", "uniform", "stateless_normal",
                                         "stateless_truncated_normal", "stateless_uniform")),
                             (getattr(keras, "random", None), ("normal", "truncated_normal", "uniform")),
                             (keras.backend, ("random_normal", "truncated_normal", "random_uniform"))):
            for name in names:
                fn = getattr(owner, name, None)
                if callable(fn):
                    found.append((fn, "uniform" if "uniform" in name else "normal"))
        return found

    @staticmethod
    def _constant(fn, kind: str):
        sig = inspect.signature(fn)

        def draw(*a, **k):
            args = sig.bind(*a, **k)
            args.apply_defaults()
            got = args.arguments
            dtype = tf.as_dtype(got.get("dtype") or keras.backend.floatx())
            if not dtype.is_floating:
                return fn(*a, **k)  # an integer draw: discrete, left random
            if kind == "uniform":
                lo = got.get("minval", 0.0)
                hi = 1.0 if got.get("maxval") is None else got["maxval"]
                value = tf.cast(lo, dtype) + UNIFORM_DRAW * (tf.cast(hi, dtype) - tf.cast(lo, dtype))
            else:
                value = tf.cast(got.get("mean", 0.0), dtype) + NORMAL_DRAW * tf.cast(got.get("stddev", 1.0), dtype)
            return tf.zeros(got["shape"], dtype) + value
        return draw

    def __enter__(self):
        replace = {id(fn): self._constant(fn, kind) for fn, kind in self._functions()}
        self.saved = []
        for mod in list(sys.modules.values()):
            d = getattr(mod, "__dict__", None)
            if not isinstance(d, dict):
                continue
            for name, value in list(d.items()):
                if callable(value) and id(value) in replace:
                    self.saved.append((d, name, value))
                    d[name] = replace[id(value)]
        return self

    def __exit__(self, *exc):
        for d, name, value in self.saved:
            d[name] = value


def _stochastic(model, xs) -> bool:
    """Whether the model's inference forward draws random numbers: two calls give outputs that differ beyond
    rounding (a function that sums a shuffled dataset gives the same sums up to the order of additions)."""
    a, b = ([_np(o) for o in _flatten(_call(model, xs, False))] for _ in range(2))
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return True
        if x.dtype.kind != "f":
            if not np.array_equal(x, y):
                return True
        elif x.size and not np.allclose(x, y, rtol=0.0, atol=1e-6 * max(1.0, float(np.nanmax(np.abs(x)))),
                                        equal_nan=True):
            return True
    return False


# the keys of a model called with a dict of inputs (ModelInfo.input_keys), set per request: the inputs,
# given in that order, are passed as one dict
_INPUT_KEYS: list = []


def _call(model, xs, training: bool):
    if isinstance(model, _Function):
        return model(*xs)
    for layer in _all_layers(model):  # stateful recurrent layers: every call compared from zero states
        states = getattr(layer, "states", None)
        if getattr(layer, "stateful", False) is True and states and all(s is not None for s in states):
            layer.reset_states()
    if _INPUT_KEYS:
        return model(dict(zip(_INPUT_KEYS, xs)), training=training)
    if len(xs) == 1:
        return model(xs[0], training=training)
    if _positional_inputs(model) >= len(xs):
        return model(*xs, training=training)
    return model(list(xs), training=training)


def _state(moves, variables) -> dict:
    return {m["key"]: _np(variables[m["key"]]) for m in moves}


def run(req: dict, draws: contextlib.ExitStack) -> dict:
    """Build, set and measure the original; ``draws`` holds the constant draws of a stochastic forward
    until the response is written."""
    if req.get("device") == "cuda" and not tf.config.list_physical_devices("GPU"):
        raise UserError("--device cuda: TensorFlow sees no GPU")
    dtype = req.get("dtype", "float32")
    _set_floatx(dtype)
    if LEGACY:
        keras.backend.clear_session()
    else:
        keras.backend.clear_session()
    keras.utils.set_random_seed(req["seed"])
    # a model with loops over run-time values: its records name layers by the order they are called
    order = _CallOrder() if req.get("calls") else None
    try:
        ns, note = load_source(req["source"], "fwport_verify_original", req.get("load", "auto"), req["model"],
                               req.get("define"))
        keras.utils.set_random_seed(req["seed"])
        model = build_object(ns, req["model"], req.get("args") or {},
                             lambda o: isinstance(o, keras.layers.Layer), req.get("kind", "model"), _Function)
    finally:
        if order is not None:
            order.close()
    called, call_lengths = _call_paths(model, order.layers, req["calls"]) if order is not None else ({}, {})

    def find(path: str):
        """The object at a record's path (``calls[s][i][j]...``: the layer the order of calls gives)."""
        m = _CALL_PATH.match(path)
        if m is not None and m.group(0) in called:
            path = called[m.group(0)] + path[m.end():]
        elif m is not None:
            raise UserError(f"{path!r}: the built model has no such layer in its order of calls")
        return resolve(model, path)
    with np.load(req["inputs"]) as z:
        xs_np = [z[f"x{i}"] for i in range(len(z.files))]
    xs = [tf.constant(x) for x in xs_np]
    _call(model, xs, False)  # builds a subclassed model
    if req.get("weights_file"):
        model.load_weights(req["weights_file"])
        _finalize(model)
    else:
        _randomize(model, req["seed"])

    # blocks of the file's own classes held by the model (in a list, a Sequential, built by a helper):
    # each instance gets its class's moves under its path
    nested = req.get("nested") or {}
    instances = _instances(model, set(nested), root=not req["moves"])
    for kpath, _, cls in instances:
        req["moves"] = req["moves"] + [dict(m, key=f"{kpath}/{m['key']}", layer=_join(kpath, m["layer"]))
                                       for m in nested[cls]]

    # a record over a list of unknown length (cells[*]): one move per item the built model holds
    lengths: dict = {}
    expanded = []
    for m in req["moves"]:
        if "[*]" not in m["layer"]:
            expanded.append(m)
            continue
        prefix = m["layer"].split("[*]", 1)[0]
        if prefix not in lengths and prefix in call_lengths:
            lengths[prefix] = call_lengths[prefix]
        if prefix not in lengths:
            try:
                lengths[prefix] = len(resolve(model, prefix))
            except (UserError, TypeError):
                lengths[prefix] = 0
        expanded += [dict(m, key=f"{m['key']}#{i}", layer=m["layer"].replace("[*]", f"[{i}]", 1))
                     for i in range(lengths[prefix])]
    req["moves"] = expanded

    # the variables the maps move, by name; anything else is unmapped
    variables, trainable, absent = {}, [], []
    for m in req["moves"]:
        try:
            layer = find(m["layer"])
        except UserError:
            # a layer built in a branch this model did not take (`if strides != 1: self.shortcut = ...`):
            # nothing to move; a wrong path still shows, as Keras variables no map moves (unmapped) or
            # torch parameters none writes
            absent.append(m["key"])
            continue
        found = _attr(layer, m["var"], _MISSING) if m["var"] not in (".", "") else layer
        if found is None or found is _MISSING:
            # an optional variable switched off (use_bias=False, center=False) or never created (a
            # Normalization given its statistics); a wrong name still shows as a torch parameter no map writes
            absent.append(m["key"])
            continue
        var = layer if m["var"] in (".", "") else _attr(layer, m["var"], None)
        if var is None or not hasattr(var, "assign"):
            raise UserError(f"{m['layer']} ({type(layer).__name__}) has no variable {m['var']!r} "
                            f"(rule {m['rule']}): the rule's weight map names a variable the layer lacks")
        variables[m["key"]] = var
        if var.trainable and _trained(var):
            trainable.append(m["key"])
    # variables the model creates itself under names no record can know (add_weight(name="kernel%d" % i)
    # in a loop): offered by name; the parent moves each to the torch parameter of that name and shape
    offered = {}
    for v in _own_variables(model):
        key = f"-1:{_short_name(v)}"
        if any(v is x for x in variables.values()) or key in variables:
            continue
        variables[key] = v
        offered[key] = [int(d) for d in v.shape]
        req["moves"].append({"key": key, "layer": "", "var": _short_name(v), "rule": "by-name"})
        if v.trainable:
            trainable.append(key)
    mapped = {id(v) for v in variables.values()}
    unmapped = [_var_id(v) for v in model.weights if id(v) not in mapped]
    moves = [m for m in req["moves"] if m["key"] not in absent]
    arrays = {f"w:{k}": v for k, v in _state(moves, variables).items()}
    initial = {k: _np(v) for k, v in variables.items()}
    checks = req.get("checks", ["forward"])
    resp: dict = {"versions": versions(), "device": device(), "unmapped": unmapped, "trainable": trainable,
                  "absent": absent, "layers": [], "instances": instances, "lengths": lengths,
                  "offered": offered}

    # a forward that draws in inference (a sampling layer) is compared with its draws made constants on both
    # sides (the torch side is asked to by the parent)
    resp["stochastic"] = _stochastic(model, xs)
    if resp["stochastic"]:
        draws.enter_context(ConstantDraws())
        if _stochastic(model, xs):
            raise UserError("the forward draws random numbers in inference, and still does with the normal and "
                            "uniform draws of tf.random / keras.random / the Keras backend made constant (a "
                            "categorical or integer draw, or a draw held where fwport cannot replace it): the "
                            "outputs cannot be compared")

    capture_paths = req.get("capture", [])
    layers = {}
    for p in capture_paths:
        try:
            layer = find(p)
        except UserError:
            continue  # a layer of a branch not taken (see the moves above)
        if not isinstance(layer, keras.layers.Layer):
            continue  # a variable (add_weight): nothing to intercept
        layers[p] = layer
        resp["layers"].append({"path": p, "name": getattr(layer, "name", p), "class": type(layer).__name__})
    cap = _Capture(layers)
    try:
        outs = _flatten(_call(model, xs, False))
    finally:
        cap.close()
    for i, o in enumerate(outs):
        arrays[f"out{i}"] = _np(o)
    for p in cap.order:
        arrays[f"act:{p}"] = cap.out[p]
        if p in cap.pre:
            arrays[f"pre:{p}"] = cap.pre[p]
    resp["captured"] = cap.order
    resp["outputs"] = len(outs)

    rng = np.random.default_rng(req["seed"] + 1)
    rs = [rng.standard_normal(arrays[f"out{i}"].shape).astype(
        arrays[f"out{i}"].dtype if arrays[f"out{i}"].dtype.kind == "f" else np.float32) for i in range(len(outs))]
    for i, r in enumerate(rs):
        arrays[f"R{i}"] = r
    float_inputs = [i for i, x in enumerate(xs_np) if x.dtype.kind == "f"]

    def loss_of(outputs):
        return tf.add_n([tf.reduce_sum(tf.cast(o, r.dtype) * r) for o, r in zip(_flatten(outputs), rs)])

    if "grad" in checks:
        tvars = [variables[k] for k in trainable]
        with tf.GradientTape() as tape:
            for i in float_inputs:
                tape.watch(xs[i])
            loss = loss_of(_call(model, xs, False))
        grads = tape.gradient(loss, tvars + [xs[i] for i in float_inputs])
        none = []
        for k, g, v in zip(trainable, grads, tvars):
            if g is None:
                none.append(k)
                g = np.zeros(v.shape, _np(v).dtype)
            arrays[f"g:{k}"] = _np(tf.convert_to_tensor(g))
        for i, g in zip(float_inputs, grads[len(tvars):]):
            arrays[f"gx{i}"] = _np(g) if g is not None else np.zeros_like(xs_np[i])
        resp["no_gradient"] = none
        arrays["loss"] = np.asarray(_np(loss))

    if "step" in checks:
        lr = float(req.get("lr", 0.1))
        for layer in _all_layers(model):
            if "Dropout" in type(layer).__name__ and hasattr(layer, "rate"):
                object.__setattr__(layer, "rate", 0.0)  # Dropout, SpatialDropout*, GaussianDropout, AlphaDropout
            if type(layer).__name__ == "GaussianNoise" and hasattr(layer, "stddev"):
                object.__setattr__(layer, "stddev", 0.0)  # its random draws differ from torch's: both sides neutral
            if type(layer).__name__.endswith("Cell") and isinstance(getattr(layer, "dropout", None), float):
                object.__setattr__(layer, "dropout", 0.0)  # a recurrent layer's dropout= (its inputs' masks)
        bn_layers = {}
        for m in moves:
            if m["var"] == "moving_variance":
                bn_layers[m["layer"]] = find(m["layer"])
        bcap = _Capture(bn_layers, pre_activation=False, inputs=True)
        try:
            with tf.GradientTape() as tape:
                loss = loss_of(_call(model, xs, True))
            tv = model.trainable_variables
            grads = tape.gradient(loss, tv)
            for v, g in zip(tv, grads):
                if g is not None:
                    v.assign_sub(tf.constant(lr, dtype=v.dtype) * tf.convert_to_tensor(g))  # tf.cast(0.1) rounds via float32
        finally:
            bcap.close()
        for k, v in _state(moves, variables).items():
            arrays[f"s:{k}"] = v
        bn = {}
        for m in moves:
            if m["var"] != "moving_variance" or m["layer"] not in bcap.inp:
                continue
            layer = bn_layers[m["layer"]]
            x = bcap.inp[m["layer"]].astype(np.float64)
            axis = layer.axis if isinstance(layer.axis, int) else list(layer.axis)[0]
            axis = axis % x.ndim
            red = tuple(a for a in range(x.ndim) if a != axis)
            arrays[f"bvar:{m['key']}"] = x.var(axis=red)
            n = int(np.prod([x.shape[a] for a in red]))
            bn[m["key"]] = {"n": n, "momentum": float(layer.momentum)}
        resp["batchnorm"] = bn
        resp["lr"] = lr
        for k, v in variables.items():  # leave the model as the forward check saw it
            v.assign(initial[k])

    if "train" in checks:
        _train(req, ns, moves, variables, arrays)

    np.savez(req["out"], **arrays)
    resp["loaded"] = note
    return resp


def _train(req: dict, ns: dict, moves: list, variables: dict, arrays: dict) -> None:
    """--check train: the file's own step function, once per batch; its losses and the variables after."""
    fn = ns.get(req["train_step"])
    if not callable(fn):
        raise UserError(f"no training-step function {req['train_step']!r} in the original (--train-step)")
    adams = _torch_epsilon(ns)
    losses = []
    with np.load(req["batches"]) as z:
        for step in range(req["steps"]):
            for opt, eps, var in adams:
                t = int(_np(opt.iterations)) + 1
                var.assign(eps * (1.0 - float(opt.beta_2) ** t) ** 0.5)
            out = fn(*[tf.constant(z[f"b{step}_{i}"]) for i in range(req["n_args"])])
            out = _flatten(out)[0] if out is not None else None
            losses.append(float(_np(out).mean()) if out is not None else float("nan"))
    arrays["train_loss"] = np.asarray(losses, dtype=np.float64)
    for k, v in _state(moves, variables).items():
        arrays[f"t:{k}"] = v


def _torch_epsilon(ns: dict) -> list:
    """Keras Adam/AdamW add epsilon to sqrt(v) before the bias correction, torch after it: a torch eps
    acts like a Keras epsilon of eps·sqrt(1 - beta_2**t) at step t. Keras RMSprop/Adagrad add it inside
    the square root, torch outside. The translation keeps the value and says so (an `approximate`
    warning); here the Keras optimizers get torch's placement (Adam: that per-step epsilon, returned
    as (optimizer, epsilon, variable) to set before each step; RMSprop/Adagrad: epsilon**2), so that
    --check train measures the translation, not this known placement (docs/verify.md)."""
    out = []
    found = list(ns.values())
    found += [getattr(v, "optimizer", None) for v in found if isinstance(v, keras.Model)]  # compile's
    for v in found:
        if type(v).__name__ in ("RMSprop", "Adagrad") and hasattr(v, "epsilon"):
            # epsilon inside the square root in Keras, outside in torch: sqrt(v + eps**2) is
            # sqrt(v) + eps to within (sqrt(2) - 1) eps, i.e. torch's placement (set before tracing)
            object.__setattr__(v, "epsilon", float(v.epsilon) ** 2)
            continue
        if isinstance(v, keras.optimizers.Adam) or type(v).__name__ in ("Adam", "AdamW"):
            eps = float(v.epsilon)
            var = tf.Variable(eps, trainable=False, dtype="float32")
            object.__setattr__(v, "epsilon", var)
            out.append((v, eps, var))
    return out


def _own_variables(layer) -> list:
    """The variables a layer created itself (add_weight), not those of its sub-layers."""
    own = [getattr(layer, a, None) or [] for a in (("_trainable_weights", "_non_trainable_weights") if LEGACY
                                                   else ("_trainable_variables", "_non_trainable_variables"))]
    return [v for vs in own for v in vs]


def _short_name(v) -> str:
    """``kernel1`` of ``my_layer/kernel1:0`` (Keras 2) or ``my_layer/kernel1`` (Keras 3)."""
    return _var_id(v).rsplit("/", 1)[-1].split(":")[0]


def _join(prefix: str, path: str) -> str:
    """The path of a record's layer inside a nested instance (the same join as transfer.nested)."""
    return path if not prefix else prefix if path in ("", ".") else f"{prefix}.{path}"


def _instances(model, classes: set, root: bool) -> list:
    """[Keras path, torch path, class] of every layer of one of ``classes`` (the file's own layer classes)
    the model holds, at any depth: in attributes, lists and tuples, Sequentials. The model itself ("")
    when ``root`` (its own records were not given: it was built by a builder function)."""
    out, seen = [], set()

    def visit(obj, kpath: str, tpath: str) -> None:
        if isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                visit(v, f"{kpath}[{i}]", f"{tpath}.{i}" if tpath else str(i))
            return
        if not isinstance(obj, keras.layers.Layer) or id(obj) in seen:
            return
        seen.add(id(obj))
        if type(obj).__name__ in classes and (kpath or root):
            out.append([kpath, tpath, type(obj).__name__])
        if isinstance(obj, keras.Sequential):
            for i, v in enumerate(obj.layers):
                visit(v, f"{kpath}.layers[{i}]" if kpath else f"layers[{i}]", f"{tpath}.{i}" if tpath else str(i))
            return
        for name, v in list(vars(obj).items()):
            if not name.startswith("_"):
                visit(v, f"{kpath}.{name}" if kpath else name, f"{tpath}.{name}" if tpath else name)

    visit(model, "", "")
    return out


class _CallOrder:
    """The layers in the order they are first called, while the source builds the model (``Layer.__call__``
    wrapped for that time): the order in which a functional model's builder runs its graph."""

    def __init__(self) -> None:
        self.layers: list = []
        seen: set[int] = set()
        self._orig = orig = keras.layers.Layer.__call__
        layers = self.layers

        def __call__(layer, *a, **k):
            if id(layer) not in seen:
                seen.add(id(layer))
                layers.append(layer)
            return orig(layer, *a, **k)

        keras.layers.Layer.__call__ = __call__

    def close(self) -> None:
        keras.layers.Layer.__call__ = self._orig


_CALL_PATH = re.compile(r"calls\[\d+\](?:\[\d+\]){1,2}")


def _call_paths(model, called: list, segments: list) -> tuple[dict, dict]:
    """``calls[s][j]`` / ``calls[s][i][j]`` → ``layers[k]`` (the model's own path of that layer), and
    ``calls[s]`` → the number of passes of loop s: the model's layers in the order they were first called,
    matched to the translation's segments (`match_calls`)."""
    members = [layer for layer in getattr(model, "layers", []) if type(layer).__name__ != "InputLayer"]
    ids = {id(layer) for layer in members}
    ordered = [layer for layer in called if id(layer) in ids]
    if len(ordered) != len(members):
        raise UserError("the order in which the model's layers were called is unknown (some were not called while "
                        "the model was built): the layers of its loops over run-time values cannot be matched")
    index = {id(layer): i for i, layer in enumerate(model.layers)}
    found = match_calls([{c.__name__ for c in type(layer).__mro__} for layer in ordered], segments)
    paths, lengths = {}, {}
    for s, (seg, places) in enumerate(zip(segments, found)):
        if seg["loop"]:
            lengths[f"calls[{s}]"] = len(places)
            for i, group in enumerate(places):
                for j, at in enumerate(group):
                    paths[f"calls[{s}][{i}][{j}]"] = f"layers[{index[id(ordered[at])]}]"
        else:
            for j, at in enumerate(places):
                paths[f"calls[{s}][{j}]"] = f"layers[{index[id(ordered[at])]}]"
    return paths, lengths


class _Sites:
    """While the source builds and runs its model (``--trace``): where in the source each layer was created
    (the constructor call: line, 1-based column) and the shapes of the first input of each of its calls
    (``Layer.__init__`` and ``Layer.__call__`` wrapped for that time)."""

    def __init__(self, source: str) -> None:
        self.source = os.path.realpath(source)
        with open(source, "rb") as f:
            self.lines = f.read().split(b"\n")
        self.site: dict[int, tuple[int, int]] = {}
        self.shapes: dict[int, list] = {}
        self.calling = 0  # layers being called: one created now is a part a layer builds for itself
        self._init, self._call = keras.layers.Layer.__init__, keras.layers.Layer.__call__
        init, call = self._init, self._call

        def __init__(layer, *a, **k):
            if id(layer) not in self.site and not self.calling:
                where = self._where(layer)
                if where is not None:
                    self.site[id(layer)] = where
            return init(layer, *a, **k)

        def __call__(layer, *a, **k):
            if id(layer) in self.site and a and hasattr(a[0], "shape"):
                try:
                    shape = [None if d is None else int(d) for d in tuple(a[0].shape)]
                except (TypeError, ValueError):
                    shape = None
                if shape is not None:
                    self.shapes.setdefault(id(layer), []).append(shape)
            self.calling += 1
            try:
                return call(layer, *a, **k)
            finally:
                self.calling -= 1

        keras.layers.Layer.__init__, keras.layers.Layer.__call__ = __init__, __call__

    def _where(self, layer):
        f = sys._getframe(2)
        while f is not None:
            if f.f_code.co_name == "__init__" and f.f_locals.get("self") is layer:
                f = f.f_back  # the layer's own __init__ (a class of the file): where it is created is above
                continue
            if f.f_code.co_filename == self.source or os.path.realpath(f.f_code.co_filename) == self.source:
                try:
                    line, _, col, _ = list(f.f_code.co_positions())[f.f_lasti // 2]
                except (IndexError, ValueError):
                    return None
                if line is None or col is None or not 0 < line <= len(self.lines):
                    return None
                # Python's columns count UTF-8 bytes; the translation's count characters
                return line, len(self.lines[line - 1][:col].decode("utf-8", "replace")) + 1
            f = f.f_back
        return None

    def close(self) -> None:
        keras.layers.Layer.__init__, keras.layers.Layer.__call__ = self._init, self._call


def trace(req: dict) -> dict:
    """``fwport tf2torch --trace``: the source's model built and run once on the given inputs; for each place
    in the source that creates layers, the shapes (batch axis dropped) of their inputs, or None where the
    layers created there were called on different ones."""
    _set_floatx("float32")
    keras.backend.clear_session()
    keras.utils.set_random_seed(req.get("seed", 0))
    sites = _Sites(req["source"])
    try:
        ns, note = load_source(req["source"], "fwport_trace_original", req.get("load", "auto"), req["model"],
                               req.get("define"))
        model = build_object(ns, req["model"], req.get("args") or {},
                             lambda o: isinstance(o, keras.layers.Layer), "model", _Function)
        with np.load(req["inputs"]) as z:
            xs = [tf.constant(z[f"x{i}"]) for i in range(len(z.files))]
        _call(model, xs, False)
    finally:
        sites.close()
    # per place: one rank, and each size where every call saw the same (None where one was symbolic, a
    # functional model's undeclared size, or where they differ); None where the ranks differ
    by_site: dict[tuple[int, int], object] = {}
    for key, where in sites.site.items():
        for shape in sites.shapes.get(key, []):
            shape = shape[1:]
            seen = by_site.get(where, shape)
            if seen is None or len(seen) != len(shape):
                by_site[where] = None
            else:
                by_site[where] = [a if a == b else None for a, b in zip(seen, shape)]
    return {"shapes": [[line, col, shape] for (line, col), shape in sorted(by_site.items())], "loaded": note,
            "versions": versions()}


def _all_layers(model):
    seen, stack = [], [model]
    while stack:
        layer = stack.pop()
        if any(layer is s for s in seen):
            continue
        seen.append(layer)
        subs = getattr(layer, "_flatten_layers", None)
        if subs is not None:
            stack.extend(l for l in layer._flatten_layers(include_self=False, recursive=False))
    return seen


def input_shapes(req: dict) -> dict:
    """The built model's declared input shapes (no batch axis): where the translation cannot read them statically
    (``keras.Input(shape=(n_hidden * 2,))`` with a builder default), Keras, which built the model, knows them."""
    _set_floatx("float32")
    keras.backend.clear_session()
    keras.utils.set_random_seed(req.get("seed", 0))
    ns, _ = load_source(req["source"], "fwport_verify_shapes", req.get("load", "auto"), req["model"],
                        req.get("define"))
    model = build_object(ns, req["model"], req.get("args") or {}, lambda o: isinstance(o, keras.layers.Layer),
                         req.get("kind", "model"), _Function)
    try:
        inputs = list(model.inputs)
    except (AttributeError, ValueError):  # a subclassed model not built yet: it declares none
        return {"shapes": None}
    return {"shapes": [[None if d is None else int(d) for d in tuple(i.shape)[1:]] for i in inputs]}


def handle(req: dict) -> dict:
    op = req.get("op")
    if op == "hello":
        return {"versions": versions(), "device": device()}
    _INPUT_KEYS[:] = req.get("input_keys") or []
    if op == "input_shapes":
        return input_shapes(req)
    if op == "run":
        with contextlib.ExitStack() as draws:
            return run(req, draws)
    if op == "trace":
        return trace(req)
    raise UserError(f"unknown request {op!r}")


if __name__ == "__main__":
    serve(handle)
