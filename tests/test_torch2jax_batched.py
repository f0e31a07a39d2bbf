"""torch2jax: a module whose forward needs the batch axis itself (torch.cat on dimension 0, a statistic over the
batch, the batch size used as a value) is translated as a *batched* module instead of being refused with
`batch-axis` errors: its __call__ takes the whole batch and keeps every axis as PyTorch writes them, calls its
per-example layers through jnp.vectorize / jax.vmap and the per-example modules of the file through jax.vmap (a key
split per example), and is called without jax.vmap (the whole-graph mode, modules.py's _batched_classes). Verified
against PyTorch (forward and gradients, batch sizes 1 and 3); what cannot be batched keeps its errors."""
from __future__ import annotations

import pytest

from helpers import error_findings as errors, needs, t2j
from runners import SIDE_HEAD, printed_json, verify_model

needs_frameworks = needs("torch", "jax", "equinox")

#: a top-level module mixing the examples (a batch mean joined on dimension 1, the batch size as a value), with
#: per-example layers inside
MIXING = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, d_in=4, d=8, n_out=3):
        super().__init__()
        self.fc = nn.Linear(d_in, d)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, n_out)

    def forward(self, x):
        b = x.size(0)
        h = torch.relu(self.fc(x))
        h = torch.cat([h, h.mean(dim=0, keepdim=True).expand(b, -1, -1)], dim=1)
        h = self.norm(h)
        return self.head(h.mean(dim=1))
'''

#: a per-example module of the file (dropout inside) that a batched module calls; the batched one joins two inputs
#: on the batch axis (SNLI's encoder over premise and hypothesis together) and splits them back
JOINED = '''
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.drop = nn.Dropout(0.1)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.drop(torch.tanh(self.fc(x))))


class Pair(nn.Module):
    def __init__(self, d_in=5, d=6):
        super().__init__()
        self.embed = nn.Linear(d_in, d)
        self.block = Block(d)
        self.out = nn.Linear(2 * d, 2)

    def forward(self, premise, hypothesis):
        b = premise.size(0)
        both = torch.cat([premise, hypothesis], 0)
        h = self.block(self.embed(both)).sum(dim=1)
        p, q = h[:b], h[b:]
        return self.out(torch.cat([p, q], dim=1))
'''


def test_a_module_needing_the_batch_axis_is_batched_not_refused():
    r = t2j(MIXING)
    assert not errors(r), r.findings
    assert any(f.code == "batch-axis" and "Net is translated as a batched module" in f.message for f in r.findings)
    text = r.output
    assert 'jnp.vectorize(self.fc, signature="(n)->(m)")(x)' in text
    assert "def __call__(self, x):  # batched module: takes the whole batch" in text
    assert "b = x.shape[0]" in text and "jnp.mean(h, axis=0, keepdims=True)" in text and "axis=1)" in text
    assert 'jnp.vectorize(self.head, signature="(n)->(m)")(jnp.mean(h, axis=1))' in text


@needs_frameworks
@pytest.mark.parametrize("n", [1, 3])
def test_a_batched_module_computes_what_pytorch_computes(tmp_path, n):
    cert = verify_model(tmp_path, MIXING, "Net", [f"float64[{n},5,4]"])
    assert cert["verdict"] == "pass" and cert["batch_axis"]["axis"] is None
    assert "batched module" in cert["batch_axis"]["why"]


def test_a_per_example_module_called_from_a_batched_one_is_mapped_over_the_batch():
    r = t2j(JOINED)
    assert not errors(r), r.findings
    text = r.output
    assert "Pair is translated as a batched module" in str(r.findings)
    assert "Block is translated" not in str(r.findings)
    # Block stays per example (its dropout takes the key given), Pair maps it with a key per example
    assert "def __call__(self, x, *, key=None):" in text and "key=key))" in text
    assert ('jax.vmap(lambda _w0: self.block(_w0, key=None if key is None else jax.random.fold_in(key, '
            'jax.lax.axis_index("batch"))), axis_name="batch")(') in text
    assert "both = jnp.concatenate([premise, hypothesis], axis=0)" in text
    assert "p, q = h[:b], h[b:]" in text


@needs_frameworks
@pytest.mark.parametrize("n", [1, 3])
def test_a_batched_module_calling_a_per_example_one_computes_what_pytorch_computes(tmp_path, n):
    # (each example's outputs are its own: the original's probe alone would say axis 0; the translation's comment
    # on `def __call__` tells verify to call it without jax.vmap)
    cert = verify_model(tmp_path, JOINED, "Pair", [f"float64[{n},7,5]", f"float64[{n},7,5]"])
    assert cert["verdict"] == "pass" and cert["batch_axis"]["axis"] is None
    assert "batched module" in cert["batch_axis"]["why"]


@pytest.mark.parametrize("held", ["nn.BatchNorm1d(4)", "nn.LSTM(4, 4, batch_first=True)",
                                  "nn.ModuleList([nn.Linear(4, 4)])"])
def test_a_module_holding_what_a_batched_module_cannot_call_keeps_its_errors(held):
    r = t2j(MIXING.replace("self.head = nn.Linear(d, n_out)", f"self.head = nn.Linear(d, n_out)\n        self.extra = {held}"))
    assert any(f.code == "batch-axis" for f in errors(r)), r.findings
    assert "batched module" not in str(r.findings)


TRAINED = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, d_in=4, d=8, n_out=3):
        super().__init__()
        self.fc = nn.Linear(d_in, d)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(2 * d, n_out)

    def forward(self, x):
        h = self.drop(torch.relu(self.fc(x)))
        h = torch.cat([h, h.mean(dim=0, keepdim=True).expand(x.size(0), -1)], dim=1)
        return self.head(h)


def train(x, y, epochs=3):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        return model(x)
'''


