"""torch2jax: re-initialisation over the built module (a loop over self.parameters() / named_parameters(),
self.apply(self._init_weights)), torch functions and classes used as values, cross_entropy's ignore_index.
Each translation is run under JAX (PyTorch hidden) and compared with what PyTorch computes."""
from __future__ import annotations

import json

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import printed_json

pytest.importorskip("torch")
pytest.importorskip("jax")

SOURCE = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Net(nn.Module):
    def __init__(self, vocab, d, n_layer):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.h = nn.ModuleList([Block(d) for _ in range(n_layer)])
        self.head = nn.Linear(d, vocab)
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.uniform_(module.weight, -0.1, 0.1)

    def forward(self, idx):
        return self.head(self.wte(idx))


class Xav(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.a = nn.Linear(d, 3 * d)
        self.b = nn.Conv1d(d, 2 * d, 3)
        self._reset_parameters()

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, x):
        return self.a(x)


def activation(name):
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    return F.glu


def loss(logits, targets):
    return F.cross_entropy(logits, targets, ignore_index=-1)


def nll(logp, targets):
    return F.nll_loss(logp, targets, ignore_index=2, reduction='none')
'''

_STATS = r'''
import json, math, sys, runpy
sys.modules["torch"] = None  # the translation must not need PyTorch
import jax, jax.numpy as jnp, numpy as np
ns = runpy.run_path(sys.argv[1])
m = ns["Net"](50, 64, 4, key=jax.random.key(0))
x = ns["Xav"](16, key=jax.random.key(1))
rng = np.random.default_rng(0)
h = rng.standard_normal((6, 8))
logits, targets = rng.standard_normal((7, 5)), np.array([0, -1, 3, 4, -1, 1, 2])
logp = np.log(np.exp(logits) / np.exp(logits).sum(1, keepdims=True))
out = {
    "head_std": float(jnp.std(m.head.weight)), "head_bias": float(jnp.abs(m.head.bias).max()),
    "fc_std": float(jnp.std(jnp.stack([b.c_fc.weight for b in m.h]))),
    "proj_std": float(jnp.std(jnp.stack([b.c_proj.weight for b in m.h]))),
    "proj_bias": float(jnp.abs(jnp.stack([b.c_proj.bias for b in m.h])).max()),
    "wte_max": float(jnp.abs(m.wte.weight).max()), "wte_var": float(jnp.var(m.wte.weight)),
    "xav": [[list(w.shape), float(jnp.abs(w).max()), float(jnp.var(w))] for w in (x.a.weight, x.b.weight)],
    "xav_bias_nonzero": bool(jnp.abs(x.a.bias).max() > 0),
    "acts": [np.asarray(ns["activation"](n)(jnp.asarray(h))).tolist() for n in ("relu", "gelu", "glu")],
    "loss": float(ns["loss"](jnp.asarray(logits), jnp.asarray(targets))),
    "nll": np.asarray(ns["nll"](jnp.asarray(logp), jnp.asarray(np.abs(targets)))).tolist(),
}
print(json.dumps(out))
'''

_TORCH = r'''
import json, sys, torch, numpy as np
import torch.nn.functional as F
rng = np.random.default_rng(0)
h = torch.from_numpy(rng.standard_normal((6, 8)))
logits, targets = torch.from_numpy(rng.standard_normal((7, 5))), torch.tensor([0, -1, 3, 4, -1, 1, 2])
logp = F.log_softmax(logits, dim=1)
shapes = json.loads(sys.argv[1])
fans = [torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(s)) for s in shapes]
print(json.dumps({
    "bounds": [(6 / (fi + fo)) ** 0.5 for fi, fo in fans],
    "acts": [F.relu(h).tolist(), F.gelu(h).tolist(), F.glu(h).tolist()],
    "loss": float(F.cross_entropy(logits, targets, ignore_index=-1)),
    "nll": F.nll_loss(logp, targets.abs(), ignore_index=2, reduction="none").tolist(),
}))
'''


def _run(code: str, *args: str) -> dict:
    return printed_json(code, *args)


@pytest.fixture(scope="module")
def translated():
    return translate_source(SOURCE, "m.py", pack="torch2jax")


def test_reinitialisation_is_translated_without_errors(translated):
    assert [f for f in translated.findings if f.severity == Severity.ERROR] == []
    out = translated.output
    assert "self.wte, self.h, self.head = reinit_layers(" in out
    assert "lambda m: isinstance(m, (eqx.nn.Linear, eqx.nn.Embedding)), self._init_weights" in out
    assert "lambda pn, p: pn.endswith('c_proj.weight')" in out
    assert "def _init_weights(self, module, *, key):" in out and "return module" in out
    assert "self.a, self.b = reinit_arrays(" in out and "lambda _, p: p.ndim > 1" in out
    assert "return functools.partial(jax.nn.gelu, approximate=False)" in out
    assert "return jax.nn.relu" in out and "return jax.nn.glu" in out
    assert out.count("def _torch_name") == 1


def test_reinitialised_values_match_pytorch(translated, tmp_path):
    path = tmp_path / "out.py"
    path.write_text(translated.output)
    jx = _run(_STATS, str(path))
    # normal_(std=0.02) on every Linear weight, then 0.02 / sqrt(2 * n_layer) on the c_proj weights (named like PyTorch)
    assert abs(jx["head_std"] - 0.02) < 0.001 and abs(jx["fc_std"] - 0.02) < 0.001
    assert abs(jx["proj_std"] - 0.02 / (8 ** 0.5)) < 0.0004
    assert jx["head_bias"] == 0.0 and jx["proj_bias"] == 0.0  # zeros_ on each bias
    assert jx["wte_max"] <= 0.1 and abs(jx["wte_var"] - 0.01 / 3) < 0.0003  # uniform_(-0.1, 0.1)
    tr = _run(_TORCH, json.dumps([s for s, _, _ in jx["xav"]]))
    for (shape, top, var), bound in zip(jx["xav"], tr["bounds"]):  # xavier_uniform_ with PyTorch's fans
        assert bound * 0.97 < top <= bound
        assert abs(var - bound ** 2 / 3) < 0.1 * bound ** 2 / 3
    assert jx["xav_bias_nonzero"]  # p.dim() > 1: the biases are left as drawn
    import numpy as np
    for a, b in zip(jx["acts"], tr["acts"]):  # F.relu / F.gelu / F.glu used as values
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-6)
    assert jx["loss"] == pytest.approx(tr["loss"], rel=1e-5)  # ignore_index: the mean over the kept targets
    np.testing.assert_allclose(np.array(jx["nll"]), np.array(tr["nll"]), rtol=1e-5, atol=1e-6)


def test_a_subclass_of_a_pytorch_layer_is_one_error_naming_it():
    src = ("import torch.nn as nn\n\n\nclass TransformerModel(nn.Transformer):\n    def __init__(self, d):\n"
           "        super().__init__(d_model=d)\n        self.init_weights()\n\n    def init_weights(self):\n"
           "        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)\n")
    r = translate_source(src, "m.py", pack="torch2jax")
    errors = [f for f in r.findings if f.severity == Severity.ERROR]
    assert len(errors) == 1 and "class TransformerModel(nn.Transformer)" in errors[0].message
    assert "torch.nn.Transformer" in errors[0].message


def test_isinstance_of_a_layer_with_a_transformed_rule_stays_a_residue():
    src = "import torch.nn as nn\n\n\ndef f(m):\n    return isinstance(m, nn.ReLU)\n"
    r = translate_source(src, "m.py", pack="torch2jax")
    assert [f.code for f in r.findings if f.severity == Severity.ERROR] == ["residue"]


def test_an_unsupported_parameter_test_is_an_error():
    src = ("import torch.nn as nn\n\n\nclass N(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.a = nn.Linear(2, 3)\n        for p in self.parameters():\n            if self.flag(p):\n"
           "                nn.init.zeros_(p)\n")
    r = translate_source(src, "m.py", pack="torch2jax")
    msgs = [f.message for f in r.findings if f.severity == Severity.ERROR]
    assert any("is not one fwport translates" in m for m in msgs)


def test_apply_of_a_method_filling_tensors_in_place_rebuilds_them():
    # module.weight.data.normal_(...) is init.normal_(module.weight, ...) (tests/test_torch2jax_init_methods.py
    # compares the draws with PyTorch's); a method doing anything else to the tensors stays an error
    src = ("import torch.nn as nn\n\n\nclass N(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.a = nn.Linear(2, 3)\n        self.apply(self._init)\n\n    def _init(self, module):\n"
           "        if isinstance(module, nn.Linear):\n            module.weight.data.normal_(mean=0.0, std=0.02)\n")
    r = translate_source(src, "m.py", pack="torch2jax")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "reinit_layers" in r.output
    assert "module = eqx.tree_at(lambda m: m.weight, module, 0.02 * jax.random.normal(key, module.weight.shape))" \
        in r.output
    r = translate_source(src.replace("normal_(mean=0.0, std=0.02)", "clamp_(-1, 1)"), "m.py", pack="torch2jax")
    assert any("self.apply(fn)" in f.message for f in r.findings if f.severity == Severity.ERROR)
    assert "reinit_layers" not in r.output


@pytest.mark.parametrize("test, expected", [
    ("p.dim() > 1", "p.ndim > 1"), ("p.numel() > 10", "p.size > 10"),
    ("pn.endswith('c_proj.weight') and p.ndim == 2", "pn.endswith('c_proj.weight') and p.ndim == 2"),
    ("p.size(0) > 1", None), ("p.requires_grad", None), ("self.flag(p)", None)])
def test_parameter_tests_are_read_for_jax_arrays_or_refused(test, expected):
    import libcst as cst

    from fwport.packs.torch2jax.passes.modules import _parameter_test
    assert _parameter_test(cst.parse_expression(test), "p", "pn") == expected


def test_a_fan_based_redraw_next_to_multihead_attention_warns_of_its_packed_projections():
    src = ("import torch.nn as nn\n\n\nclass N(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.att = nn.MultiheadAttention(8, 2, batch_first=True)\n        self._reset()\n\n"
           "    def _reset(self):\n        for p in self.parameters():\n            if p.dim() > 1:\n"
           "                nn.init.xavier_uniform_(p)\n")
    r = translate_source(src, "m.py", pack="torch2jax")
    assert "reinit_arrays(" in r.output
    assert any(f.code == "approximate" and "in_proj_weight" in f.message for f in r.findings
               if f.severity == Severity.WARNING)
