"""DETR-style transformers (issue 10): the methods a forward calls (forward_post / forward_pre, with_pos_embed) are
written for one example like forward, with the batch positions their calls give them; a module's call holds the batch
axis where its forward returns it; layers cloned by a helper (``nn.ModuleList([copy.deepcopy(layer) for ...])``) are
followed to the class their callers give; a LayerNorm handed to __init__ is vmapped over the tokens; keys reach the
dropouts inside all of them. Model: tests/data/torch_detr_like.py (verified against PyTorch, the JAX side without
PyTorch)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_findings as errors, needs, t2j
from runners import python, verify_torch2jax

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "data" / "torch_detr_like.py"
needs_frameworks = needs("torch", "jax", "equinox")


def _class(out: str, name: str) -> str:
    return out.split(f"class {name}(")[1].split("\nclass ")[0]


def _method(cls: str, name: str) -> str:
    return cls.split(f"def {name}(")[1].split("\n    def ")[0]


def test_the_methods_forward_calls_are_written_for_one_example():
    r = translate_source(MODEL.read_text(), str(MODEL), "torch2jax")
    assert not errors(r), r.findings
    block = _class(r.output, "EncoderBlock")
    post = _method(block, "post_norm_path")
    # (L, E) per example: the per-vector layers map over the tokens; each dropout (the attention's too) its own key
    assert "*, key=None):" in post
    assert "key1, key2, key3 = jax.random.split(key, 3) if key is not None else (None, None, None)" in post
    assert "x = jax.vmap(self.norm_a)(x + self.drop_a(y, key=key2))" in post
    assert "jax.vmap(self.down)(self.drop(self.act(jax.vmap(self.up)(x)), key=key3))" in post
    assert "jax.vmap(self.norm_a)(x)" in _method(block, "pre_norm_path")
    call = _method(block, "__call__")
    assert "self.pre_norm_path(x, padding, pos, key=key1)" in call and "self.post_norm_path(x, padding, pos, key=key2)" in call
    assert "inputs x 1, padding 0, pos 1; returns 1" in call
    # the clones' calls in a loop: a key per iteration; the LayerNorm handed to __init__ (or None) maps over the tokens
    enc = _class(r.output, "Encoder")
    assert "key, draw_key = jax.random.split(key) if key is not None else (None, None)\n" \
           "            x = block(x, padding=padding, pos=pos, key=draw_key)" in enc
    assert "x = jax.vmap(self.norm)(x)" in enc
    # the decoder's steps stacked before the batch axis (dim 0 of (L, N, E) parts): returns it at 2
    dec = _class(r.output, "Decoder")
    assert "return jnp.stack(steps, axis=0)" in dec and "returns 2; jax.vmap(model, in_axes=(1, 1, 0, 1, 1), out_axes=2)" in dec
    top = _class(r.output, "EncoderDecoder")
    # the blocks are built with a key (their classes are written below this one in the file's order of use)
    assert "Encoder(EncoderBlock(dim, heads, hidden, dropout, activation, pre_norm, key=key1), blocks, enc_norm)" in top
    assert "return out, jnp.swapaxes(memory, 0, 1).reshape(c, h, w)" in top
    assert "jax.vmap(model, in_axes=(0, 0, None, 0), out_axes=(1, 0))" in top
    # `from torch import Tensor` in annotations: jax.Array, and no import of torch is left
    assert "Optional[jax.Array]" in r.output and "torch" not in r.output.split('"""', 2)[2].replace("torch_", "")


def test_a_method_forward_calls_keeps_its_errors():
    """A reduction over the batch axis inside a method forward calls is an error at its line, as in forward."""
    r = t2j("""
        import torch
        from torch import nn


        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(8, 2)
                self.fc = nn.Linear(8, 8)

            def pool(self, x):
                return x.mean(1)

            def forward(self, x):
                y = self.attn(x, x, x)[0]
                return self.fc(self.pool(y))
        """)
    errs = errors(r)
    assert [(f.line, f.code) for f in errs] == [(12, "batch-axis")], r.findings
    assert "dimension 1 is the batch axis" in errs[0].message


def test_a_layer_forward_calls_gets_the_batch_position_of_its_callers():
    """A module class called by another with its input holding the batch axis second (after an attention layer) and a
    mask given by no caller: the callee takes them as its callers give them (no batch axis for the mask)."""
    r = t2j("""
        import torch
        from torch import nn


        class Inner(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(8, 2)
                self.norm = nn.LayerNorm(8)

            def forward(self, x, mask=None):
                return self.norm(x + self.attn(x, x, x, attn_mask=mask)[0])


        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner()
                self.mask = None

            def forward(self, x):
                x = x.transpose(0, 1)
                return self.inner(x, self.mask).transpose(0, 1)
        """)
    assert not errors(r), r.findings
    assert "inputs x 1, mask none; returns 1" in _class(r.output, "Inner")
    outer = _method(_class(r.output, "Outer"), "__call__")
    assert "return self.inner(x, self.mask)\n" in outer and "batch axes" not in outer  # in and out first


