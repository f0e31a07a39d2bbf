"""nanoGPT's idioms (issue 10) in torch2jax: a PyTorch feature test (hasattr) → True, attention dropout in
training only (``dropout_p=p if self.training else 0``), the causal-mask buffer of shape (1, 1, n, n) indexed
for one example. Each module is translated and checked numerically against PyTorch by ``fwport verify``."""
from __future__ import annotations

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_texts as errors, needs
from helpers import per_example
from runners import python

PACK = load_pack("torch2jax")


def tx(src: str):
    return translate_source(src, "model.py", PACK)


def _verify(session, tmp_path, src: str, model: str, inputs: list[str], args=None, checks=("forward", "grad")):
    from fwport.verify.run import Options, verify
    r = tx(src)
    assert not errors(r), errors(r)
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "m_jax.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_jax.py"), model, inputs=inputs, args=args or {},
                          checks=checks, device="cpu", direction="torch2jax"), session)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging") or cert
    return r, cert


def _load(model, arrays: dict):
    """PyTorch's arrays by name ("fc.weight") into the Equinox model at the same attribute path (not
    fwport.verify.jax_side: importing it blocks torch in this process)."""
    import functools

    import equinox as eqx
    import jax.numpy as jnp
    names = list(arrays)
    return eqx.tree_at(lambda m: [functools.reduce(getattr, n.split("."), m) for n in names], model,
                       [jnp.asarray(arrays[n]) for n in names])


# --- hasattr(torch.nn.functional, 'name'): a feature test of PyTorch ---------------------------------------

FEATURE = """import torch
import torch.nn.functional as F

flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
other = hasattr(F, 'no_such_function')
"""


def test_a_feature_test_of_a_translated_name_is_true():
    r = tx(FEATURE)
    assert "flash = True" in r.output
    assert any(f.code == "idiom-replaced" and "scaled_dot_product_attention" in f.message for f in r.findings)
    # a name no rule translates stays, and the residue scan says so
    assert "hasattr(F, 'no_such_function')" in r.output
    assert any("no_such_function" in e or "torch.nn.functional" in e for e in errors(r)), r.findings


# --- attention dropout in training only ----------------------------------------------------------------------

SDPA = """import torch
import torch.nn as nn
import torch.nn.functional as F


class SelfAttention(nn.Module):
    def __init__(self, n_embd=8, n_head=2, dropout=0.25):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.resid_dropout = nn.Dropout(0.0)  # no dropout of its own: what a key changes is the attention's
        self.n_head = n_head
        self.n_embd = n_embd
        self.dropout = dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(y)
"""


@needs("torch", "equinox")
def test_training_only_attention_dropout_takes_the_call_key(session, tmp_path):
    # PyTorch's eval mode and Equinox's inference (no key): no dropout, the same numbers
    r, _ = _verify(session, tmp_path, SDPA, "SelfAttention", ["float32[2,5,8]"])
    # its own key of the split, beside resid_dropout's; off where resid_dropout is (eqx.nn.inference_mode)
    assert "eqx.nn.Dropout(self.dropout, inference=self.resid_dropout.inference)(" in r.output
    assert "key=key1)" in r.output
    assert "key1, key2 = jax.random.split(key) if key is not None else (None, None)" in r.output
    assert any(f.code == "key-added" and "dropout_p" in f.message for f in r.findings)
    # with a key the weights are dropped: the output changes, and differs per key
    import equinox as eqx
    import jax
    import numpy as np
    ns: dict = {}
    exec(compile(r.output, "m_jax.py", "exec"), ns)
    m = ns["SelfAttention"](key=jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (5, 8))
    a, b, c = eqx.nn.inference_mode(m)(x), m(x, key=jax.random.key(2)), m(x, key=jax.random.key(3))
    assert not np.allclose(a, b) and not np.allclose(b, c)


def test_training_only_attention_dropout_given_positionally_takes_its_own_key():
    src = SDPA.replace("attn_mask=None, dropout_p=self.dropout if self.training else 0,",
                       "None, self.dropout if self.training else 0,")
    r = tx(src)
    assert not errors(r), errors(r)
    assert "inference=self.resid_dropout.inference)" in r.output and "key=key1)" in r.output and "key=key2" in r.output


