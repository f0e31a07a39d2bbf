"""torch2jax tensor functions computed as PyTorch computes them: tests/data/torch_ops.py (arange, elementwise
functions, matrix products, constructors, max/min/topk with their indices, the legacy typed constructors,
F.layer_norm, F.scaled_dot_product_attention, F.binary_cross_entropy with its clamped logs, F.glu, and the
sampling functions) translated, run with torch unimportable, and compared in float64 with the original."""
from __future__ import annotations

from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import per_example
from runners import SIDE_HEAD, python, saved_arrays

pytest.importorskip("torch")
pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parent.parent
OPS = ROOT / "tests" / "data" / "torch_ops.py"
PACK = load_pack("torch2jax")

_RUN = SIDE_HEAD + """
rng = np.random.default_rng(0)
p = 1 / (1 + np.exp(-rng.standard_normal((6, 5))))
p[0, 0], p[0, 1] = 0.0, 1.0  # PyTorch's log clamp at -100 in binary_cross_entropy
onehot = np.eye(4)[rng.integers(0, 4, 6)]
args = [rng.standard_normal((6, 5)), p, rng.uniform(size=(6, 5)), rng.standard_normal((3, 4, 5)),
        rng.standard_normal((3, 5, 2)), rng.standard_normal((2, 3, 4, 6)), rng.standard_normal((2, 3, 5, 6)),
        rng.standard_normal((2, 3, 5, 6)), onehot, rng.standard_normal(5), rng.standard_normal(5)]
if side == "torch":
    import torch
    args = [torch.from_numpy(a) for a in args]
else:
    import jax.numpy as jnp
    args = [jnp.asarray(a) for a in args]
np.savez(sys.argv[3], *[np.asarray(tuple(o)) if type(o).__name__ in ("Size", "tuple") else np.asarray(o)
                        for o in ns["ops"](*args)])
"""


def test_translated_tensor_functions_compute_what_pytorch_computes(tmp_path):
    import numpy as np
    r = translate_source(OPS.read_text(), str(OPS), PACK)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    # the file computes in float64 in places: jax_enable_x64 is switched on (a finding of the whole file, first)
    assert [f.code for f in r.findings] == ["idiom-replaced"] + ["key-added"] * 8  # the seed's root key, 7 draws
    translated = tmp_path / "ops_jax.py"
    translated.write_text(r.output)
    torch_out = saved_arrays(_RUN, "torch", OPS, tmp_path / "torch.npz")
    jax_out = saved_arrays(_RUN, "jax", translated, tmp_path / "jax.npz")
    assert len(torch_out) == len(jax_out) == 69
    perm, drawn = len(torch_out) - 3, len(torch_out) - 1
    for i, (t, j) in enumerate(zip(torch_out, jax_out)):
        assert t.shape == j.shape, f"output {i}: {t.shape} vs {j.shape}"
        assert t.dtype.kind == j.dtype.kind, f"output {i}: {t.dtype} vs {j.dtype}"
        if i == perm:  # a random permutation: the same set of indices
            np.testing.assert_array_equal(np.sort(j), np.arange(7))
            continue
        np.testing.assert_allclose(j, t, rtol=1e-10, atol=1e-12, err_msg=f"output {i}")
    assert (torch_out[drawn] == jax_out[drawn]).all()  # one-hot rows: the one possible draw


def test_bce_clamps_the_log_as_pytorch_does():
    """p = 0 and 1 give a loss of 100 per element in PyTorch (its logs are clamped at -100), not inf."""
    torch = pytest.importorskip("torch")
    import jax.numpy as jnp
    import torch.nn.functional as F
    src = "import torch.nn.functional as F\n\n\ndef f(p, t):\n    return F.binary_cross_entropy(p, t, reduction='none')\n"
    ns: dict = {}
    exec(translate_source(src, "f.py", PACK).output, ns)
    p, t = [0.0, 1.0, 0.3], [1.0, 0.0, 0.5]
    want = F.binary_cross_entropy(torch.tensor(p), torch.tensor(t), reduction="none").numpy()
    got = ns["f"](jnp.asarray(p), jnp.asarray(t))
    assert want[0] == want[1] == 100.0
    assert jnp.allclose(got, want, rtol=1e-6)


