"""PyTorch's transformer layers in JAX (issue 10): nn.TransformerEncoderLayer / TransformerDecoderLayer /
TransformerEncoder / TransformerDecoder / Transformer become helpers written into the output, on one example; a
PyTorch model with seeded weights and its translation, the weights moved by the verifier's map (eqx_layouts), agree
on outputs and input gradients, with boolean and float masks, padding masks, norm_first both ways, relu and gelu, and
a sequence-first nn.Transformer (vmapped over axis 1), word_language_model's subclass of nn.Transformer. Model: tests/data/torch_transformer_layers.py."""
from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from tests.runners import torch_and_jax

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "data" / "torch_transformer_layers.py"
MISSING = [m for m in ("torch", "jax", "equinox") if importlib.util.find_spec(m) is None]
needs_frameworks = pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} installed")


def t2j(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", "torch2jax")


def errors(r):
    return [f for f in r.findings if f.severity is Severity.ERROR]


def test_the_layers_translate_to_helpers_with_keys():
    r = translate_source(MODEL.read_text(), str(MODEL), "torch2jax")
    assert not errors(r), r.findings
    out = r.output
    for name in ("TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder", "TransformerDecoder",
                 "Transformer", "MultiheadAttentionWithWeights"):
        assert f"\nclass {name}(eqx.Module):" in out
    assert "import torch" not in out and "from torch" not in out
    # F.gelu is written by name (the helper's exact GELU); dropout (0.1 by default) takes the call's key
    assert 'activation="gelu"' in out and "jax.nn.gelu(x, approximate=False)" in out
    assert "self.encoder(x, mask=mask, src_key_padding_mask=padding, key=key)" in out
    # sequence-first nn.Transformer: proven, vmapped with the batch axis second
    assert "jax.vmap(model, in_axes=(1, 1, 0), out_axes=1)" in out


def test_a_subclass_of_nn_transformer_builds_its_encoder():
    """word_language_model's TransformerModel(nn.Transformer): nn.Transformer's encoder built in __init__ (its decoder
    replaced by __init__'s own), self.d_model read; the causal mask kept on self between calls is computed in forward."""
    r = translate_source(MODEL.read_text(), str(MODEL), "torch2jax")
    cls = r.output.split("class TransformerModel(")[1]
    assert cls.startswith("eqx.Module):")
    assert "self.encoder = TransformerEncoder(TransformerEncoderLayer(ninp, nhead, dim_feedforward=nhid, key=key1), " \
           "nlayers, eqx.nn.LayerNorm(ninp))" in cls
    assert "TransformerDecoder(" not in cls and "self.d_model = ninp" in cls
    call = cls.split("def __call__")[1]
    assert "src_mask = None\n        if has_mask:\n            src_mask = self._causal_mask(src.shape[0])" in call
    assert "self.src_mask" not in call
    assert {f.code for f in r.findings if f.line == 51} == {"idiom-replaced"}
    # a subclass keeping nn.Transformer's forward stays an error
    kept = t2j("""
        from torch import nn


        class Model(nn.Transformer):
            def __init__(self):
                super().__init__(d_model=8, nhead=2)
        """)
    assert [f.code for f in errors(kept)] == ["unsupported-construct"], kept.findings


def test_an_unknown_activation_name_is_an_error():
    r = t2j("""
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = nn.TransformerEncoderLayer(8, 2, activation="tanh", batch_first=True)
        """)
    assert [f.code for f in errors(r)] == ["unsupported-argument"], r.findings


def test_a_sequence_first_layer_no_forward_proves_stays_an_error():
    """batch_first=False with no forward showing every call gets the batch axis second: the construction's error (the
    layer of a stack is proven with the stack)."""
    r = t2j("""
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 2)
        """)
    assert [f.code for f in errors(r)] == ["batch-axis"], r.findings
    proven = t2j("""
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                layer = nn.TransformerEncoderLayer(8, 2)
                self.encoder = nn.TransformerEncoder(layer, 2)

            def forward(self, x):
                return self.encoder(x)
        """)
    assert not errors(proven), proven.findings
    assert "in_axes=(1,), out_axes=1" in proven.output


_BODY = """
import json
sys.path.insert(0, {verify!r})
rng = np.random.default_rng(0)
B, L, S, E = 3, 5, 4, 16
x = rng.normal(size=(B, L, E)); memory = rng.normal(size=(B, S, E))
causal = np.triu(np.ones((L, L), bool), 1)
masks = {{"bool": causal, "float": np.where(causal, -np.inf, 0.0), "none": None}}
padding = np.zeros((B, L), bool); padding[1, 3:] = True; padding[2, 0] = True
memory_padding = np.zeros((B, S), bool); memory_padding[0, 2:] = True
name, kwargs, mask_kind = {name!r}, {kwargs!r}, {mask!r}
mask = masks[mask_kind]
if name == "Encoder":
    inputs, axes = [x, mask, padding], (0, None, 0)
elif name == "Decoder":
    inputs, axes = [x, memory, mask, padding, memory_padding], (0, 0, None, 0, 0)
elif name == "SequenceFirst":  # (L, N, E)
    inputs, axes = [x.transpose(1, 0, 2), memory.transpose(1, 0, 2), padding], (1, 1, 0)
else:  # word_language_model's TransformerModel, batch-first: tokens (N, L), has_mask from the mask's kind
    inputs, axes = [rng.integers(0, 20, size=(B, L))], (0,)
call = {{}} if name != "TransformerModel" else {{"has_mask": mask_kind != "none"}}
R = rng.normal(size=(B, L, E) if name != "SequenceFirst" else (S, B, E))
if side == "torch":
    torch.manual_seed(0)
    model = ns[name](**kwargs).eval()
    from torch_source_side import _mapped_modules
    np.savez("state.npz", **{{k: v.detach().numpy() for k, v in model.state_dict().items()}})
    json.dump(_mapped_modules(model), open("modules.json", "w"))
    xs = [None if a is None else torch.tensor(a, requires_grad=a.dtype == np.float64) for a in inputs]
    out = model(*xs, **call)
    if name == "TransformerModel":  # tokens: the output twice (no input gradient)
        result = [out.detach().numpy()] * 2
    else:
        (out * torch.tensor(R)).sum().backward()
        result = [out.detach().numpy(), xs[0].grad.numpy()]
else:
    from jax_side import load_state
    model = ns[name](**kwargs, key=jax.random.PRNGKey(1))
    state = dict(np.load("state.npz"))
    model, problems = load_state(model, state, eqx, jnp, json.load(open("modules.json")))
    assert not problems, problems
    model = eqx.nn.inference_mode(model)
    out_axis = 1 if name == "SequenceFirst" else 0

    def f(first):
        args = [first, *(None if a is None else jnp.asarray(a) for a in inputs[1:])]
        return jax.vmap(lambda *a: model(*a, **call), in_axes=axes, out_axes=out_axis)(*args)

    if name == "TransformerModel":
        result = [np.asarray(f(jnp.asarray(inputs[0])))] * 2
    else:
        out, vjp = jax.vjp(f, jnp.asarray(inputs[0]))
        result = [np.asarray(out), np.asarray(vjp(jnp.asarray(R))[0])]
np.save(OUT, np.concatenate([np.asarray(result[0]).ravel(), np.asarray(result[1]).ravel()]))
"""


@needs_frameworks
@pytest.mark.parametrize("name, kwargs, mask", [
    ("Encoder", {}, "bool"),
    ("Encoder", {"norm_first": True, "activation": "gelu"}, "float"),
    ("Encoder", {}, "none"),
    ("Decoder", {}, "bool"),
    ("Decoder", {"norm_first": True}, "float"),
    ("SequenceFirst", {}, "none"),
    ("TransformerModel", {"ntoken": 20, "ninp": 16, "nhead": 4, "nhid": 24, "nlayers": 2}, "float"),
    ("TransformerModel", {"ntoken": 20, "ninp": 16, "nhead": 4, "nhid": 24, "nlayers": 2}, "none"),
])
def test_layers_agree_with_pytorch(name, kwargs, mask, tmp_path):
    """Outputs and the gradient of sum(out * R) by the first input, float64 on both sides, within 1e-9 (the layers
    compute in the same order; the weights are PyTorch's, moved by name and by the attention map)."""
    import numpy as np
    r = translate_source(MODEL.read_text(), str(MODEL), "torch2jax")
    assert not errors(r), r.findings
    body = _BODY.format(verify=str(ROOT / "fwport" / "verify"), name=name, kwargs=kwargs, mask=mask)
    torch_out, jax_out = torch_and_jax(tmp_path, MODEL.read_text(), r.output, body)
    assert np.isfinite(torch_out).all()
    np.testing.assert_allclose(jax_out, torch_out, rtol=1e-9, atol=1e-9)
