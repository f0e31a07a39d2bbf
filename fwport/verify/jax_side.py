"""The JAX subprocess of ``fwport verify`` for torch → JAX: the *translated* program. Imports JAX
and Equinox; importing torch fails (a translation must run without PyTorch).

``run`` executes the translated file, builds the Equinox model with a key, writes the original's
state_dict into it by name (``fc1.weight`` → ``model.fc1.weight``, ``net.0.bias`` →
``model.net.layers[0].bias``; ``eqx.tree_at``), and writes outputs of ``jax.vmap(model)`` in
inference mode and the gradients of ``sum(out * R)`` with the original's names, to an ``.npz``; with
``--check step``, the parameters after one optax.sgd step on that loss (the torch side's mode).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class _BlockTorch:
    """The translated program must run without PyTorch (and this process must never hold both)."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "torchvision", "torchaudio", "tensorflow", "keras"):
            raise ImportError(f"the translation imports {name}: a translated program must not need PyTorch")
        return None


sys.meta_path.insert(0, _BlockTorch())

import inspect  # noqa: E402

import numpy as np  # noqa: E402

from _worker_io import UserError, build_object, load_source, model_call, serve  # noqa: E402
from eqx_layouts import plan  # noqa: E402


def _setup(dtype: str, device: str) -> None:
    if device == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    jax.config.update("jax_default_matmul_precision", "highest")
    jax.config.update("jax_enable_x64", dtype == "float64")


def locate(model, name: str, eqx):
    """A state_dict name → (the getter of that array in the Equinox model, its key path), or None."""
    steps = []
    obj = model
    for part in name.split("."):
        if part.isdigit():
            if isinstance(obj, eqx.nn.Sequential):
                steps.append(("attr", "layers"))
                obj = obj.layers
            try:
                obj = obj[int(part)]
            except (TypeError, IndexError, KeyError):
                return None
            steps.append(("item", int(part)))
        elif isinstance(obj, dict):  # an nn.ModuleDict is a dict
            if part not in obj:
                return None
            obj = obj[part]
            steps.append(("item", part))
        else:
            if not hasattr(obj, part) and isinstance(getattr(obj, "layer", None), eqx.Module):
                steps.append(("attr", "layer"))  # PerVector(layer) (a translation's helper): the layer's arrays
                obj = obj.layer
            if not hasattr(obj, part):
                return None
            obj = getattr(obj, part)
            steps.append(("attr", part))

    def get(m):
        for kind, v in steps:
            m = getattr(m, v) if kind == "attr" else m[v]
        return m

    return get, "".join(f".{v}" if k == "attr" else f"[{v!r}]" for k, v in steps), obj


RUNNING = ("running_mean", "running_var")


def load_running_stats(model, layer_state, state: dict, eqx, jnp):
    """BatchNorm buffers (``bn.running_mean`` / ``bn.running_var``) → the layer's entry of the
    eqx.nn.State (mode "batch": the average itself while its counter is 0). Returns the state and problems."""
    problems = []
    for prefix in sorted({n.rsplit(".", 1)[0] for n in state if n.rsplit(".", 1)[-1] in RUNNING}):
        found = locate(model, prefix, eqx)
        bn = found[2] if found else None
        if not isinstance(bn, eqx.nn.BatchNorm) or getattr(bn, "batch_state_index", None) is None:
            problems.append(f"{prefix}.running_mean/var: no eqx.nn.BatchNorm(mode='batch') at {prefix}")
            continue
        if layer_state is None:
            problems.append(f"{prefix}: the translated model keeps no state (build it with eqx.nn.make_with_state)")
            continue
        mean, var = (jnp.asarray(state[f"{prefix}.{k}"]) for k in RUNNING)
        layer_state = layer_state.set(bn.batch_state_index, (mean, var))
    return layer_state, problems


