"""Sequence-first PyTorch models (issue 10): nn.LSTM / GRU / RNN / MultiheadAttention take (L, N, features) unless
built with batch_first=True, so the batch axis is second. The translation follows where each value holds it
(batch.py), takes such a layer's per-example form exactly where it is proven, says where each input and output holds
the batch axis, and vmaps with those axes; `fwport verify` probes them on the original (torch_source_side) and the
JAX side, which never imports PyTorch, vmaps with them. Models: tests/data/torch_seqfirst.py."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from helpers import error_findings as errors, needs, t2j
from runners import verify_torch2jax, Warm

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "data" / "torch_seqfirst.py"
needs_frameworks = needs("torch", "jax", "equinox")


def _class(out: str, name: str) -> str:
    return out.split(f"class {name}(")[1].split("\nclass ")[0]


def test_sequence_first_layers_are_proven_and_their_batch_axes_said():
    r = translate_source(MODELS.read_text(), str(MODELS), "torch2jax")
    assert not errors(r), r.findings
    out = r.output
    # the tagger: tokens (L, N) hold the batch axis second, the view(-1, tags) merges the steps and the examples
    tagger = _class(out, "Tagger")
    assert "inputs tokens 1; returns 1 merged into 0; jax.vmap(model, in_axes=(1,), out_axes=1)" in tagger
    assert "scores = jax.vmap(self.out)(h).reshape(-1, self.tags)" in tagger
    assert "jax.nn.log_softmax(scores, axis=1)" in tagger  # dim=1 of the merged view: the tags, not shifted
    # a recurrent state (layers, N, H) holds it second too
    assert "inputs tokens 1, hidden 1; returns 1; jax.vmap(model, in_axes=(1, 1), out_axes=1)" in _class(out, "LanguageModel")
    # attention: x (L, N, E) second, the key padding mask (N, L) first; the layers after it map over the steps
    block = _class(out, "AttentionBlock")
    assert "inputs x 1, padding 0; returns 1; jax.vmap(model, in_axes=(1, 0), out_axes=1)" in block
    assert "x = jax.vmap(self.norm1)(x + y)" in block
    infos = [f.message for f in r.findings if f.severity is Severity.INFO and f.code == "batch-axis"]
    assert any("in_axes=(1, 0), out_axes=1" in m for m in infos)
    assert "batch_first=" not in out.split('"""', 2)[2]  # (the docstring mentions it)


def test_a_transpose_of_the_batch_axis_is_followed():
    """x.transpose(0, 1) on (N, L, F) is, for one example, (L, F) as it is: no swap is written, the batch axis is
    recorded second, and transposing back records it first again (the model's axes are all 0: no comment)."""
    reader = _class(translate_source(MODELS.read_text(), str(MODELS), "torch2jax").output,
                    "BatchFirstReader").split("def __call__")[1]
    assert "out, h = self.rnn(x)\n" in reader and "swapaxes" not in reader and "transpose" not in reader
    assert "return self.fc(out[-1]) + self.fc(h[-1])" in reader and "batch axes" not in reader
    r = t2j("""
        import torch
        from torch import nn


        class M(nn.Module):
            def forward(self, x):
                y = x.permute(1, 2, 0)
                return y.transpose(1, 2).sum(dim=2)
        """)
    assert not errors(r), r.findings
    # (N, A, B) → permute(1, 2, 0): (A, B, N), batch axis 2, per example (A, B) as it is; transpose(1, 2): (A, N, B),
    # batch axis 1, per example still (A, B); the sum over dim 2 (B) is per example axis 1, the batch axis stays 1
    assert "y = x\n        return y.sum(axis=1)\n" in r.output, r.output
    moves = [f.message for f in r.findings if f.code == "batch-axis" and "moves" in f.message]
    assert moves == [".permute: the batch axis moves from dimension 0 to 2; for one example this is the tensor as it is",
                     ".transpose: the batch axis moves from dimension 2 to 1; for one example this is the tensor as it is"]
    assert "inputs x 0; returns 1" in r.output


@pytest.mark.parametrize("body, why", [
    ("h, _ = self.rnn(x)\n                return h.view(4, -1)", "view"),  # a view the batch axis (second) cannot be placed in
    ("h, _ = self.rnn(x)\n                return torch.sum(h, 1)", "torch.sum"),  # a sum over the batch axis
    ("h, _ = self.rnn(x)\n                return self.conv(h)", "Conv1d"),  # a layer taking the batch axis first
])
def test_what_cannot_be_followed_stays_an_error(body, why):
    r = t2j(f"""
        import torch
        from torch import nn


        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(4, 6)
                self.conv = nn.Conv1d(6, 6, 1)

            def forward(self, x):
                {body}
        """)
    es = errors(r)
    assert es and all(f.code == "batch-axis" for f in es), r.findings
    assert any(why in f.message for f in es), [f.message for f in es]