def test_other_attention_dropout_is_still_refused():
    src = SDPA.replace("dropout_p=self.dropout if self.training else 0", "dropout_p=self.dropout")
    assert any("dropout_p=self.dropout" in e for e in errors(tx(src))), errors(tx(src))


# --- the causal-mask buffer (1, 1, n, n): its leading axes are no batch axis -----------------------------------

MASK = """import math
import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalAttention(nn.Module):
    def __init__(self, n_embd=8, n_head=2, block_size=6):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        y = att @ v
        return y.transpose(1, 2).contiguous().view(B, T, C)
"""


@needs("torch", "equinox")
def test_a_causal_mask_buffer_is_indexed_for_one_example(session, tmp_path):
    r, _ = _verify(session, tmp_path, MASK, "CausalAttention", ["float32[3,4,8]"])
    assert "jax.lax.stop_gradient(self.bias)[0, :, :T, :T] == 0" in r.output
    assert ".reshape(1, 1, block_size, block_size)" in r.output  # a jax array's .view takes a dtype


def test_a_mask_buffer_without_leading_ones_is_still_refused():
    src = MASK.replace(".view(1, 1, block_size, block_size)", ".view(2, 1, block_size // 2, block_size)")
    src = per_example(src)  # (an LSTM held: per example, not a batched module)
    assert any("masked_fill" in e for e in errors(tx(src))), errors(tx(src))


# --- weight tying: one array used in both places ---------------------------------------------------------------

TIED = """import torch
import torch.nn as nn


class TinyLM(nn.Module):
    def __init__(self, vocab=11, n_embd=6):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying

    def get_num_params(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx):
        x = self.transformer.wte(idx)
        x = self.transformer.ln_f(x)
        return self.lm_head(x)
"""


@needs("torch", "equinox")
def test_weight_tying_keeps_one_array_and_verifies(session, tmp_path):
    # the gradient of the shared table is the sum of both uses in PyTorch: compared under its first name
    r, cert = _verify(session, tmp_path, TIED, "TinyLM", ["int64[2,5]:11"])
    assert "self.lm_head" not in r.output and "x @ self.transformer[\"wte\"].weight.T" in r.output
    assert any(f.code == "idiom-replaced" and "weight tying" in f.message for f in r.findings)
    assert {e["name"] for e in cert["results"]["gradients"]} >= {"transformer.wte.weight"}


def test_weight_tying_counts_parameters_as_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    ns_t: dict = {}
    exec(compile(TIED, "m.py", "exec"), ns_t)
    torch.manual_seed(0)
    n_torch = ns_t["TinyLM"]().get_num_params()
    ns_j: dict = {}
    exec(compile(tx(TIED).output, "m_jax.py", "exec"), ns_j)
    assert ns_j["TinyLM"](key=jax.random.key(0)).get_num_params() == n_torch == 11 * 6 + 2 * 6


@needs("torch", "equinox")
def test_weight_tying_the_other_way_round(session, tmp_path):
    src = """import torch
import torch.nn as nn


class TinyLM(nn.Module):
    def __init__(self, vocab=11, n_embd=6):
        super().__init__()
        self.head = nn.Linear(n_embd, vocab, bias=False)
        self.tok_emb = nn.Embedding(vocab, n_embd)
        self.head.weight = self.tok_emb.weight

    def forward(self, idx):
        return self.head(torch.tanh(self.tok_emb(idx)))
"""
    r, _ = _verify(session, tmp_path, src, "TinyLM", ["int64[3,4]:11"])
    assert "jnp.tanh(jax.vmap(self.tok_emb)(idx)) @ self.tok_emb.weight.T" in r.output


