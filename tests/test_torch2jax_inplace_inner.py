"""torch2jax: an in-place method inside a statement (``res.append(correct_k.mul_(100.0 / batch_size))``, the accuracy
helper of DETR's util/misc.py and pytorch/examples' imagenet) whose receiver is the sole holder of its memory (a
local name bound to new memory, not viewed or aliased since: inplace.sole_holders) is split into ``correct_k =
correct_k * (100.0 / batch_size)`` and the statement reading ``correct_k``, as PyTorch's reads the method's result,
the tensor itself (it was an unsupported-construct error: a jax array has no ``.mul_``). Verified against PyTorch on
the same inputs. A receiver that may share its memory (a parameter, a view), one read again in the statement, or a
call evaluated conditionally or several times keeps the error."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import error_findings as errors, needs, t2j
from runners import torch_and_jax

needs_frameworks = needs("torch", "jax")

ACCURACY = '''
import torch


@torch.no_grad()
def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
        res.append(correct_k.mul_(100.0 / batch_size))
    return res


def shifted(x):
    y = x * 2
    out = [y.add_(1, alpha=3)]
    z = x + 1
    return z.sub_(0.5), out
'''


def test_an_in_place_method_inside_a_statement_is_split_off():
    r = t2j(ACCURACY)
    assert errors(r) == [], r.findings
    assert "        correct_k = correct_k * (100.0 / batch_size)\n        res.append(correct_k)\n" in r.output
    assert "    y = y + 3 * 1\n    out = [y]\n" in r.output
    assert "    z = z - 0.5\n    return z, out\n" in r.output


@needs_frameworks
def test_an_in_place_method_split_off_verifies_against_pytorch(tmp_path):
    body = '''
rng = np.random.default_rng(0)
output, target = rng.normal(size=(6, 5)), rng.integers(0, 5, size=6)
x = rng.normal(size=(4,))
if side == "torch":
    res = ns["accuracy"](torch.tensor(output), torch.tensor(target), topk=(1, 3))
    y, out = ns["shifted"](torch.tensor(x))
    arrays = [r.numpy() for r in res] + [y.numpy(), out[0].numpy()]
else:
    res = ns["accuracy"](jnp.asarray(output), jnp.asarray(target), topk=(1, 3))
    y, out = ns["shifted"](jnp.asarray(x))
    arrays = [np.asarray(r) for r in res] + [np.asarray(y), np.asarray(out[0])]
np.save(OUT, np.concatenate([a.ravel().astype(np.float64) for a in arrays]))
'''
    torch_out, jax_out = torch_and_jax(tmp_path, ACCURACY, t2j(ACCURACY).output, body)
    assert torch_out.shape == jax_out.shape == (1 + 1 + 4 + 4,)
    np.testing.assert_allclose(jax_out, torch_out, rtol=1e-6)


@pytest.mark.parametrize("line", [
    "    return x.mul_(2)",  # a parameter: the caller's tensor changes in PyTorch
    "    v = x.view(-1)\n    return [v.mul_(2)]",  # a view of it
    "    y = x * 2\n    return y.mul_(2) + y",  # read again in the statement
    "    y = x * 2\n    return [y.mul_(k) for k in (1, 2)]",  # evaluated several times
    "    y = x * 2\n    return y.mul_(2) if x.sum() > 0 else y",  # evaluated conditionally
    "    y = x * 2\n    out = [y.add_(1)]\n    return y.mul_(2), out",  # listed since: out[0] is y, which changes too
])
def test_an_in_place_method_that_cannot_be_split_off_stays_an_error(line):
    r = t2j(f"import torch\n\n\ndef f(x):\n{line}\n")
    assert [f for f in errors(r) if ".mul_(" in f.message], r.findings
