"""fwport torch2jax: a model built and cast in one expression (``model = Net().double()``, pytorch/examples'
time_sequence_prediction as its spec builds it) → every floating array of the new model cast leaf by leaf, as the
statement ``model.double()`` becomes (``jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if
eqx.is_inexact_array(a) else a, Net(...))``), where it became ``Net(...).astype(jnp.float64)`` (an Equinox module has
no .astype: AttributeError); the name is still a model of the class, so its call over a batch goes through jax.vmap.
Checked against PyTorch with the same weights, in separate processes: the same float64 outputs."""
from __future__ import annotations

import subprocess
import sys

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from helpers import needs

SRC = '''\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.register_buffer("steps", torch.zeros(1, dtype=torch.long))

    def forward(self, x):
        return torch.tanh(self.fc(x)) + self.steps


model = Net().double()
x = torch.linspace(-1.0, 1.0, 12, dtype=torch.double).reshape(4, 3)
'''


def t2j(text: str):
    return translate_source(text, "cast.py", "torch2jax")


def test_the_cast_is_leaf_by_leaf_and_the_model_is_vmapped():
    r = t2j(SRC + "y = model(x)\n")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert ("model = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, "
            "Net(key=jax.random.key(0)))") in r.output, r.output
    assert "y = jax.vmap(model)(x)" in r.output and ".astype(jnp.float64)\n" not in r.output, r.output
    assert 'jax.config.update("jax_enable_x64", True)' in r.output, r.output


_RUN = '''
import sys
import numpy as np
side, path, out = sys.argv[1:4]
ns = {"__name__": "script"}
if side == "jax":
    sys.modules["torch"] = None
exec(open(path).read(), ns)
w = np.arange(6, dtype=np.float64).reshape(2, 3) / 7.0
b = np.array([0.25, -0.5])
m = ns["model"]
if side == "torch":
    import torch
    with torch.no_grad():
        m.fc.weight.copy_(torch.from_numpy(w))
        m.fc.bias.copy_(torch.from_numpy(b))
    y = m(ns["x"]).detach().numpy()
    dtypes = [str(m.fc.weight.dtype).split(".")[-1], str(m.steps.dtype).split(".")[-1]]
else:
    import equinox as eqx, jax, jax.numpy as jnp
    m = eqx.tree_at(lambda t: (t.fc.weight, t.fc.bias), m, (jnp.asarray(w), jnp.asarray(b)))
    y = np.asarray(jax.vmap(m)(ns["x"]))
    dtypes = [str(ns["model"].fc.weight.dtype), str(m.steps.dtype)]
np.savez(out, y=y, dtypes=np.array(dtypes))
'''


@needs("torch", "jax", "equinox")
def test_the_translation_computes_as_pytorch_does_in_float64(tmp_path):
    import numpy as np
    (tmp_path / "orig.py").write_text(SRC)
    (tmp_path / "jax.py").write_text(t2j(SRC).output)
    for side, path in (("torch", "orig.py"), ("jax", "jax.py")):
        p = subprocess.run([sys.executable, "-c", _RUN, side, str(tmp_path / path), str(tmp_path / f"{side}.npz")],
                           capture_output=True, text=True, timeout=300, env={"JAX_PLATFORMS": "cpu", "PATH": ""})
        assert p.returncode == 0, p.stderr[-3000:]
    t, j = np.load(tmp_path / "torch.npz"), np.load(tmp_path / "jax.npz")
    assert t["y"].dtype == j["y"].dtype == np.float64
    np.testing.assert_allclose(j["y"], t["y"], rtol=1e-12, atol=1e-12)
    assert list(t["dtypes"]) == list(j["dtypes"]) == ["float64", "int64"]  # the float arrays cast, the long buffer kept
