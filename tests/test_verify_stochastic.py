"""fwport verify torch → JAX on models a plain comparison cannot take as they are:

- a forward that draws random numbers in eval mode (a VAE's reparameterisation): detected on the torch side
  (two seeds, different outputs), then both sides rerun with normal draws 0.5 and uniform draws the middle of
  their range, so the deterministic path and the path scaling the noise are compared; a planted bug on the
  noise path (eps * logvar for eps * std) is a mismatch; a discrete draw (randint) cannot be made constant:
  an error, never a pass;
- a model of a whole graph (features (N, F), adjacency (N, N), no batch axis): the probe of the original on the
  halves of the batch says it takes its inputs whole, and the JAX model is called without jax.vmap;
  ``--batch-axis 0`` forces the per-example call, which this translation cannot take.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from fwport.core.pipeline import translate_source
from helpers import needs

pytestmark = needs("torch", "jax", "equinox")

VAE = '''\
import torch
import torch.nn.functional as F
from torch import nn


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 8)
        self.fc21 = nn.Linear(8, 3)
        self.fc22 = nn.Linear(8, 3)
        self.fc3 = nn.Linear(3, 12)

    def encode(self, x):
        h = F.relu(self.fc1(x))
        return self.fc21(h), self.fc22(h)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def forward(self, x):
        mu, logvar = self.encode(x)
        z = self.reparameterize(mu, logvar)
        return torch.sigmoid(self.fc3(z)), mu, logvar
'''

GCN = '''\
import torch
from torch import nn
import torch.nn.functional as F


class GraphConv(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.kernel = nn.Parameter(torch.Tensor(n_in, n_out))
        nn.init.xavier_normal_(self.kernel)
        self.bias = nn.Parameter(torch.Tensor(n_out))
        nn.init.normal_(self.bias)

    def forward(self, h, adj):
        return torch.spmm(adj, torch.mm(h, self.kernel)) + self.bias


class GCN(nn.Module):
    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.gc1 = GraphConv(n_in, hidden)
        self.gc2 = GraphConv(hidden, n_out)

    def forward(self, h, adj):
        return F.log_softmax(self.gc2(F.relu(self.gc1(h, adj)), adj), dim=1)
'''


def _verify(session, tmp_path: Path, text: str, model: str, inputs: list[str], change=None, **kw) -> dict:
    from fwport.verify.run import Options, verify
    orig = tmp_path / "model.py"
    orig.write_text(text, encoding="utf-8")
    out = translate_source(text, str(orig), "torch2jax").output
    if change is not None:
        assert change[0] in out, out
        out = out.replace(*change)
    trans = tmp_path / "translated.py"
    trans.write_text(out, encoding="utf-8")
    return verify(Options(str(orig), str(trans), model, inputs=inputs, device="cpu", direction="torch2jax", **kw),
                  session)


def test_a_stochastic_forward_is_compared_with_constant_draws(tmp_path, session):
    from fwport.verify.certificate import render
    cert = _verify(session, tmp_path, VAE, "VAE", ["float32[4,12]"])
    assert cert["verdict"] == "pass", cert.get("problems") or cert
    assert cert["stochastic"]["detected"] is True and "normal draws 0.5" in cert["stochastic"]["draws"]
    assert "stochastic forward" in render(cert)
    assert len(cert["results"]["gradients"]) == 8  # fc22 (logvar) gets gradients through eps * std
    assert cert["batch_axis"] == {"axis": 0, "why": "probe: the halves of the batch give the whole batch's rows"}
    plain = _verify(session, tmp_path, VAE.replace("torch.randn_like(std)", "torch.ones_like(std)"), "VAE",
                    ["float32[4,12]"])
    assert plain["verdict"] == "pass" and "stochastic" not in plain


def test_a_bug_on_the_noise_path_is_a_mismatch(tmp_path, session):
    cert = _verify(session, tmp_path, VAE, "VAE", ["float32[4,12]"], change=("mu + eps * std", "mu + eps * logvar"))
    assert cert["verdict"] == "mismatch"
    assert not all(e["ok"] for e in cert["results"]["outputs"])
    # a noise dropped altogether (eps 0 in the translation) is caught as well: the constant is not the mean
    cert = _verify(session, tmp_path, VAE, "VAE", ["float32[4,12]"], change=("mu + eps * std", "mu + 0 * eps * std"))
    assert cert["verdict"] == "mismatch"


def test_a_discrete_draw_cannot_be_made_constant_and_is_an_error(tmp_path, session):
    from fwport.verify.run import VerifyError
    text = VAE.replace("        return torch.sigmoid(self.fc3(z)), mu, logvar",
                       "        return torch.sigmoid(self.fc3(z)) + torch.randint(0, 9, (12,)), mu, logvar")
    with pytest.raises(VerifyError, match="cannot be compared"):
        _verify(session, tmp_path, text, "VAE", ["float32[4,12]"])


def test_a_whole_graph_model_is_called_without_vmap(tmp_path, session):
    cert = _verify(session, tmp_path, GCN, "GCN(5, 6, 3)", ["float32[7,5]", "float32[7,7]"])
    assert cert["verdict"] == "pass", cert.get("problems") or cert
    assert cert["batch_axis"]["axis"] is None and cert["batch_axis"]["why"].startswith("probe: the first half")
    assert {e["name"] for e in cert["results"]["gradients"]} == {"gc1.kernel", "gc1.bias", "gc2.kernel", "gc2.bias"}
    # forced per-example, the translation (which keeps the graph whole) cannot be compared
    from fwport.verify.run import VerifyError
    try:
        forced = _verify(session, tmp_path, GCN, "GCN(5, 6, 3)", ["float32[7,5]", "float32[7,7]"], batch_axis="0")
    except VerifyError:
        forced = {"verdict": "error"}
    assert forced["verdict"] != "pass"

