"""fwport torch2jax: PyTorch → JAX/Equinox.

- every rule example of rules/torch2jax/ (translate, compare, fixpoint);
- per-example semantics: the batch axis dropped where it is proven, an error finding where not;
- every fixtures/torch2jax/<name>/: model.py translates to exactly expected.py with the expected
  findings and is a fixpoint; expected.py runs with torch unimportable and `fwport verify` (torch in
  one subprocess, JAX in another) proves it computes the original's outputs and gradients;
- planted bugs (a trap translated wrongly on purpose) make the verifier fail.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import needs, per_example, t2j
from runners import SIDE_HEAD, python, saved_arrays

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import regen_torch2jax_fixtures as regen  # noqa: E402

PACK = load_pack("torch2jax")
RULES = sorted(PACK.rules.values(), key=lambda r: r.id)
DIRS = regen.fixture_dirs()
VERIFY = {d.name: json.loads((d / "verify.json").read_text()) for d in DIRS}
needs_frameworks = needs("torch", "jax", "equinox", "optax")


def t2j(text: str):
    return translate_source(text, "example.py", PACK)


# --- the rules' examples -----------------------------------------------------------------------------

@pytest.mark.parametrize("rule,ex", [pytest.param(r, e, id=f"{r.id}/{e.name}") for r in RULES for e in r.examples])
def test_rule_example(rule, ex):
    r = t2j(ex.before)
    assert r.output == ex.after, f"{rule.path}: example {ex.name!r}"
    assert Counter(f.code for f in r.findings) == Counter(ex.findings), f"{rule.path}: example {ex.name!r} findings"
    assert t2j(r.output).output == r.output, "translating the output again must change nothing"


def test_every_rule_has_an_example():
    assert RULES and not [r.id for r in RULES if not r.examples]


# --- per-example semantics ----------------------------------------------------------------------------

HEAD = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\nclass Net(nn.Module):\n" \
       "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 4)\n\n" \
       "    def forward(self, x):\n"


def _forward(body: str):
    r = t2j(HEAD + "".join(f"        {line}\n" for line in body.splitlines()))
    return r, r.output.split("def __call__", 1)[1]


@pytest.mark.parametrize("torch_code,jax_code", [
    ("return x.view(x.size(0), -1)", "return x.reshape(-1)"),
    ("return torch.flatten(x, 1)", "return x.reshape(-1)"),
    ("return x.flatten(2)", "return x.reshape(*x.shape[:1], -1)"),
    ("return torch.cat([x, x], dim=1)", "return jnp.concatenate([x, x], axis=0)"),
    ("return F.softmax(x, dim=-1)", "return jax.nn.softmax(x, axis=-1)"),
    ("return x.sum(dim=2, keepdim=True)", "return x.sum(axis=1, keepdims=True)"),
    ("return x.permute(0, 2, 3, 1)", "return jnp.transpose(x, (1, 2, 0))"),
    ("return x.transpose(1, 2).contiguous()", "return jnp.swapaxes(x, 0, 1)"),
    ("return x.size(1) * x.shape[2]", "return x.shape[0] * x.shape[1]"),
    ("B, T, C = x.size()\nreturn self.fc(x).view(B, T * 4)", "T, C = x.shape\n        return jax.vmap(self.fc)(x).reshape(T * 4)"),
    ("return F.max_pool2d(x, 2)", "return eqx.nn.MaxPool2d(2, stride=2)(x)"),
    ("return x.chunk(3, dim=-1)", "return jnp.split(x, 3, axis=-1)"),
    ("return x.split(4, dim=2)", "return jnp.split(x, list(range(4, x.shape[1], 4)), axis=1)"),
    ("return x.mean(dim=(2, 3))", "return x.mean(axis=(1, 2))"),
])
def test_the_batch_axis_is_dropped_where_proven(torch_code, jax_code):
    r, call = _forward(torch_code)
    assert jax_code in call, call
    assert not [f for f in r.findings if f.severity is Severity.ERROR]


@pytest.mark.parametrize("torch_code", [
    "return x.sum(dim=0)",
    "return torch.cat([x, x], dim=0)",
    "return x.view(4, -1)",
    "return torch.flatten(x)",
    "n = x.size(0)\nreturn x * n",
    "y = x.transpose(0, 1)\nreturn y.view(4, -1)",  # the batch axis moved, then a view fwport cannot place it in
])
def test_code_that_needs_the_batch_axis_is_an_error(torch_code):
    r = t2j(per_example(HEAD + "".join(f"        {line}\n" for line in torch_code.splitlines())))
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.code for f in errors] == ["batch-axis"], r.findings
    assert errors[0].line >= 12 and f"# fwport: batch-axis:" in r.output


def test_a_multi_line_buffer_keeps_its_parentheses():
    r = t2j(HEAD.replace("        self.fc = nn.Linear(8, 4)\n",
                         "        self.register_buffer(\"m\", torch.ones(4, 4)\n                             * 2.0)\n")
            + "        return x * self.m\n")
    compile(r.output, "out.py", "exec")
    assert "self.m = (jnp.ones((4, 4))\n" in r.output and "return x * jax.lax.stop_gradient(self.m)" in r.output


def test_an_assumed_batch_axis_is_a_warning():
    r, call = _forward("return x.view(-1, 400)")
    assert "return x.reshape(400)" in call
    assert [(f.severity, f.code) for f in r.findings] == [(Severity.WARNING, "batch-axis")]


def test_functional_dropout_takes_the_modules_key_not_a_global_rng():
    r, call = _forward("return F.dropout(x, 0.5, self.training)")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "return eqx.nn.Dropout(0.5, inference=self.inference)(x, key=key)" in call  # (tests/test_torch2jax_modes.py)
    r, call = _forward("return F.dropout(x, 0.5, self.training, *rest)")
    assert [f.code for f in r.findings if f.severity is Severity.ERROR] == ["unsupported-construct"]


def test_no_module_is_left_without_a_key_where_it_draws_values():
    r = t2j(HEAD + "        return self.fc(x)\n")
    assert "def __init__(self, *, key):" in r.output and "eqx.nn.Linear(8, 4, key=key)" in r.output
    assert "super().__init__()" not in r.output and "fc: eqx.nn.Linear" in r.output
    assert "torch" not in r.output


def test_a_translated_class_used_as_a_submodule_or_in_a_script_gets_a_key():
    r = t2j(HEAD + "        return self.fc(x)\n\n\nclass Outer(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.inner = Net()\n        self.head = nn.Linear(4, 2)\n\n"
            "    def forward(self, x):\n        return self.head(self.inner(x))\n\n\nmodel = Outer()\n")
    assert "self.inner = Net(key=key1)" in r.output and "self.head = eqx.nn.Linear(4, 2, key=key2)" in r.output
    assert "model = Outer(key=jax.random.key(0))" in r.output
    # (and, once per file, that the user's input is taken for one vector per example: Net's fc gets it, t2jsil)
    assert sorted((f.severity.value, f.code) for f in r.findings) == [("info", "key-added"), ("warning", "batch-axis")]


def test_a_script_calls_its_model_over_the_batch_and_threads_the_state():
    bn = ("import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
          "        super().__init__()\n        self.bn = nn.BatchNorm1d(4)\n\n    def forward(self, x):\n"
          "        return self.bn(x)\n\n\nmodel = Net()\nmodel.eval()\ny = model(torch.zeros(2, 4))\n")
    r = t2j(bn)
    assert "    def __call__(self, x, state):\n        return self.bn(x, state)\n" in r.output
    assert "model, state = eqx.nn.make_with_state(Net)()\nmodel = eqx.nn.inference_mode(model, True)\n" in r.output
    assert 'y, state = jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))' \
           '(jnp.zeros((2, 4)), state)' in r.output
    plain = t2j(HEAD + "        return self.fc(x)\n\n\nnet = Net()\nout = net(torch.ones(3, 8))\n")
    assert "net = Net(key=jax.random.key(0))\nout = jax.vmap(net)(jnp.ones((3, 8)))" in plain.output


@needs_frameworks
def test_the_translated_script_runs_without_torch(tmp_path):
    src = ("import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
           "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 3)\n"
           "        self.bn = nn.BatchNorm1d(3)\n\n    def forward(self, x):\n        return F.relu(self.bn(self.fc(x)))\n\n\n"
           "torch.manual_seed(0)\nmodel = Net()\nmodel.eval()\nwith torch.no_grad():\n    y = model(torch.ones(5, 8))\n"
           "print(tuple(y.shape))\n")
    out = tmp_path / "script.py"
    out.write_text(t2j(src).output)
    code = "import sys\nsys.modules['torch'] = None\nimport runpy\nrunpy.run_path(sys.argv[1])\n"
    # (the worker of saved_arrays' JAX side, where torch is never imported)
    p = python("-c", code, out, side="torch2jax-jax", timeout=300)
    assert p.returncode == 0, out.read_text() + p.stderr[-2000:]
    assert p.stdout.strip() == "(5, 3)"


def test_no_grad_and_device_moves_are_removed():
    r = t2j("import torch\n\n\n@torch.no_grad()\ndef evaluate(model, x, device):\n    x = x.to(device)\n"
            "    with torch.no_grad():\n        y = model(x)\n    return y.cpu()\n")
    # x = x.to(device) moves x alone: the statement goes (no `x = x` left)
    assert r.output == ("\n\ndef evaluate(model, x, device):\n    y = model(x)\n    return y\n")
    assert {f.code for f in r.findings} == {"idiom-replaced"}


def test_a_training_loop_of_another_shape_is_refused():
    r = t2j("import torch\n\n\ndef fit(model, x, y):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    for _ in range(3):\n        loss = ((model(x) - y) ** 2).mean()\n        loss.backward()\n"
            "        opt.step()\n")
    assert [f.code for f in r.findings if f.severity is Severity.ERROR] == ["unsupported-construct"]
    assert "loss.backward()" in r.output and "train_step" not in r.output


# --- fixtures -----------------------------------------------------------------------------------------

def test_enough_fixtures():
    assert len(DIRS) >= 7
    for d in DIRS:
        for f in ("model.py", "expected.py", "expected_findings.json", "verify.json"):
            assert (d / f).is_file(), f"{d.name}: {f} missing (run scripts/regen_torch2jax_fixtures.py)"


_done: dict[str, object] = {}


def translated(name: str):
    if name not in _done:
        _done[name] = regen.translate_fixture(regen.FIXTURES / name)
    return _done[name]


@pytest.mark.parametrize("name", [d.name for d in DIRS])
def test_fixture_translation_is_expected(name):
    r = translated(name)
    d = regen.FIXTURES / name
    assert r.output == (d / "expected.py").read_text(), "differs from expected.py (scripts/regen_torch2jax_fixtures.py --check)"
    assert regen.findings_data(r) == json.loads((d / "expected_findings.json").read_text())
    assert "torch" not in r.output.replace("torch2jax", "")
    assert translate_source(r.output, "again.py", PACK).output == r.output, "not a fixpoint"


def _verify(session, name: str, translated_file: Path | None = None) -> dict:
    from fwport.verify.run import Options, verify
    d = regen.FIXTURES / name
    v = VERIFY[name]
    opts = Options(str(d / "model.py"), str(translated_file or d / "expected.py"), v["model"], args=v.get("args", {}),
                   inputs=v["inputs"], checks=tuple(v.get("checks", ("forward", "grad"))), device="cpu",
                   direction="torch2jax", dtype=v.get("dtype", "float32"))
    # float64 where float32 rounding alone exceeds the tolerance (attention_block: the gradients of the
    # cross-attention projections through per-head weights differ by 1e-4 relative in float32, 1e-13 in float64)
    return verify(opts, session)


@needs_frameworks
@pytest.mark.parametrize("name", [d.name for d in DIRS if VERIFY[d.name].get("kind", "model") == "model"])
def test_fixture_verifies_against_pytorch(name, session):
    cert = _verify(session, name)
    res = cert.get("results", {})
    assert cert["verdict"] == "pass", json.dumps(cert, indent=1, default=str)[:4000]
    assert res["outputs"] and res["gradients"], "forward and gradients were both compared"
    assert all(e["ok"] for es in res.values() for e in es)


def _verify_training(session, name: str, translated_file: Path | None = None) -> dict:
    from fwport.verify.run import Options
    from fwport.verify.torch2jax import verify_training
    d = regen.FIXTURES / name
    v = VERIFY[name]
    opts = Options(str(d / "model.py"), str(translated_file or d / "expected.py"), v["model"], args=v.get("args", {}),
                   inputs=v["inputs"], device="cpu", direction="torch2jax", dtype=v.get("dtype", "float32"))
    # float64: Adam divides by sqrt(v) + eps, which magnifies float32 rounding of tiny gradients
    return verify_training(opts, session, v["train"], v.get("train_args", {}))


@needs_frameworks
@pytest.mark.parametrize("name", [d.name for d in DIRS if VERIFY[d.name].get("kind") == "training"])
def test_training_fixture_trains_like_pytorch(name, session):
    """The same initial parameters, the same data: after the training function, every parameter and
    every returned loss agree."""
    cert = _verify_training(session, name)
    assert cert["verdict"] == "pass", json.dumps(cert, indent=1, default=str)[:4000]
    assert len(cert["results"]["trained"]) >= 4 and cert["results"]["losses"]


# --- planted bugs: a trap translated wrongly must not verify ------------------------------------------

PLANTED = [
    # jax.nn.gelu is the tanh approximation unless told otherwise; PyTorch's GELU is exact (a mismatch)
    ("seq_pool", "jax.nn.gelu(x, approximate=False)", "jax.nn.gelu(x)"),
    # dim=1 kept as written: the batch axis not dropped (sums over the features, not the positions)
    ("seq_pool", "(jnp.expand_dims(w, -1) * h).sum(axis=0)", "(jnp.expand_dims(w, -1) * h).sum(axis=1)"),
    ("lenet", "jax.nn.log_softmax(self.fc3(x), axis=0)", "jax.nn.log_softmax(self.fc3(x), axis=1)"),
    # Equinox's pooling stride defaults to 1, PyTorch's to the window
    ("lenet", "eqx.nn.MaxPool2d(2, stride=2)(jax.nn.relu(self.conv1(x)))", "eqx.nn.MaxPool2d(2)(jax.nn.relu(self.conv1(x)))"),
    # BatchNorm's eps left at another value, and its state kept in the normalising-with-the-average mode
    ("conv_bn", 'self.bn0 = eqx.nn.BatchNorm(channels, axis_name="batch", momentum=0.9, mode="batch")',
     'self.bn0 = eqx.nn.BatchNorm(channels, axis_name="batch", eps=1e-3, momentum=0.9, mode="batch")'),
    ("conv_bn", 'momentum=0.95, mode="batch")', 'momentum=0.95, mode="ema")'),
    # the skip connection concatenated in the other order (a weight layout the transfer cannot see)
    ("mlp", "h = jnp.concatenate([h, x], axis=0)", "h = jnp.concatenate([x, h], axis=0)"),
    # the layers written into the output (layers.py): a boolean attention mask in Equinox's polarity
    # (True = attended) where PyTorch's True is masked out
    ("attention_block", "jnp.where(mask, -jnp.inf, scores)", "jnp.where(mask, scores, -jnp.inf)"),
    # the backward direction of a bidirectional LSTM run forwards; the cell state output in place of h
    ("lstm_classifier", "reverse=d == 1", "reverse=False"),
    ("lstm_classifier", "return state, state[0]", "return state, state[1]"),
    # the two sub-pixel offsets swapped (channel c r² + i r + j is pixel (h r + i, w r + j))
    ("super_res", "x.transpose(0, 3, 1, 4, 2)", "x.transpose(0, 3, 2, 4, 1)"),
    # resizing with the step n / out (jax.image.resize's) where PyTorch uses 1 / scale_factor
    ("conv_decoder", "step = n / out if sizes else 1 / scales[axis - 1]", "step = n / out"),
    # an in-place index write kept with the batch axis's ':' (writes a column of one example, not a feature)
    ("inplace_ops", "h = h.at[-1].multiply(2.0)", "h = h.at[:, -1].multiply(2.0)"),
    # y.mul_(gate) rebound as an addition
    ("inplace_ops", "y = y * self.gate", "y = y + self.gate"),
    # the tags' log-softmax over the tokens (axis 0 of one example's (tokens, tags)) instead of the tags
    ("lstm_tagger", "jax.nn.log_softmax(tag_space, axis=-1)", "jax.nn.log_softmax(tag_space, axis=0)"),
    # the 1-D and 3-D pools' stride left at Equinox's default 1 (PyTorch's is the window)
    ("volume_layers", "eqx.nn.MaxPool1d(2, stride=2)", "eqx.nn.MaxPool1d(2)"),
    ("volume_layers", "eqx.nn.AvgPool3d(2, stride=2)", "eqx.nn.AvgPool3d(2)"),
]


TRAINING_PLANTED = [
    # coupled L2 decay applied after the momentum instead of to the gradient
    ("sgd_loop", "optax.chain(optax.add_decayed_weights(1e-3), optax.sgd(learning_rate=lr, momentum=0.9))",
     "optax.chain(optax.sgd(learning_rate=lr, momentum=0.9), optax.add_decayed_weights(1e-3))"),
    # Nesterov momentum where PyTorch has the heavy ball
    ("sgd_loop", "optax.sgd(learning_rate=lr, momentum=0.9)", "optax.sgd(learning_rate=lr, momentum=0.9, nesterov=True)"),
    # Adam's eps left at optax's default 1e-8 (the source says 1e-6)
    ("adam_minibatch", "b2=0.98, eps=1e-6)", "b2=0.98)"),
    # eps inside the square root (optax's eps_root) instead of outside
    ("adam_minibatch", "b2=0.98, eps=1e-6)", "b2=0.98, eps=0.0, eps_root=1e-6)"),
    # PyTorch's coupled Adam decay translated as AdamW's decoupled one
    ("adam_minibatch", "optax.chain(optax.add_decayed_weights(1e-4), optax.adam(learning_rate=1e-2, b1=0.9, b2=0.98, eps=1e-6))",
     "optax.adamw(learning_rate=1e-2, b1=0.9, b2=0.98, eps=1e-6, weight_decay=1e-4)"),
    # StepLR's step_size counted in updates instead of epochs (scheduler.step() once per epoch)
    ("adamw_schedule", "transition_steps=2 * len(loader)", "transition_steps=2"),
    # AdamW's decoupled decay translated as Adam's coupled L2 (added to the gradient before the moments)
    ("adamw_schedule", "optax.adamw(learning_rate=optax.exponential_decay(3e-3, transition_steps=2 * len(loader), "
     "decay_rate=0.5, staircase=True), weight_decay=0.05)",
     "optax.chain(optax.add_decayed_weights(0.05), optax.adam(learning_rate=optax.exponential_decay(3e-3, "
     "transition_steps=2 * len(loader), decay_rate=0.5, staircase=True)))"),
    # label smoothing dropped from the cross-entropy
    ("adamw_schedule", "jnp.mean(((1 - 0.1) * optax.softmax_cross_entropy_with_integer_labels(logits, labels) - 0.1 * "
     "jnp.mean(jax.nn.log_softmax(logits, axis=-1), axis=-1)))",
     "jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))"),
]


@needs_frameworks
@pytest.mark.parametrize("name,right,wrong", TRAINING_PLANTED, ids=[f"{p[0]}:{p[2][-40:]}" for p in TRAINING_PLANTED])
def test_a_planted_optimizer_bug_fails_verification(name, right, wrong, session, tmp_path):
    text = (regen.FIXTURES / name / "expected.py").read_text()
    assert right in text, "the planted bug must replace code the translation really has"
    bad = tmp_path / "translated.py"
    bad.write_text(text.replace(right, wrong))
    cert = _verify_training(session, name, bad)
    assert cert["verdict"] == "mismatch"
    assert not all(e["ok"] for e in cert["results"]["trained"])


@needs_frameworks
@pytest.mark.parametrize("name,right,wrong", PLANTED, ids=[f"{p[0]}:{p[2][:40]}" for p in PLANTED])
def test_a_planted_bug_fails_verification(name, right, wrong, session, tmp_path):
    """Numerically wrong code is a mismatch (exit 1); code that cannot run at those shapes is an error
    of the JAX side (exit 2): never a pass."""
    from fwport.verify.run import VerifyError
    text = (regen.FIXTURES / name / "expected.py").read_text()
    assert right in text, "the planted bug must replace code the translation really has"
    bad = tmp_path / "translated.py"
    bad.write_text(text.replace(right, wrong))
    try:
        cert = _verify(session, name, bad)
    except VerifyError as e:
        assert e.side == "jax", e
        return
    assert cert["verdict"] == "mismatch"
    assert cert.get("problems") or not all(e["ok"] for e in cert["results"]["outputs"])


def test_the_state_dict_of_layers_with_another_layout_is_mapped_both_ways():
    """eqx_layouts.plan: PyTorch's packed attention projections split into three, the two recurrent biases
    added (GRU: b_hn kept apart as bias_n), per layer and direction; the gradients of PyTorch's names
    gathered back from Equinox's, and a summed bias has no inverse for trained values."""
    import numpy as np

    from fwport.verify.eqx_layouts import plan

    rng = np.random.default_rng(0)
    h = 2
    state = {"attn.in_proj_weight": rng.normal(size=(12, 4)), "attn.in_proj_bias": rng.normal(size=12),
             "attn.out_proj.weight": rng.normal(size=(4, 4)), "gru.weight_ih_l0_reverse": rng.normal(size=(3 * h, 5)),
             "gru.bias_ih_l1": rng.normal(size=3 * h), "gru.bias_hh_l1": rng.normal(size=3 * h),
             "fc.weight": rng.normal(size=(3, 4))}
    state["up.weight"] = rng.normal(size=(4, 3, 2, 5))  # (in, out / groups, kH, kW), groups 2
    values, grads, exact = plan(state, {"attn": {"class": "torch.nn.MultiheadAttention"}, "gru": {"class": "torch.nn.GRU"},
                                        "up": {"class": "torch.nn.ConvTranspose2d", "groups": 2}})
    w = values["up.weight"]  # (out, in / groups, kH, kW): group 1's output 2 from its input 0, flipped
    assert w.shape == (6, 2, 2, 5) and w[3 + 2, 0, 0, 0] == state["up.weight"][2 + 0, 2, 1, 4]
    names, combine = grads["up.weight"]
    assert np.array_equal(combine([w]), state["up.weight"]) and "up.weight" in exact
    assert np.array_equal(values["attn.key_proj.weight"], state["attn.in_proj_weight"][4:8])
    assert np.array_equal(values["attn.value_proj.bias"], state["attn.in_proj_bias"][8:])
    assert np.array_equal(values["attn.output_proj.weight"], state["attn.out_proj.weight"])
    assert np.array_equal(values["gru.cells.0.1.weight_ih"], state["gru.weight_ih_l0_reverse"])
    b_ih, b_hh = state["gru.bias_ih_l1"], state["gru.bias_hh_l1"]
    assert np.allclose(values["gru.cells.1.0.bias"], b_ih + np.r_[b_hh[:2 * h], 0, 0])
    assert np.array_equal(values["gru.cells.1.0.bias_n"], b_hh[2 * h:])
    assert np.array_equal(values["fc.weight"], state["fc.weight"])
    names, combine = grads["attn.in_proj_weight"]
    assert np.array_equal(combine([values[n] for n in names]), state["attn.in_proj_weight"])
    names, combine = grads["gru.bias_hh_l1"]
    assert names == ("gru.cells.1.0.bias", "gru.cells.1.0.bias_n")
    assert np.array_equal(combine([np.ones(3 * h), np.full(h, 2.0)]), np.r_[np.ones(2 * h), 2.0, 2.0])
    assert "attn.in_proj_weight" in exact and "gru.bias_hh_l1" not in exact and "gru.bias_ih_l1" not in exact