@needs_frameworks
def test_a_batched_model_is_trained_and_called_without_vmap(tmp_path):
    r = t2j(TRAINED)
    assert not errors(r), r.findings
    assert "model(x, key=key), y)" in r.output and "jax.vmap(model" not in r.output
    assert 'h = self.drop(jax.nn.relu(jnp.vectorize(self.fc, signature="(n)->(m)")(x)), key=key)' in r.output
    (tmp_path / "m.py").write_text(r.output)
    driver = SIDE_HEAD + """
import jax.numpy as jnp
x = jnp.asarray(np.random.default_rng(0).standard_normal((5, 4)))
out = ns["train"](x, jnp.asarray([0, 1, 2, 1, 0]), epochs=2)
print(json.dumps(list(out.shape)))
"""
    assert printed_json(driver, "jax", tmp_path / "m.py") == [5, 3]


GIVEN = '''
import torch
from torch import nn


class Wrap(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.net(self.fc(x))
        return torch.cat([h, h.mean(dim=0, keepdim=True)], dim=0)
'''


def test_a_module_calling_a_module_given_to_init_is_not_batched():
    # the given module is translated per example elsewhere: called on the whole batch it would be wrong
    r = t2j(GIVEN)
    assert any(f.code == "batch-axis" for f in errors(r)), r.findings
    assert "batched module" not in str(r.findings)


@pytest.mark.parametrize("line, method", [("        h = h.flatten(0, 1)", "flatten"),
                                          ("        h = h.repeat(1, 2, 1)", "repeat"),
                                          ("        h = h.split(2, dim=-1)[0]", "split")])
def test_a_method_jax_spells_otherwise_is_an_error_in_a_batched_module(line, method):
    src = MIXING.replace("        h = self.norm(h)\n", f"        h = self.norm(h)\n{line}\n")
    r = t2j(src)
    errs = errors(r)
    assert [f.code for f in errs] == ["unsupported-construct"] and f".{method} with arguments" in errs[0].message, errs
    assert errs[0].line == 17
    assert "Net is translated as a batched module" in str(r.findings)


NESTED = '''
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return torch.relu(self.fc(x)) + x


class Mixer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        h = self.fc(x)
        return h - h.mean(dim=0, keepdim=True)


class Outer(nn.Module):
    def __init__(self, d_in=4, d=6):
        super().__init__()
        self.embed = nn.Linear(d_in, d)
        self.block = Block(d)
        self.mixer = Mixer(d)
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        return self.head(self.mixer(self.block(self.embed(x))))
'''


def test_a_module_holding_a_batched_one_is_batched_and_calls_it_whole():
    r = t2j(NESTED)
    assert not errors(r), r.findings
    text = r.output
    assert "Mixer is translated as a batched module: its forward needs the batch axis" in str(r.findings)
    assert "Outer is translated as a batched module: its forward holds batched modules (Mixer)" in str(r.findings)
    assert "Block is translated" not in str(r.findings)
    assert 'self.mixer(jax.vmap(self.block)(jnp.vectorize(self.embed, signature="(n)->(m)")(x)))' in text


@needs_frameworks
@pytest.mark.parametrize("n", [1, 3])
def test_nested_batched_modules_compute_what_pytorch_computes(tmp_path, n):
    cert = verify_model(tmp_path, NESTED, "Outer", [f"float64[{n},5,4]"])
    assert cert["verdict"] == "pass" and cert["batch_axis"]["axis"] is None


ATTENTION = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange, repeat


class Net(nn.Module):
    def __init__(self, d=8, heads=2):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, n, _ = x.shape
        cls = repeat(self.cls, '1 1 d -> b 1 d', b=b)
        x = torch.cat([cls, x], dim=1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=self.heads), (self.q(x), self.k(x), self.v(x)))
        att = F.softmax(torch.einsum('bhid,bhjd->bhij', q, k) * 0.5, dim=-1)
        o = rearrange(torch.einsum('bhij,bhjd->bhid', att, v), 'b h n d -> b n (h d)')
        o = o - o.mean(dim=0, keepdim=True)
        return self.out(o[:, 0])
