"""torch2jax keys, loop counters and frozen parameters, each run against PyTorch: a drawing model called again in a seeded scope takes keys
split per statement (new dropout masks and noise at every call and iteration, as PyTorch's); a non-name input is
bound to a fresh name where it is passed (one evaluation: a random input drawn once, an iterator advanced once)."""
from __future__ import annotations

import numpy as np

from fwport.core.finding import Severity
from helpers import by, error_findings as errors, needs, t2j
from runners import both_sides, python

needs_frameworks = needs("torch", "jax", "equinox")

SEEDED = '''
import torch
import torch.nn as nn

torch.manual_seed(0)


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x) + torch.randn_like(x) * 0.0


model = Noisy()
x = torch.ones(4, 200)
a = model(x)
b = model(x)
loop = []
for _ in range(3):
    loop.append(model(x))
'''


@needs_frameworks
def test_a_model_called_again_in_a_seeded_scope_draws_anew_as_pytorchs(tmp_path):
    r = t2j(SEEDED)
    assert "key, subkey = jax.random.split(key)\na = jax.vmap(model)(x, key=jax.random.split(subkey, " in r.output
    assert not [f for f in by(r, Severity.WARNING) if "key as it is" in f.message], r.findings
    outs = both_sides(tmp_path, SEEDED, """
    arrays = [ns["a"], ns["b"], *ns["loop"]]
    np.savez(sys.argv[3], *[np.asarray(a) for a in arrays])
    """)
    for side, arrays in zip(("torch", "jax"), outs):
        masks = [a != 0 for a in arrays]
        kept = np.mean([m.mean() for m in masks])
        assert abs(kept - 0.5) < 0.03, (side, kept)  # dropout p=0.5
        np.testing.assert_array_equal(np.unique(np.concatenate([a.ravel() for a in arrays])), [0.0, 2.0])
        # every call a new mask: no two of the five calls alike, nor two examples of one call
        flat = {m.tobytes() for m in masks} | {row.tobytes() for m in masks for row in m}
        assert len(flat) == 5 + 5 * 4, side


BOUND = '''
import torch
import torch.nn as nn

torch.manual_seed(0)


class Doubler(nn.Module):
    def forward(self, x):
        return x * 2.0 + torch.randn_like(x) * 0.0


model = Doubler()
batches = iter([torch.ones(2, 3), torch.ones(2, 3) * 3.0, torch.ones(2, 3) * 5.0])
y = model(next(batches))
z = model(next(batches))
w = model(torch.randn(2, 3))
'''


@needs_frameworks
def test_an_input_that_calls_anything_is_bound_once_for_its_batch_size(tmp_path):
    r = t2j(BOUND)
    assert not errors(r), r.findings
    out = r.output
    assert "y = jax.vmap(model)(inputs := next(batches), key=jax.random.split(subkey, inputs.shape[0]))" in out, out
    assert "z = jax.vmap(model)(inputs1 := next(batches), key=jax.random.split(subkey, inputs1.shape[0]))" in out
    assert ("w = jax.vmap(model)(inputs2 := jax.random.normal(subkey1, (2, 3)), key=jax.random.split(subkey2, "
            "inputs2.shape[0]))") in out, out
    assert out.count("jax.random.normal(") == 2, out  # the input drawn once (and the forward's noise)
    torch_out, jax_out = both_sides(tmp_path, BOUND, """
    np.savez(sys.argv[3], *[np.asarray(ns[k]) for k in ("y", "z")])
    """)
    for t, j in zip(torch_out, jax_out):
        np.testing.assert_array_equal(t, j)  # the iterator advanced once per call: 2.0 then 6.0
    assert jax_out[1][0, 0] == 6.0


# --- a loop counter the loss computes with: a traced array, one compilation ------------------------------------

COUNTED = '''
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
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    losses = []
    for epoch in range(4):
        for i, (xb, yb) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(xb), yb) * (epoch + 1) / (i + 2.0) + 0.5 ** epoch
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return model, losses
'''

_COMPILES = """
import json, logging, runpy, sys
sys.modules["torch"] = None
import jax
import numpy as np
jax.config.update("jax_log_compiles", True)
said = []
class Said(logging.Handler):
    def emit(self, record):
        said.append(record.getMessage())
logging.getLogger("jax").addHandler(Said())
logging.getLogger("jax").setLevel(logging.WARNING)
ns = runpy.run_path(sys.argv[1])
model = ns["Net"](key=jax.random.key(0))
x = np.random.RandomState(0).randn(8, 6).astype(np.float32)
model, losses = ns["train"](model, x, np.arange(8) % 3)
print(json.dumps({"steps": len(losses), "compiled": sum(m.startswith("Compiling jit(train_step)") for m in said)}))
"""


def _verified_training(tmp_path, session, src: str, out: str) -> dict:
    from fwport.verify.run import Options
    from fwport.verify.torch2jax import verify_training
    (tmp_path / "model.py").write_text(src)
    (tmp_path / "translated.py").write_text(out)
    opts = Options(str(tmp_path / "model.py"), str(tmp_path / "translated.py"), "Net", args={},
                   inputs=["float32[8,6]", "int64[8]:3"], device="cpu", direction="torch2jax", dtype="float64")
    cert = verify_training(opts, session, "train", {})
    assert cert["verdict"] == "pass", str(cert)[:3000]
    return cert