@pytest.mark.parametrize("change,why", [
    ("bias=False", "has a bias"),
    ("return self.lm_head(x)", "used otherwise"),
])
def test_weight_tying_that_is_not_translated_is_an_error(change, why):
    src = TIED.replace(change, {"bias=False": "bias=True",
                                "return self.lm_head(x)": "return self.lm_head(x) + self.lm_head.weight.sum()"}[change])
    errs = errors(tx(src))
    assert any("weight tying" in e and why in e for e in errs), errs


TIED_IF = """import torch
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken=10, nhid=4, tie_weights=False, bias=True):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, nhid)
        self.decoder = nn.Linear(nhid, ntoken, bias=BIAS)
        if tie_weights:
            if nhid < 1:
                raise ValueError("nhid")
            self.decoder.weight = self.encoder.weight
        self.init_weights()

    def init_weights(self):
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, x):
        return self.decoder(torch.tanh(self.encoder(x)))
"""


@pytest.mark.parametrize("bias", ["True", "False"])
@pytest.mark.parametrize("tie", [True, False])
@needs("torch", "equinox")
def test_a_weight_tie_under_a_flag_keeps_the_flag_and_verifies(session, tmp_path, tie, bias):
    """word_language_model ties `if tie_weights:`: the flag becomes a static field and the decoder's calls use
    the encoder's table when it is set; outputs and the gradients (the table's: the sum of both uses, compared
    under its first name) are PyTorch's, with the flag set and not."""
    r, cert = _verify(session, tmp_path, TIED_IF.replace("BIAS", bias), f"RNNModel(tie_weights={tie})",
                      ["int64[3,5]:10"])
    plus = " + self.decoder.bias" if bias == "True" else ""
    assert "tie_weights: bool = eqx.field(static=True)" in r.output
    assert (f"(jnp.tanh(jax.vmap(self.encoder)(x)) @ self.encoder.weight.T{plus} if self.tie_weights "
            "else jax.vmap(self.decoder)(jnp.tanh(jax.vmap(self.encoder)(x))))") in r.output
    assert "self.decoder.weight = " not in r.output
    # PyTorch's init after the tie fills the shared table: said, since here it fills the unused weight
    assert any(f.code == "approximate" and "initialises the shared table" in f.message for f in r.findings)
    names = {e["name"] for e in cert["results"]["gradients"]}
    assert "encoder.weight" in names and ("decoder.weight" in names) is not tie


def test_a_tied_decoder_used_otherwise_than_called_stays_an_error():
    src = TIED_IF.replace("BIAS", "True").replace("return self.decoder(torch.tanh(self.encoder(x)))",
                                                   "return self.decoder(self.encoder(x)) * self.decoder.weight.sum()")
    errs = errors(tx(src))
    assert any(e.startswith("L13 ") and "under `if tie_weights:`" in e and "used otherwise" in e for e in errs), errs


@pytest.mark.parametrize("head", ["if tie_weights and ntoken > 2:", "for _ in range(1):", "if tie_weights:"])
def test_a_weight_tie_under_another_condition_is_an_error(head):
    """Only `if <a parameter of __init__>:` is a flag decided at construction; another condition, a loop or a flag
    reassigned in __init__ stays an error at the tie's line (the assignment left as written would fail at run
    time: an Equinox module's fields are frozen)."""
    src = f"""import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken=10, nhid=4, tie_weights=False):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, nhid)
        self.decoder = nn.Linear(nhid, ntoken)
        tie_weights = TIE
        {head}
            self.decoder.weight = self.encoder.weight

    def forward(self, x):
        return self.decoder(self.encoder(x))
"""
    if head == "if tie:":
        src = src.replace("tie = tie_weights", "tie = tie_weights\n        tie = not tie")
    errs = errors(tx(src))
    line = src.splitlines().index("            self.decoder.weight = self.encoder.weight") + 1
    assert errs and all(e.startswith(f"L{line} ") for e in errs) and any("under a condition" in e for e in errs), errs


# --- model surgery: crop_block_size assigns arrays into the submodules -----------------------------------------

