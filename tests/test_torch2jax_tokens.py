"""Examples that hold several vectors (tokens) inside a per-example Equinox module (issue 10, vit-pytorch):
the ranks each module of a file receives (ranks.py), per-vector layers mapped over the tokens (jax.vmap at a
direct call, PerVector inside a Sequential), einops patterns and einops's Rearrange layer written for one
example. The translation is checked against PyTorch by `fwport verify` (forward and gradients)."""
from __future__ import annotations

from pathlib import Path


from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from helpers import needs, t2j
from runners import verify_torch2jax

ROOT = Path(__file__).resolve().parent.parent
TOKENS = ROOT / "tests" / "data" / "torch_tokens.py"
needs_frameworks = needs("torch", "jax", "equinox", "einops")


def test_a_small_vit_translates_with_per_example_ranks_inferred_across_its_modules():
    r = translate_source(TOKENS.read_text(), str(TOKENS), "torch2jax")
    assert not [f for f in r.findings if f.severity is not Severity.INFO], r.findings
    out = r.output
    # Attention gets (tokens, dim) from Tiny through the ModuleList loop: its direct per-vector calls are vmapped
    assert "x = jax.vmap(self.norm)(x)" in out and "jnp.split(jax.vmap(self.to_qkv)(x), 3, axis=-1)" in out
    assert "rearrange(t, 'n (h d) -> h n d', h=self.heads)" in out and "'h n d -> n (h d)'" in out
    # the Sequentials it and FeedForward call on tokens wrap their per-vector layers; the activation stays
    assert "eqx.nn.Sequential([PerVector(eqx.nn.LayerNorm(dim)), PerVector(eqx.nn.Linear(dim, hidden, key=key1)), " \
           "eqx.nn.Lambda(lambda x: jax.nn.gelu(x, approximate=False)), PerVector(eqx.nn.Linear(hidden, dim, key=key2))])" in out
    assert "eqx.nn.Sequential([PerVector(eqx.nn.Linear(inner, dim, key=key2)), eqx.nn.Dropout(0.0)]) if inner != dim " \
           "else eqx.nn.Identity()" in out
    # the Rearrange layer for one example, and the layers after it (tokens) wrapped
    assert "eqx.nn.Lambda(lambda x: einops.rearrange(x, 'c (h p1) (w p2) -> (h w) (p1 p2 c)', p1=ph, p2=pw))," in out
    assert "PerVector(eqx.nn.LayerNorm(patch_dim))," in out and "einops.layers" not in out and "import einops" in out
    # `b, n, _ = x.shape` says x holds tokens; the class token's x[:, 0] is one vector: the head is not mapped
    assert "jax.vmap(self.proj)(x).mean(axis=0) * n" in out
    assert "return self.head(x[0]) + self.head(self.pool(x))" in out
    assert "class PerVector(eqx.Module)" in out and "patch_size: tuple" in out


@needs_frameworks
def test_the_small_vit_verifies_against_pytorch(tmp_path):
    r = translate_source(TOKENS.read_text(), str(TOKENS), "torch2jax")
    translated = tmp_path / "tokens_jax.py"
    translated.write_text(r.output)
    cert = verify_torch2jax(TOKENS, translated, "Tiny", ["float32[2,3,8,8]"])
    res = cert.get("results", {})
    assert cert["verdict"] == "pass", str(cert)[:3000]
    assert res["outputs"] and res["gradients"]


def test_a_rearrange_layer_that_moves_the_batch_axis_is_an_error_and_the_others_are_translated():
    r = t2j('''
        import torch
        from torch import nn
        from einops.layers.torch import Rearrange, Reduce


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Sequential(Rearrange('b c n -> c b n'), nn.Identity())
                self.b = nn.Sequential(Rearrange('b c h w -> b (c h w)'), Reduce('b n -> b', 'mean'))
    ''')
    errs = [(f.line, f.code) for f in r.findings if f.severity is Severity.ERROR]
    assert errs == [(9, "batch-axis")], r.findings  # Reduce is translated too (its pattern for one example)
    assert "eqx.nn.Lambda(lambda x: einops.rearrange(x, '(c h w)'))" not in r.output  # '-> (c h w)' for one example
    assert "einops.rearrange(x, 'c h w -> (c h w)')" in r.output
    assert "eqx.nn.Lambda(lambda x: einops.reduce(x, 'n -> ', 'mean'))" in r.output


def test_a_per_vector_layer_on_a_value_of_unknown_rank_in_a_called_module_maps_over_its_leading_axes():
    """Block is called by Net with what an untranslated helper returns: its rank cannot be inferred, so the Linear
    is vectorized over every leading axis (exact at any rank, a vector included: t2j29), with an info finding.
    In Net, whose input is the user's, one vector per example is assumed, with a warning saying so (t2jsil)."""
    r = t2j('''
        import torch
        from torch import nn


        def helper(x):
            return x


        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x)


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.block(helper(self.fc(x)))
    ''')
    said = [(f.line, f.severity, f.code) for f in r.findings]
    assert said == [(15, Severity.INFO, "idiom-replaced"), (25, Severity.WARNING, "batch-axis")], r.findings
    assert 'return jnp.vectorize(self.fc, signature="(n)->(m)")(x)' in r.output
    assert "return self.block(helper(self.fc(x)))" in r.output and "jax.vmap" not in r.output


def test_a_chained_assignment_to_a_field_declares_it():
    r = t2j('''
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self, size):
                super().__init__()
                self.size = h, w = size, size
                self.fc = nn.Linear(h * w, 2)
    ''')
    assert "    size: tuple\n" in r.output, r.output
