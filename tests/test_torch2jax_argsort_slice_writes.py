"""torch2jax: argsort (torch.argsort and x.argsort(...), in functions, per-example and batched modules:
jnp.argsort, stable, with a warning where PyTorch's default unstable sort promises no order among ties) and writes
into a slice (`out[i] = v`) in a batched module (`out = out.at[i].set(v)` where the forward made the tensor and alone
holds it, else an error), which were left as written. Run against PyTorch."""
from __future__ import annotations

import textwrap

from fwport.core.finding import Severity
from helpers import by, error_findings as errors, needs, t2j
from runners import torch_and_jax, verify_model

needs_frameworks = needs("torch", "jax", "equinox")

SORTS = '''
import torch


def sorts(x):
    a = torch.argsort(x, dim=1, descending=True, stable=True)
    b = x.argsort(dim=0, stable=True)
    c = x.argsort(dim=-1, descending=True, stable=True)
    d = torch.argsort(x[0] * 7 + torch.arange(x.shape[1]))
    return a, b, c, d
'''


def test_argsort_becomes_jnp_argsort_with_a_warning_where_ties_may_differ():
    r = t2j(SORTS)
    assert not errors(r), r.findings
    out = r.output
    assert "jnp.argsort(x, axis=1, descending=True)" in out
    assert "jnp.argsort(x, axis=0)" in out and "jnp.argsort(x, axis=-1, descending=True)" in out
    assert "torch" not in out
    # only the call without stable=True warns (PyTorch promises no order among equal values there)
    warns = [f for f in by(r, Severity.WARNING) if "stable=True" in f.message]
    assert [(f.code, f.line) for f in warns] == [("approximate", 8)], r.findings
    # a continuous draw has no ties: no warning
    r = t2j("import torch\n\n\ndef f(n):\n    return torch.rand(3, n).argsort(dim=-1)\n")
    assert "jnp.argsort(jax.random.uniform(" in r.output and not [f for f in r.findings if "stable=True" in f.message]
    # a numpy / jax array's own argsort (no PyTorch keyword) is left as it is
    assert "    a = x.argsort()\n" in t2j("def f(x):\n    a = x.argsort()\n    return a\n").output


@needs_frameworks
def test_argsort_gives_pytorchs_indices_ties_included(tmp_path):
    import numpy as np
    body = '''
x = np.array([[3., 1., 3., 2., 1., 3., 0., 3.] * 3, [1., 1., 2., 0., 2., 1., 1., 0.] * 3])
x = torch.tensor(x) if side == "torch" else jnp.asarray(x)
np.save(OUT, np.concatenate([np.ravel(np.asarray(v)) for v in ns["sorts"](x)]))
'''
    t, j = torch_and_jax(tmp_path, textwrap.dedent(SORTS).lstrip("\n"), t2j(SORTS).output, body)
    np.testing.assert_array_equal(j, t)  # 24 values with ties: stable=True, ascending and descending, as PyTorch


#: a batched module (a batch mean): argsort over one axis, writes into a tensor it made, row by row in a loop, a
#: masked write and an augmented one
BATCHED = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        b = x.size(0)
        h = self.fc(x) - self.fc(x).mean(dim=0, keepdim=True)
        order = torch.argsort(h, dim=1, stable=True)
        rank = h.argsort(dim=-1, descending=True, stable=True)
        out = torch.zeros(b, 4, dtype=x.dtype)
        for i in range(b):
            out[i] = h[i] * 2
        out[0] += h[-1]
        out[out < -0.5] = -0.5
        return out + order.to(x.dtype) + 10 * rank.to(x.dtype)
