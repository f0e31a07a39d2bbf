"""PyTorch state_dict entries → the arrays of the Equinox layers fwport writes where Equinox's layout
differs from PyTorch's (numpy only; the layers: fwport/packs/torch2jax/layers.py and the rules).

Names are dotted, an index a number (``lstm.cells.0.1.weight_ih`` is ``model.lstm.cells[0][1].weight_ih``),
the form ``jax_side.locate`` reads. :func:`plan` takes the state_dict and the class of each module that
needs a map (``{"lstm": "torch.nn.LSTM"}``, reported by the torch side) and returns:

- ``values``: Equinox name → array, what to write into the model (every other entry by its own name);
- ``grads``: PyTorch name → (the Equinox names, a function of their arrays giving the PyTorch-shaped
  array): the gradient of a PyTorch parameter from the Equinox gradients. ``exact`` lists the names
  whose function also inverts the values (a split or a copy); a bias that is a sum of two has none.

The maps:
  nn.LSTM / nn.GRU / nn.RNN   weight_ih_l{k}[_reverse] → cells.k.d.weight_ih (weight_hh likewise);
                              bias_ih + bias_hh → cells.k.d.bias; GRU: bias = b_ih + (b_hr, b_hz, 0),
                              bias_n = b_hn (Equinox keeps it inside the reset gate as PyTorch does)
  nn.LSTMCell / GRUCell / RNNCell   the same for one cell, without the layer suffix
  nn.ConvTranspose1d/2d/3d    weight (in, out/g, k...) → (out, in/g, k...) per group, flipped along
                              every spatial axis (Equinox's kernel is the forward convolution's)
  nn.MultiheadAttention       in_proj_weight (3E, E) → query_proj / key_proj / value_proj .weight
                              (q/k/v_proj_weight when kdim/vdim differ); in_proj_bias likewise;
                              out_proj.weight / .bias → output_proj.weight / .bias; inside the transformer
                              layers too (self_attn, multihead_attn), whose other arrays (linear1, norm1,
                              layers.N.*) keep PyTorch's names
"""
from __future__ import annotations

import re

import numpy as np

RECURRENT = {"torch.nn.LSTM": "lstm", "torch.nn.GRU": "gru", "torch.nn.RNN": "rnn"}
CELLS = {"torch.nn.LSTMCell": "lstm", "torch.nn.GRUCell": "gru", "torch.nn.RNNCell": "rnn"}
ATTENTION = "torch.nn.MultiheadAttention"
TRANSPOSED = frozenset({"torch.nn.ConvTranspose1d", "torch.nn.ConvTranspose2d", "torch.nn.ConvTranspose3d"})
#: the module classes whose parameters need a map (the torch side reports where they are, with the
#: attributes the map needs: ``{"class": ..., "groups": ...}``)
MAPPED = frozenset({*RECURRENT, *CELLS, ATTENTION, *TRANSPOSED})

_LAYER = re.compile(r"^(weight|bias)_(ih|hh)_l(\d+)(_reverse)?$")


def plan(state: dict[str, np.ndarray], modules: dict[str, dict]):
    """(values, grads, exact) for ``state`` given its mapped modules (``{"lstm": {"class": "torch.nn.LSTM"}}``,
    see the module docstring)."""
    values: dict[str, np.ndarray] = {}
    grads: dict[str, tuple[tuple[str, ...], object]] = {}
    exact: set[str] = set()
    done: set[str] = set()
    for prefix, info in sorted(modules.items(), key=lambda kv: -len(kv[0])):
        cls = info["class"]
        p = f"{prefix}." if prefix else ""
        mine = {n[len(p):]: n for n in state if n.startswith(p) and "." not in n[len(p):] and n not in done}
        if cls in RECURRENT or cls in CELLS:
            groups: dict[str, dict[str, str]] = {}  # the Equinox cell's name → {"weight_ih": torch name, ...}
            for local, full in mine.items():
                if cls in RECURRENT:
                    m = _LAYER.match(local)
                    if not m:
                        continue
                    cell = f"{p}cells.{m.group(3)}.{1 if m.group(4) else 0}"
                    groups.setdefault(cell, {})[f"{m.group(1)}_{m.group(2)}"] = full
                elif local in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    groups.setdefault(prefix, {})[local] = full
            kind = RECURRENT.get(cls) or CELLS[cls]
            for cell, names in groups.items():
                _cell(state, kind, f"{cell}." if cell else "", names, values, grads, exact)
                done.update(names.values())
        elif cls in TRANSPOSED and "weight" in mine:
            groups = int(info.get("groups", 1))
            full = mine["weight"]
            values[f"{p}weight"] = _transposed_kernel(state[full], groups)
            grads[full] = ((f"{p}weight",), lambda g, groups=groups: _transposed_kernel_back(g[0], groups))
            exact.add(full)
            done.add(full)
        elif cls == ATTENTION:
            _attention(state, p, mine, values, grads, exact)
            done.update(mine.values())
            for k in ("weight", "bias"):
                if f"{p}out_proj.{k}" in state:
                    full = f"{p}out_proj.{k}"
                    _copy(state, full, f"{p}output_proj.{k}", values, grads, exact)
                    done.add(full)
    for name, value in state.items():
        if name not in done and name not in values:
            _copy(state, name, name, values, grads, exact)
    return values, grads, exact