def load_state(model, state: dict, eqx, jnp, modules: dict | None = None):
    """Write each torch array into the model by name: the same shape, or Equinox's shape for the same
    values (a conv bias (O,) is (O, 1, 1)); the layers whose layout differs (``modules``: their classes by
    name) through eqx_layouts.plan. Returns the model and the problems."""
    import jax
    getters, values, problems, written = [], [], [], set()
    arrays = plan({k: v for k, v in state.items() if k.rsplit(".", 1)[-1] not in RUNNING}, modules or {})[0]
    for name, value in arrays.items():
        found = locate(model, name, eqx)
        if found is None:
            problems.append(f"{name}: the translated model has no such array")
            continue
        get, path, target = found
        if not hasattr(target, "shape"):
            problems.append(f"{name}: {path} is a {type(target).__name__}, not an array")
            continue
        if tuple(target.shape) != tuple(value.shape):
            if int(np.prod(target.shape)) == value.size and [d for d in target.shape if d != 1] == [d for d in value.shape if d != 1]:
                value = value.reshape(target.shape)
            else:
                problems.append(f"{name}: shape {tuple(value.shape)} in PyTorch, {tuple(target.shape)} at {path}")
                continue
        getters.append(get)
        values.append(jnp.asarray(value, dtype=target.dtype))
        written.add(path)
    if getters:
        model = eqx.tree_at(lambda m: tuple(g(m) for g in getters), model, tuple(values))
    leaves = jax.tree_util.tree_flatten_with_path(eqx.filter(model, eqx.is_inexact_array))[0]
    for path, _ in leaves:
        p = jax.tree_util.keystr(path)
        if p not in written:
            problems.append(f"{p}: an array of the translated model that no PyTorch state entry writes")
    return model, problems


def untied(model, state: dict, tied: dict, eqx) -> dict:
    """The state without the second name of a tied parameter (``tied``: name → the first name it shares its
    array with, from the torch side) where the translation keeps the array at the other name only (one array
    used in both places: torch2jax's tying.py)."""
    drop = set()
    for alias, first in tied.items():
        here = locate(model, alias, eqx) is not None, locate(model, first, eqx) is not None
        if here == (False, True):
            drop.add(alias)
        elif here == (True, False):
            drop.add(first)
    return {k: v for k, v in state.items() if k not in drop}


def load_all(model, layer_state, state: dict, modules: dict, eqx, jnp):
    """A torch state_dict (numpy arrays by name) into the model and its layer state: (model, state, problems)."""
    model, problems = load_state(model, state, eqx, jnp, modules)
    layer_state, more = load_running_stats(model, layer_state, state, eqx, jnp)
    return model, layer_state, problems + more


def leaves_of(model, layer_state):
    """What a translated program serialises and reads back: ``(model, state)`` for a model that keeps a
    layer state (the translation of torch.save(model.state_dict(), f)), else the model."""
    return model if layer_state is None else (model, layer_state)


def read_leaves(path: str, model, layer_state, eqx):
    try:
        got = eqx.tree_deserialise_leaves(path, leaves_of(model, layer_state))
    except Exception as e:
        raise UserError(f"{path}: cannot be read into the translated model ({type(e).__name__}: {str(e)[:300]})") from None
    return (got, None) if layer_state is None else got