@needs_frameworks
def test_a_counter_the_loss_computes_with_is_traced_once_and_trains_like_pytorch(tmp_path, session):
    import json
    import subprocess
    import sys
    r = t2j(COUNTED)
    assert not errors(r), r.findings
    assert not [f for f in by(r, Severity.WARNING) if "compiles again" in f.message], r.findings
    assert "train_step(model, opt_state, criterion, xb, yb, jnp.asarray(epoch), jnp.asarray(i))" in r.output, r.output
    cert = _verified_training(tmp_path, session, COUNTED, r.output)  # the same losses and parameters as PyTorch's
    assert len(cert["results"]["losses"]) == 1 and len(cert["results"]["trained"]) == 4
    p = subprocess.run([sys.executable, "-c", _COMPILES, str(tmp_path / "translated.py")], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    ran = json.loads(p.stdout.strip().splitlines()[-1])
    assert ran == {"steps": 8, "compiled": 1}, ran  # (with the ints as static: one compilation per (epoch, i))


def test_a_counter_read_otherwise_stays_static_and_warned():
    for loss in ("criterion(model(xb), yb) * (1 if epoch > 2 else 2)", "criterion(model(xb), yb)[:epoch + 1].sum()",
                 "criterion(model(xb), yb) * (epoch + 1) ** -1"):
        r = t2j(COUNTED.replace("criterion(model(xb), yb) * (epoch + 1) / (i + 2.0) + 0.5 ** epoch", loss))
        assert [f for f in by(r, Severity.WARNING) if "compiles again" in f.message and "epoch" in f.message], loss
        assert "jnp.asarray(epoch)" not in r.output, r.output


# --- frozen parameters: the optimizer's updates of them set to zero ------------------------------------------

FROZEN = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 8))
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.encoder(x)))


def train(model, x, y):
    FREEZE
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=0.1)
    criterion = nn.CrossEntropyLoss()
    losses = []
    for epoch in range(5):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses
'''

FREEZES = {
    "loop": ("for p in model.encoder.parameters():\n        p.requires_grad = False\n"
             "    model.head.bias.requires_grad = False", ["encoder", "head.bias"]),
    "method": ("model.encoder.requires_grad_(False)", ["encoder"]),
    "loop_method": ("for param in model.encoder.parameters():\n        param.requires_grad_(False)", ["encoder"]),
}

_FROZEN_RUN = """
import json, runpy, sys
sys.modules["torch"] = None
import jax
import numpy as np
jax.config.update("jax_enable_x64", True)
ns = runpy.run_path(sys.argv[1])
start = ns["Net"](key=jax.random.key(0))
x = np.random.RandomState(0).randn(8, 6)
trained, losses = ns["train"](start, x, np.arange(8) % 3)
parts = {"encoder": lambda m: m.encoder, "head.bias": lambda m: m.head.bias, "head.weight": lambda m: m.head.weight}
same = {k: all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in
               zip(jax.tree_util.tree_leaves(f(start)), jax.tree_util.tree_leaves(f(trained)))) for k, f in parts.items()}
print(json.dumps(same))
"""


@needs_frameworks
def test_frozen_parts_keep_their_values_exactly_and_the_rest_trains_like_pytorch(tmp_path, session):
    import json
    for case, (freeze, parts) in FREEZES.items():
        src = FROZEN.replace("FREEZE", freeze)
        r = t2j(src)
        assert not errors(r), (case, r.findings)
        assert ".requires_grad" not in r.output, r.output  # (the freezes go)
        where = "m." + parts[0] if len(parts) == 1 else "(" + ", ".join("m." + p for p in parts) + ")"
        assert (f'optax.multi_transform({{"trained": optax.chain(optax.add_decayed_weights(0.1), optax.adam('
                f'learning_rate=0.05)), "frozen": optax.set_to_zero()}}, frozen_labels(lambda m: {where}))') in r.output
        _verified_training(tmp_path, session, src, r.output)  # every parameter and loss as PyTorch's
        p = python("-c", _FROZEN_RUN, tmp_path / "translated.py", side="jax", timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        same = json.loads(p.stdout.strip().splitlines()[-1])
        assert same == {"encoder": True, "head.bias": "head.bias" in parts, "head.weight": False}, (case, same)


def test_a_freeze_fwport_cannot_place_stays_an_error():
    cases = {
        "by name": "for n, p in model.named_parameters():\n        if 'encoder' in n:\n            p.requires_grad = False",
        "unfrozen later": "model.encoder.requires_grad_(False)\n    model.encoder[0].requires_grad_(True)",
        "in a loop": "for _ in range(1):\n        model.encoder.requires_grad_(False)",
    }
    for case, freeze in cases.items():
        r = t2j(FROZEN.replace("FREEZE", freeze))
        assert [f for f in errors(r) if "freezes a parameter" in f.message], (case, r.findings)
        assert "frozen_labels" not in r.output, (case, r.output)
    late = FROZEN.replace("FREEZE", "pass").replace("    return model, losses", "    model.encoder.requires_grad_(False)\n"
                                                                         "    return model, losses")
    r = t2j(late)  # after the loop: nothing trains after it, but it is not read as one before the steps
    assert [f for f in errors(r) if "freezes a parameter" in f.message], r.findings