_LOSSES = """import torch
import torch.nn as nn
import torch.nn.functional as F

smooth = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.2)
plain = nn.CrossEntropyLoss(label_smoothing=0.3, reduction="sum")


def f(logits, labels, x):
    return [F.cross_entropy(logits, labels, ignore_index=2, label_smoothing=0.1),
            F.cross_entropy(logits, labels, label_smoothing=0.25, reduction="none"),
            smooth(logits, labels), plain(logits, labels),
            torch.var(x, dim=1, keepdim=True), torch.std(x, 0, unbiased=False), torch.var(x, correction=0),
            torch.std(x)]
"""


def test_losses_with_label_smoothing_and_the_unbiased_variance_compute_as_pytorch():
    """label_smoothing (with and without ignore_index, function and module) and var/std with PyTorch's ddof."""
    torch = pytest.importorskip("torch")
    import jax.numpy as jnp
    import numpy as np
    rng = np.random.default_rng(1)
    logits, labels = rng.standard_normal((7, 4)).astype(np.float32), rng.integers(0, 4, 7)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    labels[:2] = (0, 2)  # ignored by one loss or the other
    r = translate_source(_LOSSES, "l.py", PACK)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    tns: dict = {}
    exec(_LOSSES, tns)
    want = [w.numpy() for w in tns["f"](torch.from_numpy(logits), torch.from_numpy(labels), torch.from_numpy(x))]
    ns: dict = {}
    exec(r.output, ns)
    got = ns["f"](jnp.asarray(logits), jnp.asarray(labels), jnp.asarray(x))
    for i, (w, g) in enumerate(zip(want, got)):
        assert np.shape(g) == w.shape, (i, np.shape(g), w.shape)
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6, err_msg=str(i))


@pytest.mark.parametrize("src,message", [
    ("y = torch.max(a, b)", "write dim= or torch.maximum"),
    ("y = torch.max(f(x), 1)", "assign f(x) to a name first"),
    ("y = torch.multinomial(p, 2)", "num_samples=2"),
    ("y = torch.topk(x, 2, largest=False)", "largest=False"),
    ("y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)", "dropout"),
    ("y = F.scaled_dot_product_attention(q, k, v, attn_mask=m)", "masks are not translated"),
    ("y = torch.zeros(3, dtype=pick(dt))", "only a torch dtype written out"),
])
def test_what_has_no_exact_translation_is_an_error(src, message):
    r = translate_source(f"import torch\nimport torch.nn.functional as F\n\n{src}\n", "e.py", PACK)
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert len(errors) == 1 and message in errors[0].message, r.findings
    assert src in r.output  # left as written


# --- in a module's __call__: one example, the batch axis dropped -------------------------------------------

HEAD = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\nclass Net(nn.Module):\n" \
       "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 12)\n\n" \
       "    def forward(self, x, y):\n"


def _forward(body: str):
    r = translate_source(HEAD + "".join(f"        {line}\n" for line in body.splitlines()), "net.py", PACK)
    return r, r.output.split("def __call__", 1)[1]