def save(req: dict) -> dict:
    """``fwport weights model.pt --to model.eqx``: the translated model built, the torch state_dict moved
    into it by name (Equinox's layouts), then eqx.tree_serialise_leaves to a temporary file beside the
    destination, renamed over it only once complete."""
    _setup(req["dtype"], req["device"])
    import tempfile

    import equinox as eqx
    import jax
    import jax.numpy as jnp

    ns, _ = load_source(req["source"], "__fwport_translated__", req.get("load", "auto"), req.get("model"), req.get("define"))
    model, layer_state = _build(ns, req, jax.random.key(req["seed"]), eqx)
    with np.load(req["torch"]) as z:
        state = {k[2:]: z[k] for k in z.files if k.startswith("w:")}
    state = untied(model, state, req.get("tied", {}), eqx)
    model, layer_state, problems = load_all(model, layer_state, state, req.get("modules", {}), eqx, jnp)
    if problems:
        return {"problems": problems, "versions": _versions()}
    dest = os.path.realpath(req["to"])
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=f".{os.path.basename(dest)}.", suffix=".fwport-tmp")
    os.close(fd)
    try:
        eqx.tree_serialise_leaves(tmp, leaves_of(model, layer_state))
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    n = len(jax.tree_util.tree_leaves(eqx.filter(leaves_of(model, layer_state), eqx.is_array)))
    return {"problems": [], "arrays": n, "stateful": layer_state is not None, "versions": _versions()}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def run(req: dict) -> dict:
    _setup(req["dtype"], req["device"])
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    ns, note = load_source(req["source"], "__fwport_translated__", req.get("load", "auto"), req.get("model"), req.get("define"))
    key = jax.random.key(req["seed"])

    model, layer_state = _build(ns, req, key, eqx)
    with np.load(req["torch"]) as z:
        T = {k: z[k] for k in z.files}
    state = untied(model, {k[2:]: v for k, v in T.items() if k.startswith("w:")}, req.get("tied", {}), eqx)
    modules = req.get("modules", {})
    if req.get("eqx"):  # the file `fwport weights --to model.eqx` wrote, read as a translated program reads it
        model, layer_state = read_leaves(req["eqx"], model, layer_state, eqx)
        problems = []
    else:
        model, layer_state, problems = load_all(model, layer_state, state, modules, eqx, jnp)
    if problems:
        return {"problems": problems, "versions": _versions(), "device": str(jax.devices()[0]), "loaded": note}
    model = eqx.nn.inference_mode(model)
    with np.load(req["inputs"]) as z:
        xs = [jnp.asarray(z[f"x{i}"]) for i in range(len(z.files))]
    n_out = len([k for k in T if k.startswith("out")])
    R = [jnp.asarray(T[f"R{i}"], dtype=jnp.float64 if req["dtype"] == "float64" else jnp.float32) for i in range(n_out)]

    axis = req.get("batch_axis", 0)
    whole = axis is None  # the model takes the inputs whole (a graph): no jax.vmap
    in_axes = tuple(axis) if isinstance(axis, list) else (axis,) * len(xs)
    # where each output holds the batch axis (the torch side's probe): "merged:a" is vmapped out at a + 1, then axes
    # a and a + 1 reshaped into one, as PyTorch's view(-1, ...) made them; "grouped:a" (the examples the outer factor
    # of axis a: (N * L, V)) is vmapped out at a, then the same two axes reshaped into one
    outs = req.get("out_axes")
    out_at = [int(o.split(":")[1]) + (o.startswith("merged") and 1) if isinstance(o, str) else o for o in outs] \
        if outs else None

    def joined(out):  # the vmapped outputs with the batch axis merged into its neighbour where PyTorch's view did
        return [o.reshape(*o.shape[:int(spec.split(":")[1])], -1, *o.shape[int(spec.split(":")[1]) + 2:])
                if isinstance(spec, str) else o for o, spec in zip(out, outs)]
    first = next((i for i, a in enumerate(in_axes) if a is not None), 0)
    n = xs[first].shape[in_axes[first] or 0] if xs and xs[first].ndim else 1
    keyed = _takes_key(model)  # a forward drawing random numbers (or a dropout) takes key=: one per example
    kw = {"key": jax.random.key(req["seed"] + 3) if whole else jax.random.split(jax.random.key(req["seed"] + 3), n)} \
        if keyed else {}

    def flat(out):
        return [o for o in jax.tree_util.tree_leaves(out) if o is not None] if isinstance(out, (tuple, list)) else [out]

    def forward(m, *inputs):
        if whole:
            out = m(*inputs, **kw) if layer_state is None else m(*inputs, layer_state, **kw)[0]
        elif out_at is not None:  # the outputs' axes, one per output as torch's side flattens them
            def one(*a, **k):
                y = m(*a, **k) if layer_state is None else m(*a, layer_state, **k)[0]
                return tuple(flat(y))
            out = joined(jax.vmap(one, in_axes=in_axes, out_axes=tuple(out_at), axis_name="batch")(*inputs, **kw))
        elif layer_state is None:
            out = jax.vmap(m, in_axes=in_axes)(*inputs, **kw) if any(a != 0 for a in in_axes) else \
                jax.vmap(m)(*inputs, **kw)
        else:  # the state is shared by the batch: in_axes None for it, and it comes back once
            out, _ = jax.vmap(m, axis_name="batch", in_axes=in_axes + (None,),
                              out_axes=(0, None))(*inputs, layer_state, **kw)
        return [o for o in out if o is not None] if isinstance(out, (tuple, list)) else [out]  # as torch's side

    def forward_state(m, st, *inputs):
        """The outputs as ``forward``'s, and the layer state after the call (None for a model without one)."""
        def one(*a, **k):
            y, s = (m(*a, **k), None) if st is None else m(*a, st, **k)
            return tuple(flat(y)), s
        if whole:
            out, new = one(*inputs, **kw)
        else:
            out, new = jax.vmap(one, in_axes=in_axes, out_axes=(tuple(out_at) if out_at is not None else 0, None),
                                axis_name="batch")(*inputs, **kw)
            if out_at is not None:
                out = joined(out)
        return [o for o in out if o is not None], new

    def step() -> dict:
        return _sgd_step(req, model, layer_state, forward_state, xs, R, state, modules, T, jax, jnp, eqx)

    with ConstantDraws(jax, jnp) if req.get("constant_draws") else _nothing():
        return _forward_and_grads(req, model, forward, xs, R, state, modules, T, note, jax, jnp, eqx,
                                  step if "step" in req["checks"] else None)


