"""fwport torch2jax: a model with dropout called by the script's own top-level code in training mode (PyTorch builds
modules in training mode; no ``model.eval()`` before the call) takes keys, one per example, as a drawing forward's
call does (training.py's ``training_at_module_level``), where the translation called it without one and Equinox's
Dropout failed at run time ("Dropout requires a key"). After ``model.eval()`` the call stays keyless; after
``model.train()`` it takes keys again. In a seeded script (torch.manual_seed's root key) each statement holding such a
call splits the key first (keys.py): new masks at each call. The translation runs under JAX alone and drops as PyTorch does (the same rate and
scale, new masks at each call and for each example; compared with torch's in separate processes)."""
from __future__ import annotations

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from helpers import needs
from runners import python

SRC = '''\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x), self.fc(x)


model = Net()
x = torch.rand(2000, 4) + 1.0
a, _ = model(x)
model.eval()
b, _ = model(x)
model.train()
c, _ = model(x)
'''


def t2j(text: str):
    return translate_source(text, "drop.py", "torch2jax")


def test_a_call_in_training_mode_takes_keys_and_one_after_eval_does_not():
    r = t2j(SRC)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    out = r.output
    assert out.count("(x, key=jax.random.split(subkey, x.shape[0]))") == 2, out
    assert "b, _ = jax.vmap(model)(x)\n" in out, out


def test_a_seeded_script_splits_per_call_and_one_with_no_seed_gets_a_root_key():
    seeded = t2j(SRC.replace("model = Net()\n", "torch.manual_seed(0)\nmodel = Net()\n"))
    warned = [f for f in seeded.findings if f.severity is Severity.WARNING and "same dropout masks" in f.message]
    assert not warned, seeded.findings  # (keys.py splits the seed's key per statement: new masks at each call)
    assert seeded.output.count("key, subkey = jax.random.split(key)\n") == 3, seeded.output  # (and x's draw)
    assert seeded.output.count("(x, key=jax.random.split(subkey, x.shape[0]))") == 2, seeded.output
    # no draw of the file's own and no seed: the dropout is the scope's draw, keyed from a root key made above it
    # (keys.py, as any draw in unseeded code: a warning that the seed is fixed), where it was an error before
    keyless = t2j(SRC.replace("torch.rand(2000, 4) + 1.0", "torch.ones(2000, 4)"))
    assert not [f for f in keyless.findings if f.severity is Severity.ERROR], keyless.findings
    assert [f.line for f in keyless.findings if f.severity is Severity.WARNING and "seed is fixed at 0" in f.message] \
        == [17], keyless.findings
    assert keyless.output.count("(x, key=jax.random.split(subkey, x.shape[0]))") == 2, keyless.output


_RUN = '''
import sys
import numpy as np
side, path, out = sys.argv[1:4]
ns = {"__name__": "script"}
if side == "torch":
    import torch
    torch.manual_seed(0)
else:
    sys.modules["torch"] = None
exec(open(path).read(), ns)
np.savez(out, **{n: np.asarray(ns[n]) for n in ("x", "a", "b", "c")})
'''


@needs("torch", "jax", "equinox")
def test_the_translation_drops_as_pytorch_does(tmp_path):
    import numpy as np
    (tmp_path / "orig.py").write_text(SRC)
    (tmp_path / "jax.py").write_text(t2j(SRC).output)
    for side, path in (("torch", "orig.py"), ("jax", "jax.py")):
        p = python("-c", _RUN, side, tmp_path / path, tmp_path / f"{side}.npz", side=side, timeout=300,
                   env={"JAX_PLATFORMS": "cpu"})
        assert p.returncode == 0, p.stderr[-3000:]
    t, j = np.load(tmp_path / "torch.npz"), np.load(tmp_path / "jax.npz")
    n = t["x"].size
    for d in (t, j):
        np.testing.assert_array_equal(d["b"], d["x"])  # eval: no dropout
        for name in ("a", "c"):
            kept = d[name] != 0
            # the kept entries are scaled by 1 / (1 - p), the others zero
            np.testing.assert_allclose(d[name][kept], 2.0 * d["x"][kept], rtol=1e-6)
            # the rate: 0.5 within five standard errors
            assert abs(kept.mean() - 0.5) < 5 * np.sqrt(0.25 / n), (name, kept.mean())
        # new masks at each call and for each example
        assert abs(np.corrcoef((d["a"] != 0).ravel(), (d["c"] != 0).ravel())[0, 1]) < 0.1
        assert len({tuple(r) for r in (d["a"] != 0)}) == 16
    assert abs((j["a"] != 0).mean() - (t["a"] != 0).mean()) < 5 * np.sqrt(0.5 / n)