@pytest.mark.parametrize("torch_code,jax_code", [
    ("return torch.max(x, 1)", "return (jnp.max(x, axis=0), jnp.argmax(x, axis=0))"),
    ("v, i = x.min(dim=-1, keepdim=True)", "v, i = (jnp.min(x, axis=-1, keepdims=True), jnp.argmin(x, axis=-1, keepdims=True))"),
    ("return torch.topk(x, 3, dim=2)", "return jax.lax.top_k(x, 3, axis=1)"),
    ("return torch.topk(x, 3)", "return jax.lax.top_k(x, 3)"),
    ("return torch.bmm(x, y)", "return jnp.matmul(x, y)"),
    ("return x.bmm(y.transpose(1, 2))", "return jnp.matmul(x, jnp.swapaxes(y, 0, 1))"),
    ("return torch.mm(x, self.w)", "return jnp.matmul(x, self.w)"),
    ("return F.glu(x)", "return jax.nn.glu(x, axis=-1)"),
    ("return F.glu(x, dim=1)", "return jax.nn.glu(x, axis=0)"),
    ("return x.masked_fill(y == 0, float('-inf'))", "return jnp.where(y == 0, float('-inf'), x)"),
    ("B, T, C = x.shape\nreturn x.repeat(1, 2, 3)", "return jnp.tile(x, (2, 3))"),
    ("q, k, v = self.fc(x).split(4, dim=2)\nreturn q", "q, k, v = jnp.split(self.fc(x), [4, 2 * 4], axis=1)"),
    ("a, b = self.fc(x).split(n, dim=-1)\nreturn a", "a, b = jnp.split(self.fc(x), [n], axis=-1)"),
    ("return torch.sin(x) * torch.cos(x)", "return jnp.sin(x) * jnp.cos(x)"),
    ("return torch.zeros_like(x) + torch.randn_like(x)", "return jnp.zeros_like(x) + jax.random.normal(key, x.shape, x.dtype)"),
    ("outs = []\nfor i in range(2):\n    outs.append(x)\nreturn torch.stack(outs, dim=1)", "return jnp.stack(outs, axis=0)"),
    ("return torch.einsum('bhid,bhjd->bhij', x, y)", "return jnp.einsum('hid,hjd->hij', x, y)"),
    ("return torch.einsum('b i d, d j -> b i j', x, self.w)", "return jnp.einsum('id,dj->ij', x, self.w)"),
    ("return torch.einsum('...ij,...jk->...ik', [x, y])", "return jnp.einsum('...ij,...jk->...ik', x, y)"),
    ("return torch.clamp(x, min=0.0) + torch.where(x > 0, x, y)", "return jnp.clip(x, min=0.0) + jnp.where(x > 0, x, y)"),
    ("return x @ torch.eye(x.size(2))", "return x @ jnp.eye(x.shape[1])"),
    # the batch size read from the input, sizing a per-batch copy of what every example shares: not built
    ("b = x.shape[0]\nreturn torch.zeros(b, 4) + x", "(self, x, y):\n        return jnp.zeros(4) + x"),
    ("return torch.ones((x.size(0), 3, 4), dtype=torch.double)", "return jnp.ones((3, 4), dtype=jnp.float64)"),
    ("B, T, C = x.shape\nreturn torch.full((B, T), 2.0)", "return jnp.full((T,), 2.0)"),
    ("n = x.size(0)\nreturn self.w.expand(n, -1, 5)",
     "return jnp.broadcast_to(self.w, (1, self.w.shape[-2], 5))[0]"),
    ("batch = x.shape[0]; h = x * 2\nreturn h.view(batch, -1)", "h = x * 2\n        return h.reshape(-1)"),
    ("r, b = x, x.size(0)\nreturn r.view(b, -1)", "r = x\n        return r.reshape(-1)"),
    ("r, b, k = x, x.size(0), 2\nreturn r.view(b, -1) * k", "r, k = x, 2\n        return r.reshape(-1) * k"),
    ("return x[:, 0] + y[:, 1:, ::2]", "return x[0] + y[1:, ::2]"),
    ("return x[..., 0]", "return x[..., 0]"),
])
def test_the_batch_axis_is_dropped_where_proven(torch_code, jax_code):
    r, call = _forward(torch_code)
    assert jax_code in call, call
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings


@pytest.mark.parametrize("torch_code", [
    "return torch.max(x)",
    "return torch.max(x, 0)",
    "return torch.topk(x, 2, dim=0)",
    "return torch.bmm(x, self.w)",
    "return torch.mm(x, y)",
    "return torch.dot(x, y)",
    "return torch.diag(x)",
    "return x.masked_fill(self.bias[:, :, :4, :4] == 0, 0.0)",
    "return x.repeat(2, 1, 1)",
    "return x.repeat(1, 2)",
    "outs = [x]\nouts.append(x)\nreturn torch.cat(outs)",  # (a stack on dim 0 is followed: the batch axis moves on)
    "return torch.einsum('bij,bjk->ik', x, y)",
    "return torch.einsum('ij,jk->ik', x, y)",
    "return torch.einsum(eq, x, y)",
    "return torch.einsum('...ij,...jk->...ik', x, self.w)",
    "b = x.shape[0]\nreturn x * b",
    # (b, n, _ = x.shape; x.reshape(b * n, -1) is translated: one example's rows, the batch merged
    # outermost into dimension 0, verified in test_torch2jax_batch_rows.py)
    # (torch.randn(x.size(0), 4) is translated: one draw per example from its own key, checked in
    # test_torch2jax_batch_gathers.py)
    "return torch.zeros(x.size(0) + 1, 4)",
    "return x[0, :]",
])
def test_what_needs_the_batch_axis_is_an_error(torch_code):
    r = translate_source(per_example(HEAD + "".join(f"        {line}\n" for line in torch_code.splitlines())), "net.py",
                         PACK)
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.code for f in errors] == ["batch-axis"], r.findings