'''


def test_a_batched_modules_argsort_and_writes_are_translated():
    r = t2j(BATCHED)
    assert not errors(r), r.findings
    out = r.output
    assert "order = jnp.argsort(h, axis=1)" in out and "rank = jnp.argsort(h, axis=-1, descending=True)" in out
    assert "            out = out.at[i].set(h[i] * 2)" in out and "out = out.at[0].add(h[-1])" in out
    assert "out = jnp.where(out < -0.5, -0.5, out)" in out
    assert "h.argsort(" not in out and "    out[" not in out


@needs_frameworks
def test_a_batched_modules_argsort_and_writes_compute_what_pytorch_computes(tmp_path):
    for n in (1, 3):
        cert = verify_model(tmp_path, BATCHED, "Net", [f"float64[{n},4]"])
        assert cert["verdict"] == "pass" and cert["batch_axis"]["axis"] is None


def test_a_batched_modules_write_into_a_shared_tensor_or_its_input_is_an_error():
    src = BATCHED.replace("        for i in range(b):\n", "        first = out[0]\n        x[:, 0] = 0.0\n"
                          "        for i in range(b):\n").replace("return out +", "return first + out +")
    r = t2j(src)
    errs = [(f.code, f.line) for f in errors(r)]
    # out[i] (out viewed by first) and x (the caller's input): left as written, with an error; the list keeps its own
    assert errs == [("unsupported-construct", 17), ("unsupported-construct", 19), ("unsupported-construct", 20),
                    ("unsupported-construct", 21)], r.findings
    assert all("no item assignment" in f.message for f in errors(r))
    r = t2j(BATCHED.replace("        return out", "        parts = [None, None]\n        parts[0] = h\n        return out"))
    assert not errors(r) and "        parts[0] = h\n" in r.output, r.findings


def test_a_per_example_argsort_dim_is_one_examples():
    r = t2j(BATCHED.replace("h = self.fc(x) - self.fc(x).mean(dim=0, keepdim=True)", "h = self.fc(x)")
            .split("        b = x.size(0)")[0] + "        h = self.fc(x)\n"
            "        return torch.argsort(h, dim=1) + h.argsort(dim=1, descending=True, stable=True)\n")
    assert not errors(r), r.findings
    assert "jnp.argsort(h, axis=0) + jnp.argsort(h, axis=0, descending=True)" in r.output, r.output
    assert len([f for f in by(r, Severity.WARNING) if "stable=True" in f.message]) == 1


#: a state_dict loaded into a name, then given to model.load_state_dict (at module level, and in a function that
#: makes the model first): read into the model's structure, as the translated torch.save(model.state_dict()) wrote it
LOADS = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


def restore(path):
    net = Net()
    weights = torch.load(path, map_location="cpu")
    net.load_state_dict(weights)
    return net


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
x = torch.linspace(-1, 1, 12).reshape(4, 3)
y = torch.ones(4, 2)
init = model(x)
torch.save(model.state_dict(), "net.pt")
for _ in range(3):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
trained = model(x)
state_dict = torch.load("net.pt", weights_only=True)
model.load_state_dict(state_dict)
loaded = model(x)
other = restore("net.pt")
'''


def test_a_loaded_state_dict_given_to_load_state_dict_is_read_into_the_model():
    r = t2j(LOADS)
    assert not errors(r), r.findings
    out = r.output
    assert "    weights = eqx.tree_deserialise_leaves(path, net)\n    net = weights\n" in out
    assert 'state_dict = eqx.tree_deserialise_leaves("net.pt", model)\nmodel = state_dict\n' in out
    # a state_dict changed before the load, read twice, or loaded before the model is made: the rule's error
    for old, new in (("    net.load_state_dict(weights)\n", "    del weights['fc.bias']\n    net.load_state_dict(weights)\n"),
                     ("    net.load_state_dict(weights)\n", "    net.load_state_dict(weights)\n    print(weights)\n"),
                     ("    net = Net()\n    weights = torch.load(path, map_location=\"cpu\")\n",
                      "    weights = torch.load(path, map_location=\"cpu\")\n    net = Net()\n"),
                     ("    net.load_state_dict(weights)\n", "    net.load_state_dict(weights, strict=False)\n")):
        assert old in LOADS
        errs = errors(t2j(LOADS.replace(old, new)))
        assert len(errs) == 1 and "torch.load(...) reads a pickle" in errs[0].message and errs[0].line in (15, 16), errs


