"""torch2jax training code of real PyTorch files: pytorch/examples' siamese_network steps the optimizer it
receives in ``train(args, model, device, train_loader, optimizer, epoch)``, and another function of the file has a
parameter of that name (its dataset's ``def __init__(self, root, train, ...)``, read as ``train=train``): that name is
the other function's own, not a use of train(), so train() is threaded (opt_state through its signature) and the
StepLR stepped once per epoch becomes the optimizer's schedule. The translated training trains like PyTorch's (same
initial parameters, same batches: every parameter compared by the verifier)."""
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
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset


class Pairs(Dataset):
    def __init__(self, x, y, train):
        n = x.shape[0] * 3 // 4
        self.x = x[:n] if train else x[n:]
        self.y = y[:n] if train else y[n:]

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def train(model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()


def fit(model, x, y):
    device = torch.device("cpu")
    train_set = Pairs(x, y, train=True)
    train_loader = DataLoader(train_set, batch_size=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.5)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.5)
    for epoch in range(1, 4):
        train(model, device, train_loader, optimizer, epoch)
        scheduler.step()
    return model
'''


def _errors(r) -> list:
    return [f for f in r.findings if f.severity is Severity.ERROR]


def test_a_parameter_of_another_function_named_like_the_training_function_is_not_a_use_of_it():
    r = translate_source(SOURCE, "train.py", "torch2jax")
    assert not _errors(r), _errors(r)
    assert "def train(model, device, train_loader, optimizer, opt_state, epoch):" in r.output, r.output
    assert "model, opt_state = train(model, device, train_loader, optimizer, opt_state, epoch)" in r.output, r.output
    assert ("optimizer = optax.sgd(learning_rate=optax.exponential_decay(0.5, transition_steps=len(train_loader), "
            "decay_rate=0.5, staircase=True)") in r.output, r.output
    assert "scheduler" not in r.output and ".backward()" not in r.output
    # a use of train() itself that is not such a call (here passed as a value) still keeps the error
    other = translate_source(SOURCE.replace("    return model\n", "    return model, [train]\n"), "train.py", "torch2jax")
    assert any("is not created in this function" in f.message for f in _errors(other)), other.findings


def test_the_threaded_training_function_trains_like_pytorch(session, tmp_path):
    from fwport.verify.run import Options
    from fwport.verify.torch2jax import verify_training
    r = translate_source(SOURCE, "train.py", "torch2jax")
    assert not _errors(r), _errors(r)
    (tmp_path / "model.py").write_text(SOURCE)
    (tmp_path / "translated.py").write_text(r.output)
    opts = Options(str(tmp_path / "model.py"), str(tmp_path / "translated.py"), "Net", args={},
                   inputs=["float32[16,6]", "int64[16]:3"], device="cpu", direction="torch2jax", dtype="float32")
    cert = verify_training(opts, session, "fit", {})
    assert cert["verdict"] == "pass", json.dumps(cert, indent=1, default=str)[:3000]
    assert len(cert["results"]["trained"]) == 4


# pytorch/examples' time_sequence_prediction/generate_sine_wave.py: numpy data saved with torch.save
SINE = '''
import numpy as np
import torch

np.random.seed(2)
T = 20
x = np.empty((5, 40), 'int64')
x[:] = np.array(range(40)) + np.random.randint(-4 * T, 4 * T, 5).reshape(5, 1)
data = np.sin(x / 1.0 / T).astype('float64')
torch.save(data, open('traindata.pt', 'wb'))
'''


def test_numpy_data_saved_with_torch_save_is_written_in_its_archive_layout(tmp_path):
    """torch.save of a name bound once to numpy data → save_pickled_arrays: the file the translation writes (torch
    unimportable there) holds the same array as PyTorch's, read back by torch.load and by the translated torch.load
    of numpy data (load_pickled_arrays)."""
    import numpy as np

    from runners import python
    r = translate_source(SINE, "gen.py", "torch2jax")
    assert not _errors(r), _errors(r)
    assert "save_pickled_arrays(data, open('traindata.pt', 'wb'))" in r.output and "import torch" not in r.output
    for side, text in (("torch", SINE), ("jax", r.output)):
        (tmp_path / side).mkdir()
        (tmp_path / side / "gen.py").write_text(text)
        block = "import sys; sys.modules['torch'] = None; " if side == "jax" else ""
        p = python("-c", block + "import runpy; runpy.run_path('gen.py')", side=side, cwd=tmp_path / side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
    import torch
    from fwport.packs.torch2jax.data import TEXTS
    ns: dict = {}
    exec(TEXTS["load_pickled_arrays"].format(np="np.", jnp="jnp.", eqx="eqx."), ns)
    want = torch.load(tmp_path / "torch" / "traindata.pt", weights_only=False)
    assert want.shape == (5, 40) and want.dtype == np.float64
    for read in (lambda f: torch.load(f, weights_only=False), ns["load_pickled_arrays"]):
        got = read(tmp_path / "jax" / "traindata.pt")
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("value", ["torch.sin(torch.arange(4.0))", "(np.zeros(3), torch.ones(2))",
                                   "np.zeros(3).tolist() + [torch.ones(2)]"])
def test_data_that_may_hold_a_tensor_keeps_the_error(value):
    src = SINE.replace("data = np.sin(x / 1.0 / T).astype('float64')", f"data = {value}")
    r = translate_source(src, "gen.py", "torch2jax")
    assert any("torch.save(data, ...)" in f.message for f in _errors(r)), r.findings
    again = translate_source(SINE + "data = data * 2\n", "gen.py", "torch2jax")  # bound twice: not read
    assert any("torch.save(data, ...)" in f.message for f in _errors(again)), again.findings
