"""The PyTorch subprocess of ``fwport verify`` / ``fwport weights``. Imports torch, never TensorFlow.

``build`` executes the translated file and constructs the model (lazy modules are materialised by
one forward pass) and reports its state names; ``run`` loads the transferred state, checking that
every parameter and buffer is written, and writes outputs, gradients, per-module activations and
the state after one plain SGD step to an ``.npz``.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from _worker_io import UserError, build_object, load_source, serve  # noqa: E402
from torch_draws import ConstantDraws  # noqa: E402

# reduced-precision float32 matmuls/convolutions off (cuDNN convolutions default to TF32)
try:
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    torch.backends.cudnn.conv.fp32_precision = "ieee"
except AttributeError:  # torch < 2.9
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cudnn.benchmark = False

class _BlockSourceFrameworks:
    """The translated program must run without TensorFlow/Keras (and this process must never hold both)."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "keras", "tf_keras"):
            raise ImportError(f"the translation imports {name}: a translated program must not need TensorFlow/Keras")
        return None


# torch.optim imports torch._dynamo on first use, which probes for tensorflow with find_spec: import
# it before the block (a probe must find nothing, not fail)
import torch._dynamo  # noqa: E402,F401

sys.meta_path.insert(0, _BlockSourceFrameworks())

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
_STATE: dict = {}
# integer book-keeping buffers with no Keras counterpart
SKIP_BUFFERS = ("num_batches_tracked",)


def versions() -> dict:
    return {"torch": torch.__version__}


def pick_device(want: str) -> torch.device:
    if want == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: torch sees no CUDA device")
    if want in ("auto", "cuda") and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def _flatten(out) -> list:
    if isinstance(out, dict):
        return [x for k in sorted(out) for x in _flatten(out[k])]
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in _flatten(o)]
    return [out]


def _state_items(model):
    for name, p in model.named_parameters():
        yield name, p
    persistent = set(model.state_dict())
    for name, b in model.named_buffers():
        if name.rsplit(".", 1)[-1] in SKIP_BUFFERS or name not in persistent:
            continue  # a non-persistent buffer is a constant of the code (Normalization(mean=...)), not state
        yield name, b


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().copy()  # never a view: the state is restored in place later


class _Function(nn.Module):
    """A plain tensor function verified like a model without parameters."""

    def __init__(self, fn, args):
        super().__init__()
        self.fn, self.args = fn, args

    def forward(self, *xs):
        return self.fn(*xs, **self.args)


# the keys of a model called with a dict of inputs (ModelInfo.input_keys), set when it is built: the
# inputs, given in that order, are passed as one dict
_INPUT_KEYS: list = []


def _call(model, xs):
    """Inputs as the Keras side passes them: positionally, or as one list to a forward that takes fewer
    (``def forward(self, inputs): sequence, length = inputs``), as Keras passes a list to ``call``, or
    as one dict keyed as the Keras model's dict of inputs. Stateful recurrent modules (Stateful<kind>) start
    from zero states, as the Keras side's layers."""
    for module in model.modules() if hasattr(model, "modules") else ():
        if getattr(module, "stateful", False) is True and hasattr(module, "reset_states"):
            module.reset_states()
    if _INPUT_KEYS and not isinstance(model, _Function):
        return model(dict(zip(_INPUT_KEYS, xs)))
    if len(xs) > 1 and _positional_inputs(model) < len(xs):
        return model(list(xs))
    return model(*xs)


def _positional_inputs(model) -> int:
    import inspect
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return 1 << 30
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 1 << 30
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               and p.name != "training" and p.default is p.empty)  # (a torch forward's `mask` is an input)