def test_max_of_a_dim_that_may_be_a_tensor_is_refused_in_a_module_too():
    r, _ = _forward("return torch.max(x, y)")
    assert [f.code for f in r.findings if f.severity is Severity.ERROR] == ["unsupported-construct"]


def test_a_host_value_inside_the_module_is_refused_with_what_to_do():
    r, _ = _forward("return x.numpy()")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.code for f in errors] == ["unsupported-construct"] and "convert it outside the module" in errors[0].message


PER_EXAMPLE = ROOT / "tests" / "data" / "torch_per_example.py"
_RUN_MODULE = SIDE_HEAD + """
rng = np.random.default_rng(1)
x, y = rng.standard_normal((4, 5, 6)), rng.standard_normal((4, 7, 6))
if side == "torch":
    import torch
    outs = ns["PerExample"]()(torch.from_numpy(x), torch.from_numpy(y))
else:
    import jax.numpy as jnp
    outs = jax.vmap(ns["PerExample"]())(jnp.asarray(x), jnp.asarray(y))
np.savez(sys.argv[3], *[np.asarray(o) for o in outs])
"""


def test_per_example_rewrites_under_vmap_compute_what_pytorch_computes_on_the_batch(tmp_path):
    import numpy as np
    r = translate_source(PER_EXAMPLE.read_text(), str(PER_EXAMPLE), PACK)
    assert not r.findings, r.findings
    translated = tmp_path / "per_example_jax.py"
    translated.write_text(r.output)
    outs = {}
    for side, path in (("torch", PER_EXAMPLE), ("jax", translated)):
        outs[side] = saved_arrays(_RUN_MODULE, side, path, tmp_path / f"{side}.npz")
    assert len(outs["torch"]) == len(outs["jax"]) == 12
    for i, (t, j) in enumerate(zip(outs["torch"], outs["jax"])):
        assert t.shape == j.shape, f"output {i}: {t.shape} vs {j.shape}"
        np.testing.assert_allclose(j, t, rtol=1e-10, atol=1e-12, err_msg=f"output {i}")


BATCH_SIZE = ROOT / "tests" / "data" / "torch_batch_size.py"
_RUN_BATCH_SIZE = """
import sys, numpy as np, runpy
side = sys.argv[1]
if side == "jax":
    class NoTorch:  # the translation must not need PyTorch (torch left out of sys.modules: einops looks there)
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "torch":
                raise ImportError("PyTorch is hidden")
    sys.meta_path.insert(0, NoTorch())
    import jax
    jax.config.update("jax_enable_x64", True)
ns = runpy.run_path(sys.argv[2])
x = np.random.default_rng(2).standard_normal((3, 4, 6))
if side == "torch":
    import torch
    torch.manual_seed(0)
    with torch.no_grad():
        outs = ns["BatchSize"]()(torch.from_numpy(x))
else:
    import jax.numpy as jnp
    outs = jax.vmap(ns["BatchSize"]())(jnp.asarray(x))
np.savez(sys.argv[3], *[np.asarray(o.detach() if side == 'torch' else o) for o in outs])
"""


def test_batch_size_copies_of_per_example_constants_compute_what_pytorch_computes(tmp_path):
    """`batch = x.shape[0]` and `b, n, _ = x.shape` sizing zeros/ones/full, expand and einops.repeat of parameters
    (a new batch axis before the pattern's others: '() n d -> b n d', 'd -> b 1 d', '1 1 d -> b f 1 d'),
    a view, and `x[:, i]` indexing: one example's value under jax.vmap is PyTorch's on the batch."""
    import numpy as np
    r = translate_source(BATCH_SIZE.read_text(), str(BATCH_SIZE), PACK)
    assert [f.code for f in r.findings] == ["idiom-replaced"], r.findings  # float64: jax_enable_x64 switched on
    assert "batch" not in r.output.split("def __call__", 1)[1], r.output
    translated = tmp_path / "batch_size_jax.py"
    translated.write_text(r.output)
    outs = {}
    for side, path in (("torch", BATCH_SIZE), ("jax", translated)):
        outs[side] = saved_arrays(_RUN_BATCH_SIZE, side, path, tmp_path / f"{side}.npz")
    assert len(outs["torch"]) == len(outs["jax"]) == 13
    for i, (t, j) in enumerate(zip(outs["torch"], outs["jax"])):
        assert t.shape == j.shape, f"output {i}: {t.shape} vs {j.shape}"
        np.testing.assert_allclose(j, t, rtol=1e-12, atol=1e-12, err_msg=f"output {i}")