def test_a_layer_after_a_recurrent_one_is_vmapped_over_the_steps():
    """`out, (h, c) = self.lstm(x)`: out is (L, D * H) per example, so a Linear on it is vmapped; h[-1] is
    one vector, so a Linear on it is not; PixelShuffle keeps the rank of an image."""
    src = ("import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n        self.emb = nn.Embedding(10, 4)\n"
           "        self.lstm = nn.LSTM(4, 8, batch_first=True)\n        self.fc = nn.Linear(8, 2)\n"
           "        self.head = nn.Linear(8, 2)\n\n    def forward(self, tokens):\n"
           "        out, (h, c) = self.lstm(self.emb(tokens))\n        return self.fc(out), self.head(h[-1])\n")
    r = translate_source(src, "m.py", PACK)
    assert "return jax.vmap(self.fc)(out), self.head(h[-1])" in r.output
    assert not [f for f in r.findings if f.severity is Severity.ERROR]


def test_sequence_first_recurrent_and_attention_layers_are_errors_but_translated():
    """batch_first=False: PyTorch feeds (L, N, features), the batch axis second, which the per-example code
    around the layer does not know: an error at the layer, which is translated all the same."""
    src = ("import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n        self.rnn = nn.GRU(4, 8)\n"
           "        self.attn = nn.MultiheadAttention(8, 2, batch_first=False)\n        self.ok = nn.LSTM(4, 8, batch_first=True)\n")
    r = translate_source(src, "m.py", PACK)
    errors = [(f.line, f.code) for f in r.findings if f.severity is Severity.ERROR]
    assert errors == [(8, "batch-axis"), (9, "batch-axis")]
    assert "StackedGRU(4, 8, key=" in r.output and "MultiheadAttentionWithWeights(8, 2, key=" in r.output
    code_lines = [ln for ln in r.output.splitlines() if not ln.strip().startswith("#")]
    assert "class StackedLSTM(eqx.Module)" in r.output and not any("batch_first" in ln for ln in code_lines)