_LOAD_RUN = '''
import sys, json, runpy
import numpy as np
side, path = sys.argv[1:3]
if side == "jax":
    sys.modules["torch"] = None
    import jax
ns = runpy.run_path(path, run_name="__main__")
other = ns["other"](ns["x"]) if side == "torch" else jax.vmap(ns["other"])(ns["x"])
print(json.dumps({k: np.asarray(v.detach() if side == "torch" else v).tolist()
                  for k, v in [*((k, ns[k]) for k in ("init", "trained", "loaded")), ("other", other)]}))
'''


@needs_frameworks
def test_the_loaded_state_dict_restores_what_was_saved_as_pytorch_does(tmp_path):
    import numpy as np
    from runners import printed_json
    (tmp_path / "orig.py").write_text(textwrap.dedent(LOADS).lstrip("\n"))
    (tmp_path / "jax.py").write_text(t2j(LOADS).output)
    got = {}
    for side, path in (("torch", "orig.py"), ("jax", "jax.py")):
        (tmp_path / side).mkdir()
        printed = printed_json(_LOAD_RUN, side, tmp_path / path, cwd=tmp_path / side,
                               env={"JAX_PLATFORMS": "cpu", "PATH": ""})
        got[side] = {k: np.array(v) for k, v in printed.items()}
    for side, v in got.items():
        assert not np.allclose(v["trained"], v["init"], atol=1e-3), side  # training moved the weights
        # the load gives back the weights saved before training, into the model and into a fresh one
        np.testing.assert_allclose(v["loaded"], v["init"], rtol=1e-6, atol=1e-7, err_msg=side)
        np.testing.assert_allclose(v["other"], v["init"], rtol=1e-6, atol=1e-7, err_msg=side)
    for k in ("init", "trained", "loaded", "other"):  # the same initial weights (torch.manual_seed vs key): not compared
        assert got["jax"][k].shape == got["torch"][k].shape


#: a module-level loop in the common variants: the loss first, zero_grad(set_to_none=True) after the step, the
#: gradients clipped between backward and step, the loss summed into a float, and the input rebound in the loop
#: (read by the train_step as an argument: a global would stay as eqx.filter_jit traced it)
LOOP = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(-0.5, 0.5, 6).reshape(3, 2))
        self.b = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return x @ self.w + self.b


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
x = torch.linspace(-1, 1, 12).reshape(4, 3)
y = torch.ones(4, 2)
total = 0.0
for step in range(4):
    loss = ((model(x) - y) ** 2).mean()
    x = x * 0.5
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.3)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    total += loss.item()
final = model(x)
'''


def test_a_loop_rebinding_what_its_loss_reads_gives_it_to_the_train_step():
    r = t2j(LOOP)
    assert not errors(r), r.findings
    out = r.output
    assert "def train_step(model, opt_state, x, max_grad_norm):" in out, out
    assert "    model, opt_state, loss = train_step(model, opt_state, x, 0.3)\n    x = x * 0.5\n" in out, out
    assert "zero_grad" not in out and "backward" not in out and "torch" not in out


@needs_frameworks
def test_the_loop_variants_train_as_pytorch_does(tmp_path):
    import numpy as np
    body = '''
final = ns["final"].detach().numpy() if side == "torch" else np.asarray(jax.vmap(ns["model"])(ns["x"]))
np.save(OUT, np.concatenate([[ns["total"]], np.ravel(final)]))
'''
    t, j = torch_and_jax(tmp_path, textwrap.dedent(LOOP).lstrip("\n"), t2j(LOOP).output, body)
    np.testing.assert_allclose(j, t, rtol=1e-6, atol=1e-8)
    # the clipping and the rebinding matter: without them the numbers differ
    for old, new in (("0.3)", "100.0)"), ("    x = x * 0.5\n", "")):
        t2, _ = torch_and_jax(tmp_path, textwrap.dedent(LOOP.replace(old, new)).lstrip("\n"),
                              t2j(LOOP.replace(old, new)).output, body)
        assert not np.allclose(t2, t, rtol=1e-4), old