def build(req: dict) -> dict:
    dev = pick_device(req.get("device", "auto"))
    dtype = _DTYPES[req.get("dtype", "float32")]
    torch.manual_seed(req.get("seed", 0))
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        ns, note = load_source(req["source"], "fwport_verify_translated", req.get("load", "auto"), req["model"], req.get("define"))
        torch.manual_seed(req.get("seed", 0))
        model = build_object(ns, req["model"], req.get("args") or {}, lambda o: isinstance(o, nn.Module),
                             req.get("kind", "model"), _Function)
    finally:
        torch.set_default_dtype(prev)
    if not isinstance(model, nn.Module):
        raise UserError(f"{req['model']!r} in the translation gave a {type(model).__name__}, not an nn.Module")
    model = model.to(device=dev)
    with np.load(req["inputs"]) as z:
        xs_np = [z[f"x{i}"] for i in range(len(z.files))]
    xs = [torch.from_numpy(x).to(dev) for x in xs_np]
    model.eval()
    with torch.no_grad():
        _call(model, xs)  # materialises lazy modules
    model = model.to(dtype=dtype)
    _STATE.clear()
    _STATE.update(model=model, xs=xs, xs_np=xs_np, device=dev, dtype=dtype, ns=ns)
    return {"versions": versions(), "device": str(dev) + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else ""),
            "state": {n: list(t.shape) for n, t in _state_items(model)}, "loaded": note}


def _load(model, state: dict) -> None:
    with torch.no_grad():
        for name, t in _state_items(model):
            t.copy_(torch.from_numpy(state[name]).to(t.device, t.dtype))


def _read_state(path: str) -> dict:
    """A state from the verifier (.npz) or a checkpoint fwport weights wrote (.pt, .safetensors)."""
    if path.endswith(".npz"):
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    if path.endswith(".safetensors"):
        from safetensors.numpy import load_file
        sd = load_file(path)
    else:
        sd = {k: v.numpy() for k, v in torch.load(path, map_location="cpu", weights_only=True).items()}
    return {k: v for k, v in sd.items() if k.rsplit(".", 1)[-1] not in SKIP_BUFFERS}


def _load_checked(model, state: dict) -> dict | None:
    """Load a transferred state after checking it names every parameter and buffer of the model,
    nothing else, with the module's shapes; the ``load_error`` answer when it does not."""
    items = dict(_state_items(model))
    missing = [n for n in items if n not in state]
    extra = [n for n in state if n not in items]
    bad = [f"{n}: the map gives {tuple(state[n].shape)}, the module has {tuple(items[n].shape)}"
           for n in items if n in state and tuple(state[n].shape) != tuple(items[n].shape)]
    if missing or extra or bad:
        return {"load_error": {"missing": missing, "extra": extra, "shape": bad}}
    _load(model, state)
    return None


def run(req: dict) -> dict:
    """Load the transferred state and measure the translation; with ``constant_draws`` (the original's
    forward draws in inference) torch's continuous draws are the Keras side's constants meanwhile."""
    if req.get("constant_draws"):
        with ConstantDraws():
            return _run(req)
    return _run(req)