@needs_frameworks
def test_fwport_verify_command_detects_the_direction_and_passes(tmp_path):
    """The command line: exit 0 and a certificate naming both frameworks."""
    import subprocess
    d = regen.FIXTURES / "mlp"
    cert_path = tmp_path / "cert.json"
    p = subprocess.run([sys.executable, "-m", "fwport", "verify", str(d / "model.py"), str(d / "expected.py"), "--model",
                        "MLP", "--input", "float32[3,20]", "--device", "cpu", "--json", str(cert_path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "JAX" in p.stdout and "verdict: PASS" in p.stdout
    cert = json.loads(cert_path.read_text())
    assert cert["direction"] == "torch2jax" and cert["versions"]["jax"] and cert["versions"]["torch"]


FUNCTIONS = ROOT / "tests" / "data" / "torch_functions.py"
_RUN = SIDE_HEAD + """
rng = np.random.default_rng(0)
args = [rng.standard_normal((6, 5)), rng.integers(0, 5, 6), rng.standard_normal((6, 3)), rng.standard_normal((6, 3))]
if sys.argv[1] == "torch":
    import torch
    args = [torch.from_numpy(a) for a in args]
else:
    import jax.numpy as jnp
    args = [jnp.asarray(a) for a in args]
np.savez(sys.argv[3], *[np.asarray(o) for o in ns["losses"](*args)])
"""


@needs_frameworks
def test_translated_functions_compute_what_pytorch_computes(tmp_path):
    """Losses with their reductions, reductions over dims, softmax, matmul, exact GELU, cat: the
    translated file (torch unimportable) against the original, in float64."""
    import numpy as np
    r = translate_source(FUNCTIONS.read_text(), str(FUNCTIONS), PACK)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    translated_file = tmp_path / "functions_jax.py"
    translated_file.write_text(r.output)
    outs = {}
    for side, path in (("torch", FUNCTIONS), ("jax", translated_file)):
        outs[side] = saved_arrays(_RUN, side, path, tmp_path / f"{side}.npz")
    assert len(outs["torch"]) == len(outs["jax"]) == 12
    for i, (t, j) in enumerate(zip(outs["torch"], outs["jax"])):
        assert t.shape == j.shape, f"output {i}"
        np.testing.assert_allclose(j, t, rtol=1e-10, atol=1e-12, err_msg=f"output {i}")


@needs_frameworks
def test_an_empty_sequential_shortcut_threads_the_state_too(session):
    """resnet_block with stride 1 and as many planes in as out: the shortcut is the empty Sequential,
    called with the state like the one holding a BatchNorm."""
    from fwport.verify.run import Options, verify
    d = regen.FIXTURES / "resnet_block"
    opts = Options(str(d / "model.py"), str(d / "expected.py"), "BasicBlock",
                   args={"in_planes": 8, "planes": 8, "stride": 1}, inputs=["float32[2,8,6,6]"],
                   checks=("forward", "grad"), device="cpu", direction="torch2jax")
    cert = verify(opts, session)
    assert cert["verdict"] == "pass", json.dumps(cert, indent=1, default=str)[:3000]


def test_a_module_list_holding_batch_norm_is_still_refused():
    src = ("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n        self.blocks = nn.ModuleList([nn.Linear(3, 3), nn.BatchNorm1d(3)])\n\n"
           "    def forward(self, x):\n        for b in self.blocks:\n            x = b(x)\n        return x\n")
    r = translate_source(src, "m.py", PACK)
    errs = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.code for f in errs] == ["unsupported-construct"] and "ModuleList holding BatchNorm" in errs[0].message


BLOCK = ("import torch\nfrom torch import nn\n\n\nclass Block(nn.Module):\n    def __init__(self, n):\n"
         "        super().__init__()\n        self.fc = nn.Linear(n, n)\n\n    def forward(self, x):\n"
         "        return self.fc(x)\n\n\n")


def src_line(r, n: int) -> str:
    return r.source.splitlines()[n - 1]


def _errors(src: str):
    r = translate_source(src, "m.py", PACK)
    return r, [f for f in r.findings if f.severity is Severity.ERROR]


def test_a_module_built_in_a_helper_method_of_init_gets_a_key_per_element():
    """`self._make(...)` called from __init__ (the CIFAR ResNets' `_make_layer`): the helper takes `*, key`,
    __init__ hands it a split, and each element of `[Block(4) for _ in range(k)]` gets its own key."""
    r, errs = _errors(BLOCK + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                      "        self.blocks = self._make(3)\n        self.head = nn.Linear(4, 2)\n\n"
                      "    def _make(self, k):\n        return [Block(4 * i + 4) for i in range(k)]\n\n"
                      "    def forward(self, x):\n        for b in self.blocks:\n            x = b(x)\n        return self.head(x)\n")
    assert errs == []
    assert "        self.blocks = self._make(3, key=key1)\n        self.head = eqx.nn.Linear(4, 2, key=key2)\n" in r.output
    assert "    def _make(self, k, *, key):\n        return [Block(4 * i + 4, key=subkey) for i, subkey in " \
           "enumerate(jax.random.split(key, k))]\n" in r.output


def test_a_helper_of_init_called_from_another_method_is_an_error_there():
    r, errs = _errors(BLOCK + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                      "        self.reset()\n\n    def reset(self):\n        self.fc = nn.Linear(4, 4)\n\n"
                      "    def forward(self, x):\n        self.reset()\n        return self.fc(x)\n")
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", 23)]
    assert "self.reset(...) in forward(): reset() builds modules" in errs[0].message
    assert "        self.reset(key=key)\n" in r.output and "    def reset(self, *, key):\n" in r.output


def test_the_fields_a_helper_of_init_sets_are_declared():
    r, errs = _errors("import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
                      "        super().__init__()\n        self.n = 4\n        self._build()\n\n    def _build(self):\n"
                      "        self.fc = nn.Linear(self.n, 2)\n        self.k = 3\n\n    def forward(self, x):\n"
                      "        return self.fc(x)\n")
    assert errs == []
    assert ("    n: int = eqx.field(static=True)\n    fc: eqx.nn.Linear\n    k: int = eqx.field(static=True)\n"
            in r.output)
    assert "        self._build(key=key)\n\n    def _build(self, *, key):\n        self.fc = eqx.nn.Linear(self.n, 2, key=key)\n" \
        in r.output


def test_a_loop_building_modules_splits_its_key_each_iteration():
    """The same key for every iteration would give every layer the same initial values."""
    r, errs = _errors("import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
                      "        super().__init__()\n        layers = []\n        for _ in range(3):\n"
                      "            layers.append(nn.Linear(4, 4))\n            layers.append(nn.ReLU())\n"
                      "        self.net = nn.Sequential(*layers)\n        self.out = nn.Linear(4, 1)\n\n"
                      "    def forward(self, x):\n        return self.out(self.net(x))\n")
    assert errs == []
    assert ("        key1, key2 = jax.random.split(key)\n        layers = []\n        for _ in range(3):\n"
            "            key1, subkey = jax.random.split(key1)\n            layers.append(eqx.nn.Linear(4, 4, key=subkey))\n"
            "            layers.append(eqx.nn.Lambda(jax.nn.relu))\n        self.net = eqx.nn.Sequential(layers)\n"
            "        self.out = eqx.nn.Linear(4, 1, key=key2)\n") in r.output
    assert "net: eqx.nn.Sequential" in r.output


@needs_frameworks
def test_modules_built_in_loops_get_different_initial_values():
    import jax
    r, errs = _errors(BLOCK + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                      "        self.seq = self._make(3)\n\n    def _make(self, k):\n        layers = []\n"
                      "        for i in range(k):\n            for j in range(2):\n                layers.append(Block(4))\n"
                      "        return nn.Sequential(*layers)\n\n    def forward(self, x):\n        return self.seq(x)\n")
    assert errs == []
    ns: dict = {}
    exec(compile(r.output, "m.py", "exec"), ns)
    net = ns["Net"](key=jax.random.key(0))
    weights = [tuple(b.fc.weight.ravel().tolist()) for b in net.seq.layers]
    assert len(weights) == 6 and len(set(weights)) == 6
    assert net(jax.numpy.ones(4)).shape == (4,)  # eqx.nn.Sequential calls each member with key=


def test_a_class_given_as_a_parameter_gets_a_key_only_where_every_caller_is_known():
    helper = ("class Net(nn.Module):\n    def __init__(self, block):\n        super().__init__()\n"
              "        self.a = self._make(block)\n\n    def _make(self, block):\n        return block(4)\n\n"
              "    def forward(self, x):\n        return self.a(x)\n\n\n")
    r, errs = _errors(BLOCK + helper + "net = Net(Block)\n")
    assert errs == [] and "        return block(4, key=key)\n" in r.output
    r, errs = _errors(BLOCK + helper + "def make(cls):\n    return Net(cls)\n")  # the class is not known
    assert [f.code for f in errs] == ["unsupported-construct"] and "`block` is a parameter" in errs[0].message
    assert "        return block(4)\n" in r.output


def test_a_module_built_in_a_method_init_does_not_call_is_still_an_error():
    r, errs = _errors(BLOCK + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                      "        self.fc = nn.Linear(4, 4)\n\n    def grow(self):\n        return Block(4)\n\n"
                      "    def forward(self, x):\n        return self.fc(x)\n")
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", 20)]  # `return Block(4)`
    assert "built in grow(), not in __init__" in errs[0].message and "return Block(4)" in src_line(r, 20)


def test_a_comprehension_of_another_shape_building_modules_is_an_error():
    r, errs = _errors("import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self, sizes):\n"
                      "        super().__init__()\n        self.fcs = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes, reversed(sizes))])\n\n"
                      "    def forward(self, x):\n        for f in self.fcs:\n            x = f(x)\n        return x\n")
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", 8)]
    assert "a comprehension in __init__()" in errs[0].message


def test_a_builder_function_takes_a_key_and_its_calls_get_splits():
    r, errs = _errors("import torch\nfrom torch import nn\n\n\ndef conv3x3(a, b):\n    return nn.Conv2d(a, b, 3, padding=1)\n\n\n"
                      "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c1 = conv3x3(3, 4)\n"
                      "        self.c2 = conv3x3(4, 4)\n\n    def forward(self, x):\n        return self.c2(self.c1(x))\n\n\n"
                      "c = conv3x3(1, 1)\n")
    assert errs == []
    assert "def conv3x3(a, b, *, key):\n    return eqx.nn.Conv2d(a, b, 3, padding=1, key=key)\n" in r.output
    assert "        self.c1 = conv3x3(3, 4, key=key1)\n        self.c2 = conv3x3(4, 4, key=key2)\n" in r.output
    assert "c = conv3x3(1, 1, key=jax.random.key(0))" in r.output


def test_a_module_given_to_init_is_an_error_where_it_may_hold_batch_norm():
    """yunjey's ResidualBlock: `self.downsample = downsample`, called without the state in forward."""
    src = ("import torch\nfrom torch import nn\n\n\nclass Block(nn.Module):\n    def __init__(self, n, downsample=None):\n"
           "        super().__init__()\n        self.bn = nn.BatchNorm1d(n)\n        self.downsample = downsample\n\n"
           "    def forward(self, x):\n        if self.downsample:\n            x = self.downsample(x)\n"
           "        return self.bn(x)\n")
    r, errs = _errors(src)
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", 13)]
    assert "fwport cannot prove whether it holds BatchNorm" in errs[0].message
    r, errs = _errors(src + "\n\nb = Block(3, nn.Linear(3, 3))\n")  # every caller's argument is known stateless
    assert errs == [] and "            x = self.downsample(x)\n" in r.output
    r, errs = _errors(src + "\n\nb = Block(3, nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)))\nc = Block(3)\n")
    assert errs == [] and "            x, state = self.downsample(x, state)\n" in r.output  # None or with state: threaded
    r, errs = _errors(src + "\n\nb = Block(3, nn.BatchNorm1d(3))\nc = Block(3, nn.Linear(3, 3))\n")
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", 13)]  # with state at one call, not another


# --- nn.init -------------------------------------------------------------------------------------------

INITS = [  # (layer, init call on its weight, bounded): drawn from torch and from the translation, compared
    ("nn.Linear(400, 300)", "nn.init.uniform_({w}, -0.3, 0.2)", True),
    ("nn.Linear(400, 300)", "nn.init.normal_({w}, mean=0.5, std=0.1)", False),
    ("nn.Conv2d(32, 64, 3)", "nn.init.xavier_uniform_({w}, gain=2.0)", True),
    ("nn.Conv2d(32, 64, 3)", "nn.init.xavier_normal_({w}, init.calculate_gain('tanh'))", False),
    ("nn.Conv2d(32, 64, 3)", "nn.init.kaiming_uniform_({w}, a=math.sqrt(5))", True),
    ("nn.Conv2d(64, 32, 3)", "nn.init.kaiming_normal_({w}, mode='fan_out', nonlinearity='relu')", False),
    ("nn.Linear(300, 200)", "nn.init.kaiming_uniform_({w}, a=0.2, mode='fan_in')", True),
    ("nn.Linear(400, 300)", "nn.init.trunc_normal_({w}, std=0.5, a=-1.0, b=1.0)", True),
    ("nn.Linear(400, 300)", "nn.init.trunc_normal_({w}, 0.5, 0.2, 0.1, 0.8)", True),
    ("nn.Linear(400, 300)", "nn.init.trunc_normal_({w})", True),
    ("nn.Conv1d(16, 64, 5)", "nn.init.orthogonal_({w}, init.calculate_gain('leaky_relu', 0.2))", False),
    ("nn.Linear(50, 400)", "nn.init.orthogonal_({w})", False),
]


@needs_frameworks
def test_nn_init_draws_from_pytorchs_distributions():
    """Each initialiser's translation draws from the distribution PyTorch's does (gain, fan mode, bounds):
    means, standard deviations and bounds of large tensors agree; orthogonal ones are orthogonal with the gain."""
    import jax
    import numpy as np
    import torch
    lines = "".join(f"        self.l{i} = {layer}\n        {call.format(w=f'self.l{i}.weight')}\n"
                    for i, (layer, call, _) in enumerate(INITS))
    src = ("import math\nimport torch\nimport torch.nn.init as init\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
           f"    def __init__(self):\n        super().__init__()\n{lines}\n    def forward(self, x):\n        return x\n")
    r = t2j(src)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "torch" not in r.output
    ns: dict = {}
    exec(compile(r.output, "m.py", "exec"), ns)
    jnet = ns["Net"](key=jax.random.key(1))
    torch.manual_seed(0)
    tns: dict = {}
    exec(compile(src, "t.py", "exec"), tns)
    tnet = tns["Net"]()
    for i, (layer, call, bounded) in enumerate(INITS):
        j = np.asarray(getattr(jnet, f"l{i}").weight, dtype=np.float64)
        t = getattr(tnet, f"l{i}").weight.detach().numpy().astype(np.float64)
        assert j.shape == t.shape, call
        if "orthogonal" in call:
            jm, tm = j.reshape(j.shape[0], -1), t.reshape(t.shape[0], -1)
            gram = (lambda m: m @ m.T) if jm.shape[0] <= jm.shape[1] else (lambda m: m.T @ m)
            np.testing.assert_allclose(gram(jm), gram(tm), atol=1e-4, err_msg=call)  # both g² I
            continue
        # two independent samples of t.size values: five standard errors of the difference of their means and of
        # the ratio of their standard deviations (the test does not hang on which keys a translation splits)
        assert abs(j.mean() - t.mean()) < 5 * t.std() * np.sqrt(2 / t.size) + 1e-6, (call, j.mean(), t.mean())
        assert abs(j.std() / t.std() - 1) < 5 / np.sqrt(t.size), (call, j.std(), t.std())
        if bounded:
            span = t.max() - t.min()
            assert abs(j.min() - t.min()) < 0.01 * span and abs(j.max() - t.max()) < 0.01 * span, (call, j.min(), t.min())


def test_nn_init_in_place_forms_not_translated_keep_their_finding_and_apply_is_refused():
    src = ("import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n        self.apply(self._init)\n"
           "        for p in self.parameters():\n            nn.init.zeros_(p)\n\n    def _init(self, m):\n"
           "        nn.init.eye_(m.weight)\n\n    def forward(self, x):\n        return self.fc(x)\n")
    r, errs = _errors(src)
    # (the loop over self.parameters() is translated: tests/test_torch2jax_init.py; the lines after it keep theirs)
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", 9), ("no-rule", 14)]
    assert "self.apply(fn) runs fn on every submodule" in errs[0].message
    assert "self.fc, = reinit_arrays(" in r.output
    r, errs = _errors(src.replace("self.apply(self._init)", "nn.init.kaiming_uniform_(self.fc.weight, mode='fan_avg')"))
    assert [(f.code, f.line) for f in errs][:1] == [("unsupported-construct", 9)]
    assert "mode='fan_avg' is not 'fan_in' or 'fan_out'" in errs[0].message


# --- guidance: what to write instead of PyTorch APIs with no JAX translation ----------------------------

@pytest.mark.parametrize("line, api, advice", [
    # (a one-process data-parallel script is translated: tests/test_torch2jax_distributed.py; these stay refused)
    ("dist.broadcast(model, 0)", "torch.distributed.broadcast", "jax.sharding.Mesh"),
    ("dist.barrier()", "torch.distributed.barrier", "a barrier orders several processes"),
    ("torch.distributed.rpc.init_rpc('w')", "torch.distributed.rpc.init_rpc", "RPC between processes"),
    ("reps = torch.nn.parallel.replicate(model, [0, 1])", "torch.nn.parallel.replicate", "jax.sharding.Mesh"),
    ("p = torch.multiprocessing.Process(target=main)", "torch.multiprocessing.Process", "run the function once"),
    ("torch.cuda.empty_cache()", "torch.cuda.empty_cache", "jax.device_put"),
    ("g = torch.fx.symbolic_trace(model)", "torch.fx.symbolic_trace", "jax.make_jaxpr"),
    ("scaler = torch.amp.GradScaler()", "torch.amp.GradScaler", "mixed precision in JAX is explicit"),
    ("sd = torch.hub.load_state_dict_from_url('u')", "torch.hub.load_state_dict_from_url", "fwport weights"),
])
def test_apis_with_no_jax_counterpart_say_what_to_write(line, api, advice):
    src = f"import torch\nimport torch.distributed as dist\n\nmodel = main = None\n{line}\n"
    r = t2j(src)
    errs = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [(f.code, f.line) for f in errs] == [("no-rule", 5)]
    assert f"{api} has no torch2jax translation: " in errs[0].message and advice in errs[0].message
    # the line stays as written, under a marker that says why
    assert f"# fwport: no-rule: {api} has no torch2jax translation: " in r.output and f"\n{line}\n" in r.output
