"""torch2jax gaps of t2j29: names the output reads that the file binds (clashes.py), nn.Linear on inputs of
rank > 1 per example, `+=` on tensors outside forward, module outputs in the in-place check, packed sequences."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from runners import python


def _t(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "f.py", "torch2jax")


def _errors(r):
    return [f for f in r.findings if f.severity.value == "error"]


def _run(tmp_path, text: str, script: str) -> str:
    """Run the translation with torch unimportable, then ``script`` (ns: the translation's globals)."""
    (tmp_path / "t.py").write_text(text)
    run = "import sys, runpy\nsys.modules['torch'] = None\nns = runpy.run_path(sys.argv[1])\n" + script
    p = python("-c", run, tmp_path / "t.py", side="jax", timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


# --- 1. names the file binds --------------------------------------------------------------------------------

REBOUND_NP = '''
import numpy as onp
import torch
from torch.utils.data import DataLoader, TensorDataset

np = 3  # a count, not numpy

x = torch.tensor(onp.arange(24, dtype=onp.float32).reshape(8, 3))
loader = DataLoader(TensorDataset(x, x), batch_size=4, shuffle=True)
'''


def test_helpers_spell_numpy_through_the_files_own_alias_when_np_is_rebound(tmp_path):
    r = _t(REBOUND_NP)
    assert not _errors(r)
    assert "np." not in r.output.replace("onp.", "").replace("jnp.", "")
    assert "onp.random.default_rng(seed)" in r.output and "import numpy as np\n" not in r.output
    pytest.importorskip("jax")
    out = _run(tmp_path, r.output, "print(ns['np'], sorted(float(v) for xb, yb in ns['loader'] for v in xb[:, 0]))\n")
    assert out.split("\n")[0] == "3 [0.0, 3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0]"


def test_helpers_import_numpy_under_a_free_name_when_np_is_taken():
    r = _t(REBOUND_NP.replace("import numpy as onp\n", "").replace("onp.arange(24, dtype=onp.float32)",
                                                                    "[float(i) for i in range(24)]"))
    assert "\nimport numpy\n" in r.output and "numpy.random.default_rng(seed)" in r.output
    assert "import numpy as np" not in r.output
    again = translate_source(r.output, "f.py", "torch2jax")
    assert again.output == r.output


def test_a_file_that_binds_jnp_gets_an_error_at_the_binding():
    r = _t('''
        import torch

        jnp = 3
        x = torch.zeros(3)
    ''')
    (e,) = _errors(r)
    assert (e.line, e.code) == (3, "unsupported-construct") and "`jnp`" in e.message
    assert r.output.index("# fwport: unsupported-construct: this file binds `jnp`") < r.output.index("jnp = 3")
    r = _t("import numpy as jnp\nimport torch\nx = torch.zeros(3)\n")
    (e,) = _errors(r)
    assert e.line == 1 and "imports numpy as `jnp`" in e.message
    # the module's own import, a name bound only inside a function, a class attribute: no clash
    r = _t("import jax.numpy as jnp\nimport torch\n\n\ndef f():\n    jnp = 1\n    return jnp\n\n\nclass A:\n"
           "    jnp = 2\n\n\nx = torch.zeros(3)\n")
    assert not _errors(r)


# --- numerical comparison: torch in this process, the translation in a subprocess without torch ------------

_JAX_SIDE = '''
import re, numpy, jax, jax.numpy as jnp, equinox as eqx
data = numpy.load(sys.argv[2])
model = ns[sys.argv[3]](key=jax.random.key(0))
for name in [k[2:] for k in data.files if k.startswith("w:")]:
    path = re.sub(r"\\.(\\d+)", r".layers[\\1]", name)  # an nn.Sequential's layers: eqx.nn.Sequential's .layers
    get = lambda m, path=path: eval("m." + path, {"m": m})
    model = eqx.tree_at(get, model, jnp.asarray(data["w:" + name]).reshape(get(model).shape))
worst = 0.0
for k in [k for k in data.files if k.startswith("x:")]:
    y = jax.vmap(model)(jnp.asarray(data[k]))
    want = data["y:" + k[2:]]
    assert y.shape == want.shape, (y.shape, want.shape)
    worst = max(worst, float(numpy.max(numpy.abs(numpy.asarray(y) - want))))
print(worst)
'''


def _compare(tmp_path, src: str, cls: str, inputs: dict) -> float:
    """The largest difference between the PyTorch module ``cls`` of ``src`` and its translation on ``inputs``
    (name → array with the batch axis first), the PyTorch state_dict moved by name."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("jax")
    pytest.importorskip("equinox")
    import numpy as np
    src = textwrap.dedent(src).lstrip("\n")
    r = translate_source(src, "f.py", "torch2jax")
    assert not _errors(r), [f.message for f in _errors(r)]
    ns: dict = {}
    exec(compile(src, "f.py", "exec"), ns)
    torch.manual_seed(0)
    model = ns[cls]().eval()
    arrays = {f"w:{k}": v.detach().numpy() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for name, x in inputs.items():
            arrays[f"x:{name}"] = x
            arrays[f"y:{name}"] = model(torch.from_numpy(x)).numpy()
    np.savez(tmp_path / "data.npz", **arrays)
    (tmp_path / "t.py").write_text(r.output)
    run = "import sys, runpy\nsys.modules['torch'] = None\nns = runpy.run_path(sys.argv[1])\n" + _JAX_SIDE
    p = python("-c", run, tmp_path / "t.py", tmp_path / "data.npz", cls, side="jax", timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return float(p.stdout.split()[-1])


# --- 2. a Linear given a value of unknown rank -------------------------------------------------------------

TOKENS_LINEAR = '''
import torch
import torch.nn as nn


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, h):
        return torch.tanh(self.fc(self.norm(h)))


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        h = x * 2.0
        return self.inner(h)
'''


def test_a_linear_or_layernorm_given_an_unknown_rank_maps_over_the_leading_axes(tmp_path):
    import numpy as np
    r = _t(TOKENS_LINEAR)
    assert 'jnp.tanh(jnp.vectorize(self.fc, signature="(n)->(m)")(jnp.vectorize(self.norm, signature="(n)->(n)")(h)))' \
        in r.output
    assert not [f for f in r.findings if f.severity.value != "info"]
    rng = np.random.default_rng(0)
    # (tokens, features) examples with as many tokens as features (Equinox's W @ x would broadcast silently there;
    # its LayerNorm would normalise over the whole example),
    # (2, 3, 4) examples, and one vector per example
    err = _compare(tmp_path, TOKENS_LINEAR, "Outer", {
        "tokens": rng.normal(size=(3, 4, 4)).astype(np.float32),
        "grid": rng.normal(size=(2, 2, 3, 4)).astype(np.float32),
        "vector": rng.normal(size=(5, 4)).astype(np.float32)})
    assert err < 1e-5


def test_a_permuted_input_is_known_to_hold_tokens(tmp_path):
    import numpy as np
    src = '''
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                return self.fc(x.permute(0, 2, 1))
    '''
    r = _t(src)
    assert "jax.vmap(self.fc)(jnp.transpose(x, (1, 0)))" in r.output
    err = _compare(tmp_path, src, "Net", {"x": np.random.default_rng(1).normal(size=(2, 4, 5)).astype(np.float32)})
    assert err < 1e-5


# --- 3. writes into a tensor outside forward -----------------------------------------------------------------

WRITES = '''
import torch


def shared(n):
    a = torch.zeros(n)
    b = a
    a += 1
    return b


def row_of(n):
    a = torch.zeros(n, 3)
    row = a[0]
    row += 1
    return a


def into_a_view(n):
    a = torch.zeros(n, 3)
    b = a.view(-1)
    b[0] += 5
    return a


def sole(n):
    a = torch.arange(n, dtype=torch.float32)
    a += 1
    a *= 2
    return a


def copied(x: torch.Tensor):
    y = x.clone() if x.dim() > 1 else x * 1.0
    y[0] += 1
    y[1:] = y[1:] * 3
    return y


def numbers(xs):
    total = 0
    for x in xs:
        total += x.sum()
    counts = [0, 0]
    counts[0] += 1
    return total, counts


total = torch.zeros(3)
view = total[:2]
for i in range(3):
    total += torch.ones(3)
'''


def test_writes_into_tensors_outside_forward_are_exact_or_errors(tmp_path):
    r = _t(WRITES)
    lines = WRITES.lstrip("\n").splitlines()
    errors = sorted((f.line, lines[f.line - 1].strip()) for f in _errors(r))
    assert errors == [(7, "a += 1"), (14, "row += 1"), (21, "b[0] += 5"), (51, "total += torch.ones(3)")]
    assert all(f.code == "unsupported-construct" and "may share its memory" in f.message for f in _errors(r))
    assert "    y = y.at[0].add(1)\n    y = y.at[1:].set(y[1:] * 3)\n" in r.output
    assert "    a += 1\n    a *= 2\n" in r.output and "        total += x.sum()\n" in r.output
    assert "    counts[0] += 1\n" in r.output
    # the exact ones compute what PyTorch computes
    torch = pytest.importorskip("torch")
    pytest.importorskip("jax")
    ns: dict = {}
    exec(compile(textwrap.dedent(WRITES), "f.py", "exec"), ns)
    want = [ns["sole"](4).tolist(), ns["copied"](torch.arange(6.0).reshape(3, 2)).tolist(),
            ns["copied"](torch.arange(3.0)).tolist()]
    out = _run(tmp_path, r.output, "import jax.numpy as jnp\nprint([ns['sole'](4).tolist(), "
               "ns['copied'](jnp.arange(6.0).reshape(3, 2)).tolist(), ns['copied'](jnp.arange(3.0)).tolist()])\n")
    assert out.strip() == str(want)


# --- 4. modules that return their input, in the in-place check ---------------------------------------------

PASSING = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.skip = nn.Identity()
        self.drop = nn.Dropout(0.1)
        self.both = nn.Sequential(nn.Identity(), nn.Dropout(0.2))
        self.act = nn.ReLU(inplace=True)
        self.mlp = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

    def forward(self, x):
        h = self.fc(x)
        y = self.skip(h)
        y.add_(1)
        z = self.drop(h)
        z.mul_(2)
        w = self.both(h)
        w.relu_()
        v = self.act(h)
        v.sub_(1)
        u = F.dropout(h, 0.1, self.training)
        u.tanh_()
        m = self.mlp(h)
        m.add_(1)
        m.relu_()
        return h + m
'''


def test_module_outputs_that_are_their_input_are_shared_memory():
    r = _t(PASSING)
    lines = PASSING.lstrip("\n").splitlines()
    refused = sorted(lines[f.line - 1].strip() for f in _errors(r))
    assert refused == ["u.tanh_()", "v.sub_(1)", "w.relu_()", "y.add_(1)", "z.mul_(2)"], refused
    assert all("may share its memory" in f.message for f in _errors(r))
    assert "        m = m + 1\n        m = jax.nn.relu(m)\n" in r.output  # a Sequential of new memory: rebound


def test_a_module_output_of_new_memory_is_rebound_exactly(tmp_path):
    import numpy as np
    src = '''
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
                self.skip = nn.Identity()
                self.mlp = nn.Sequential(nn.Linear(3, 3), nn.Tanh())

            def forward(self, x):
                h = self.fc(x)
                m = self.mlp(h)
                m.add_(1)
                m.relu_()
                s = self.skip(m)
                return h * 2 + s
    '''
    err = _compare(tmp_path, src, "Net", {"x": np.random.default_rng(2).normal(size=(5, 4)).astype(np.float32)})
    assert err < 1e-5


# --- 5. packed sequences -------------------------------------------------------------------------------------

def test_packed_sequences_are_errors_with_the_masking_to_write():
    r = _t('''
        import torch
        import torch.nn as nn
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


        def encode(lstm, x, lengths):
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, _ = lstm(packed)
            out, _ = pad_packed_sequence(out, batch_first=True)
            return out
    ''')
    errs = _errors(r)
    assert sorted((f.line, f.code) for f in errs) == [(7, "no-rule"), (9, "no-rule")]
    assert all("JAX has no packed sequences" in f.message and "jnp.arange(L) < length" in f.message for f in errs)
    assert "# fwport: no-rule: torch.nn.utils.rnn.pack_padded_sequence has no torch2jax translation" in r.output
    assert "pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)" in r.output


def test_the_packed_sequence_guidance_computes_what_pytorch_does():
    """What the guidance says to write (a mask over the padded steps) gives PyTorch's packed results."""
    torch = pytest.importorskip("torch")
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4, batch_first=True)
    x, lengths = torch.randn(3, 5, 3), torch.tensor([5, 3, 2])
    out, (h, _) = lstm(pack_padded_sequence(x, lengths, batch_first=True))
    padded, _ = pad_packed_sequence(out, batch_first=True)
    full, _ = lstm(x)
    valid = torch.arange(5)[None, :] < lengths[:, None]
    assert torch.allclose(padded, torch.where(valid[..., None], full, torch.zeros(())))
    assert torch.allclose(h[0], full[torch.arange(3), lengths - 1])
    logits, t = torch.randn(3, 5, 4), torch.randint(0, 4, (3, 5))
    packed = torch.nn.functional.cross_entropy(pack_padded_sequence(logits, lengths, batch_first=True)[0],
                                               pack_padded_sequence(t, lengths, batch_first=True)[0])
    masked = (torch.nn.functional.cross_entropy(logits.reshape(-1, 4), t.reshape(-1), reduction="none").reshape(3, 5)
              * valid).sum() / valid.sum()
    assert torch.allclose(packed, masked)


def test_an_augmented_assignment_alone_is_checked():
    r = _t("import torch\n\n\ndef f(n):\n    a = torch.zeros(n)\n    b = a\n    a += 1\n    return b\n")
    (e,) = _errors(r)
    assert e.line == 7 and "may share its memory" in e.message
