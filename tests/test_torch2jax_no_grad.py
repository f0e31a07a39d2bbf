"""torch.no_grad() in code a loss differentiates through (fwport/packs/torch2jax/nograd.py): PyTorch records no
graph for what the block computes, so its values are constants for backward(); the translation detaches what leaves
the block (jax.lax.stop_gradient) and the return values of a @torch.no_grad() method. Compared with PyTorch by fwport
verify (forward and gradients): main's translation, which only removed the block, failed the gradient check. In an
evaluation loop the removal stays, and the finding says which it was."""
from __future__ import annotations

from helpers import needs, t2j
from runners import verify_model

BLOCK = '''
import torch
import torch.nn as nn


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        h = self.a(x)
        with torch.no_grad():
            t = torch.tanh(h) * 2.0
            s, u = h.sum(-1, keepdim=True), h * 0.5
            s = s + 1.0
        return self.b(h * t) * s + u.sum(-1, keepdim=True)
'''

TEACHER = '''
import torch
import torch.nn as nn


class Distilled(nn.Module):
    """a student and a teacher sharing the input; the teacher's target is a constant (BYOL / momentum-encoder
    style: the key encoder runs under no_grad)"""

    def __init__(self):
        super().__init__()
        self.student = nn.Linear(4, 3)
        self.teacher = nn.Linear(4, 3)

    @torch.no_grad()
    def target(self, x):
        return torch.relu(self.teacher(x)), self.teacher(x).sum(-1, keepdim=True)

    def forward(self, x):
        q = self.student(x)
        with torch.no_grad():
            k = self.teacher(x)
        t, total = self.target(x)
        return q * k + t * total + self.teacher(x * q.tanh().sum(-1, keepdim=True))
'''


def test_values_leaving_a_no_grad_block_are_detached():
    r = t2j(BLOCK)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert "t = jax.lax.stop_gradient(jnp.tanh(h) * 2.0)" in r.output
    assert "s = jax.lax.stop_gradient(s)" in r.output and "u = jax.lax.stop_gradient(u)" in r.output
    info = [f for f in r.findings if "no_grad" in f.message]
    assert len(info) == 1 and "Gated.forward is module code" in info[0].message and "(t, s, u)" in info[0].message


def test_a_no_grad_method_returns_constants():
    r = t2j(TEACHER)
    assert "return jax.lax.stop_gradient(jax.nn.relu(self.teacher(x))), jax.lax.stop_gradient(self.teacher(x).sum(axis=-1, keepdims=True))" \
        in r.output, r.output
    assert "k = jax.lax.stop_gradient(self.teacher(x))" in r.output


@needs("torch", "jax", "equinox")
def test_no_grad_block_gradients_as_pytorch(tmp_path):
    cert = verify_model(tmp_path, BLOCK, "Gated", ["float64[5,4]"])
    assert cert["results"]["gradients"] and all(e["ok"] for e in cert["results"]["gradients"])


@needs("torch", "jax", "equinox")
def test_no_grad_teacher_gradients_as_pytorch(tmp_path):
    cert = verify_model(tmp_path, TEACHER, "Distilled", ["float64[5,4]"])
    assert cert["results"]["gradients"] and all(e["ok"] for e in cert["results"]["gradients"])


LOOPS = '''
import torch
import torch.nn as nn

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
for step in range(3):
    opt.zero_grad()
    out = model(x)
    with torch.no_grad():
        target = out * 0.5 + 1.0
    loss = ((out - target) ** 2).mean()
    loss.backward()
    opt.step()

with torch.no_grad():
    pred = model(x)
print(pred.sum())
with torch.enable_grad():
    z = model(x)
'''


def test_training_loop_target_detached_evaluation_removed():
    r = t2j(LOOPS)
    assert "target = jax.lax.stop_gradient(out * 0.5 + 1.0)" in r.output
    assert "pred = jax.vmap(model)(x)" in r.output and "with " not in r.output
    info = {f.line: f.message for f in r.findings if "removed" in f.message and "grad" in f.message}
    assert "a backward() follows it" in info[10]
    assert "outside any differentiated code" in info[16]
    assert "enable_grad() removed" in info[19]