CROP = """import torch
import torch.nn as nn
from torch.nn import functional as F


class Attn(nn.Module):
    def __init__(self, n_embd, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        att = q @ k.transpose(-2, -1)
        att = att.unsqueeze(1).masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf')).squeeze(1)
        return F.softmax(att, dim=-1) @ v


class Block(nn.Module):
    def __init__(self, n_embd, block_size):
        super().__init__()
        self.attn = Attn(n_embd, block_size)

    def forward(self, x):
        return x + self.attn(x)


class TinyGPT(nn.Module):
    def __init__(self, vocab=11, n_embd=8, block_size=12, n_layer=2):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, block_size) for _ in range(n_layer)]),
        ))

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return x

    def crop_block_size(self, block_size):
        assert block_size <= self.block_size
        self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size])
        for block in self.transformer.h:
            if hasattr(block.attn, 'bias'):
                block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]


def cropped():
    model = TinyGPT()
    model.crop_block_size(6)
    return model
"""


@pytest.mark.parametrize("length", [6, 4])
@needs("torch", "equinox")
def test_model_surgery_returns_a_new_model_and_verifies(session, tmp_path, length):
    """nanoGPT's crop_block_size: the method returns a new model (eqx.tree_at), the file's caller rebinds it; the
    cropped model (6 positions of 12) verifies against PyTorch's cropped one, on the full and a shorter sequence."""
    r, _ = _verify(session, tmp_path, CROP, "cropped", [f"int64[3,{length}]:11"])
    assert "model = model.crop_block_size(6)" in r.output
    assert "for i, block in enumerate(model.transformer[\"h\"]):" in r.output
    assert "model = eqx.tree_at(lambda m: m.transformer[\"h\"][i].attn.bias, model, " in r.output
    assert "getattr(block.attn, 'bias', None) is not None" in r.output
    assert any(f.code == "idiom-replaced" and "callers must rebind" in f.message for f in r.findings)


def test_model_surgery_leaves_the_old_model_and_crops_the_new(tmp_path):
    """Under JAX alone (a subprocess without torch): the cropped model's arrays have the new sizes, the model it was
    called on keeps its own, and the cropped model reads shorter sequences."""
    (tmp_path / "m_jax.py").write_text(tx(CROP).output)
    check = """import sys, jax, jax.numpy as jnp
sys.modules["torch"] = None
import m_jax
old = m_jax.TinyGPT(key=jax.random.key(0))
new = old.crop_block_size(5)
assert old.transformer["wpe"].weight.shape == (12, 8), old.transformer["wpe"].weight.shape
assert new.transformer["wpe"].weight.shape == (5, 8)
assert all(b.attn.bias.shape == (1, 1, 5, 5) for b in new.transformer["h"])
assert all(b.attn.bias.shape == (1, 1, 12, 12) for b in old.transformer["h"])
assert (new.transformer["wpe"].weight == old.transformer["wpe"].weight[:5]).all()
idx = jnp.array([1, 2, 3])
assert jnp.allclose(new(idx), old(idx))  # the first positions and the mask's corner are the same arrays
print("ok")
"""
    p = python("-c", check, side="jax", cwd=tmp_path, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]


@pytest.mark.parametrize("change,why", [
    ("        assert block_size <= self.block_size\n",
     "        assert block_size <= self.block_size\n        self.block_size = block_size\n"),
    ("                block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]",
     "                block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]\n        return block_size"),
    ("        for block in self.transformer.h:\n            if hasattr(block.attn, 'bias'):\n"
     "                block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]",
     "        for block in self.transformer.h:\n            for _ in range(1):\n"
     "                block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]"),
])
def test_model_surgery_fwport_cannot_follow_stays_an_error(change, why):
    """A static field replaced, a return of its own, a member assigned in a nested loop: an error, not a method
    that would fail (or return the wrong thing) at run time."""
    assert change in CROP
    src = CROP.replace(change, why)
    errs = errors(tx(src))
    assert any("crop_block_size() assigns" in e and "model surgery" in e for e in errs), errs


def test_a_surgery_call_that_cannot_be_rebound_is_an_error():
    src = CROP.replace("    model.crop_block_size(6)\n    return model",
                          "    holder = [model]\n    holder[0].crop_block_size(6)\n    return model")
    errs = errors(tx(src))
    assert any("holder[0].crop_block_size(6)" in e and "rebind" in e for e in errs), errs