@needs_frameworks
@pytest.mark.parametrize("args", [{}, {"pre_norm": True, "activation": "gelu"}])
def test_a_detr_style_transformer_verifies_against_pytorch(args, tmp_path):
    """Forward and gradients against PyTorch (eval: dropout off), the JAX side never importing PyTorch: the feature map
    and its padding mask on axis 0, the query embedding shared (none); the outputs' axes probed on the original."""
    r = translate_source(MODEL.read_text(), str(MODEL), "torch2jax")
    translated = tmp_path / "detr_like_jax.py"
    translated.write_text(r.output)
    cert = verify_torch2jax(MODEL, translated, "EncoderDecoder",
                            ["float32[2,16,3,3]", "bool[2,3,3]", "float32[5,16]", "float32[2,16,3,3]"], args=args,
                            batch_axis="0,0,none,0")
    assert cert["verdict"] == "pass", str(cert)[:3000]
    assert cert["results"]["outputs"] and cert["results"]["gradients"]
    assert cert["batch_axis"]["out_axes"] == [1, 0]


_TRAIN = r'''
import sys
sys.modules["torch"] = None  # the translation must not need PyTorch
import importlib.util
import equinox as eqx
import jax
import jax.numpy as jnp
spec = importlib.util.spec_from_file_location("t", sys.argv[1])
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
model = t.EncoderDecoder(dropout=0.5, key=jax.random.key(0))
feats = jax.random.normal(jax.random.key(1), (2, 16, 3, 3))
pos = jax.random.normal(jax.random.key(2), (2, 16, 3, 3))
padding = jnp.zeros((2, 3, 3), bool)
queries = jax.random.normal(jax.random.key(3), (5, 16))
run = lambda m, k: jax.vmap(m, in_axes=(0, 0, None, 0), out_axes=(1, 0))(feats, padding, queries, pos,
                                                                            key=jax.random.split(k, 2))[0]
a, b = run(model, jax.random.key(4)), run(model, jax.random.key(5))
assert a.shape == (2, 2, 5, 16), a.shape  # (blocks, N, queries, dim), PyTorch's layout
assert not jnp.allclose(a, b)  # dropout in training: other keys, other draws (attention's too)
infer = eqx.nn.inference_mode(model)
c = jax.vmap(infer, in_axes=(0, 0, None, 0), out_axes=(1, 0))(feats, padding, queries, pos)[0]
d = jax.vmap(infer, in_axes=(0, 0, None, 0), out_axes=(1, 0))(feats, padding, queries, pos)[0]
assert jnp.array_equal(c, d) and not jnp.allclose(a, c)
print("ok")
'''


@needs_frameworks
def test_dropout_keys_reach_every_consumer_under_jax_alone(tmp_path):
    """With dropout on, a training call takes a key that reaches each Dropout, each attention's weights (dropout_key)
    and each clone in the loops (a key per iteration); inference mode needs none and is deterministic."""
    r = translate_source(MODEL.read_text(), str(MODEL), "torch2jax")
    assert "self.attn(q, k, value=x, key_padding_mask=padding, dropout_key=key1)[0]" in r.output
    assert "key_padding_mask=memory_padding, dropout_key=key" in _class(r.output, "DecoderBlock")
    path = tmp_path / "detr_like_jax.py"
    path.write_text(r.output)
    p = python("-c", _TRAIN, path, side="jax", timeout=600)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-3000:]


def test_an_array_filled_in_place_from_the_input_is_an_error():
    """seq2seq's batch of one: ``out = torch.empty([n, 1, c])`` (n = len(x) of an (L, N, F) input: a size, the same per
    example) then ``out[i] = <computed from the input>``: which axis of out is the batch's is the code's own choice, so
    the assignment is an error at its line, and what out becomes holds the batch axis nowhere fwport knows."""
    r = t2j("""
        import torch
        from torch import nn


        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.RNN(4, 8)
                self.out = nn.Linear(8, 4)

            def forward(self, x, h):
                y, h = self.rnn(x, h)
                n = len(x)
                out = torch.empty([n, 1, 4])
                for i in range(n):
                    out[i] = self.out(y[i])
                return out.transpose(0, 1)
        """)
    errs = sorted((f.line, f.message.split(":")[0]) for f in errors(r))
    assert (16, "out[i] = ...") in errs and any(line == 17 for line, _ in errs), r.findings
    assert "n = len(x)\n" in r.output and not any(line in (13, 14) for line, _ in errs)  # n: a size, not refused


def test_a_field_naming_a_class_written_later_is_a_string_and_the_file_imports(tmp_path):
    """DETR writes Transformer above the TransformerEncoder it holds: PyTorch looks the class up when __init__
    runs, but an Equinox field's annotation is evaluated when the class body runs, so the bare name raised
    NameError on import. A later class (or the class itself) is named by a string."""
    r = t2j("""
        import torch
        from torch import nn


        class Top(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner(4)
                self.head = nn.Linear(4, 2)

            def forward(self, x):
                return self.head(self.inner(x))


        class Inner(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.fc = nn.Linear(n, n)

            def forward(self, x):
                return torch.relu(self.fc(x))
        """)
    assert not errors(r), r.findings
    top = _class(r.output, "Top")
    assert 'inner: "Inner"' in top and "head: eqx.nn.Linear" in top
    assert "fc: eqx.nn.Linear" in _class(r.output, "Inner")  # a class written above is named as it is
    path = tmp_path / "m.py"
    path.write_text(r.output)
    if importlib.util.find_spec("jax") is None or importlib.util.find_spec("equinox") is None:
        return
    check = ("import runpy, jax, jax.numpy as jnp; ns = runpy.run_path(%r); m = ns['Top'](key=jax.random.key(0)); "
             "y = jax.vmap(m)(jnp.ones((3, 4))); assert y.shape == (3, 2), y.shape; print('ok')" % str(path))
    p = python("-c", check, side="jax", timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]