def _copy(state, src: str, dst: str, values, grads, exact) -> None:
    values[dst] = state[src]
    grads[src] = ((dst,), lambda g: g[0])
    exact.add(src)


def _transposed_kernel(w: np.ndarray, groups: int) -> np.ndarray:
    """PyTorch's (in, out/g, k...) → Equinox's (out, in/g, k...) with the window flipped."""
    cin, og, *k = w.shape
    w = w.reshape(groups, cin // groups, og, *k).swapaxes(1, 2).reshape(groups * og, cin // groups, *k)
    return np.ascontiguousarray(np.flip(w, axis=tuple(range(2, w.ndim))))


def _transposed_kernel_back(w: np.ndarray, groups: int) -> np.ndarray:
    """The inverse of :func:`_transposed_kernel` (a permutation: values and gradients alike)."""
    out, ig, *k = w.shape
    w = np.flip(np.asarray(w), axis=tuple(range(2, w.ndim)))
    return np.ascontiguousarray(w.reshape(groups, out // groups, ig, *k).swapaxes(1, 2).reshape(groups * ig, out // groups, *k))


def _cell(state, kind: str, p: str, names: dict[str, str], values, grads, exact) -> None:
    for w in ("weight_ih", "weight_hh"):
        if w in names:
            _copy(state, names[w], f"{p}{w}", values, grads, exact)
    if "bias_ih" not in names:
        return
    b_ih, b_hh = state[names["bias_ih"]], state[names["bias_hh"]]
    if kind != "gru":
        values[f"{p}bias"] = b_ih + b_hh
        grads[names["bias_ih"]] = ((f"{p}bias",), lambda g: g[0])
        grads[names["bias_hh"]] = ((f"{p}bias",), lambda g: g[0])
        return
    h = b_ih.shape[0] // 3
    values[f"{p}bias"] = b_ih + np.concatenate([b_hh[:2 * h], np.zeros_like(b_hh[2 * h:])])
    values[f"{p}bias_n"] = b_hh[2 * h:]
    grads[names["bias_ih"]] = ((f"{p}bias",), lambda g: g[0])
    grads[names["bias_hh"]] = ((f"{p}bias", f"{p}bias_n"), lambda g, h=h: np.concatenate([g[0][:2 * h], g[1]]))


def _attention(state, p: str, mine: dict[str, str], values, grads, exact) -> None:
    projections = (f"{p}query_proj", f"{p}key_proj", f"{p}value_proj")
    for k in ("weight", "bias"):
        packed = mine.get(f"in_proj_{k}")
        if packed is not None:
            for dst, part in zip(projections, np.split(state[packed], 3, axis=0)):
                values[f"{dst}.{k}"] = part
            grads[packed] = (tuple(f"{d}.{k}" for d in projections), lambda g: np.concatenate(g, axis=0))
            exact.add(packed)
    for short, dst in zip("qkv", projections):
        name = mine.get(f"{short}_proj_weight")
        if name is not None:
            _copy(state, name, f"{dst}.weight", values, grads, exact)
