"""`fwport verify --direction torch2jax --check step`: one torch.optim.SGD step against one optax.sgd step on the
same loss, in training mode (BatchNorm on the batch's statistics and its running statistics updated; dropout layers
off), every parameter and running statistic compared after it (fwport/verify/torch2jax.py `_compare_step`).
The BatchNorm momentum trap (PyTorch's momentum weighs the new batch, Equinox's the running value) leaves the forward
and the gradients exact: only the step sees it."""
from __future__ import annotations

import textwrap

import pytest

from helpers import needs, t2j
from runners import verify_torch2jax

pytestmark = needs("torch", "jax", "equinox", "optax")

SRC = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4, momentum=0.2)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(4, 3)
        self.bn1 = nn.BatchNorm1d(3)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))
        h = self.drop(h.mean(dim=(2, 3)))
        return self.bn1(self.fc(h))


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 2)

    def forward(self, x):
        return self.fc(F.dropout(x, 0.3, training=self.training))


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, batch_first=True)
        self.out = nn.Linear(5, 2)

    def forward(self, x):
        h, _ = self.lstm(x)
        return self.out(h)
'''
INPUTS = {"Net": ["float64[6,3,5,5]"], "Noisy": ["float64[4,5]"], "Tagger": ["float64[3,6,4]"]}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("t2j-step")
    (d / "model.py").write_text(textwrap.dedent(SRC).lstrip("\n"))
    r = t2j(SRC)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    (d / "good.py").write_text(r.output)
    return d, r.output


def _verify(files, model: str, text: str | None = None) -> dict:
    d, good = files
    path = d / "good.py"
    if text is not None:
        assert text != good, "the mutation did not apply"
        path = d / f"bad_{model}.py"
        path.write_text(text)
    return verify_torch2jax(d / "model.py", path, model, INPUTS[model], checks=("forward", "grad", "step"))


def test_one_sgd_step_in_training_mode_matches(files):
    cert = _verify(files, "Net")
    assert cert["verdict"] == "pass", cert
    assert cert["step"]["mode"] == "train" and cert["step"]["lr"] == 0.1
    step = {e["name"]: e for e in cert["results"]["step"]}
    # every parameter and running statistic of the original, nothing skipped
    assert set(step) == {"conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                         "fc.weight", "fc.bias", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"}
    # PyTorch's unbiased running variance from Equinox's biased one: n = batch * height * width values per channel
    assert "n = 150 per channel" in step["bn.running_var"]["note"]
    assert "n = 6 per channel" in step["bn1.running_var"]["note"]


def test_batchnorm_momentum_bug_is_invisible_to_forward_and_gradients_but_caught_by_the_step(files):
    _, good = files
    assert "momentum=0.8" in good  # PyTorch's 0.2 weighs the new batch; Equinox's 0.8 the running value
    cert = _verify(files, "Net", good.replace("momentum=0.8", "momentum=0.2"))
    assert cert["verdict"] == "mismatch"
    assert all(e["ok"] for g in ("outputs", "gradients", "input_gradients") for e in cert["results"][g])
    bad = {e["name"] for e in cert["results"]["step"] if not e["ok"]}
    assert bad == {"bn.running_mean", "bn.running_var"}
    assert cert["first_diverging"]["layer"] == "bn" and cert["first_diverging"]["point"] == "after one SGD step"


def test_functional_dropout_in_training_mode_steps_in_eval_mode(files):
    cert = _verify(files, "Noisy")
    assert cert["verdict"] == "pass", cert
    assert cert["step"]["mode"] == "eval" and "draws random numbers" in cert["step"]["why"]
    assert {e["name"] for e in cert["results"]["step"]} == {"fc.weight", "fc.bias"}


def test_folded_recurrent_biases_have_no_stepped_value_of_their_own(files):
    cert = _verify(files, "Tagger")
    assert cert["verdict"] == "pass", cert
    names = {e["name"] for e in cert["results"]["step"]}
    assert {"lstm.weight_ih_l0", "lstm.weight_hh_l0", "out.weight", "out.bias"} <= names
    assert not names & {"lstm.bias_ih_l0", "lstm.bias_hh_l0"}  # one Equinox bias holds their sum