'''


def test_einops_patterns_of_a_batched_module_stay_as_pytorch_writes_them():
    r = t2j(ATTENTION)
    assert not errors(r), r.findings
    assert "rearrange(t, 'b n (h d) -> b h n d', h=self.heads)" in r.output
    assert "repeat(self.cls, '1 1 d -> b 1 d', b=b)" in r.output
    assert "jnp.einsum('bhij,bhjd->bhid', att, v), 'b h n d -> b n (h d)')" in r.output


@needs_frameworks
@pytest.mark.parametrize("n", [1, 3])
def test_a_batched_attention_computes_what_pytorch_computes(tmp_path, n):
    cert = verify_model(tmp_path, ATTENTION, "Net", [f"float64[{n},4,8]"])
    assert cert["verdict"] == "pass" and cert["batch_axis"]["axis"] is None


SEQUENTIAL = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, d_in=4, d=8, n_out=3):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d_in, d), nn.GELU(), nn.Dropout(0.1), nn.Linear(d, d))
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, n_out))

    def forward(self, x):
        h = self.mlp(x)
        h = h - h.mean(dim=0, keepdim=True)
        return self.head(h)
'''


def test_sequentials_of_a_batched_module_are_mapped_over_the_batch():
    r = t2j(SEQUENTIAL)
    assert not errors(r), r.findings
    assert ('jax.vmap(lambda _w0: self.mlp(_w0, key=None if key is None else jax.random.fold_in(key, '
            'jax.lax.axis_index("batch"))), axis_name="batch")(x)') in r.output
    assert "return jax.vmap(self.head)(h)" in r.output
    # one vector per example is assumed for the user's input, and said, as in a per-example module
    assert [f.message.split(" gets")[0] for f in r.findings if f.severity.name == "WARNING"] == ["self.mlp (Linear)"]


@needs_frameworks
@pytest.mark.parametrize("n", [1, 3])
def test_a_batched_module_with_sequentials_computes_what_pytorch_computes(tmp_path, n):
    cert = verify_model(tmp_path, SEQUENTIAL, "Net", [f"float64[{n},4]"])
    assert cert["verdict"] == "pass" and cert["batch_axis"]["axis"] is None


def test_the_per_example_error_tests_module_without_its_lstm_is_batched_without_errors():
    # tests/test_torch2jax_batch_index.py's and _functions.py's per-example errors hold an LSTM to stay per example;
    # without it the module is batched: `len(h)` and torch.unbind over the batch are PyTorch's, as written
    for body in ("        h = torch.zeros(len(h), len(h))", "        h = torch.stack(torch.unbind(h)) + h"):
        src = f'''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 6)

    def forward(self, x):
        h = self.fc(x)
{body}
        return h
'''
        r = t2j(src)
        assert not errors(r), r.findings
        assert "Net is translated as a batched module" in str(r.findings)


#: a ViT attention (vit-pytorch's): a Softmax module over the last axis, the output projection chosen by a condition
#: (`nn.Sequential(Linear, Dropout) if project_out else nn.Identity()`), q, k, v by .chunk; the batch mean makes it
#: batched
VIT_ATTENTION = '''
import torch
import torch.nn as nn
from einops import rearrange


class Attention(nn.Module):
    def __init__(self, dim=8, heads=2, dim_head=4, dropout=0.1):
        super().__init__()
        inner = heads * dim_head
        project_out = not (heads == 1 and dim_head == dim)
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.attend = nn.Softmax(dim=-1)
        self.to_qkv = nn.Linear(dim, inner * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner, dim), nn.Dropout(dropout)) if project_out else nn.Identity()

    def forward(self, x):
        x = self.norm(x)
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=self.heads), qkv)
        dots = torch.matmul(q, k.transpose(-1, -2)) * 0.5
        attn = self.attend(dots)
        out = rearrange(torch.matmul(attn, v), 'b h n d -> b n (h d)')
        out = out - out.mean(dim=0, keepdim=True)
        return self.to_out(out)
'''


def test_a_softmax_module_a_conditional_sequential_and_chunk_are_kept_in_a_batched_module():
    r = t2j(VIT_ATTENTION)
    assert not errors(r), r.findings
    assert "Attention is translated as a batched module" in str(r.findings)
    text = r.output
    assert 'qkv = jnp.split(jnp.vectorize(self.to_qkv, signature="(n)->(m)")(x), 3, axis=-1)' in text
    assert "jax.nn.softmax(x, axis=-1)" in text and "attn = self.attend(dots)" in text
    # the Sequential is mapped over the batch with a key per example; its Linear takes any rank (PerVector)
    assert "eqx.nn.Sequential([PerVector(eqx.nn.Linear(inner, dim, key=key2)), eqx.nn.Dropout(dropout)]) if " \
           "project_out else eqx.nn.Identity()" in text
    assert ('return jax.vmap(lambda _w0: self.to_out(_w0, key=None if key is None else jax.random.fold_in(key, '
            'jax.lax.axis_index("batch"))), axis_name="batch")(out)') in text


