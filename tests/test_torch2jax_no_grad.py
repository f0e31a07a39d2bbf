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
    assert "reaches a backward() after it" in info[10]
    assert "outside any differentiated code" in info[16]
    assert "enable_grad() removed" in info[19]


MOMENTUM = '''
import torch
import torch.nn as nn


class MoCo(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder_q = nn.Linear(4, 3)
        self.encoder_k = nn.Linear(4, 3)
        self.register_buffer("center", torch.zeros(3))
        self._copy()

    @torch.no_grad()
    def _copy(self):
        self.encoder_k.weight.copy_(self.encoder_q.weight)

    @torch.no_grad()
    def _momentum_update(self):
        for q, k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            k.data = k.data * 0.99 + q.data * 0.01

    def forward(self, x):
        q = self.encoder_q(x)
        with torch.no_grad():
            self._momentum_update()
            k = self.encoder_k(x)
            self.center.mul_(0.9)
        return q * k - self.center
'''


def test_state_updates_under_no_grad_in_module_code_are_errors():
    """An EMA / momentum update of the module's parameters or buffers inside its call: an eqx.Module cannot change
    there (main left `k.data = ...` and `self.center.mul_(0.9)` with no finding); the copy in a method only
    __init__ calls is construction, not differentiated: removed."""
    r = t2j(MOMENTUM)
    errors = {f.line: f.message for f in r.findings if f.severity.value == "error"}
    assert sorted(errors) == [20, 27], errors
    assert all("updates the module's state under torch.no_grad()" in m for m in errors.values())
    assert "k = jax.lax.stop_gradient(self.encoder_k(x))" in r.output
    info = {f.line: f.message for f in r.findings if "no_grad() removed" in f.message}
    assert "which only __init__ calls: construction" in info[13]


FROZEN = '''
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
for p in model[0].parameters():
    p.requires_grad = False
model[1].bias.requires_grad_(False)
x = torch.randn(8, 4).requires_grad_()
'''


def test_frozen_parameters_are_errors():
    """PyTorch's optimizer skips a parameter with requires_grad False; the translated optimizer updates every array
    of the model: main dropped `.requires_grad_(False)` and kept `p.requires_grad = False` with no finding."""
    r = t2j(FROZEN)
    errors = {f.line: f.message for f in r.findings if f.severity.value == "error"}
    assert sorted(errors) == [6, 7], errors
    assert all("freezes a parameter" in m for m in errors.values())


CHOSEN = '''
from contextlib import nullcontext

import torch
import torch.nn as nn


class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.vit = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x, freeze_vit=True):
        context = torch.no_grad if freeze_vit else nullcontext
        with context():
            embed = self.vit(x)
        return self.head(embed) * embed.sum(-1, keepdim=True)
'''


def test_a_context_chosen_by_a_flag_detaches_where_the_flag_is_true():
    """`torch.no_grad if freeze else nullcontext` (lucidrains' vat / vaat): main left it, a residue error."""
    r = t2j(CHOSEN)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert "embed = self.vit(x)\n        if freeze_vit:\n            embed = jax.lax.stop_gradient(embed)\n" in r.output
    assert "nullcontext" not in r.output.split("class")[1]


@needs("torch", "jax", "equinox")
def test_a_context_chosen_by_a_flag_gradients_as_pytorch(tmp_path):
    cert = verify_model(tmp_path, CHOSEN, "Frozen", ["float64[5,4]"])
    assert cert["results"]["gradients"] and all(e["ok"] for e in cert["results"]["gradients"])


FILLED = '''
import torch
import torch.nn as nn


class Feats(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x):
        outs = []
        with torch.no_grad():
            outs.append(self.a(x))
            h, g = self.a(x), x
        return outs[0] + h + g
'''


def test_a_list_filled_under_no_grad_is_a_warning_and_tuple_targets_are_detached():
    r = t2j(FILLED)
    assert "h = jax.lax.stop_gradient(h)" in r.output and "g = jax.lax.stop_gradient(g)" in r.output
    assert "outs = jax.lax.stop_gradient" not in r.output
    warnings = [f for f in r.findings if f.severity.value == "warning" and "not detached" in f.message]
    assert len(warnings) == 1 and warnings[0].message.startswith("outs: a list / dict the block fills"), warnings