def _takes_key(model) -> bool:
    try:
        return "key" in inspect.signature(type(model).__call__).parameters
    except (TypeError, ValueError):
        return False


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


class ConstantDraws:
    """While active, jax.random.normal gives 0.5 and jax.random.uniform the middle of its range, as the
    torch side's ConstantDraws makes torch's draws (a stochastic forward: the deterministic path and the
    path scaling the noise compared). Attributes of jax.random (what ``jax.random.normal(key, ...)`` looks up
    at each call), restored on exit."""

    def __init__(self, jax, jnp):
        self.jax, self.jnp = jax, jnp

    def __enter__(self):
        jnp, random = self.jnp, self.jax.random
        self.saved = {n: getattr(random, n) for n in ("normal", "uniform")}

        def normal(key, shape=(), dtype=float, *a, **k):
            return jnp.full(shape, 0.5, dtype=dtype)

        def uniform(key, shape=(), dtype=float, minval=0.0, maxval=1.0):
            middle = jnp.asarray(minval) + 0.5 * (jnp.asarray(maxval) - jnp.asarray(minval))
            return jnp.broadcast_to(middle, shape).astype(dtype)

        random.normal, random.uniform = normal, uniform
        return self

    def __exit__(self, *exc):
        for n, f in self.saved.items():
            setattr(self.jax.random, n, f)


def _dropouts_off(model, eqx, jax):
    """The model with every eqx.nn.Dropout in inference mode (as the torch side's dropout layers in eval mode)."""
    def is_dropout(x):
        return isinstance(x, eqx.nn.Dropout)

    def where(m):
        return [x for x in jax.tree_util.tree_leaves(m, is_leaf=is_dropout) if is_dropout(x)]

    found = where(model)
    return eqx.tree_at(where, model, [eqx.nn.Dropout(d.p, inference=True) for d in found]) if found else model


def stepped_arrays(model, state: dict, modules: dict, T: dict, eqx) -> dict:
    """The arrays of a trained or stepped ``model`` under PyTorch's names (``s:NAME``), for each name of the torch
    ``state`` the torch side wrote a trained value of (``T``) and that one Equinox array (or several, combined) holds
    exactly: a bias that is the sum of PyTorch's two has no trained value of its own to compare."""
    save = {}
    _, maps, exact = plan(state, modules)
    for name in state:
        if name not in exact or f"s:{name}" not in T:
            continue
        targets, combine = maps[name]
        found = [locate(model, t, eqx) for t in targets]
        if all(f is not None for f in found):
            save[f"s:{name}"] = np.asarray(combine([np.asarray(f[2]) for f in found])).reshape(T[f"s:{name}"].shape)
    return save


