"""The PyTorch subprocess of ``fwport verify`` for torch → JAX: the *original* program. Imports
torch, never JAX.

``run`` executes the original file, builds the model (seeded), and writes to an ``.npz``: its
state (``w:NAME``, the state_dict the JAX side loads by name), outputs in eval mode (``outN``),
the cotangents of the scalar loss ``sum(out * R)`` (``RN``, drawn here once the output shapes are
known), the gradients of that loss with respect to every parameter (``g:NAME``) and float input
(``gxN``), and with ``--check step`` the state after one torch.optim.SGD step on it (``s:NAME``).
"""
from __future__ import annotations

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _worker_io import UserError, build_object, load_source, serve  # noqa: E402
from torch_draws import ConstantDraws  # noqa: E402

try:  # reduced-precision float32 matmuls/convolutions off
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    torch.backends.cudnn.conv.fp32_precision = "ieee"
except AttributeError:  # torch < 2.9
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

SKIP_BUFFERS = ("num_batches_tracked",)


def _flatten(out) -> list:
    if isinstance(out, dict):
        return [x for k in sorted(out) for x in _flatten(out[k])]
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in _flatten(o)]
    return [out]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().copy()


def _expose_norm_statistics(model, seed: int) -> None:
    """Normalisation layers start as the identity (mean 0, var 1, scale 1, shift 0), which hides a
    statistic or an affine parameter that is not carried over: give them seeded non-trivial values."""
    g = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(getattr(m, "running_mean", None), torch.Tensor) and isinstance(getattr(m, "running_var", None), torch.Tensor):
                m.running_mean.copy_(0.5 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(0.5 + 1.5 * torch.rand(m.running_var.shape, generator=g))
                if getattr(m, "weight", None) is not None:
                    m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))
                if getattr(m, "bias", None) is not None:
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))


def _tied(model) -> dict:
    """state_dict names of a parameter an earlier name already holds (weight tying, ``a.weight = b.weight``):
    that name → the first, which ``named_parameters`` (and so the gradients) use. The JAX side keeps one array."""
    first, tied = {}, {}
    for name, t in model.state_dict(keep_vars=True).items():
        if id(t) in first:
            tied[name] = first[id(t)]
        else:
            first[id(t)] = name
    return tied


def _mapped_modules(model) -> dict:
    """The modules whose parameters the JAX side moves by a map (eqx_layouts.MAPPED): name → their class
    and the attributes the map needs."""
    from eqx_layouts import MAPPED
    out = {}
    for name, m in model.named_modules():
        cls = type(m)
        q = f"torch.nn.{cls.__name__}"
        if q in MAPPED and getattr(torch.nn, cls.__name__, None) is cls:
            out[name] = {"class": q, **({"groups": int(m.groups)} if hasattr(m, "groups") else {})}
    return out


