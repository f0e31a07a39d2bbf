"""torch2jax graph code: sparse matrices (torch.sparse_coo_tensor → jsparse.BCOO, torch.spmm → ``@``), a module
that takes a whole graph (no per-example axis shift, called without jax.vmap) and a training function that is
one step per call (pytorch/examples gcn/main.py's train_iter). tests/data/torch_gcn.py is translated, run with
torch unimportable from the same initial kernels, and compared with PyTorch: the sparse product, the forward
pass and three Adam steps."""
from __future__ import annotations

from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python

pytest.importorskip("torch")
pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parent.parent
GCN = ROOT / "tests" / "data" / "torch_gcn.py"

_RUN = """
import importlib.util, sys
import numpy as np
side, path, out = sys.argv[1:4]
if side == "jax":
    sys.modules["torch"] = None  # the translation must not need it
spec = importlib.util.spec_from_file_location("gcn", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
rng = np.random.default_rng(0)
n = 7
edges = np.array([[0, 1], [1, 0], [1, 2], [2, 1], [3, 4], [4, 3], [5, 6], [6, 5], [2, 2], [0, 6]], dtype=np.int64)
values = rng.uniform(0.5, 1.5, len(edges)).astype(np.float32)
features = (rng.uniform(size=(n, 5)) > 0.5).astype(np.float32)
labels = rng.integers(0, 3, n)
mask = np.array([0, 1, 2, 4, 5])
k1 = rng.standard_normal((5, 8)).astype(np.float32)
k2 = rng.standard_normal((8, 3)).astype(np.float32)
dense = rng.standard_normal((n, 4)).astype(np.float32)
res = {"k1_init": k1}
if side == "torch":
    import torch
    adj = mod.graph(torch.from_numpy(edges), torch.from_numpy(values), n)
    res["spmm"] = torch.spmm(adj, torch.from_numpy(dense)).numpy()
    Base = mod.GCN

    def made(*args, **kw):
        m = Base(*args, **kw)
        with torch.no_grad():
            m.gc1.kernel.copy_(torch.from_numpy(k1))
            m.gc2.kernel.copy_(torch.from_numpy(k2))
        return m

    mod.GCN = made
    res["forward"] = made(5, 8, 3)(torch.from_numpy(features), adj).detach().numpy()
    trained = mod.fit(torch.from_numpy(features), adj, torch.from_numpy(labels), torch.from_numpy(mask), 3)
    res["k1"], res["k2"] = trained.gc1.kernel.detach().numpy(), trained.gc2.kernel.detach().numpy()
else:
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    adj = mod.graph(jnp.asarray(edges), jnp.asarray(values), n)
    res["spmm"] = np.asarray(adj @ jnp.asarray(dense))
    Base = mod.GCN

    def made(*args, **kw):
        m = Base(*args, **kw)
        m = eqx.tree_at(lambda m: m.gc1.kernel, m, jnp.asarray(k1))
        return eqx.tree_at(lambda m: m.gc2.kernel, m, jnp.asarray(k2))

    mod.GCN = made
    res["forward"] = np.asarray(made(5, 8, 3, key=jax.random.key(0))(jnp.asarray(features), adj, key=None))
    trained = mod.fit(jnp.asarray(features), adj, jnp.asarray(labels), jnp.asarray(mask), 3)
    res["k1"], res["k2"] = np.asarray(trained.gc1.kernel), np.asarray(trained.gc2.kernel)
np.savez(out, **res)
"""


def _translated(tmp_path: Path) -> Path:
    r = translate_source(GCN.read_text(), str(GCN), pack="torch2jax")
    assert not [f for f in r.findings if f.severity >= Severity.WARNING], r.findings
    out = tmp_path / "gcn_jax.py"
    out.write_text(r.output)
    return out


def test_a_graph_network_translates_to_whole_graph_modules_and_a_threaded_step(tmp_path):
    text = _translated(tmp_path).read_text()
    assert "support = x @ self.kernel" in text and "return adj @ support" in text  # BCOO takes @, not jnp.matmul
    assert "jax.nn.log_softmax(x, axis=1)" in text  # no axis shifted: the nodes are no batch
    assert "jsparse.BCOO((values, edges), shape=(n, n))" in text
    assert "jax.vmap" not in text
    # the function that is one step: a jitted train_step above it, opt_state and a key per call threaded
    assert "@eqx.filter_jit\ndef train_step(model, opt_state, optimizer, input, criterion, mask, target, key):" in text
    assert "output = model(*input, key=key)" in text
    assert "def train_iter(epoch, model, optimizer, opt_state, criterion, input, target, mask, key):" in text
    assert "key, step_key = jax.random.split(key)\n    model, opt_state, loss = train_step(model, opt_state, optimizer, " \
           "input, criterion, mask, target, step_key)" in text
    assert "key, train_key = jax.random.split(key)\n        gcn, opt_state = train_iter(epoch, gcn, optimizer, opt_state, " \
           "criterion, (jsparse.BCOO.fromdense(features), adj), labels, mask, key=train_key)" in text
    assert "optimizer.zero_grad()" not in text and "backward" not in text


def test_sparse_product_forward_and_steps_compute_what_pytorch_computes(tmp_path):
    import numpy as np
    jax_file = _translated(tmp_path)
    outs = {}
    for side, path in (("torch", GCN), ("jax", jax_file)):
        p = python("-c", _RUN, side, path, tmp_path / f"{side}.npz", side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        outs[side] = dict(np.load(tmp_path / f"{side}.npz"))
    for name in ("spmm", "forward", "k1", "k2"):
        np.testing.assert_allclose(outs["jax"][name], outs["torch"][name], rtol=1e-5, atol=1e-5, err_msg=name)
    assert np.abs(outs["torch"]["k1"] - outs["torch"]["k1_init"]).max() > 1e-3  # the steps moved the kernels


@pytest.mark.parametrize("src, message", [
    ("import torch\nadj = torch.sparse_coo_tensor(i, v)\n", "without a size"),
])
def test_a_sparse_matrix_without_its_size_is_refused(src, message):
    r = translate_source(src, "x.py", pack="torch2jax")
    assert any(f.severity == Severity.ERROR and message in f.message for f in r.findings), r.findings


def test_a_step_function_with_a_defaulted_parameter_takes_its_key_by_keyword_from_a_seeded_main_block():
    # gcn/main.py: train_iter(..., print_every=10) called under `if __name__ == "__main__":` after torch.manual_seed
    src = GCN.read_text().replace("target, mask):\n    model.train()", "target, mask, print_every=10):\n    model.train()")
    src = src.replace("def fit(features, adj, labels, mask, epochs):\n    torch.manual_seed(0)\n",
                      "def fit(features, adj, labels, mask, epochs):\n    if True:\n        torch.manual_seed(0)\n")
    r = translate_source(src, "gcn.py", pack="torch2jax")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "def train_iter(epoch, model, optimizer, opt_state, criterion, input, target, mask, print_every=10, *, key):" \
        in r.output
    assert "labels, mask, key=train_key)" in r.output