def _sgd_step(req, model, layer_state, forward_state, xs, R, state, modules, T, jax, jnp, eqx) -> dict:
    """``--check step``: one optax.sgd(lr) step on ``sum(out * R)`` in the torch side's mode (``req["step_mode"]``:
    training mode with dropouts off, or inference mode), the layer state threaded. Returns the arrays to save:
    the parameters after the step under PyTorch's names (``s:NAME``, where a torch array maps to one Equinox
    array exactly) and each BatchNorm's running mean (``s:``) and Equinox's own running variance (``bnvar:``)."""
    import optax
    m = model
    if req["step_mode"] == "train":
        m = _dropouts_off(eqx.nn.inference_mode(model, value=False), eqx, jax)
    params, static = eqx.partition(m, eqx.is_inexact_array)

    def loss(p):
        outs, new = forward_state(eqx.combine(p, static), layer_state, *xs)
        return sum(jnp.sum(o * r) for o, r in zip(outs, R) if jnp.issubdtype(o.dtype, jnp.floating)), new

    grads, new_state = jax.grad(loss, has_aux=True)(params)
    opt = optax.sgd(req["lr"])
    updates, _ = opt.update(grads, opt.init(params), params)
    stepped = eqx.apply_updates(m, updates)
    save = stepped_arrays(stepped, state, modules, T, eqx)
    for prefix in sorted({n.rsplit(".", 1)[0] for n in state if n.rsplit(".", 1)[-1] in RUNNING}):
        found = locate(stepped, prefix, eqx)
        bn = found[2] if found else None
        if new_state is None or getattr(bn, "batch_state_index", None) is None:
            continue  # no mode="batch" BatchNorm there: the comparison reports the running statistics missing
        mean, var = new_state.get(bn.batch_state_index)
        save[f"s:{prefix}.running_mean"] = np.asarray(mean)
        save[f"bnvar:{prefix}"] = np.asarray(var)
    return save


def _forward_and_grads(req, model, forward, xs, R, state, modules, T, note, jax, jnp, eqx, step=None) -> dict:
    out = forward(model, *xs)
    save = {f"out{i}": np.asarray(o) for i, o in enumerate(out)}
    if "grad" in req["checks"]:
        floats = [i for i, x in enumerate(xs) if jnp.issubdtype(x.dtype, jnp.floating)]

        def loss(params, static, fx):
            inputs = list(xs)
            for i, x in zip(floats, fx):
                inputs[i] = x
            outs = forward(eqx.combine(params, static), *inputs)
            return sum(jnp.sum(o * r) for o, r in zip(outs, R) if jnp.issubdtype(o.dtype, jnp.floating))

        params, static = eqx.partition(model, eqx.is_inexact_array)
        g_params, g_x = jax.grad(loss, argnums=(0, 2))(params, static, [xs[i] for i in floats])
        grads = plan(state, modules)[1]
        for name in state:
            if name not in grads:
                continue
            targets, combine = grads[name]
            found = [locate(model, t, eqx) for t in targets]
            if any(f is None for f in found):  # a buffer kept in the layer state (running statistics)
                continue
            gs = [f[0](g_params) for f in found]
            if all(g is not None for g in gs):
                save[f"g:{name}"] = np.asarray(combine([np.asarray(g) for g in gs])).reshape(T[f"w:{name}"].shape)
        for alias, first in req.get("tied", {}).items():  # torch's gradient is under the first name
            if f"g:{alias}" in save and f"g:{first}" not in save:
                save[f"g:{first}"] = save[f"g:{alias}"]
        for i, g in zip(floats, g_x):
            save[f"gx{i}"] = np.asarray(g)
    if step is not None:
        save.update(step())
    np.savez(req["out"], **save)
    return {"outputs": len(out), "versions": _versions(), "device": str(jax.devices()[0]), "problems": [],
            "loaded": note}


