"""Buffers that meet the batch axis (issue 10): a positional encoding registered in __init__ with a size-1 axis that
lines up with the batch axis (word_language_model's (max_len, 1, E) against (L, N, E), language_translation's
.unsqueeze(-2), a batch-first (1, max_len, E)) is read for one example with that axis indexed away
(batch.buffer_read); a module of the file returning the batch axis where it got it passes a sequence-first input
on to the layer (ranks.py), and an attention mask given as an input has no batch axis (in_axes None). Numbers
against PyTorch: tests/data/torch_seqfirst_buffers.py, the weights moved by the verifier's map."""
from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from tests.runners import torch_and_jax

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "data" / "torch_seqfirst_buffers.py"
MISSING = [m for m in ("torch", "jax", "equinox") if importlib.util.find_spec(m) is None]
needs_frameworks = pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} installed")


def t2j(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", "torch2jax")


def errors(r):
    return [f for f in r.findings if f.severity is Severity.ERROR]


def test_the_buffer_s_batch_aligned_axis_is_indexed_away():
    r = translate_source(MODEL.read_text(), str(MODEL), "torch2jax")
    assert not errors(r), r.findings
    out = r.output
    assert "x + jax.lax.stop_gradient(self.pe)[:x.shape[0], 0]" in out  # (max_len, 1, E) against (L, N, E)
    assert "jax.lax.stop_gradient(self.pos_embedding)[:token_embedding.shape[0], 0]" in out  # .unsqueeze(-2)
    assert "x + jax.lax.stop_gradient(self.pe)[0, :x.shape[0]]" in out  # (1, max_len, E) against (N, L, E)
    assert "in_axes=(1, None), out_axes=1" in out  # the model: tokens (L, N), the mask shared
    assert "inputs x 1, attn_mask none" in out  # MultiheadAttention's attn_mask given as an input


def test_a_buffer_whose_batch_aligned_axis_is_not_of_size_one_is_an_error():
    r = t2j("""
        import torch
        from torch import nn


        class PositionalEncoding(nn.Module):
            def __init__(self, d_model, max_len=50):
                super().__init__()
                self.register_buffer('pe', torch.zeros(max_len, 2, d_model))

            def forward(self, x):
                return x + self.pe[:x.size(0)]


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(20, 8)
                self.pos = PositionalEncoding(8)
                self.rnn = nn.GRU(8, 8)

            def forward(self, x):
                return self.rnn(self.pos(self.emb(x)))[0]
        """)
    messages = [f.message for f in errors(r)]
    assert any("self.pe (rank 3)" in m and "its axis 1 lines up with the batch axis" in m
               and "__init__ does not build that axis of size 1" in m for m in messages), r.findings


def test_an_attention_mask_computed_from_the_input_says_so():
    r = t2j("""
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 1)

            def forward(self, src):
                mask = src[:, :, 0] > 0
                return self.encoder(src, mask)
        """)
    assert any("given to self.encoder as mask, is computed from the module's input" in f.message
               for f in errors(r)), r.findings


_BODY = """
import json
sys.path.insert(0, {verify!r})
rng = np.random.default_rng(0)
name = {name!r}
seq_first = name.startswith("SeqFirst") or name == "AttentionMask"
L, N = 6, 3
tokens = rng.integers(0, 20, size=(L, N) if seq_first else (N, L)) if name != "AttentionMask" else rng.normal(size=(L, N, 8))
mask = np.triu(np.full((L, L), -np.inf), 1)
inputs = [tokens, mask] if seq_first else [tokens]
if side == "torch":
    torch.manual_seed(0)
    model = ns[name]().eval()
    from torch_source_side import _mapped_modules
    np.savez("state.npz", **{{k: v.detach().numpy() for k, v in model.state_dict().items()}})
    json.dump(_mapped_modules(model), open("modules.json", "w"))
    out = model(*[torch.tensor(a) for a in inputs]).detach().numpy()
else:
    from jax_side import load_state
    model = ns[name](key=jax.random.PRNGKey(1))
    model, problems = load_state(model, dict(np.load("state.npz")), eqx, jnp, json.load(open("modules.json")))
    assert not problems, problems
    model = eqx.nn.inference_mode(model)
    axes = (1, None) if seq_first else (0,)
    out = np.asarray(jax.vmap(model, in_axes=axes, out_axes=1 if seq_first else 0)(
        *[jnp.asarray(a) for a in inputs]))
np.save(OUT, out)
"""


@needs_frameworks
@pytest.mark.parametrize("name", ["SeqFirstModel", "SeqFirstUnsqueezed", "BatchFirstModel", "AttentionMask"])
def test_positional_encodings_compute_what_pytorch_computes(name, tmp_path):
    import numpy as np
    r = translate_source(MODEL.read_text(), str(MODEL), "torch2jax")
    assert not errors(r), r.findings
    body = _BODY.format(verify=str(ROOT / "fwport" / "verify"), name=name)
    torch_out, jax_out = torch_and_jax(tmp_path, MODEL.read_text(), r.output, body)
    assert torch_out.shape == jax_out.shape == {"SeqFirstModel": (6, 3, 5), "SeqFirstUnsqueezed": (6, 3, 8), "BatchFirstModel": (3, 6, 5),
                                                         "AttentionMask": (6, 3, 8)}[name]
    np.testing.assert_allclose(jax_out, torch_out, rtol=1e-9, atol=1e-9)