def test_a_sequential_written_one_layer_per_line_stays_so_with_its_comments():
    src = ("import torch.nn as nn\n\n\nclass N(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.net = nn.Sequential(\n            nn.Linear(4, 8),  # first\n            # then\n"
           "            nn.ReLU(),\n            nn.Linear(8, 2),\n        )\n\n    def forward(self, x):\n"
           "        return self.net(x)\n")
    out = translate_source(src, "m.py", "torch2jax").output
    assert ("        self.net = eqx.nn.Sequential([\n            eqx.nn.Linear(4, 8, key=key1),  # first\n"
            "            # then\n            eqx.nn.Lambda(jax.nn.relu),\n            eqx.nn.Linear(8, 2, key=key2),\n"
            "        ])\n") in out, out
    # one line in, one line out
    one = src.replace("nn.Sequential(\n            nn.Linear(4, 8),  # first\n            # then\n            nn.ReLU(),\n"
                      "            nn.Linear(8, 2),\n        )", "nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))")
    assert ("self.net = eqx.nn.Sequential([eqx.nn.Linear(4, 8, key=key1), eqx.nn.Lambda(jax.nn.relu), "
            "eqx.nn.Linear(8, 2, key=key2)])") in translate_source(one, "m.py", "torch2jax").output


_BCE_LOGITS = """import torch
import torch.nn as nn
import torch.nn.functional as F

mean = nn.BCEWithLogitsLoss()
each = nn.BCEWithLogitsLoss(reduction="none")


def f(x, t):
    return [mean(x, t), each(x, t), F.binary_cross_entropy_with_logits(x, t, reduction="sum"),
            F.binary_cross_entropy_with_logits(x, t)]
"""

_RUN_BCE_LOGITS = """import runpy, sys
import numpy as np
side, path, out = sys.argv[1:4]
if side == "jax":
    sys.modules["torch"] = None
f = runpy.run_path(path)["f"]
rng = np.random.default_rng(0)
x = (rng.standard_normal((4, 5)) * 3).astype(np.float32)
x[0, :3] = [40.0, -40.0, 0.0]  # saturated logits: PyTorch's loss stays finite and exact
t = rng.uniform(size=(4, 5)).astype(np.float32)
t[0, :3] = [0.0, 1.0, 0.5]
if side == "torch":
    import torch
    x, t = torch.from_numpy(x), torch.from_numpy(t)
np.savez(out, *[np.asarray(o) for o in f(x, t)])
"""