def _build(ns: dict, req: dict, key, eqx):
    """The translated model and its layer state (or None). ``--model`` names a class (called with ``key=``
    when it takes one), a builder function (likewise) or a model object, or is a call expression
    (``ResNet(Block, [2, 2])``: ``key=`` added the same way). A model whose ``__call__`` takes a state gets
    one as eqx.nn.make_with_state makes it (the built model's eqx.nn.State, its initial values then
    deleted from the model), so a builder function stays a plain function returning the model; a builder
    that returns ``(model, state)`` itself is taken as it is."""
    call = model_call(ns, req["model"])
    if call is None:
        obj = ns.get(req["model"])
        if isinstance(obj, eqx.Module):
            return obj, None
        if obj is None or not callable(obj):
            build_object(ns, req["model"], req["args"], lambda o: isinstance(o, eqx.Module))  # raises the usage error
        pos, kw = [], {}
    else:
        obj, pos, kw = call
    kw = {**kw, **req["args"]}
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        params = {}
    built = obj(*pos, **kw, key=key) if "key" in params and "key" not in kw else obj(*pos, **kw)
    if isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], eqx.Module) \
            and isinstance(built[1], eqx.nn.State):
        return built
    if not isinstance(built, eqx.Module):
        raise UserError(f"{req['model']!r} gave a {type(built).__name__}, not an eqx.Module")
    call_fn = getattr(type(built), "__call__", None)
    try:
        stateful = call_fn is not None and "state" in inspect.signature(call_fn).parameters
    except (TypeError, ValueError):
        stateful = False
    if not stateful:
        return built, None
    return eqx.nn.delete_init_state(built), eqx.nn.State(built)


def train(req: dict) -> dict:
    """The translated training function on the model holding the original's initial state; writes
    the trained parameters under the original's names (``s:``) and the losses it returns."""
    _setup(req["dtype"], req["device"])
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    ns, _ = load_source(req["source"], "__fwport_translated__", req.get("load", "auto"), req.get("model"), req.get("define"))
    if req["train"] not in ns:
        raise UserError(f"{req['train']!r} is missing from {req['source']}")
    model, _ = _build(ns, req, jax.random.key(req["seed"]), eqx)
    with np.load(req["torch"]) as z:
        T = {k: z[k] for k in z.files}
    state = untied(model, {k[2:]: v for k, v in T.items() if k.startswith("w:")}, req.get("tied", {}), eqx)
    model, problems = load_state(model, state, eqx, jnp, req.get("modules", {}))
    if problems:
        return {"problems": problems, "versions": _versions(), "device": str(jax.devices()[0])}
    with np.load(req["inputs"]) as z:
        xs = [jnp.asarray(z[f"x{i}"]) for i in range(len(z.files))]
    result = ns[req["train"]](model, *xs, **req.get("train_args", {}))
    items = result if isinstance(result, (tuple, list)) else [result]
    trained = next((o for o in items if isinstance(o, eqx.Module)), None)
    if trained is None:
        raise UserError(f"{req['train']} returns no eqx.Module: a JAX training function must return the trained model")
    save = stepped_arrays(trained, state, req.get("modules", {}), T, eqx)
    losses = [o for o in items if isinstance(o, list)]
    if losses:
        save["losses"] = np.asarray([float(v) for v in losses[0]], dtype=np.float64)
    np.savez(req["out"], **save)
    return {"versions": _versions(), "device": str(jax.devices()[0]), "problems": []}


def _versions() -> dict:
    import equinox
    import jax
    return {"jax": jax.__version__, "equinox": equinox.__version__}


def handle(req: dict) -> dict:
    if req["op"] == "run":
        return run(req)
    if req["op"] == "train":
        return train(req)
    if req["op"] == "save":
        return save(req)
    raise UserError(f"unknown request {req['op']!r}")


if __name__ == "__main__":
    serve(handle)