def test_a_sequence_layer_fed_the_batch_axis_first_is_still_an_error():
    """The input goes through a view before the GRU: fwport cannot tell where its batch axis is, so the layer is not
    proven and its construction keeps the batch-axis error."""
    r = t2j("""
        import torch
        from torch import nn


        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(4, 6)

            def forward(self, x):
                y = x.view(x.size(0), 3, 4)
                return self.rnn(y)[0]
        """)
    assert [(f.line, f.code) for f in errors(r)] == [(8, "batch-axis")], r.findings
    assert "batch_first=False" in errors(r)[0].message


def test_an_input_shared_by_the_batch_is_copied_over_it():
    """DETR's query embedding: q.unsqueeze(1).repeat(1, bs, 1) with bs the batch size makes a (Q, N, C) copy of a (Q, C)
    input; one example's copy is q itself, and q is an input without a batch axis (in_axes None)."""
    r = translate_source(MODELS.read_text(), str(MODELS), "torch2jax")
    dec = _class(r.output, "QueryDecoder").split("def __call__")[1]
    assert "inputs src 0, query_embed none; returns 0; jax.vmap(model, in_axes=(0, None), out_axes=0)" in dec
    assert "query = query_embed\n" in dec and "return jax.vmap(self.norm)(query + out)\n" in dec
    assert any("query_embed is shared by every example" in f.message for f in r.findings)


def test_a_training_step_vmaps_a_sequence_first_model_with_its_axes():
    r = t2j(src := """
        import torch
        from torch import nn


        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(30, 8)
                self.lstm = nn.LSTM(8, 12)
                self.out = nn.Linear(12, 5)

            def forward(self, tokens):
                h, _ = self.lstm(self.emb(tokens))
                return self.out(h)


        torch.manual_seed(0)  # the root key the draws below split (without it no key reaches them: an error)
        model = Tagger()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randint(0, 30, (7, 4))
        y = torch.randint(0, 5, (7, 4))
        for step in range(3):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x).reshape(-1, 5), y.reshape(-1))
            loss.backward()
            opt.step()
        """)
    assert not errors(r), r.findings
    assert "jax.vmap(model, in_axes=(1,), out_axes=1)(x).reshape(-1, 5)" in r.output
    # with dropout in training: one key per example, split over the batch axis (the second of x)
    drop = t2j(textwrap.dedent(src).replace("self.lstm(self.emb(tokens))", "self.lstm(self.drop(self.emb(tokens)))")
               .replace("self.out = nn.Linear(12, 5)", "self.out = nn.Linear(12, 5)\n        self.drop = nn.Dropout(0.1)")
               .replace("for step in", "model.train()\nfor step in"))
    assert not errors(drop), drop.findings
    assert "jax.vmap(model, in_axes=(1,), out_axes=1)(x, key=jax.random.split(key, x.shape[1]))" in drop.output


@needs_frameworks
@pytest.mark.parametrize("model, inputs, axis", [
    ("Tagger", ["int64[6,4]:30"], "auto"),
    ("LanguageModel", ["int64[5,3]:20", "float32[2,3,10]"], "auto"),
    ("AttentionBlock", ["float32[5,3,8]", "bool[3,5]"], "auto"),
    ("BatchFirstReader", ["float32[4,6,5]"], "auto"),
    ("QueryDecoder", ["float32[3,8,5]", "float32[4,8]"], "0,none"),  # the query embedding: shared by the batch
])
def test_sequence_first_models_verify_against_pytorch(model, inputs, axis, tmp_path):
    """Forward and gradients against PyTorch: the JAX side (no PyTorch importable there) vmaps with the axes the
    probe finds on the original: the inputs split on axis 1 (the attention block's mask on 0), the outputs joined on
    theirs (the tagger's merged into axis 0)."""
    r = translate_source(MODELS.read_text(), str(MODELS), "torch2jax")
    translated = tmp_path / "seqfirst_jax.py"
    translated.write_text(r.output)
    cert = verify_torch2jax(MODELS, translated, model, inputs, batch_axis=axis)
    assert cert["verdict"] == "pass", str(cert)[:3000]
    assert cert["results"]["outputs"] and cert["results"]["gradients"]
    why = cert["batch_axis"]["why"]
    if axis == "auto":
        assert ("axis 0" not in why and "probe" in why) if model != "BatchFirstReader" else "rows" in why
    if model == "Tagger":
        assert cert["batch_axis"]["out_axes"] == ["merged:0"]


@needs_frameworks
def test_a_wrong_batch_axis_fails_verification(tmp_path):
    """The language model with the JAX side told its inputs hold the batch axis first (--batch-axis 0; four layers and
    four steps, so that every axis splits): the outputs differ from PyTorch's."""
    from fwport.verify.run import Options, verify
    r = translate_source(MODELS.read_text(), str(MODELS), "torch2jax")
    translated = tmp_path / "seqfirst_jax.py"
    translated.write_text(r.output)
    opts = Options(str(MODELS), str(translated), "LanguageModel", args={"layers": 4},
                   inputs=["int64[4,4]:20", "float32[4,4,10]"], checks=("forward",), device="cpu",
                   direction="torch2jax", dtype="float64", batch_axis="0")
    session = Warm.session()
    cert = verify(opts, session)
    assert cert["verdict"] == "mismatch", str(cert)[:2000]
    opts.batch_axis = "1"
    session = Warm.session()
    assert verify(opts, session)["verdict"] == "pass"
