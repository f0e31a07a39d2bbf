"""self.training read inside a module (fwport/packs/torch2jax/modes.py) → `not self.inference`, a field set False in
__init__ that eqx.nn.inference_mode (model.eval() / model.train()) sets across the whole model: the translation
follows the mode as PyTorch does, a nested module included."""
from __future__ import annotations

import importlib.util
import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import torch_and_jax

MISSING = [m for m in ("jax", "torch", "equinox") if importlib.util.find_spec(m) is None]


def t2j(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", "torch2jax")


SRC = '''
import torch
import torch.nn as nn


class Scale(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        if not self.training:
            return x - 1.0
        return x * self.factor


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = Scale(2.0)
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        y = self.scale(x)
        shift = 10.0 if self.training else 0.0
        flag = self.training == True
        return y + shift + flag


def run(x):
    model = Outer()
    a = model(x)
    model.eval()
    b = model(x)
    model.train()
    c = model(x)
    return a, b, c
'''


def test_reads_become_the_inference_field():
    r = t2j(SRC)
    out = r.output
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "training" not in out
    assert out.count("    inference: bool\n") == 2  # a leaf (not static): inference_mode sets it
    assert out.count("        self.inference = False\n") == 2
    assert "        if self.inference:\n            return x - 1.0" in out  # `not self.training`
    assert "shift = 10.0 if not self.inference else 0.0" in out
    assert "flag = (not self.inference) == True" in out  # parenthesised where it binds tighter


def test_dropout_p_pattern_is_left_to_the_attention_rule():
    r = t2j('''
        import torch.nn as nn
        import torch.nn.functional as F


        class Attn(nn.Module):
            def __init__(self, p):
                super().__init__()
                self.p = p
                self.drop = nn.Dropout(p)

            def forward(self, q, k, v):
                return self.drop(F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0))
    ''')
    assert "inference: bool" not in r.output and "self.inference = False" not in r.output


@pytest.mark.parametrize("src, says", [
    ("class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.t = self.training\n"
     "\n    def forward(self, x):\n        return x\n", "always True"),
    ("class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n"
     "        self.training = False\n        return x if self.training else -x\n", "assigns self.training"),
])
def test_reads_it_cannot_rewrite_are_errors(src, says):
    r = t2j("import torch.nn as nn\n\n\n" + src)
    assert [f for f in r.findings if f.severity is Severity.ERROR and says in f.message], r.findings


def test_a_class_that_is_not_a_module_is_left_alone():
    r = t2j('''
        import torch


        class Trainer:
            def __init__(self):
                self.training = True

            def step(self):
                return 1 if self.training else 0
    ''')
    assert "self.training" in r.output and "inference" not in r.output


@pytest.mark.skipif(bool(MISSING), reason=f"needs {MISSING}")
def test_the_translation_follows_train_and_eval_as_pytorch_does(tmp_path):
    import numpy as np
    body = '''
x = np.arange(6.0).reshape(2, 3)
if side == "torch":
    x = torch.tensor(x)
outs = ns["run"](x)
np.save(OUT, np.stack([np.asarray(o.detach() if side == "torch" else o, dtype=np.float64) for o in outs]))
'''
    t, j = torch_and_jax(tmp_path, textwrap.dedent(SRC).lstrip("\n"), t2j(SRC).output, body)
    np.testing.assert_allclose(j, t, rtol=0, atol=1e-12)
    assert not np.allclose(t[0], t[1])  # train and eval differ: the test can fail
    np.testing.assert_allclose(t[0], t[2])


DROP = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Drop(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        y = F.dropout(x * 2.0, self.p, training=self.training)
        return F.dropout(y, p=0.5, training=False) + 1.0
'''


def test_functional_dropout_is_an_inline_dropout_following_the_mode():
    r = t2j(DROP)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "eqx.nn.Dropout(self.p, inference=self.inference)(x * 2.0, key=key)" in r.output
    assert "return y + 1.0" in r.output  # training=False: no dropout
    assert "def __call__(self, x, *, key=None):" in r.output
    r = t2j(DROP.replace(", training=self.training", ""))
    assert "eqx.nn.Dropout(self.p)(x * 2.0, key=key)" in r.output  # PyTorch's default: training=True
    assert [f for f in r.findings if f.code == "key-added" and "drops in eval mode too" in f.message]


@pytest.mark.skipif(bool(MISSING), reason=f"needs {MISSING}")
def test_functional_dropout_drops_in_training_and_not_in_eval_as_pytorch_does(tmp_path):
    import numpy as np
    body = '''
x = np.linspace(0.5, 1.5, 20000)
if side == "torch":
    torch.manual_seed(0)
    m = ns["Drop"](0.3)
    x = torch.tensor(x)
    train = m(x).detach().numpy()
    m.eval()
    ev = m(x).detach().numpy()
else:
    m = ns["Drop"](0.3)
    train = np.asarray(m(x, key=jax.random.key(0)))
    ev = np.asarray(eqx.nn.inference_mode(m)(x))
np.save(OUT, np.stack([train, ev]))
'''
    t, j = torch_and_jax(tmp_path, textwrap.dedent(DROP).lstrip("\n"), t2j(DROP).output, body)
    x = np.linspace(0.5, 1.5, 20000)
    np.testing.assert_allclose(j[1], t[1], rtol=0, atol=1e-12)  # eval: no dropout, on both
    np.testing.assert_allclose(t[1], 2 * x + 1)
    for side in (t, j):  # training: each value dropped (1.0) or kept and scaled by 1 / (1 - p)
        kept = ~np.isclose(side[0], 1.0)
        np.testing.assert_allclose(side[0][kept], 2 * x[kept] / 0.7 + 1.0, rtol=1e-12)
        assert abs((~kept).mean() - 0.3) < 0.02
