"""fwport torch2jax: a random fill of a freshly built tensor (``torch.empty(n).uniform_(a, b)``,
``torch.Tensor(n).normal_(std=0.02)`` in ``__init__``) → the draw building it (fills.py), with the key machinery of
any ``torch.rand`` / ``torch.randn``: the same distribution as PyTorch's (moments checked against PyTorch's own draws),
not the same numbers."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_findings as errors, needs
from runners import SIDE_HEAD, printed_json

SOURCE = '''\
import torch
import torch.nn as nn


def sample_gumbel(shape, dtype, eps=1e-6):
    u = torch.empty(shape, dtype=dtype).uniform_(0, 1)
    return -torch.log(-torch.log(u + eps) + eps)


def prob_mask_like(batch, seq_length, prob):
    return torch.zeros((batch, seq_length)).float().uniform_(0, 1) < prob


def noise(n):
    return torch.empty(n, 3, dtype=torch.float64).normal_(2.0, std=0.5) + torch.ones(n).uniform_(-0.5, 1.5)[:, None]


class M(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.Tensor(d, 400).normal_(std=0.02))
        self.b = nn.Parameter(torch.empty(4000).uniform_(-1, 1))
        self.gamma = nn.Parameter(torch.Tensor(d).uniform_())
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)
'''

DRIVER = SIDE_HEAD + '''
if side == "torch":
    import torch
    torch.manual_seed(0)
    m = ns["M"](50)
    g = ns["sample_gumbel"]((200, 200), torch.float32).numpy()
    mask = ns["prob_mask_like"](300, 300, 0.3).numpy()
    z = ns["noise"](40000).numpy()
    w, b, gamma = (t.detach().numpy() for t in (m.w, m.b, m.gamma))
else:
    import jax, jax.numpy as jnp
    m = ns["M"](50, key=jax.random.key(0))
    g = np.asarray(ns["sample_gumbel"]((200, 200), jnp.float32))
    mask = np.asarray(ns["prob_mask_like"](300, 300, 0.3))
    z = np.asarray(ns["noise"](40000))
    w, b, gamma = (np.asarray(t) for t in (m.w, m.b, m.gamma))
print(json.dumps({
    "g": [str(g.dtype), float(g.mean()), float(g.std())], "mask": [list(mask.shape), float(mask.mean())],
    "z": [list(z.shape), str(z.dtype), float(z.mean()), float(z.std()), float((z[:, 1] - z[:, 0]).std())],
    "w": [list(w.shape), float(w.mean()), float(w.std())], "b": [list(b.shape), float(b.min()), float(b.max()),
    float(b.mean()), float(b.var())], "gamma": [list(gamma.shape), float(gamma.min()), float(gamma.max())],
}))
'''


@pytest.fixture(scope="module")
def translated():
    return translate_source(SOURCE, "m.py", "torch2jax")


def test_fills_of_fresh_tensors_are_draws(translated):
    assert not errors(translated), translated.findings
    out = translated.output
    assert ".uniform_(" not in out and ".normal_(" not in out
    assert "jax.random.uniform(key, shape, dtype=dtype)" in out  # the constructor's dtype, kept
    assert "jax.random.normal(subkey1, (n, 3), dtype=jnp.float64) * 0.5 + 2.0" in out
    assert "jax.random.uniform(subkey2, n) * 2.0 - 0.5" in out  # u * (b - a) + a, as PyTorch's uniform_
    # in __init__: the module's key, split per draw as for a layer's constructor
    assert "self.w = jax.random.normal(key1, (d, 400)) * 0.02" in out
    assert any(f.code == "key-added" for f in translated.findings)  # the numbers are not PyTorch's: said


@needs("jax", "equinox", "torch")
def test_fills_draw_pytorch_s_distributions(translated, tmp_path):
    (tmp_path / "orig.py").write_text(SOURCE)
    (tmp_path / "jax.py").write_text(translated.output)
    tr = printed_json(DRIVER, "torch", tmp_path / "orig.py")
    jx = printed_json(DRIVER, "jax", tmp_path / "jax.py")
    # Gumbel(0, 1) from uniform_(0, 1) in the dtype given: mean 0.5772, std pi / sqrt(6)
    assert jx["g"][0] == tr["g"][0] == "float32"
    for s in (tr, jx):
        assert s["g"][1] == pytest.approx(0.5772, abs=0.02) and s["g"][2] == pytest.approx(1.2825, abs=0.02)
        assert s["mask"][1] == pytest.approx(0.3, abs=0.01)
        assert s["z"][2] == pytest.approx(2.0 + 0.5, abs=0.01)  # normal(2, 0.5) + uniform(-0.5, 1.5) per row
        assert s["z"][4] == pytest.approx(0.5 * 2 ** 0.5, abs=0.01)  # difference of two of a row's normals
        assert s["w"][2] == pytest.approx(0.02, rel=0.03) and abs(s["w"][1]) < 0.001
        assert -1 <= s["b"][1] and s["b"][2] < 1 and s["b"][4] == pytest.approx(1 / 3, rel=0.05)
        assert 0 <= s["gamma"][1] and s["gamma"][2] < 1
    for k in ("mask", "w", "b", "gamma"):
        assert jx[k][0] == tr[k][0]  # the shapes PyTorch builds
    assert jx["z"][:2] == tr["z"][:2] == [[40000, 3], "float64"]
    assert jx["z"][3] == pytest.approx(tr["z"][3], rel=0.03)


def test_fills_it_cannot_rewrite_exactly_stay_errors():
    # a generator, a keyword the draw does not take, a fill of a name: each left to the tensor-method error
    for line in ("u = torch.empty(3).uniform_(0, 1, generator=g)",
                 "u = torch.empty(3, memory_format=torch.contiguous_format).uniform_()",
                 "u = torch.zeros(3, dtype=torch.float64).float().uniform_()",
                 "u = t.uniform_()"):
        r = translate_source(f"import torch\n\n\ndef f(t, g):\n    {line}\n    return u\n", "m.py", "torch2jax")
        assert [f.code for f in errors(r)] == ["unsupported-construct"] and "uniform_" in r.output, (line, r.findings)
    # torch.Tensor(x) with x data or a size: the draw takes the shape of the tensor it builds
    r = translate_source("import torch\n\n\ndef f(x):\n    return torch.Tensor(x).uniform_(2, 3)\n", "m.py", "torch2jax")
    assert "jax.random.uniform(key, (" in r.output and ".shape) + 2\n" in r.output, r.output