def read_checkpoint(path: str) -> dict:
    """A state_dict saved with ``torch.save(model.state_dict(), path)`` (or a .safetensors file, or the
    verifier's .npz of arrays): name → array."""
    if path.endswith(".npz"):
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    if path.endswith(".safetensors"):
        from safetensors.numpy import load_file
        return dict(load_file(path))
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise UserError(f"{path}: not a PyTorch checkpoint torch.load can read with weights_only=True "
                        f"({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        nested = [k for k, v in sd.items() if isinstance(v, dict)] if isinstance(sd, dict) else []
        hint = f" (it holds {', '.join(map(repr, nested[:4]))}: save checkpoint[{nested[0]!r}] alone)" if nested else ""
        raise UserError(f"{path}: not a state_dict (a dict of tensors, what torch.save(model.state_dict(), f) "
                        f"writes){hint}")
    return {k: _np(v) for k, v in sd.items()}


def load_checkpoint(model, state: dict, path: str) -> None:
    """Write ``state`` into the built model, by name: every parameter and buffer named once, with the
    module's shape (BatchNorm's num_batches_tracked may be absent). Raises UserError naming what differs."""
    own = model.state_dict()
    missing = [k for k in own if k not in state and k.rsplit(".", 1)[-1] not in SKIP_BUFFERS]
    extra = [k for k in state if k not in own]
    shapes = [f"{k}: {tuple(state[k].shape)} in the checkpoint, {tuple(own[k].shape)} in the model"
              for k in own if k in state and tuple(state[k].shape) != tuple(own[k].shape)]
    if missing or extra or shapes:
        parts = ([f"missing from the checkpoint: {', '.join(missing)}"] if missing else []) + \
                ([f"not in the model: {', '.join(extra)}"] if extra else []) + \
                ([f"shape mismatch: {'; '.join(shapes)}"] if shapes else [])
        raise UserError(f"{path} does not fit the model built from the source: " + " | ".join(parts)
                        + " (check --model and --args)")
    with torch.no_grad():
        for k, t in own.items():
            if k in state:
                t.copy_(torch.from_numpy(np.asarray(state[k])).to(t.device, t.dtype))


def _built(req: dict):
    dtype = {"float32": torch.float32, "float64": torch.float64}[req["dtype"]]
    device = torch.device("cuda" if req["device"] in ("auto", "cuda") and torch.cuda.is_available() else "cpu")
    ns, note = load_source(req["source"], "__fwport_original__", req.get("load", "auto"), req.get("model"), req.get("define"))
    torch.manual_seed(req["seed"])
    model = build_object(ns, req["model"], req["args"], lambda o: isinstance(o, torch.nn.Module))
    if not isinstance(model, torch.nn.Module):
        raise UserError(f"{req['model']!r} gave a {type(model).__name__}, not a torch.nn.Module")
    model = model.to(device=device, dtype=dtype).eval()
    if req.get("weights"):  # a checkpoint (fwport weights), or the state Keras's weights became (tf2jax)
        load_checkpoint(model, read_checkpoint(req["weights"]), req["weights"])
    else:
        _expose_norm_statistics(model, req["seed"])
    return model, dtype, device, note


def state(req: dict) -> dict:
    """The built model holding a checkpoint: its state (``w:NAME``) and mapped modules, for the JAX side."""
    model, _, _, note = _built(req)
    np.savez(req["out"], **{f"w:{k}": _np(v) for k, v in model.state_dict().items()
                            if k.rsplit(".", 1)[-1] not in SKIP_BUFFERS})
    return {"versions": {"torch": torch.__version__}, "modules": _mapped_modules(model), "tied": _tied(model), "loaded": note}


def _outputs(model, xs) -> list:
    with torch.no_grad():
        return [o for o in _flatten(model(*xs)) if torch.is_tensor(o)]


def _close(a: list, b: list, rtol: float = 1e-6) -> bool:
    """Two lists of outputs equal up to rounding (relative to each tensor's largest value)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return False
        if not x.numel():
            continue
        if not x.is_floating_point():
            if not torch.equal(x, y):
                return False
        elif not torch.allclose(x, y, rtol=0.0, atol=rtol * max(1.0, float(torch.nan_to_num(x).abs().max())),
                                equal_nan=True):
            return False
    return True


def stochastic(model, xs, seed: int) -> bool:
    """Whether the model's forward (in eval mode) draws random numbers: two runs under different seeds of
    PyTorch's global generator give different outputs."""
    torch.manual_seed(seed + 101)
    a = _outputs(model, xs)
    torch.manual_seed(seed + 202)
    return not _close(a, _outputs(model, xs))


def batch_axis(model, xs, option: str) -> tuple[object, str, list | None]:
    """Where each input and output holds the batch axis, as the JAX side's jax.vmap needs it: (in_axes, why,
    out_axes). in_axes: one axis for every input (0: the JAX model is vmapped over the first axis), a list of one per
    input (None: an input every example shares), or None (the model takes its inputs whole: a graph's nodes mix
    through its adjacency matrix). out_axes: one per output, an axis or ``"merged:a"`` (PyTorch's view put the
    examples inside axis a as its inner factor: ``(L, N, V).view(-1, V)``) or ``"grouped:a"`` (as its outer factor:
    ``(N, L, V).view(N * L, V)``), or None (each at the inputs' axis).

    ``--batch-axis 0`` / ``1`` / ``none`` / a list (``0,0,none,0``) give the inputs'; ``auto`` probes the original:
    every input split on axis 0 (then axis 1: PyTorch's sequence layers take (L, N, ...)) into two halves, whose
    outputs must give the whole batch's along some axis of each output (which gives out_axes)."""
    if option == "none":
        return None, "--batch-axis none", None
    if option != "auto":
        parts = [None if p.strip() == "none" else int(p) for p in option.split(",")]
        in_axes = parts * len(xs) if len(parts) == 1 else parts
        if len(in_axes) != len(xs):
            raise UserError(f"--batch-axis {option}: {len(parts)} axes for {len(xs)} inputs (give one, or one per input)")
        found = _probe(model, xs, in_axes)
        axis = in_axes[0] if len(set(in_axes)) == 1 else in_axes
        if isinstance(found, tuple):
            return axis, f"--batch-axis {option}; " + found[1], found[0]
        return axis, f"--batch-axis {option}" + (f" (the outputs' axes not probed: {found})" if found else ""), None
    tried = []
    for candidate in (0, 1):
        found = _probe(model, xs, [candidate] * len(xs))
        if isinstance(found, tuple):
            if candidate == 0 and all(a == 0 for a in found[0]):
                return 0, "probe: the halves of the batch give the whole batch's rows", None
            return candidate, f"probe: the halves of the batch (inputs split on axis {candidate}) {found[1]}", found[0]
        tried.append(found)
        if found not in ("no-common-axis", "mix"):
            break  # (axis 1 is tried where axis 0 cannot be split, or mixes the examples)
    if tried[-1] == "no-common-axis" and 1 < len(xs) <= 6:  # inputs at different axes: (L, N, E) with a mask (N, L)
        import itertools
        for combo in itertools.product((0, 1), repeat=len(xs)):
            if len(set(combo)) == 1:
                continue
            found = _probe(model, xs, list(combo))
            if isinstance(found, tuple):
                return list(combo), (f"probe: the halves of the batch (inputs split on axes {', '.join(map(str, combo))}) "
                                     f"{found[1]}"), found[0]
    if tried[0] == "mix":
        return None, "probe: the halves of the batch give other values than the whole batch (rows mix)", None
    if isinstance(tried[0], str) and tried[0].startswith("fails"):
        return None, f"probe: the first half of the batch {tried[0]}", None
    if tried[0] == "no-axis-out":
        return 0, "assumed (an output has no first axis of the inputs' length to compare)", None
    return 0, "assumed (the inputs have no common first axis of 2 or more to split)", None


def _probe(model, xs, in_axes: list):
    """(out_axes, how) where splitting each input on its axis in ``in_axes`` gives outputs that join into the whole
    batch's along one axis each; else why not: "no-common-axis", "no-axis-out", "mix", "fails ...". """
    sizes = {x.shape[a] for x, a in zip(xs, in_axes) if a is not None and x.dim() > a}
    if len(sizes) != 1 or any(a is not None and x.dim() <= a for x, a in zip(xs, in_axes)) or min(sizes) < 2:
        return "no-common-axis"
    n = sizes.pop()
    whole = _outputs(model, xs)
    if not all(o.dim() and any(s % n == 0 for s in o.shape) for o in whole):
        return "no-axis-out"
    try:
        halves = [_outputs(model, [x if a is None else x.narrow(a, start, size) for x, a in zip(xs, in_axes)])
                  for start, size in ((0, n // 2), (n // 2, n - n // 2))]
    except Exception as e:  # noqa: BLE001 (a model of the whole graph fails on part of it)
        return f"fails alone ({type(e).__name__}: {str(e)[:120]})"
    if not all(len(h) == len(whole) for h in halves):
        return "mix"
    out_axes, merged = [], False
    for j, o in enumerate(whole):
        parts = [h[j] for h in halves]
        axis = next((a for a in range(o.dim()) if o.shape[a] == n and all(p.dim() == o.dim() for p in parts)
                     and _close([o], [torch.cat(parts, a)], 1e-4)), None)
        if axis is None:  # the examples merged into an axis as its inner factor: (L * N, V)
            for a in range(o.dim()):
                k = o.shape[a] // n
                if o.shape[a] % n or k < 2 or any(p.dim() != o.dim() or p.shape[a] % k for p in parts):
                    continue
                split = [p.reshape(*p.shape[:a], k, p.shape[a] // k, *p.shape[a + 1:]) for p in parts]
                if _close([o.reshape(*o.shape[:a], k, n, *o.shape[a + 1:])], [torch.cat(split, a + 1)], 1e-4):
                    axis, merged = f"merged:{a}", True
                    break
                if [p.shape[a] for p in parts] == [(n // 2) * k, (n - n // 2) * k] \
                        and _close([o], [torch.cat(parts, a)], 1e-4):  # the outer factor: (N * L, V)
                    axis, merged = f"grouped:{a}", True
                    break
        if axis is None:
            return "mix"
        out_axes.append(axis)
    how = "give the whole batch's along the outputs' axes " + ", ".join(map(str, out_axes)) + \
        (" (merged:a / grouped:a: the examples are the inner / outer factor of axis a, as PyTorch's view made it)"
         if merged else "")
    return out_axes, how


def run(req: dict) -> dict:
    model, dtype, device, note = _built(req)
    with np.load(req["inputs"]) as z:
        arrays = [z[f"x{i}"] for i in range(len(z.files))]
    xs = []
    for a in arrays:
        t = torch.from_numpy(a).to(device)
        xs.append(t.to(dtype).requires_grad_(True) if t.is_floating_point() else t)
    random = stochastic(model, xs, req["seed"])
    with contextlib.ExitStack() as stack:
        if random:  # compare the deterministic path and the noise scale path: the draws are constants
            stack.enter_context(ConstantDraws())
            if stochastic(model, xs, req["seed"]):
                raise UserError("the forward draws random numbers in eval mode, and still does with normal and "
                                "uniform draws made constant (randint, randperm, bernoulli, multinomial, or a draw "
                                "not through the torch module's attributes): the outputs cannot be compared")
        axis, why, out_axes = batch_axis(model, xs, req.get("batch_axis", "auto"))
        return _run(req, model, dtype, device, note, xs, random, axis, why, out_axes)


def _run(req, model, dtype, device, note, xs, random, axis, why, out_axes=None) -> dict:
    out = [o for o in _flatten(model(*xs)) if torch.is_tensor(o)]
    rng = np.random.default_rng(req["seed"] + 1)
    R = [rng.standard_normal(tuple(o.shape)) for o in out]
    save = {f"out{i}": _np(o) for i, o in enumerate(out)}
    save.update({f"R{i}": r for i, r in enumerate(R)})
    state = model.state_dict()
    save.update({f"w:{k}": _np(v) for k, v in state.items() if k.rsplit(".", 1)[-1] not in SKIP_BUFFERS})
    if "grad" in req["checks"]:
        loss = sum((o.to(dtype) * torch.as_tensor(r, dtype=dtype, device=device)).sum()
                   for o, r in zip(out, R) if o.is_floating_point())
        loss.backward()
        for name, p in model.named_parameters():
            if p.grad is not None:
                save[f"g:{name}"] = _np(p.grad)
        for i, x in enumerate(xs):
            if x.is_floating_point() and x.grad is not None:
                save[f"gx{i}"] = _np(x.grad)
    step = _sgd_step(req, model, xs, R, dtype, device, save) if "step" in req["checks"] else None
    np.savez(req["out"], **save)
    return {"outputs": len(out), "versions": {"torch": torch.__version__}, "device": str(device),
            **({"step": step} if step is not None else {}),
            "trainable": [n for n, p in model.named_parameters() if p.requires_grad], "modules": _mapped_modules(model),
            "tied": _tied(model), "loaded": note, "stochastic": random, "batch_axis": axis, "batch_axis_why": why,
            **({"out_axes": out_axes} if out_axes is not None else {})}


def _train_mode(model) -> None:
    """Training mode with the dropout layers in eval mode: their draws cannot be matched across frameworks."""
    model.train()
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.eval()


def _sgd_step(req, model, xs, R, dtype, device, save: dict) -> dict:
    """``--check step``: one torch.optim.SGD(lr) step on the loss ``sum(out * R)`` from the loaded state, in training
    mode (BatchNorm normalises with the batch's statistics and updates its running ones; dropout layers in eval
    mode), or in eval mode where the training-mode forward still draws random numbers (functional dropout, noise).
    Writes the state after the step (``s:NAME``); returns the mode, why, and per BatchNorm its momentum and the
    values per channel it averaged (the verifier turns Equinox's biased running variance into PyTorch's unbiased
    one with them)."""
    import copy
    xs = [x.detach() for x in xs]
    before = copy.deepcopy(model.state_dict())
    _train_mode(model)
    mode, why = "train", "training mode: BatchNorm on the batch's statistics; dropout layers in eval mode"
    torch.manual_seed(req["seed"] + 303)
    a = _outputs(model, xs)
    torch.manual_seed(req["seed"] + 404)
    b = _outputs(model, xs)
    model.load_state_dict(before)  # the two probes updated BatchNorm's running statistics
    if not _close(a, b):
        model.eval()
        mode, why = "eval", ("eval mode: the training-mode forward draws random numbers (functional dropout or "
                             "noise) that cannot be matched")
    norms = {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
             and m.track_running_stats and m.momentum is not None}
    counts: dict[str, int] = {}
    hooks = [m.register_forward_pre_hook(lambda mod, inp, name=name: counts.__setitem__(
        name, inp[0].numel() // inp[0].shape[1])) for name, m in norms.items()]
    opt = torch.optim.SGD(model.parameters(), lr=req["lr"])
    opt.zero_grad(set_to_none=True)
    out = [o for o in _flatten(model(*xs)) if torch.is_tensor(o)]
    for h in hooks:
        h.remove()
    if [tuple(o.shape) for o in out] != [tuple(r.shape) for r in R]:
        raise UserError("--check step: the outputs in training mode have other shapes than in eval mode "
                        f"({[tuple(o.shape) for o in out]} against {[tuple(r.shape) for r in R]})")
    loss = sum((o.to(dtype) * torch.as_tensor(r, dtype=dtype, device=device)).sum()
               for o, r in zip(out, R) if o.is_floating_point())
    loss.backward()
    opt.step()
    model.eval()
    save.update({f"s:{k}": _np(v) for k, v in model.state_dict().items() if k.rsplit(".", 1)[-1] not in SKIP_BUFFERS})
    return {"mode": mode, "why": why, "lr": req["lr"],
            "batchnorm": {name: {"momentum": float(m.momentum), "n": counts[name]} for name, m in norms.items()
                          if name in counts and mode == "train"}}


def train(req: dict) -> dict:
    """Run the original's training function on the built model: ``fn(model, *inputs, **train_args)``;
    writes the initial state (``w:``), the trained parameters (``s:``) and the losses it returns."""
    ns, note = load_source(req["source"], "__fwport_original__", req.get("load", "auto"), req.get("model"), req.get("define"))
    torch.manual_seed(req["seed"])
    model = build_object(ns, req["model"], req["args"], lambda o: isinstance(o, torch.nn.Module))
    if req["train"] not in ns:
        raise UserError(f"no training function {req['train']!r} in {req['source']}")
    dtype = {"float32": torch.float32, "float64": torch.float64}[req["dtype"]]
    model = model.to(dtype=dtype)
    save = {f"w:{k}": _np(v) for k, v in model.state_dict().items() if k.rsplit(".", 1)[-1] not in SKIP_BUFFERS}
    with np.load(req["inputs"]) as z:
        xs = [torch.from_numpy(z[f"x{i}"]) for i in range(len(z.files))]
    xs = [x.to(dtype) if x.is_floating_point() else x for x in xs]
    result = ns[req["train"]](model, *xs, **req.get("train_args", {}))
    trained = next((o for o in (result if isinstance(result, (tuple, list)) else [result])
                    if isinstance(o, torch.nn.Module)), model)
    save.update({f"s:{n}": _np(p) for n, p in trained.named_parameters()})
    losses = [o for o in (result if isinstance(result, (tuple, list)) else [result]) if isinstance(o, list)]
    if losses:
        save["losses"] = np.asarray(losses[0], dtype=np.float64)
    np.savez(req["out"], **save)
    return {"versions": {"torch": torch.__version__}, "device": "cpu", "modules": _mapped_modules(model), "tied": _tied(model), "loaded": note}


def handle(req: dict) -> dict:
    if req["op"] == "run":
        return run(req)
    if req["op"] == "train":
        return train(req)
    if req["op"] == "state":
        return state(req)
    raise UserError(f"unknown request {req['op']!r}")


if __name__ == "__main__":
    serve(handle)
