"""A learning rate set as training goes through the optimizer's param_groups (pytorch-tutorial's resnet
``update_lr(optimizer, lr)``, nanoGPT's ``for param_group in optimizer.param_groups: param_group['lr'] = lr``)
→ the optimizer built with optax.inject_hyperparams and the write ``opt_state.hyperparams['learning_rate'] =
jnp.asarray(lr)`` (passes/learning_rate.py). The translated training function trains like PyTorch's: the
verifier runs both from the same parameters on the same batches and compares every loss, the rates read back
(``optimizer.param_groups[0]['lr']``) and the trained parameters."""
from __future__ import annotations

import json

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

MODEL = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))

'''

# a helper taking the optimizer, called between epochs (pytorch-tutorial's deep_residual_network)
HELPER = MODEL + '''
def update_lr(optimizer, lr):
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def train(model, x, y):
    optimizer = OPTIMIZER
    criterion = nn.CrossEntropyLoss()
    losses, rates = [], []
    curr_lr = 0.05
    for epoch in range(6):
        for i in range(2):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if (epoch + 1) % 2 == 0:
            curr_lr /= 5
            update_lr(optimizer, curr_lr)
        rates.append(optimizer.param_groups[0]['lr'])
    return model, losses + rates
'''

# the rate written in the loop before each step (nanoGPT's train.py), and scaled in place
INLINE = MODEL + '''
def train(model, x, y):
    optimizer = OPTIMIZER
    criterion = nn.CrossEntropyLoss()
    losses = []
    for it in range(8):
        lr = 0.05 if it < 3 else 0.005
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    optimizer.param_groups[0]['lr'] = 0.2
    for i in range(3):
        for g in optimizer.param_groups:
            g['lr'] *= 0.5
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses
'''

OPTIMIZERS = {
    "adam": "torch.optim.Adam(model.parameters(), lr=0.05)",
    "adam-l2": "torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=0.01)",
    "adamw": "torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)",
    "sgd-momentum": "torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)",
}


def _trains_like_pytorch(src: str, session, tmp_path):
    from fwport.verify.run import Options
    from fwport.verify.torch2jax import verify_training
    r = translate_source(src, "train.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "param_groups" not in r.output
    (tmp_path / "model.py").write_text(src)
    (tmp_path / "translated.py").write_text(r.output)
    opts = Options(str(tmp_path / "model.py"), str(tmp_path / "translated.py"), "Net", args={},
                   inputs=["float32[10,6]", "int64[10]:3"], device="cpu", direction="torch2jax", dtype="float32")
    cert = verify_training(opts, session, "train", {})
    assert cert["verdict"] == "pass", json.dumps(cert, indent=1, default=str)[:3000]
    assert len(cert["results"]["losses"]) and len(cert["results"]["trained"]) == 4
    return r


@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
def test_a_helper_setting_the_rate_between_epochs_trains_like_pytorch(opt, session, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    r = _trains_like_pytorch(HELPER.replace("OPTIMIZER", OPTIMIZERS[opt]), session, tmp_path)
    assert "def update_lr(opt_state, lr):\n    opt_state.hyperparams['learning_rate'] = jnp.asarray(lr)" in r.output
    assert "update_lr(opt_state, curr_lr)" in r.output
    assert "rates.append(opt_state.hyperparams['learning_rate'])" in r.output
    if opt == "adam":
        assert "optimizer = optax.inject_hyperparams(optax.adam)(learning_rate=0.05)" in r.output, r.output
    if opt == "adam-l2":  # (a chain: the rate reaches optax.adam through the factory's parameter)
        assert ("optax.inject_hyperparams(lambda learning_rate: optax.chain(optax.add_decayed_weights(0.01), "
                "optax.adam(learning_rate=learning_rate)))(learning_rate=0.05)") in r.output, r.output


def test_rates_written_in_the_loop_and_scaled_in_place_train_like_pytorch(session, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    r = _trains_like_pytorch(INLINE.replace("OPTIMIZER", OPTIMIZERS["adamw"]), session, tmp_path)
    assert "opt_state.hyperparams['learning_rate'] = jnp.asarray(lr)" in r.output
    assert "opt_state.hyperparams['learning_rate'] = jnp.asarray(0.2)" in r.output
    assert "opt_state.hyperparams['learning_rate'] *= 0.5" in r.output


def test_a_rate_that_would_act_otherwise_or_other_uses_of_param_groups_stay_errors():
    def errors(src):
        r = translate_source(src, "train.py", "torch2jax")
        return [f.message for f in r.findings if f.severity is Severity.ERROR]
    # RMSprop's momentum trace holds updates already scaled by the rate in optax, not in PyTorch
    rms = HELPER.replace("OPTIMIZER", "torch.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.9)")
    assert any("RMSprop with momentum" in m for m in errors(rms)), errors(rms)
    # a rate per group, or another key, has no optax counterpart here
    other = INLINE.replace("OPTIMIZER", OPTIMIZERS["adam"]).replace("g['lr'] *= 0.5", "g['betas'] = (0.5, 0.9)")
    assert any("param_groups is used otherwise" in m for m in errors(other)), errors(other)
    # an epoch schedule already sets the rate (training.py's _schedules): a write would be overwritten
    sched = MODEL + """
from torch.utils.data import DataLoader, TensorDataset


def train(model, x, y):
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(5):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
        scheduler.step()
        optimizer.param_groups[0]['lr'] = 0.1
    return model
"""
    assert any("already an optax schedule" in m for m in errors(sched)), errors(sched)


SCRIPT = '''
import torch
from torch import nn

model = nn.Linear(4, 2)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = torch.linspace(-1.0, 1.0, 32).reshape(8, 4)
y = torch.linspace(0.0, 1.0, 16).reshape(8, 2)


def adjust_learning_rate(optimizer, epoch):
    lr = 0.1 * (0.1 ** (epoch // 3))
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def train(epoch):
    adjust_learning_rate(optimizer, epoch)
    for i in range(2):
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("lr", float(optimizer.param_groups[0]['lr']))


for epoch in range(7):
    train(epoch)
'''


def test_a_module_optimizer_whose_rate_a_function_sets_gets_the_module_opt_state(tmp_path):
    """The PyTorch examples' ``adjust_learning_rate(optimizer, epoch)`` called in ``def train(epoch)`` on the module's
    optimizer: the helper takes the module's opt_state (the training function declares it global), and the rates
    the translated script reads back are PyTorch's, epoch by epoch."""
    from runners import python
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    r = translate_source(SCRIPT, "train.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "optimizer = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1, momentum=0.9)" in r.output, r.output
    assert "    adjust_learning_rate(opt_state, epoch)\n" in r.output
    rates = []
    for name, text in (("torch_side.py", SCRIPT), ("jax_side.py", r.output)):
        (tmp_path / name).write_text(text)
        p = python(tmp_path / name, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        rates.append([float(line.split()[1]) for line in p.stdout.splitlines() if line.startswith("lr ")])
    assert len(rates[0]) == 7 and len(set(rates[0])) == 3
    assert rates[1] == pytest.approx(rates[0], rel=1e-6)