@needs_frameworks
@pytest.mark.parametrize("n", [1, 3])
def test_a_batched_vit_attention_computes_what_pytorch_computes(tmp_path, n):
    cert = verify_model(tmp_path, VIT_ATTENTION, "Attention", [f"float64[{n},5,8]"])
    assert cert["verdict"] == "pass" and cert["batch_axis"]["axis"] is None


@pytest.mark.parametrize("softmax", ["nn.Softmax(dim=1)", "nn.Softmax()", "nn.Softmax(dim=self.heads)"])
def test_a_softmax_over_a_dimension_counted_from_the_front_is_not_batched(softmax):
    # its translation shifts a positive dim for one example (dim 1 → axis 0): on the whole batch it would be wrong
    r = t2j(VIT_ATTENTION.replace("nn.Softmax(dim=-1)", softmax))
    assert any(f.code == "batch-axis" for f in errors(r)), r.findings
    assert "batched module" not in str(r.findings)


#: a transformer (vit-pytorch's): a ModuleList of [a batched module, a per-example feed-forward with dropout] unpacked
#: by a loop; the batched one makes the transformer batched
MODULE_LIST = '''
import torch
import torch.nn as nn


class FeedForward(nn.Module):
    def __init__(self, dim, hidden, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(hidden, dim), nn.Dropout(dropout))

    def forward(self, x):
        return self.net(x)


class Mix(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, dim)
        self.attend = nn.Softmax(dim=-1)

    def forward(self, x):
        x = self.norm(x)
        w = self.attend(torch.matmul(x, x.transpose(-1, -2)))
        h = self.proj(torch.matmul(w, x))
        return h - h.mean(dim=0, keepdim=True)


class Transformer(nn.Module):
    def __init__(self, dim=8, depth=2, hidden=16):
        super().__init__()
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(nn.ModuleList([Mix(dim), FeedForward(dim, hidden)]))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        for mix, ff in self.layers:
            x = mix(x) + x
            x = ff(x) + x
        return self.norm(x)
'''


def test_a_module_list_unpacked_by_a_loop_is_kept_in_a_batched_module():
    r = t2j(MODULE_LIST)
    assert not errors(r), r.findings
    assert "Transformer is translated as a batched module: its forward holds batched modules (Mix)" in str(r.findings)
    text = r.output
    assert "x = mix(x) + x" in text  # (batched: the whole batch)
    # the per-example one mapped over the batch, a key per example drawn outside the mapped function, and per layer
    assert "key, draw_key = jax.random.split(key) if key is not None else (None, None)" in text
    assert ("x = jax.vmap(lambda _w0, _k: ff(_w0, key=_k))(x, None if key is None else jax.random.split(draw_key, "
            "num=x.shape[0])) + x") in text


@needs_frameworks
@pytest.mark.parametrize("n", [1, 3])
def test_a_batched_module_list_computes_what_pytorch_computes(tmp_path, n):
    cert = verify_model(tmp_path, MODULE_LIST, "Transformer", [f"float64[{n},8]"])
    assert cert["verdict"] == "pass" and cert["batch_axis"]["axis"] is None


@needs_frameworks
def test_a_batched_module_list_draws_a_dropout_mask_per_example(tmp_path):
    r = t2j(MODULE_LIST)
    (tmp_path / "m.py").write_text(r.output)
    driver = SIDE_HEAD + """
import jax
import jax.numpy as jnp
m = ns["Transformer"](key=jax.random.key(1))
x = jnp.tile(jnp.arange(8.0), (3, 1))
y = m(x, key=jax.random.key(2))
print(json.dumps([bool(jnp.any(y[0] != y[1])), list(y.shape)]))
"""
    # identical examples: the same output but for their dropout masks, which differ (a key per example)
    assert printed_json(driver, "jax", tmp_path / "m.py") == [True, [3, 8]]


@pytest.mark.parametrize("line", ["        x = self.layers[0][1](x) + x", "        n = len(self.layers)"])
def test_a_module_list_read_otherwise_than_by_the_loop_is_not_batched(line):
    r = t2j(MODULE_LIST.replace("        return self.norm(x)", f"{line}\n        return self.norm(x)"))
    assert any(f.code == "batch-axis" for f in errors(r)), r.findings
    assert "Transformer is translated as a batched module" not in str(r.findings)