# --- a language model's loss inside forward: the tokens of one example ----------------------------------------

LOSS = """import torch
import torch.nn as nn
from torch.nn import functional as F


class TinyLM(nn.Module):
    def __init__(self, vocab=11, n_embd=6):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.lm_head = nn.Linear(n_embd, vocab)

    def forward(self, idx, targets=None):
        logits = self.lm_head(torch.tanh(self.wte(idx)))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss
"""


def test_a_token_loss_in_forward_is_the_example_mean():
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    import equinox as eqx
    import jax.numpy as jnp
    import numpy as np
    r = tx(LOSS)
    assert not errors(r), errors(r)
    assert "logits.reshape(-1, logits.shape[-1])" in r.output and "targets.reshape(-1)" in r.output
    assert any(f.severity is Severity.WARNING and "mean over this example's tokens" in f.message for f in r.findings)
    ns_t: dict = {}
    exec(compile(LOSS, "m.py", "exec"), ns_t)
    torch.manual_seed(0)
    tm = ns_t["TinyLM"]()
    ns_j: dict = {}
    exec(compile(r.output, "m_jax.py", "exec"), ns_j)
    jm = _load(ns_j["TinyLM"](key=jax.random.key(0)), {k: v.detach().numpy() for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(0)
    idx, tg = rng.integers(0, 11, (3, 5)), rng.integers(0, 11, (3, 5))
    logits_t, loss_t = tm(torch.tensor(idx), torch.tensor(tg))
    logits_j, loss_j = jax.vmap(jm)(jnp.asarray(idx), jnp.asarray(tg))
    np.testing.assert_allclose(np.asarray(logits_j), logits_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert loss_j.shape == (3,)  # one loss per example; their mean is PyTorch's (as many targets each)
    np.testing.assert_allclose(float(jnp.mean(loss_j)), loss_t.item(), rtol=1e-5)
    # an ignored target in one example only: the per-example means no longer average to PyTorch's (the warning)
    tg[0, :3] = -1
    _, loss_t = tm(torch.tensor(idx), torch.tensor(tg))
    _, loss_j = jax.vmap(jm)(jnp.asarray(idx), jnp.asarray(tg))
    assert abs(float(jnp.mean(loss_j)) - loss_t.item()) > 1e-4


# --- model surgery after __init__ -------------------------------------------------------------------------------

SURGERY = """import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.wpe = nn.Embedding(8, 4)
        self.h = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.size = 8

    def crop(self, n):
        self.size = n
        self.wpe.weight = nn.Parameter(self.wpe.weight[:n])
        for block in self.h:
            block.bias = None

    def forward(self, x):
        return self.wpe(x)
"""


def test_model_surgery_is_one_precise_error():
    errs = errors(tx(SURGERY))
    assert len(errs) == 1, errs
    assert "crop() assigns self.size, self.wpe.weight, block.bias" in errs[0] and "eqx.tree_at" in errs[0]


# --- parameter groups: decay for the matrices only -----------------------------------------------------------------

GROUPS = """import inspect
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.ln = nn.LayerNorm(3)

    def forward(self, x):
        return self.ln(self.fc(x))

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters()}
        param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {'params': decay_params, 'weight_decay': weight_decay},
            {'params': nodecay_params, 'weight_decay': 0.0}
        ]
        num_decay_params = sum(p.numel() for p in decay_params)
        print(f"num decayed parameter tensors: {len(decay_params)}, with {num_decay_params:,} parameters")
        fused_available = 'fused' in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == 'cuda'
        extra_args = dict(fused=True) if use_fused else dict()
        optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)
        return optimizer
"""


def test_parameter_groups_become_an_optax_mask_and_step_as_pytorch():
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    import equinox as eqx
    import jax.numpy as jnp
    import numpy as np
    import optax
    r = tx(GROUPS)
    assert not errors(r), errors(r)
    assert "mask=lambda params: jax.tree_util.tree_map(lambda p: p.ndim >= 2, params)" in r.output
    assert "fused_available = False" in r.output and "import torch" not in r.output
    ns_t: dict = {}
    exec(compile(GROUPS, "m.py", "exec"), ns_t)
    torch.manual_seed(0)
    tm = ns_t["Net"]()
    ns_j: dict = {}
    exec(compile(r.output, "m_jax.py", "exec"), ns_j)
    state = {k: v.detach().numpy().copy() for k, v in tm.state_dict().items()}
    jm = _load(ns_j["Net"](key=jax.random.key(0)), state)
    topt = tm.configure_optimizers(0.5, 0.1, (0.9, 0.95), "cpu")
    rng = np.random.default_rng(0)
    gs = [{k: rng.standard_normal(v.shape).astype(np.float32) for k, v in state.items()} for _ in range(3)]
    for g in gs:
        for k, p in tm.named_parameters():
            p.grad = torch.tensor(g[k])
        topt.step()

    def run(opt):
        params = eqx.filter(jm, eqx.is_array)
        st = opt.init(params)
        for g in gs:
            grads = eqx.filter(_load(jm, g), eqx.is_array)
            updates, st = opt.update(grads, st, params)
            params = optax.apply_updates(params, updates)
        return eqx.combine(params, jm)

    got = run(jm.configure_optimizers(0.5, 0.1, (0.9, 0.95), "cpu"))
    unmasked = run(optax.adamw(0.1, b1=0.9, b2=0.95, weight_decay=0.5))
    have = {"fc.weight": got.fc.weight, "fc.bias": got.fc.bias, "ln.weight": got.ln.weight, "ln.bias": got.ln.bias}
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(np.asarray(have[k]), v.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    # decaying every array (no groups) would differ: the mask is what matches
    assert not np.allclose(np.asarray(unmasked.ln.weight), tm.ln.weight.detach().numpy(), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(unmasked.fc.weight), tm.fc.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


# --- a method that holds a batch (generate): the model called through jax.vmap, no assignment into arrays ------------

BATCH_METHOD = """import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)

    def clipped_last(self, x, k):
        logits = self(x)
        v, _ = torch.topk(logits, k)
        logits[logits < v[:, [-1]]] = -float('Inf')
        return logits.size(0), torch.softmax(logits, dim=-1)
"""


def test_a_batch_method_calls_the_model_through_vmap():
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np
    r = tx(BATCH_METHOD)
    assert not errors(r), errors(r)
    assert "logits = jax.vmap(self)(x)" in r.output
    assert "logits = jnp.where(logits < v[:, [-1]], -float('Inf'), logits)" in r.output
    ns_t: dict = {}
    exec(compile(BATCH_METHOD, "m.py", "exec"), ns_t)
    torch.manual_seed(0)
    tm = ns_t["Net"]()
    ns_j: dict = {}
    exec(compile(r.output, "m_jax.py", "exec"), ns_j)
    jm = _load(ns_j["Net"](key=jax.random.key(0)), {k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    n_t, p_t = tm.clipped_last(torch.tensor(x), 2)
    n_j, p_j = jm.clipped_last(jnp.asarray(x), 2)
    assert n_j == n_t == 5
    np.testing.assert_allclose(np.asarray(p_j), p_t.detach().numpy(), rtol=1e-5, atol=1e-6)


# --- a field set only in a branch of __init__ (nanoGPT's causal-mask buffer when flash is off) ------------------------

COND = """import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, scaled=False):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.scaled = scaled
        if scaled:
            self.register_buffer("scale", torch.full((3,), 2.0))

    def forward(self, x):
        y = self.fc(x)
        if self.scaled:
            y = y * self.scale
        return y
"""


@pytest.mark.parametrize("scaled", [True, False])
@needs("torch", "equinox")
def test_a_field_set_in_a_branch_defaults_to_none(session, tmp_path, scaled):
    r, _ = _verify(session, tmp_path, COND, "Net", ["float32[2,4]"], args={"scaled": scaled})
    assert "    scale: jax.Array | None = None\n" in r.output  # else Equinox refuses the instance built without it


def test_fwport_weights_moves_a_tied_parameter_once(tmp_path):
    # a checkpoint holds the table under both names; the .eqx file has one array, read back and checked
    torch = pytest.importorskip("torch")
    from click.testing import CliRunner

    from fwport.verify.cli import weights_command
    (tmp_path / "m.py").write_text(TIED)
    (tmp_path / "m_jax.py").write_text(tx(TIED).output)
    ns: dict = {}
    exec(compile(TIED, "m.py", "exec"), ns)
    torch.manual_seed(0)
    sd = ns["TinyLM"]().state_dict()
    assert {"transformer.wte.weight", "lm_head.weight"} <= set(sd)
    torch.save(sd, tmp_path / "model.pt")
    r = CliRunner().invoke(weights_command, [
        str(tmp_path / "model.pt"), "--source", str(tmp_path / "m.py"), "--translated", str(tmp_path / "m_jax.py"),
        "--model", "TinyLM", "--to", str(tmp_path / "model.eqx"), "--check", "--input", "int64[2,5]:11"])
    assert r.exit_code == 0, r.output
    assert "verdict: PASS" in r.output and (tmp_path / "model.eqx").is_file()


def test_a_method_of_construction_may_set_attributes():
    # ResNet's _make_layer (self.inplanes = ...), here a base class's, called from a subclass's __init__
    src = """import torch.nn as nn


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.inplanes = 4

    def _make_layer(self, planes):
        layer = nn.Linear(self.inplanes, planes)
        self.inplanes = planes
        return layer


class Net(Base):
    def __init__(self):
        super().__init__()
        self.fc = self._make_layer(3)

    def forward(self, x):
        return self.fc(x)
"""
    assert not [e for e in errors(tx(src)) if "immutable" in e], errors(tx(src))


# --- blocks in an nn.ModuleDict entry (nanoGPT's transformer.h): their per-token layers get the tokens' rank ----------

DICT_BLOCKS = """import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.c_fc = nn.Linear(n, 2 * n)
        self.c_proj = nn.Linear(2 * n, n)

    def forward(self, x):
        return self.c_proj(torch.tanh(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.mlp = MLP(n)

    def forward(self, x):
        return x + self.mlp(x)


class TinyGPT(nn.Module):
    def __init__(self, vocab=11, n=6, layers=2):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n),
            h=nn.ModuleList([Block(n) for _ in range(layers)]),
        ))

    def forward(self, idx):
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x)
        return x
"""


@needs("torch", "equinox")
def test_blocks_in_a_module_dict_entry_get_the_tokens_rank(session, tmp_path):
    r, _ = _verify(session, tmp_path, DICT_BLOCKS, "TinyGPT", ["int64[2,5]:11"])
    assert "jax.vmap(self.c_fc)(x)" in r.output and "jax.vmap(self.transformer[\"wte\"])(idx)" in r.output


# --- nanoGPT's LayerNorm(ndim, bias): F.layer_norm with a bias field that may be None ----------------------

OPTIONAL_BIAS = """import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class Block(nn.Module):
    def __init__(self, bias=False):
        super().__init__()
        self.ln = LayerNorm(8, bias=bias)
        self.fc = nn.Linear(8, 8, bias=bias)

    def forward(self, x):
        return self.fc(self.ln(x)) + x
"""


@pytest.mark.parametrize("bias", [False, True])
@needs("torch", "equinox")
def test_layer_norm_with_a_bias_field_that_may_be_none(session, tmp_path, bias):
    # bias=False: the field is None and F.layer_norm adds nothing (had been `+ self.bias`, a TypeError on None)
    r, _ = _verify(session, tmp_path, OPTIONAL_BIAS, "Block", ["float32[3,8]"], args={"bias": bias})
    assert "* self.weight + (self.bias if self.bias is not None else 0)" in r.output
    # a field that is always an array keeps the plain form (the rule's own example)
    plain = tx(OPTIONAL_BIAS.replace(" if bias else None", ""))
    assert "* self.weight + self.bias\n" in plain.output, plain.output
