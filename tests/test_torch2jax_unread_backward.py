"""``loss.backward()`` at a module's level with nothing after it that reads the gradients (no optimizer step, no
``.grad``, no function or method of the file called): JAX computes gradients only where asked, so the statement
is dropped (an info finding) and the rest runs; where something later may read them, the error stays."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import SIDE_HEAD, saved_arrays

SOURCE = '''
import torch
import torch.nn as nn


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([0.5, -1.0, 2.0], dtype=torch.double))

    def forward(self, x):
        return torch.tanh(x * self.w).sum(dim=-1)


critic = Critic()
x = torch.linspace(-1, 1, 6, dtype=torch.double).view(2, 3)
penalty = (critic(x) ** 2).mean()
penalty.backward()
value = float(penalty)
scores = critic(x).detach()
'''


def translate(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "f.py", "torch2jax")


def test_a_backward_whose_gradients_nothing_reads_is_dropped():
    r = translate(SOURCE)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert ".backward(" not in r.output, r.output
    assert any(f.code == "idiom-replaced" and "penalty.backward() at the module's level" in f.message
               for f in r.findings), r.findings


@pytest.mark.parametrize("after", ["print(critic.w.grad)", "opt.step()", "report(critic)"])
def test_a_backward_whose_gradients_may_be_read_is_refused(after):
    src = SOURCE.replace("value = float(penalty)", "def report(m):\n    return m.w.grad\n\n\n" + after)
    r = translate(src)
    assert any(f.severity is Severity.ERROR and "penalty.backward() is not at the level" in f.message
               for f in r.findings), r.findings


def test_a_dropped_backward_leaves_pytorchs_values(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    src = textwrap.dedent(SOURCE).lstrip("\n")
    (tmp_path / "orig.py").write_text(src)
    (tmp_path / "jax.py").write_text(translate(SOURCE).output)
    driver = SIDE_HEAD + ("np.savez(sys.argv[3], np.asarray(ns['value']), "
                          "np.asarray(getattr(ns['scores'], 'numpy', lambda: ns['scores'])()))\n")
    t, j = (saved_arrays(driver, side, tmp_path / path, tmp_path / f"{side}.npz")
            for side, path in (("torch", "orig.py"), ("jax", "jax.py")))
    assert [a.shape for a in j] == [a.shape for a in t] == [(), (2,)]
    for a, b in zip(t, j):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
