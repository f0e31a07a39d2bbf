"""fwport torch2jax: a module's methods other than forward. A method forward calls (``self.encode(x)``) sees one
example, as ``__call__`` does: called from the script around the class it goes through jax.vmap (the draws' keys:
test_torch2jax_draws.py), and the dimensions written inside it, which fwport writes for one example only in
forward, are errors rather than left counting a batch axis that is not there."""
from __future__ import annotations

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import verify_torch2jax

SRC = '''\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def feats(self, x):
        return torch.cat([x, x], dim=1)

    def tail(self, h):
        return h.softmax(-1) + h.sum(-1, keepdim=True)

    def stats(self, h):
        return torch.stack([h, h]).sum()

    def forward(self, x):
        return self.tail(self.fc(self.feats(x))) + self.stats(x)

    def whole(self, batch):
        return batch.sum(1)


torch.manual_seed(0)
model = Net()
x = torch.randn(3, 8)
y = model.tail(model.fc(x))
z = model.whole(x)
'''


def test_dimensions_in_a_method_forward_calls_are_errors():
    r = translate_source(SRC, "m.py", "torch2jax")
    errs = sorted((f.line, f.code) for f in r.findings if f.severity is Severity.ERROR)
    # the methods forward calls are written for one example as forward is (batch.py): feats' dim=1 (the batch's second
    # axis) is one example's first; stats' sum over every axis (the batch's too) is an error, and forward's sum of its
    # result with another holding the batch axis elsewhere; tail's negative dimensions are one example's too; whole()
    # is no method forward calls (it sees the batch)
    assert errs == [(17, "batch-axis"), (20, "batch-axis")], r.findings
    assert "        return jnp.concatenate([x, x], axis=0)\n" in r.output
    assert "the dimension (none: all of them)" in [f.message for f in r.findings if f.line == 17 and f.severity is Severity.ERROR][0]
    # called from outside: the per-example method and the layer go through jax.vmap, the whole-batch method does not
    assert "y = jax.vmap(model.tail)(jax.vmap(model.fc)(x))\n" in r.output
    assert "z = model.whole(x)\n" in r.output


def test_tensor_methods_in_a_method_forward_calls_are_translated():
    out = translate_source(SRC, "m.py", "torch2jax").output
    assert "        return jax.nn.softmax(h, axis=-1) + h.sum(axis=-1, keepdims=True)\n" in out, out


CONTAINER = '''\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


torch.manual_seed(0)
models = [Net() for _ in range(2)]
x = torch.randn(5, 4)
outs = [m(x) for m in models]
first = models[0](x)
'''


def test_instances_in_a_list_are_called_through_vmap():
    """``models[0](x)`` and ``m(x)`` over a list of the module's instances take the batch as a model name's call does
    (left as written, eqx.nn.Linear would multiply its weight by the whole batch)."""
    import jax.numpy as jnp
    r = translate_source(CONTAINER, "c.py", "torch2jax")
    assert "outs = [jax.vmap(m)(x) for m in models]\n" in r.output
    assert "first = jax.vmap(models[0])(x)\n" in r.output
    ns: dict = {}
    exec(r.output, ns)
    assert ns["first"].shape == (5, 3) and all(o.shape == (5, 3) for o in ns["outs"])
    assert jnp.allclose(ns["first"], jnp.stack([ns["models"][0](row) for row in ns["x"]]), atol=1e-6)
    # made in a comprehension, every instance gets the same key: the same parameters, which PyTorch's are not
    assert jnp.array_equal(ns["models"][0].fc.weight, ns["models"][1].fc.weight)
    said = [f for f in r.findings if f.severity is Severity.WARNING and f.code == "key-added"]
    assert len(said) == 1 and said[0].line == 15 and "the same parameters" in said[0].message, r.findings


RANK = '''\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        if x.dim() != 2:
            raise ValueError("takes (batch, features)")
        return self.fc(x) * x.ndim + x.ndimension()
'''


def test_the_rank_of_a_batched_tensor_counts_the_batch_axis(tmp_path):
    # x.dim() was an error ("not translated yet") and x.ndim was left as written: one example's rank, one less
    # than PyTorch's, silently (a rank check in forward raised on every input, a product was off by one)
    import pytest
    r = translate_source(RANK, "m.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "if (x.ndim + 1) != 2:" in r.output and "* (x.ndim + 1) + (x.ndim + 1)" in r.output, r.output
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    pytest.importorskip("equinox")
    (tmp_path / "m.py").write_text(RANK)
    (tmp_path / "m_jax.py").write_text(r.output)
    cert = verify_torch2jax(tmp_path / "m.py", tmp_path / "m_jax.py", "Net", ["float32[3,4]"], dtype="float32")
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