def test_bce_with_logits_computes_what_pytorch_computes(tmp_path):
    import numpy as np
    r = translate_source(_BCE_LOGITS, "x.py", PACK)
    assert not [f for f in r.findings if f.severity >= Severity.WARNING], r.findings
    assert "optax.sigmoid_binary_cross_entropy(x, y)" not in r.output and "torch" not in r.output
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(_BCE_LOGITS)
    out.write_text(r.output)
    res = {}
    for side, path in (("torch", src), ("jax", out)):
        p = python("-c", _RUN_BCE_LOGITS, side, path, tmp_path / f"{side}.npz", side=f"torch2jax-{side}", timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        with np.load(tmp_path / f"{side}.npz") as z:
            res[side] = [z[f"arr_{i}"] for i in range(len(z.files))]
    assert len(res["torch"]) == len(res["jax"]) == 4
    assert res["torch"][1][0, 0] == pytest.approx(40.0, rel=1e-6)  # -log(1 - sigmoid(40)): no overflow
    for i, (t, j) in enumerate(zip(res["torch"], res["jax"])):
        assert t.shape == j.shape, i
        np.testing.assert_allclose(j, t, rtol=1e-5, atol=1e-6, err_msg=f"output {i}")


def test_bce_with_logits_pos_weight_is_refused():
    r = translate_source("import torch.nn as nn\ncrit = nn.BCEWithLogitsLoss(pos_weight=w)\n", "x.py", PACK)
    assert any(f.severity is Severity.ERROR and "pos_weight" in f.message for f in r.findings), r.findings


_ARITH = """import torch


def f(a, b, x):
    return [torch.add(a, b), torch.mul(a, b), torch.multiply(a, 2.5), torch.fmod(x, 1.0), torch.fmod(x, -0.75),
            torch.erfinv(torch.tanh(x)), torch.special.erfinv(x / 10)]
"""

_RUN_ARITH = """import runpy, sys
import numpy as np
side, path, out = sys.argv[1:4]
if side == "jax":
    sys.modules["torch"] = None
f = runpy.run_path(path)["f"]
rng = np.random.default_rng(0)
a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
x = (rng.standard_normal((3, 4)) * 3).astype(np.float32)  # negative values too: fmod keeps the dividend's sign
if side == "torch":
    import torch
    a, b, x = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(x)
np.savez(out, *[np.asarray(o) for o in f(a, b, x)])
"""


def test_add_mul_fmod_erfinv_compute_what_pytorch_computes(tmp_path):
    import numpy as np
    r = translate_source(_ARITH, "x.py", PACK)
    assert not [f for f in r.findings if f.severity >= Severity.WARNING], r.findings
    assert "torch" not in r.output
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(_ARITH)
    out.write_text(r.output)
    res = {}
    for side, path in (("torch", src), ("jax", out)):
        p = python("-c", _RUN_ARITH, side, path, tmp_path / f"{side}.npz", side=f"torch2jax-{side}", timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        with np.load(tmp_path / f"{side}.npz") as z:
            res[side] = [z[f"arr_{i}"] for i in range(len(z.files))]
    assert len(res["torch"]) == len(res["jax"]) == 7
    assert (res["torch"][3] < 0).any()  # a negative remainder: not Python's %
    for i, (t, j) in enumerate(zip(res["torch"], res["jax"])):
        assert t.shape == j.shape and t.dtype == j.dtype, i
        np.testing.assert_allclose(j, t, rtol=2e-5, atol=1e-6, err_msg=f"output {i}")


def test_add_with_alpha_is_refused():
    r = translate_source("import torch\ny = torch.add(a, b, alpha=2)\n", "x.py", PACK)
    assert any(f.severity is Severity.ERROR and "alpha" in f.message for f in r.findings), r.findings


_IS_TENSOR = """import numpy as np
import torch


def f(t, a):
    return [torch.is_tensor(t), torch.is_tensor(t * 2), torch.is_tensor(a), torch.is_tensor(3.0), torch.is_tensor([t])]
"""

_RUN_IS_TENSOR = """import json, runpy, sys
import numpy as np
side, path = sys.argv[1:3]
if side == "jax":
    sys.modules["torch"] = None
f = runpy.run_path(path)["f"]
a = np.ones(3, dtype=np.float32)
if side == "torch":
    import torch
    got = f(torch.from_numpy(a), a)
else:
    import jax, jax.numpy as jnp
    got = f(jnp.asarray(a), a)
    traced = jax.jit(lambda t: jnp.asarray(f(t, a)[:2]))(jnp.asarray(a))  # a traced array is one too
    assert bool(traced.all()), traced
print(json.dumps([bool(g) for g in got]))
"""


def test_is_tensor_answers_as_pytorch_does(tmp_path):
    import json
    r = translate_source(_IS_TENSOR, "x.py", PACK)
    assert not [f for f in r.findings if f.severity >= Severity.WARNING], r.findings
    assert "isinstance(t, jax.Array)" in r.output and "torch" not in r.output
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(_IS_TENSOR)
    out.write_text(r.output)
    res = {}
    for side, path in (("torch", src), ("jax", out)):
        p = python("-c", _RUN_IS_TENSOR, side, path, side=f"torch2jax-{side}", timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        res[side] = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["torch"] == [True, True, False, False, False]
    assert res["jax"] == res["torch"]
