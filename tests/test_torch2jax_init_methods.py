"""A tensor's in-place fill methods in ``__init__`` (``self.emb.weight.data.copy_(vectors)``, ``.fill_(v)``,
``.zero_()``, ``.normal_(mean, std)``), in a method ``self.apply`` is given (minGPT's ``_init_weights``:
``module.weight.data.normal_(mean=0.0, std=0.02)``) and in a loop over ``self.named_parameters()``: the field
holding the array is rebuilt (``eqx.tree_at``), as ``torch.nn.init`` calls are (modules.py, _Inits). Elsewhere
(a slice of a local array, a loop variable) the error says what to write. Both sides are built in subprocesses from
the same vectors and their arrays compared; the draws by their mean and spread."""
from __future__ import annotations

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import printed_json

pytest.importorskip("torch")
pytest.importorskip("equinox")

SRC = """import torch
import torch.nn as nn


class M(nn.Module):
    def __init__(self, vectors):
        super().__init__()
        self.emb = nn.Embedding(6, 4)
        self.fc = nn.Linear(4, 3)
        self.big = nn.Linear(200, 300)
        self.register_buffer("table", torch.zeros(3, 4))
        self.emb.weight.data.copy_(vectors)
        self.fc.bias.data.zero_()
        self.table.fill_(0.25)
        with torch.no_grad():
            self.fc.weight.copy_(torch.full((3, 4), 0.5))
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("big.bias"):
                p.data.fill_(-1.5)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear) and module.in_features == 200:
            module.weight.data.normal_(mean=0.1, std=0.02)

    def forward(self, x):
        return self.fc(self.emb(x)) + self.table[0, :3]
"""

_RUN = """
import sys, json, numpy as np
side, path = sys.argv[1:3]
vectors = np.arange(24, dtype=np.float32).reshape(6, 4) / 10
if side == "torch":
    import torch, runpy
    torch.manual_seed(0)
    ns = runpy.run_path(path)
    m = ns["M"](torch.from_numpy(vectors))
    arr = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    out = m(torch.tensor([[1, 4, 2], [0, 5, 3]])).detach().numpy()
else:
    sys.modules["torch"] = None
    import jax, jax.numpy as jnp, runpy
    ns = runpy.run_path(path)
    m = ns["M"](jnp.asarray(vectors), key=jax.random.key(0))
    arr = {"emb.weight": m.emb.weight, "fc.weight": m.fc.weight, "fc.bias": m.fc.bias, "table": m.table,
           "big.weight": m.big.weight, "big.bias": m.big.bias}
    out = jax.vmap(m)(jnp.asarray([[1, 4, 2], [0, 5, 3]]))
res = {k: np.asarray(arr[k]).tolist() for k in ("emb.weight", "fc.weight", "fc.bias", "table", "big.bias")}
w = np.asarray(arr["big.weight"])
res["big.weight"] = [float(w.mean()), float(w.std()), w.size]
res["out"] = np.asarray(out).tolist()
print(json.dumps(res))
"""


def test_in_place_fills_in_init_rebuild_the_fields_and_compute_what_pytorch_computes(tmp_path):
    import numpy as np
    r = translate_source(SRC, "m.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    out = r.output
    assert ("self.emb = eqx.tree_at(lambda m: m.weight, self.emb, jnp.broadcast_to(jnp.asarray(vectors, "
            "dtype=self.emb.weight.dtype), self.emb.weight.shape))") in out, out
    assert "self.fc = eqx.tree_at(lambda m: m.bias, self.fc, jnp.zeros(self.fc.bias.shape))" in out, out
    assert "module = eqx.tree_at(lambda m: m.weight, module, 0.02 * jax.random.normal(key, module.weight.shape) + 0.1)" \
        in out, out
    assert ".copy_(" not in out and ".fill_(" not in out and ".normal_(" not in out and ".data" not in out, out
    (tmp_path / "m.py").write_text(SRC)
    (tmp_path / "m_jax.py").write_text(out)
    res = {}
    for side, path in (("torch", "m.py"), ("jax", "m_jax.py")):
        res[side] = printed_json(_RUN, side, tmp_path / path)
    t, j = res["torch"], res["jax"]
    for k in ("emb.weight", "fc.weight", "fc.bias", "table", "big.bias", "out"):
        np.testing.assert_allclose(np.asarray(j[k]), np.asarray(t[k]), rtol=1e-6, atol=1e-6, err_msg=k)
    (tm, ts, n), (jm, js, _) = t["big.weight"], j["big.weight"]
    se = 0.02 / n ** 0.5  # the mean within five standard errors, the spread within 5 %
    assert abs(tm - 0.1) < 5 * se and abs(jm - 0.1) < 5 * se, (tm, jm)
    assert abs(ts - 0.02) < 0.001 and abs(js - 0.02) < 0.001, (ts, js)


def test_a_copy_into_a_slice_or_a_loop_variable_is_an_error_saying_what_to_write():
    src = ("import torch\n\n\ndef pad(imgs, out):\n    for img, o in zip(imgs, out):\n"
           "        o[: img.shape[0]].copy_(img)\n    return out\n")
    r = translate_source(src, "m.py", "torch2jax")
    errs = [f for f in r.findings if f.severity is Severity.ERROR]
    assert len(errs) == 1 and errs[0].line == 6, r.findings
    assert "writes into o[: img.shape[0]] in place" in errs[0].message
    assert "x = x.at[idx].set(y)" in errs[0].message
