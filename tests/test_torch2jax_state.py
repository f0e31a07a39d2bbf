"""A model's BatchNorm state threaded through a script's functions (passes/state.py): a training function
given the model takes ``state`` and hands it back with the model and opt_state, an evaluating one takes it,
one running the model in training mode returns it; a model a builder returns (``net = ResNet18()``) is
called with its state through jax.vmap. Run against PyTorch: the translation with torch unimportable."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_findings as errors, needs
from runners import python

PACK = load_pack("torch2jax")
needs_frameworks = needs("torch", "jax", "equinox", "optax")
NO_TORCH = "import sys\nsys.modules['torch'] = None\nimport runpy\nrunpy.run_path(sys.argv[1], run_name='__main__')\n"


def t2j(text: str):
    return translate_source(text, "example.py", PACK)


# BatchNorm alone (weight 1, bias 0 on both sides: the same start), inputs far from the fresh statistics
# (mean 0, variance 1), so an evaluation that missed the trained state would be far off
_SCRIPT = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x):
        return self.bn(x)


class Big(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.fc(x))


def build():
    return Big()


def train(model, loader, optimizer, epoch):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        out = model(x)
        loss = F.mse_loss(out, y)
        loss.backward()
        optimizer.step()
        print("train", epoch, loss.item())


def evaluate(model, loader):
    model.eval()
    total = 0.0
    for x, y in loader:
        out = model(x)
        total += F.mse_loss(out, y).item()
    print("eval", total)


def warm(model, x):
    model.train()
    y = model(x)
    print("warm", y.sum().item())


def check():
    net = build()
    y = net(torch.arange(12.0).reshape(4, 3) ** 2 * 100.0)
    print("fresh", abs(y.sum().item()), (y * y).sum().item())


def main():
    x = torch.arange(192.0).reshape(64, 3) / 20.0 + 5.0
    y = torch.sin(x)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=False)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(60):
        train(model, loader, optimizer, epoch)
    evaluate(model, loader)
    warm(model, x * 2.0)
    evaluate(model, loader)
    check()


if __name__ == "__main__":
    main()
'''


def test_the_state_is_threaded_through_the_functions_that_run_the_model():
    r = t2j(_SCRIPT)
    assert not errors(r), r.findings
    out = r.output
    assert "def train(model, state, loader, optimizer, opt_state, epoch):" in out
    assert "    return model, opt_state, state\n" in out
    assert "model, opt_state, state = train(model, state, loader, optimizer, opt_state, epoch)" in out
    # evaluating (model.eval()): it takes the state and hands nothing back
    assert "def evaluate(model, state, loader):" in out and "        evaluate(model, state, loader)\n" not in out
    assert out.count("    evaluate(model, state, loader)\n") == 2
    # in training mode (the statistics move): it returns the state, its caller rebinds it
    assert "def warm(model, state, x):" in out and "    return state\n" in out
    assert "    state = warm(model, state, x * 2.0)\n" in out
    # a builder's model: made with its state, called through jax.vmap with it
    assert "    net, state = eqx.nn.make_with_state(build)(key=jax.random.key(0))\n" in out
    assert ('y, state = jax.vmap(net, axis_name="batch", in_axes=(0, None), out_axes=(0, None))'
            '(jnp.arange(12.0).reshape(4, 3) ** 2 * 100.0, state)') in out


def _lines(text: str) -> list[tuple[str, list[float]]]:
    rows = []
    for ln in text.strip().splitlines():
        head, *vals = ln.split()
        rows.append((head, [float(v) for v in vals]))
    return rows


@needs_frameworks
def test_the_threaded_state_trains_and_evaluates_as_pytorch(tmp_path):
    src, out = tmp_path / "model.py", tmp_path / "out.py"
    src.write_text(_SCRIPT)
    r = t2j(_SCRIPT)
    out.write_text(r.output)
    t = python(src, side="torch", timeout=300)
    assert t.returncode == 0, t.stderr[-3000:]
    j = python("-c", NO_TORCH, out, side="jax", timeout=300)
    assert j.returncode == 0, r.output + j.stderr[-3000:]
    torch_rows, jax_rows = _lines(t.stdout), _lines(j.stdout)
    assert [h for h, _ in torch_rows] == [h for h, _ in jax_rows]
    assert [h for h, _ in jax_rows].count("train") == 60
    for (head, a), (_, b) in zip(torch_rows, jax_rows):
        if head == "fresh":  # batch statistics: sum 0, sum of squares the number of values (Linear's init apart;
            # the rows of the input differ in every direction, so no channel is near-constant for any init: with
            # rows differing along (1, 1, 1) alone, an unseeded init whose row sums to ~0 failed 1 run in 600)
            assert abs(a[0] - b[0]) < 1e-3 and b[1] == pytest.approx(a[1], rel=1e-4), (a, b)
        else:  # (running statistics: Equinox's average differs slightly from PyTorch's, the batch-norm warning)
            assert b == pytest.approx(a, rel=2e-3 if head == "eval" else 1e-4), (head, a, b)


def test_a_call_without_the_state_in_reach_is_an_error():
    src = _SCRIPT.replace("    check()\n\n\nif", "    check()\n\n\ndef again(loader):\n    evaluate(other, loader)\n\n\nif")
    r = t2j(src)
    errs = errors(r)
    line = src.splitlines().index("    evaluate(other, loader)") + 1
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", line)], r.findings
    assert "cannot find that model's state here" in errs[0].message


def test_a_training_mode_function_returning_a_value_is_an_error():
    src = _SCRIPT.replace('    print("warm", y.sum().item())\n', '    return y.sum()\n')
    r = t2j(src)
    errs = errors(r)
    line = src.splitlines().index("def warm(model, x):") + 1
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", line)], r.findings
    assert "returns a value" in errs[0].message


def test_a_function_used_as_a_value_or_not_as_a_statement_is_an_error():
    src = _SCRIPT.replace("    warm(model, x * 2.0)\n", "    hooks = [warm]\n    done = warm(model, x * 2.0)\n")
    r = t2j(src)
    lines = src.splitlines()
    assert sorted((f.code, f.line) for f in errors(r)) == [
        ("unsupported-construct", lines.index("    hooks = [warm]") + 1),
        ("unsupported-construct", lines.index("    done = warm(model, x * 2.0)") + 1)], r.findings


def test_a_builder_of_a_stateful_model_made_without_its_state_is_an_error():
    src = _SCRIPT.replace("def build():\n    return Big()", "def build():\n    return Net()")
    r = t2j(src)
    errs = errors(r)
    line = src.splitlines().index("    net = build()") + 1
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", line)], r.findings
    assert "make_with_state(build)" in errs[0].message


_GLOBAL = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x):
        return self.bn(x)


model = Net()


def run(x):
    y = model(x)
    return y


model.eval()
a = run(torch.arange(12.0).reshape(4, 3))
model.train()
b = run(torch.arange(12.0).reshape(4, 3) * 3.0)
model.eval()
c = run(torch.arange(12.0).reshape(4, 3))
print(*a.flatten().tolist(), *b.flatten().tolist(), *c.flatten().tolist())
'''


@needs_frameworks
def test_a_function_running_the_module_s_model_rebinds_the_global_state(tmp_path):
    r = t2j(_GLOBAL)
    assert not errors(r), r.findings
    assert "def run(x):\n    global state\n" in r.output
    src, out = tmp_path / "model.py", tmp_path / "out.py"
    src.write_text(_GLOBAL)
    out.write_text(r.output)
    t = python(src, side="torch", timeout=300)
    j = python("-c", NO_TORCH, out, side="jax", timeout=300)
    assert t.returncode == 0 and j.returncode == 0, r.output + t.stderr[-2000:] + j.stderr[-2000:]
    a, b = [float(v) for v in t.stdout.split()], [float(v) for v in j.stdout.split()]
    # evaluation with the fresh statistics, then a training-mode call (batch statistics): as PyTorch
    assert b[:24] == pytest.approx(a[:24], rel=1e-5, abs=1e-5)
    # that call moved the module's statistics on both sides (how far differs after one step: Equinox debiases
    # its average, PyTorch starts it from (0, 1), the batch-norm warning)
    assert a[24:] != pytest.approx(a[:12], rel=0.1) and b[24:] != pytest.approx(b[:12], rel=0.1)


_VOLUME = '''
import torch
from torch import nn


class Vol(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm3d(3)

    def forward(self, x):
        return self.bn(x)


def main():
    model = Vol()
    model.train()
    x = torch.arange(144.0).reshape(2, 3, 2, 3, 4) ** 1.5 / 100.0
    y = model(x)
    print("out", (y * x).sum().item(), (y[:, 0] * x[:, 0]).sum().item(), (y[1, 2] ** 3).sum().item())


if __name__ == "__main__":
    main()
'''


@needs_frameworks
def test_batchnorm3d_normalises_each_channel_of_a_volume_as_pytorch(tmp_path):
    """nn.BatchNorm3d (no rule before: a no-rule error) → eqx.nn.BatchNorm with its state, like 1d/2d: in training
    mode each channel of the (N, C, D, H, W) batch normalised over N, D, H, W (sums weighted by the input, so a
    statistic over other axes gives other numbers)."""
    src, out = tmp_path / "model.py", tmp_path / "out.py"
    src.write_text(_VOLUME)
    r = t2j(_VOLUME)
    assert not errors(r), r.findings
    assert 'self.bn = eqx.nn.BatchNorm(3, axis_name="batch", momentum=0.9, mode="batch")' in r.output
    out.write_text(r.output)
    t = python(src, side="torch", timeout=300)
    assert t.returncode == 0, t.stderr[-3000:]
    j = python("-c", NO_TORCH, out, side="jax", timeout=300)
    assert j.returncode == 0, r.output + j.stderr[-3000:]
    (head, a), = _lines(t.stdout)
    assert _lines(j.stdout) == [(head, pytest.approx(a, rel=1e-5))]
