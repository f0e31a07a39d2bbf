"""torch2jax gaps of t2j32: ``t.to(v)`` outside a forward's batched path. A ``v`` fwport cannot tell a dtype, a device
or a tensor is an error (it was left as written with no finding: a jax array has no ``.to``); ``.to(y.dtype)`` and
``.to(dtype=d)`` are casts; ``.to(rank)`` / ``.to(self.gpu_id)`` / ``.to(DEVICE)`` are device moves, removed."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from runners import python


def _t(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "f.py", "torch2jax")


def _errors(r):
    return [f for f in r.findings if f.severity.value == "error"]


UNKNOWN = '''
import torch


def f(q, *rest):
    dtype = rest[-1]
    a = torch.ones(3).to(q)
    b = torch.arange(4).to(dtype)
    return a, b


x = torch.zeros(2)
w = torch.ones(2).to(x)
'''


def test_a_to_of_an_argument_fwport_cannot_tell_is_an_error():
    src = textwrap.dedent(UNKNOWN).lstrip("\n")
    r = _t(src)
    lines = src.splitlines()
    want = [lines.index(s) + 1 for s in ("    a = torch.ones(3).to(q)", "    b = torch.arange(4).to(dtype)",
                                         "w = torch.ones(2).to(x)")]
    got = [f.line for f in _errors(r) if "cannot tell whether" in f.message and "a dtype, a device or a tensor" in f.message]
    assert got == want, [(f.line, f.message) for f in r.findings]
    assert "# fwport: unsupported-construct: torch.ones(3).to(q): fwport cannot tell whether q is" in r.output


KNOWN = '''
import torch
import torch.nn as nn

x = torch.arange(6).reshape(2, 3) * 0.5
y = torch.arange(3).to(x.dtype) * 1.5
dt = (x * 2).dtype
z = torch.ones(2, 3).to(dtype=dt) + 0.25
h = torch.ones(3).to(torch.float16)
DEVICE = torch.device("cpu")
v = (x + 1).to(DEVICE)
device = torch.device("cpu")
u = (x - 1).to(device)
model = nn.Linear(3, 2).to(DEVICE)


def distributed(batch, rank, gpu_id):
    return batch.to(rank) + batch.to(gpu_id)
'''

_RUN = ("import sys, runpy, numpy\nsys.modules['torch'] = None\nns = runpy.run_path(sys.argv[1])\n"
        "numpy.savez(sys.argv[2], **{k: numpy.asarray(ns[k]) for k in 'yzhvu'})\n"
        "print(' '.join(str(numpy.asarray(ns[k]).dtype) for k in 'yzhvu'))\n")


def test_casts_and_device_moves_are_translated_and_compute_pytorchs_values(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    import numpy as np
    src = textwrap.dedent(KNOWN).lstrip("\n")
    r = _t(src)
    assert not _errors(r), [(f.line, f.message) for f in _errors(r)]
    assert "y = jnp.arange(3).astype(x.dtype) * 1.5" in r.output
    assert "z = jnp.ones((2, 3)).astype(dt) + 0.25" in r.output
    assert "return batch + batch\n" in r.output, r.output
    assert ".to(" not in r.output, r.output
    ns: dict = {}
    exec(compile(src, "f.py", "exec"), ns)
    (tmp_path / "t.py").write_text(r.output)
    p = python("-c", _RUN, tmp_path / "t.py", tmp_path / "got.npz", side="jax", timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    got = np.load(tmp_path / "got.npz")
    dtypes = p.stdout.split()
    for i, k in enumerate("yzhvu"):
        want = ns[k].numpy()
        assert dtypes[i] == str(want.dtype), (k, dtypes[i], want.dtype)
        assert got[k].shape == want.shape and np.max(np.abs(got[k] - want)) < 1e-6, k


# --- LambdaLR whose lambda Python alone computes (max, a method of an object), stepped once per epoch of a range ---

GAN_SCHEDULE = '''
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


class LambdaLR:
    def __init__(self, n_epochs, offset, decay_start_epoch):
        self.n_epochs = n_epochs
        self.offset = offset
        self.decay_start_epoch = decay_start_epoch

    def step(self, epoch):
        return 1.0 - max(0, epoch + self.offset - self.decay_start_epoch) / (self.n_epochs - self.decay_start_epoch)


def train(model, x, y):
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=LambdaLR(6, 1, 3).step)
    criterion = nn.CrossEntropyLoss()
    losses = []
    for epoch in range(1, 6):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
    return model, losses
'''


def test_a_lambda_lr_python_computes_is_a_table_of_its_epochs_and_trains_like_pytorch(session, tmp_path):
    import json

    import numpy as np
    import torch
    from fwport.verify.run import Options
    from fwport.verify.torch2jax import verify_training
    r = _t(GAN_SCHEDULE)
    assert not _errors(r), [(f.line, f.message) for f in _errors(r)]
    assert "scheduler" not in r.output, r.output
    at = r.output.index("learning_rate=") + len("learning_rate=")
    schedule = r.output[at:r.output.index(", momentum=", at)]
    assert "LambdaLR(6, 1, 3).step" in schedule and "range(1, 6)" in schedule, schedule
    # the rate of each epoch: PyTorch's scheduler against the schedule at the first update of that epoch (3 per epoch)
    ns: dict = {}
    exec(compile(GAN_SCHEDULE, "src.py", "exec"), ns)
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda=ns["LambdaLR"](6, 1, 3).step)
    want = []
    for _ in range(5):
        want.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    import jax.numpy as jnp
    f = eval(schedule.replace("len(loader)", "3"), {"jnp": jnp, "LambdaLR": ns["LambdaLR"]})
    got = [float(f(jnp.asarray(3 * e + k))) for e in range(5) for k in range(3)]
    assert np.allclose(got, np.repeat(want, 3), rtol=1e-6, atol=0), (got, want)
    assert len(set(want)) >= 3  # the rate does change over the epochs
    # the whole training: every parameter and every loss against PyTorch's, from the same start and batches
    (tmp_path / "model.py").write_text(GAN_SCHEDULE)
    (tmp_path / "translated.py").write_text(r.output)
    opts = Options(str(tmp_path / "model.py"), str(tmp_path / "translated.py"), "Net", args={},
                   inputs=["float32[10,6]", "int64[10]:3"], device="cpu", direction="torch2jax", dtype="float32")
    cert = verify_training(opts, session, "train", {})
    assert cert["verdict"] == "pass", json.dumps(cert, indent=1, default=str)[:3000]
    assert len(cert["results"]["losses"]) and len(cert["results"]["trained"]) == 4


def _gan_epochs() -> str:
    """tests/data/torch_gan_reset_grad.py's GAN loop run for 3 epochs, each optimizer with a LambdaLR stepped after
    each epoch (PyTorch-GAN's shape: the schedulers and the loader created after the optimizers, two optimizers
    stepped in one loop; the generator's lambda a method of an object, the discriminator's a Python max)."""
    from pathlib import Path
    src = (Path(__file__).resolve().parent / "data" / "torch_gan_reset_grad.py").read_text()
    head, loop = src.split("g_losses = []\n")
    head = head.replace("generator = Generator()\n", GAN_SCHEDULE[GAN_SCHEDULE.index("class LambdaLR:"):
                                                                  GAN_SCHEDULE.index("def train(")] + "generator = Generator()\n")
    head = head.replace("g_optimizer = torch.optim.SGD(generator.parameters(), lr=0.05, momentum=0.9)\n",
                        "g_optimizer = torch.optim.SGD(generator.parameters(), lr=0.05, momentum=0.9)\n"
                        "g_scheduler = torch.optim.lr_scheduler.LambdaLR(g_optimizer, lr_lambda=LambdaLR(3, 0, 1).step)\n"
                        "d_scheduler = torch.optim.lr_scheduler.LambdaLR(d_optimizer, lambda e: max(0.2, 1.0 - 0.5 * e))\n"
                        "loader = list(batches)\n")
    loop = loop.replace("enumerate(batches)", "enumerate(loader)")
    body = "\n".join("    " + line if line.strip() else line for line in loop.splitlines())
    return head + "g_losses = []\nfor epoch in range(3):\n" + body + "\n    g_scheduler.step()\n    d_scheduler.step()\n"


def test_lambda_lrs_of_a_gan_loop_train_as_pytorch_does(tmp_path):
    import json

    import numpy as np
    from test_torch2jax_gan import _RUN_N_CRITIC
    src = _gan_epochs()
    assert src.count("g_scheduler") == 2 and "    g_scheduler.step()\n" in src
    r = _t(src)
    assert not _errors(r), [(f.line, f.message) for f in _errors(r)]
    assert "scheduler" not in r.output, r.output
    assert ("g_optimizer = optax.sgd(learning_rate=lambda count: 0.05 * jnp.asarray([(LambdaLR(3, 0, 1).step)(_epoch) "
            "for _epoch in range(len(range(3)))])[count // len(loader)], momentum=0.9)") in r.output, r.output
    (tmp_path / "src.py").write_text(src)
    (tmp_path / "out.py").write_text(r.output)
    results = []
    for path, side in ((tmp_path / "src.py", "torch"), (tmp_path / "out.py", "jax")):
        p = python("-c", _RUN_N_CRITIC, path, side, side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    t, j = results
    assert len(t["g_losses"]) == len(j["g_losses"]) == 15
    for k in ("g0", "g3", "d0", "g_losses", "last_fake"):
        np.testing.assert_allclose(j[k], t[k], rtol=1e-4, atol=1e-5, err_msg=k)
    # (without the schedules the runs part: the rates do matter here)
    plain = r.output.replace("learning_rate=lambda count: 0.05 *", "learning_rate=lambda count: 0.05 + 0 *") \
        .replace("learning_rate=lambda count: 0.01 *", "learning_rate=lambda count: 0.01 + 0 *")
    (tmp_path / "plain.py").write_text(plain)
    p = python("-c", _RUN_N_CRITIC, tmp_path / "plain.py", "jax", side="jax", timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not np.allclose(json.loads(p.stdout.strip().splitlines()[-1])["g_losses"], t["g_losses"], rtol=1e-4, atol=1e-5)
