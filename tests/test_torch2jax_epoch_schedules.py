"""Schedulers stepped once per epoch, after a loop over a DataLoader (training.py _epoch_schedule): MultiStepLR →
optax.piecewise_constant_schedule with the milestones counted in updates, CosineAnnealingLR → the cosine of the
epoch (count // len(loader)), LambdaLR with an arithmetic lambda → lr times it at the epoch. The translated
training function trains like PyTorch's (same initial parameters, same batches: every parameter and every loss
compared by the verifier); what is not exact stays the rule's error, with the schedule to write."""
from __future__ import annotations

import json

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

pytest.importorskip("torch")
pytest.importorskip("jax")

SOURCE = '''
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def train(model, x, y):
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.5)
    scheduler = SCHEDULER
    criterion = nn.CrossEntropyLoss()
    losses = []
    for epoch in range(5):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
    return model, losses
'''

CASES = {
    "multistep": ("torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1, 3], gamma=0.3)",
                  "optax.piecewise_constant_schedule(0.5, {1 * len(loader): 0.3, 3 * len(loader): 0.3})"),
    "cosine": ("torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4)",
               "lambda count: optax.cosine_decay_schedule(0.5, decay_steps=4)(count // len(loader))"),
    "lambda": ("torch.optim.lr_scheduler.LambdaLR(optimizer, lambda e: 1.0 / (1 + 2 * e))",
               "lambda count: 0.5 * (1.0 / (1 + 2 * (count // len(loader))))"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_epoch_stepped_scheduler_trains_like_pytorch(case, session, tmp_path):
    from fwport.verify.run import Options
    from fwport.verify.torch2jax import verify_training
    scheduler, schedule = CASES[case]
    src = SOURCE.replace("SCHEDULER", scheduler)
    r = translate_source(src, "train.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert f"learning_rate={schedule}" in r.output, r.output
    assert "scheduler" not in r.output
    (tmp_path / "model.py").write_text(src)
    (tmp_path / "translated.py").write_text(r.output)
    opts = Options(str(tmp_path / "model.py"), str(tmp_path / "translated.py"), "Net", args={},
                   inputs=["float32[10,6]", "int64[10]:3"], device="cpu", direction="torch2jax", dtype="float32")
    cert = verify_training(opts, session, "train", {})
    assert cert["verdict"] == "pass", json.dumps(cert, indent=1, default=str)[:3000]
    assert len(cert["results"]["losses"]) and len(cert["results"]["trained"]) == 4


def test_a_cosine_schedule_past_t_max_or_a_lambda_with_python_max_is_not_rewritten():
    long = SOURCE.replace("SCHEDULER", "torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=2)")
    r = translate_source(long, "train.py", "torch2jax")
    assert any(f.severity is Severity.WARNING and "rises again" in f.message for f in r.findings), r.findings
    # (over a range, such a lambda is a table of its values: test_torch2jax_t2j32.py; over a list, the epochs are unknown)
    py_max = SOURCE.replace("SCHEDULER", "torch.optim.lr_scheduler.LambdaLR(optimizer, lambda e: max(0.1, 0.9 ** e))") \
        .replace("for epoch in range(5):", "for epoch in [0, 1, 2, 3, 4]:")
    r = translate_source(py_max, "train.py", "torch2jax")
    assert any(f.severity is Severity.ERROR and "jnp.maximum" in f.message for f in r.findings), r.findings
    ms = SOURCE.replace("SCHEDULER", "torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 2], gamma=0.3)")
    r = translate_source(ms, "train.py", "torch2jax")
    assert any(f.severity is Severity.ERROR and "MultiStepLR" in f.message for f in r.findings), r.findings