def _run(req: dict) -> dict:
    if not _STATE:
        raise UserError("run before build")
    model, xs, xs_np, dev = _STATE["model"], _STATE["xs"], _STATE["xs_np"], _STATE["device"]
    state = _read_state(req["weights"])
    error = _load_checked(model, state)
    if error is not None:
        return error
    checks = req.get("checks", ["forward"])
    arrays: dict = {}
    resp: dict = {}

    # forward, inference mode, with activations of the chosen modules
    hooks, acts, order = [], {}, []
    for path in req.get("capture", []):
        try:
            mod = model.get_submodule(path) if path else model
        except AttributeError:
            continue

        def hook(m, inp, out, _p=path):
            if _p not in acts and isinstance(out, torch.Tensor):
                acts[_p] = _np(out)
                order.append(_p)
        hooks.append(mod.register_forward_hook(hook))
    model.eval()
    try:
        with torch.no_grad():
            outs = _flatten(_call(model, xs))
    finally:
        for h in hooks:
            h.remove()
    for i, o in enumerate(outs):
        arrays[f"out{i}"] = _np(o)
    for p in order:
        arrays[f"act:{p}"] = acts[p]
    resp["outputs"] = len(outs)
    resp["captured"] = order

    rs = []
    if req.get("R"):
        with np.load(req["R"]) as z:
            rs = [torch.from_numpy(z[f"R{i}"]).to(dev) for i in range(len(z.files))]

    def loss_of(outputs):
        return sum((o.to(r.dtype) * r).sum() for o, r in zip(_flatten(outputs), rs))

    float_inputs = [i for i, x in enumerate(xs_np) if x.dtype.kind == "f"]
    if "grad" in checks:
        gx = [x.clone().requires_grad_(i in float_inputs) for i, x in enumerate(xs)]
        model.zero_grad(set_to_none=True)
        loss = loss_of(_call(model, gx))
        if isinstance(loss, torch.Tensor) and loss.requires_grad:  # integer outputs have no gradient
            loss.backward()
        none = []
        for name, p in model.named_parameters():
            if p.grad is None:
                none.append(name)
                arrays[f"g:{name}"] = np.zeros(tuple(p.shape), _np(p).dtype)
            else:
                arrays[f"g:{name}"] = _np(p.grad)
        for i in float_inputs:
            arrays[f"gx{i}"] = _np(gx[i].grad) if gx[i].grad is not None else np.zeros_like(xs_np[i])
        arrays["loss"] = np.asarray(_np(loss) if isinstance(loss, torch.Tensor) else loss)
        resp["no_gradient"] = none
        model.zero_grad(set_to_none=True)

    if "step" in checks:
        lr = float(req.get("lr", 0.1))
        for m in model.modules():
            if isinstance(m, nn.modules.dropout._DropoutNd):
                m.p = 0.0  # nn.Dropout*, nn.AlphaDropout
            if type(m).__name__ == "GaussianDropout" and isinstance(getattr(m, "rate", None), (int, float)):
                m.rate = 0.0  # the translation's helper modules (the Keras side's rate / stddev are 0 too)
            if type(m).__name__ == "GaussianNoise" and isinstance(getattr(m, "stddev", None), (int, float)):
                m.stddev = 0.0
            if type(m).__name__ == "SequenceDropout" and isinstance(getattr(m, "p", None), float):
                m.p = 0.0  # the translation's helper of a recurrent layer's dropout= (rate 0 on the Keras side)
            if isinstance(getattr(m, "input_dropout", None), float) and isinstance(m, nn.RNNBase):
                m.input_dropout = 0.0  # Bidirectional<kind>Dropout's
        model.train()
        model.zero_grad(set_to_none=True)
        loss = loss_of(_call(model, xs))
        if isinstance(loss, torch.Tensor) and loss.requires_grad:
            loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p -= lr * p.grad
        for name, t in _state_items(model):
            arrays[f"s:{name}"] = _np(t)
        model.zero_grad(set_to_none=True)
        model.eval()
        _load(model, state)
    if "train" in checks:
        _train(req, model, arrays)
        _load(model, state)
    np.savez(req["out"], **arrays)
    return resp


def _train(req: dict, model, arrays: dict) -> None:
    """--check train: the translation's own step function, once per batch; its losses and the parameters after."""
    fn = _STATE["ns"].get(req["train_step"])
    if not callable(fn):
        raise UserError(f"no training-step function {req['train_step']!r} in the translation (--train-step)")
    dev = _STATE["device"]
    losses = []
    with np.load(req["batches"]) as z:
        for step in range(req["steps"]):
            args = []
            for i in range(req["n_args"]):
                a = torch.from_numpy(z[f"b{step}_{i}"]).to(dev)
                args.append(a.to(_STATE["dtype"]) if a.is_floating_point() else a)
            out = fn(*args)
            out = _flatten(out)[0] if out is not None else None
            losses.append(float(out.detach().double().mean()) if isinstance(out, torch.Tensor) else
                          float("nan") if out is None else float(out))
    arrays["train_loss"] = np.asarray(losses, dtype=np.float64)
    for name, p in model.named_parameters():
        arrays[f"t:{name}"] = _np(p)


def save(req: dict) -> dict:
    """Load a transferred state into the built model and save its complete state_dict."""
    model = _STATE["model"]
    with np.load(req["weights"]) as z:
        state = {k: z[k] for k in z.files}
    error = _load_checked(model, state)
    if error is not None:
        return error
    sd = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    for path in req["to"]:
        if path.endswith(".safetensors"):
            from safetensors.torch import save_file
            save_file(sd, path)
        else:
            torch.save(sd, path)
    return {"keys": sorted(sd)}


def handle(req: dict) -> dict:
    op = req.get("op")
    if op == "hello":
        return {"versions": versions()}
    if op == "build":
        _INPUT_KEYS[:] = req.get("input_keys") or []
        return build(req)
    if op == "run":
        return run(req)
    if op == "save":
        return save(req)
    raise UserError(f"unknown request {op!r}")


if __name__ == "__main__":
    serve(handle)
