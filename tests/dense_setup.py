"""The ``setup`` module that Keras sources of a two-Dense model (6 -> 8 -> 3) import in the save/load tests
(test_checkpoint_load_model, test_fit_loaded_model), and the head of their drivers, which writes it.

``setup`` gives fixed data ``x`` (40 x 6), labels ``y`` in {0, 1, 2} and ``start(model)``, which sets the same
seeded kernels and biases into the Keras model or into its translation's Linear layers (``SIDE`` tells which),
so that both sides train from the same weights.
"""
from __future__ import annotations

_SETUP = '''
import numpy as np
rng = np.random.default_rng(SEED)
W = [[rng.normal(size=s).astype("float32"), rng.normal(size=s[1]).astype("float32") * 0.1] for s in [(6, 8), (8, 3)]]
x = rng.normal(size=(40, 6)).astype("float32")
y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0.5).astype("int32")


def start(model):
    if SIDE == "torch":
        import torch
        linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
        with torch.no_grad():
            for m, (k, b) in zip(linears, W):
                m.weight.copy_(torch.tensor(k).T)
                m.bias.copy_(torch.tensor(b))
    else:
        for layer, w in zip([l for l in model.layers if l.get_weights()], W):
            layer.set_weights(w)
'''

_HEAD = '''
import json, os, sys
os.chdir(sys.argv[1])
sys.path.insert(0, sys.argv[1])
open("setup.py", "w").write(f"SIDE = {sys.argv[2]!r}\\n" + SETUP)
'''


def setup_source(seed: int) -> str:
    """The setup module's text (without its first line, ``SIDE = ...``, which the driver writes)."""
    return _SETUP.replace("SEED", str(int(seed)))


def driver(seed: int, body: str) -> str:
    """A driver (argv: directory, side) that writes setup.py there with the seed's weights, then runs ``body``."""
    return _HEAD.replace("SETUP", repr(setup_source(seed))) + body
