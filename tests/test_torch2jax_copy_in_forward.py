"""`.copy_()` as a statement of a module's forward (fwport/packs/torch2jax/batch.py `copy_into`): `h.copy_(v)` →
`h = jnp.broadcast_to(v, h.shape).astype(h.dtype)` (PyTorch broadcasts and casts into h), `out[:, :2].copy_(v)` →
`out = out.at[:2].set(v)` for one example; compared with PyTorch by fwport verify (forward and gradients)."""
from __future__ import annotations

from helpers import needs, t2j
from runners import verify_model

SRC = '''
import torch
import torch.nn as nn


class Mix(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.gate = nn.Linear(4, 1)

    def forward(self, x):
        h = torch.zeros_like(x)
        h.copy_(self.fc(x))
        out = x.clone()
        out[:, :2].copy_(h[:, :2])
        g = torch.empty_like(x)
        g.copy_(self.gate(x))
        return out * g
'''


def test_copy_statements_become_assignments():
    r = t2j(SRC)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert "h = jnp.broadcast_to(self.fc(x), h.shape).astype(h.dtype)" in r.output
    assert "out = out.at[:2].set(h[:2])" in r.output
    assert "g = jnp.empty_like(x)\n        g = jnp.broadcast_to(self.gate(x), g.shape).astype(g.dtype)" in r.output  # (1,) → (4,)


@needs("torch", "jax", "equinox")
def test_copy_in_forward_computes_as_pytorch(tmp_path):
    cert = verify_model(tmp_path, SRC, "Mix", ["float64[5,4]"])
    assert cert["results"]["gradients"] and all(e["ok"] for e in cert["results"]["gradients"])


SHARED = '''
import torch
import torch.nn as nn


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        first = h[:, 0]
        first.copy_(h[:, 1])
        x.copy_(h)
        return h
'''


def test_a_copy_into_a_view_or_an_input_is_an_error_not_a_rebinding():
    """PyTorch writes through `first` into h, and through x into the caller's tensor: rebinding the name would
    drop those writes silently."""
    r = t2j(SHARED)
    errors = [f for f in r.findings if f.severity.value == "error"]
    assert [f.line for f in errors] == [13, 14], errors
    assert all("may share its memory" in f.message for f in errors)
    assert "first.copy_(" in r.output and "x.copy_(h)" in r.output and "# fwport: unsupported-construct" in r.output
