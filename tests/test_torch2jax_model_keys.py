"""fwport torch2jax: a model whose forward draws, called where no key was in scope, in a file keys.py keys.

A script with no torch.manual_seed that draws (``torch.randn``) gets a root key from keys.py; a call of a model
whose forward draws (``torch.randn_like``) in that scope takes a split of it, one key per example, as a JAX user
writes it (``key, subkey = jax.random.split(key)`` above the statement, ``jax.vmap(model)(x,
key=jax.random.split(subkey, x.shape[0]))``), where it was refused as "no key is in scope". The translation runs
under JAX alone and draws as PyTorch does: the same distribution (compared with torch's in separate processes),
new numbers at each call and for each example.
"""
from __future__ import annotations

import subprocess
import sys

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from helpers import needs

SRC = '''\
import torch
from torch import nn


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return 2.0 * torch.randn_like(x) + 0.5


model = Noisy()
x = torch.zeros(4000, 3)
with torch.no_grad():
    a = model(x)
    b = model(x)
c = torch.randn(2, 3)
'''


def t2j(text: str):
    return translate_source(text, "noisy.py", "torch2jax")


def test_the_call_takes_a_split_of_the_root_key_keys_py_makes():
    r = t2j(SRC)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    out = r.output
    assert ("    key, subkey = jax.random.split(key)\n"
            "    a = jax.vmap(model)(x, key=jax.random.split(subkey, x.shape[0]))\n"
            "    key, subkey = jax.random.split(key)\n"
            "    b = jax.vmap(model)(x, key=jax.random.split(subkey, x.shape[0]))\n") in out \
        or ("key, subkey = jax.random.split(key)\n"
            "a = jax.vmap(model)(x, key=jax.random.split(subkey, x.shape[0]))\n"
            "key, subkey = jax.random.split(key)\n"
            "b = jax.vmap(model)(x, key=jax.random.split(subkey, x.shape[0]))\n") in out, out
    assert out.count("key = jax.random.key(0)") == 1, out  # one root key, above the model's creation


def test_with_a_seed_or_no_draw_of_its_own_the_old_paths_stay():
    # a seeded script: torch.manual_seed's root key, read by the call as before
    seeded = t2j(SRC.replace("model = Noisy()\n", "torch.manual_seed(0)\nmodel = Noisy()\n"))
    assert not [f for f in seeded.findings if f.severity is Severity.ERROR], seeded.findings
    # the draw in a lambda: no key can be made for it there, the error says why
    r = t2j(SRC + "f = lambda t: model(t)\n")
    errs = [f for f in r.findings if f.severity is Severity.ERROR]
    assert len(errs) == 1 and "inside a lambda" in errs[0].message and errs[0].line == 20, r.findings


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
np.savez(out, a=np.asarray(ns["a"]), b=np.asarray(ns["b"]))
'''


@needs("torch", "jax", "equinox")
def test_the_translation_draws_as_pytorch_does(tmp_path):
    import numpy as np
    (tmp_path / "orig.py").write_text(SRC)
    (tmp_path / "jax.py").write_text(t2j(SRC).output)
    for side, path in (("torch", "orig.py"), ("jax", "jax.py")):
        p = subprocess.run([sys.executable, "-c", _RUN, side, str(tmp_path / path), str(tmp_path / f"{side}.npz")],
                           capture_output=True, text=True, timeout=300, env={"JAX_PLATFORMS": "cpu", "PATH": ""})
        assert p.returncode == 0, p.stderr[-3000:]
    t, j = np.load(tmp_path / "torch.npz"), np.load(tmp_path / "jax.npz")
    n = t["a"].size
    for name in ("a", "b"):
        assert j[name].shape == t[name].shape == (4000, 3)
        # mean 0.5 and spread 2 on both sides, within five standard errors
        assert abs(j[name].mean() - t[name].mean()) < 5 * 2.0 * np.sqrt(2.0 / n), (name, j[name].mean(), t[name].mean())
        assert abs(j[name].std() - t[name].std()) < 5 * 2.0 * np.sqrt(1.0 / n), (name, j[name].std(), t[name].std())
    # new numbers at each call (as PyTorch's generator moves on) and for each example
    for d in (t, j):
        assert abs(np.corrcoef(d["a"].ravel(), d["b"].ravel())[0, 1]) < 0.1
        assert len({tuple(r) for r in d["a"].round(6)}) == 4000
