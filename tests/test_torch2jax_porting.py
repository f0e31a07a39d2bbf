"""torch2jax constructs a JAX user meets porting real PyTorch models and training scripts (issue 10; the wider
/tmp/crash/pt set): F.interpolate (→ the Upsample helper, per example in a module, vmapped over a whole array),
nn.Embedding.from_pretrained, Tensor.expand, clip_grad_norm_ in a training loop. Each is translated, run with torch
unimportable, and compared with PyTorch: modules through `fwport verify` (forward and gradients), functions by
running both files on the same arrays in float64."""
from __future__ import annotations

import textwrap

import pytest

from helpers import error_findings as errors, needs, per_example, t2j
from runners import SIDE_HEAD, printed_json, saved_arrays, verify_model

needs_frameworks = needs("torch", "jax", "equinox")


# runs `fn` of a file (the original with torch, the translation with torch unimportable) on float64 arrays
_RUN = SIDE_HEAD + """
out, shapes = sys.argv[3], eval(sys.argv[4])
rng = np.random.default_rng(0)
arrays = [rng.standard_normal(s) for s in shapes]
if side == "torch":
    import torch
    arrays = [torch.from_numpy(a) for a in arrays]
else:
    import jax.numpy as jnp
    arrays = [jnp.asarray(a) for a in arrays]
res = ns["fn"](*arrays)
np.savez(out, *[np.asarray(o) for o in (res if isinstance(res, (list, tuple)) else [res])])
"""


def run_both(tmp_path, source: str, shapes: list[tuple]) -> tuple[list, list]:
    r = t2j(source)
    assert not errors(r), r.findings
    paths = {"torch": tmp_path / "f.py", "jax": tmp_path / "f_jax.py"}
    paths["torch"].write_text(textwrap.dedent(source).lstrip("\n"))
    paths["jax"].write_text(r.output)
    outs = {}
    for side, path in paths.items():
        outs[side] = saved_arrays(_RUN, side, path, tmp_path / f"{side}.npz", repr(shapes))
    return outs["torch"], outs["jax"]


def assert_close(torch_outs, jax_outs):
    import numpy as np
    assert len(torch_outs) == len(jax_outs)
    for i, (t, j) in enumerate(zip(torch_outs, jax_outs)):
        assert t.shape == j.shape, f"output {i}: {t.shape} vs {j.shape}"
        np.testing.assert_allclose(j, t, rtol=1e-10, atol=1e-12, err_msg=f"output {i}")


# --- F.interpolate --------------------------------------------------------------------------------------------

INTERPOLATE = '''
import torch
from torch import nn
import torch.nn.functional as F


class Up(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.conv1 = nn.Conv1d(4, 2, 1)

    def forward(self, x):
        y = self.conv(x)
        a = F.interpolate(y, scale_factor=2, mode="nearest")
        b = F.interpolate(y, size=(7, 5), mode="bilinear", align_corners=False)
        c = F.interpolate(y, size=a.shape[-2:], mode="bilinear", align_corners=True)
        d = F.interpolate(y, scale_factor=1.5)
        e = F.interpolate(self.conv1(y.flatten(2)), size=11, mode="linear")
        return a.sum(1) + c.sum(1) + F.interpolate(b, size=a.shape[-2:]).mean(1), d, e
'''


def test_interpolate_in_a_module_resamples_one_example():
    r = t2j(INTERPOLATE)
    assert not errors(r), r.findings
    assert 'a = Upsample(scale_factor=2, mode="nearest")(y)' in r.output
    assert 'c = Upsample(size=a.shape[-2:], mode="bilinear", align_corners=True)(y)' in r.output
    assert "class Upsample(eqx.Module)" in r.output and "jax.vmap(Upsample" not in r.output


@needs_frameworks
def test_interpolate_in_a_module_verifies_against_pytorch(tmp_path):
    cert = verify_model(tmp_path, INTERPOLATE, "Up", ["float32[2,3,6,5]"])
    assert cert["results"]["outputs"] and cert["results"]["gradients"]


INTERPOLATE_WHOLE = '''
import torch
import torch.nn.functional as F


def fn(x, v):
    return [F.interpolate(x, scale_factor=2), F.interpolate(x, size=(5, 9), mode="bilinear"),
            F.interpolate(x, size=(4, 7), mode="bilinear", align_corners=True),
            F.interpolate(x, scale_factor=(0.5, 1.7), mode="nearest"),
            F.interpolate(v, scale_factor=2.5, mode="linear", align_corners=False)]
'''


@needs_frameworks
def test_interpolate_of_whole_arrays_is_the_helper_vmapped_and_computes_what_pytorch_computes(tmp_path):
    r = t2j(INTERPOLATE_WHOLE)
    assert "jax.vmap(Upsample(scale_factor=2))(x)" in r.output
    assert_close(*run_both(tmp_path, INTERPOLATE_WHOLE, [(2, 3, 6, 5), (2, 4, 6)]))


@pytest.mark.parametrize("call, message", [
    ("F.interpolate(x, size=(4, 4), mode='bicubic')", "mode='bicubic'"),
    ("F.interpolate(x, scale_factor=2, antialias=True)", "antialias=True"),
    ("F.interpolate(x, scale_factor=2, recompute_scale_factor=True)", "recompute_scale_factor=True"),
])
def test_interpolate_modes_without_a_translation_are_errors(call, message):
    for where in (f"y = {call}\n", f"class M(nn.Module):\n    def forward(self, x):\n        return {call}\n"):
        r = t2j(f"import torch\nfrom torch import nn\nimport torch.nn.functional as F\n\n{where}")
        errs = errors(r)
        assert errs and message in errs[0].message, (where, r.findings)


# --- nn.Embedding.from_pretrained ----------------------------------------------------------------------------

PRETRAINED = '''
import numpy as np
import torch
from torch import nn


def table(n, d):
    return torch.FloatTensor(np.arange(n * d, dtype=np.float64).reshape(n, d) / (n * d))


class Tagger(nn.Module):
    def __init__(self, vocab=11, dim=6):
        super().__init__()
        self.frozen = nn.Embedding.from_pretrained(table(vocab, dim))
        self.tuned = nn.Embedding.from_pretrained(torch.ones(vocab, dim) * 0.5, freeze=False)
        self.fc = nn.Linear(dim, 3)

    def forward(self, tokens):
        h = self.frozen(tokens) + self.tuned(tokens) * self.tuned(tokens)
        return self.fc(h).sum(1)
'''


def test_from_pretrained_is_the_table_looked_up_frozen_by_default():
    r = t2j(PRETRAINED)
    assert not errors(r), r.findings
    assert "self.frozen = PretrainedEmbedding(table(vocab, dim))" in r.output
    assert "self.tuned = PretrainedEmbedding(jnp.ones((vocab, dim)) * 0.5, freeze=False)" in r.output
    assert "jax.vmap(self.fc)(h)" in r.output  # tokens: their embeddings are vectors per token
    assert "jax.lax.stop_gradient(self.weight) if self.freeze else self.weight" in r.output


@needs_frameworks
def test_from_pretrained_verifies_and_the_frozen_table_gets_no_gradient(tmp_path):
    import jax
    import jax.numpy as jnp
    import equinox as eqx
    import runpy
    verify_model(tmp_path, PRETRAINED, "Tagger", ["int64[2,5]:11"])
    ns = runpy.run_path(str(tmp_path / "model_jax.py"))
    model = ns["Tagger"](key=jax.random.key(0))
    tokens = jnp.asarray([[1, 2, 3], [4, 5, 10]])
    grads = eqx.filter_grad(lambda m: jnp.sum(jax.vmap(m)(tokens)))(model)
    assert not jnp.any(grads.frozen.weight) and jnp.any(grads.tuned.weight)


@pytest.mark.parametrize("arg", ["padding_idx=0", "max_norm=1.0", "scale_grad_by_freq=True"])
def test_from_pretrained_options_without_a_translation_are_errors(arg):
    r = t2j(f'''
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self, w):
                super().__init__()
                self.emb = nn.Embedding.from_pretrained(w, {arg})
        ''')
    errs = errors(r)
    assert errs and arg.split("=")[0] in errs[0].message and errs[0].line == 8, r.findings


# --- Tensor.expand / expand_as ----------------------------------------------------------------------------------

EXPAND = '''
import torch
from torch import nn


class Expand(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 3)

    def forward(self, x, m):
        B = x.size(0)
        h = x.flatten(1)
        g = h[:, None, :].expand(-1, 5, -1)
        k = h.unsqueeze(1).expand(B, 2, 12)
        c = m.unsqueeze(-1).expand(-1, -1, 3)
        return self.fc(g.sum(1) + k.mean(1)) + c.sum(1) + g.expand_as(g).mean(1).sum(-1, keepdim=True)
'''


def test_expand_of_a_batched_tensor_is_one_examples_broadcast():
    r = t2j(EXPAND)
    assert not errors(r), r.findings
    assert "g = jnp.broadcast_to(h[None, :], (5, h[None, :].shape[-1]))" in r.output
    assert "k = jnp.broadcast_to(jnp.expand_dims(h, 0), (2, 12))" in r.output and "B = " not in r.output
    assert "jnp.broadcast_to(g, g.shape)" in r.output


@needs_frameworks
def test_expand_in_a_module_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, EXPAND, "Expand", ["float32[2,3,4]", "float32[2,6]"])


@pytest.mark.parametrize("line, message", [
    ("h.unsqueeze(1).expand(x.size(0), 2, 3)", "not shown to be the batch's"),  # the rank of h is not known
    ("x.flatten(1).expand(2, 3, 12)", "new axes come before the batch axis"),
    ("x.flatten(1).expand(torch.Size([2, 12]))", "not written one per axis"),
    ("h.expand_as(x)", "expand_as"),
    ("h[None].expand(-1, -1, 3)", "whose batch axis is dimension 1"),  # x[None]: PyTorch's batch axis second
])
def test_expand_that_cannot_be_written_for_one_example_is_an_error(line, message):
    r = t2j(per_example(f'''
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                h = self.fc(x)
                return {line}
        '''))  # (an LSTM held: per example)
    errs = errors(r)
    assert any(message in e.message and e.line == 13 for e in errs), r.findings


EXPAND_WHOLE = '''
import torch


def fn(a, m):
    n = 4
    x = a[:, :1]
    mask = (m[:, 0] > 0).unsqueeze(1)
    return [x.expand(-1, 5), a[0].expand(3, 2, 5), mask.expand(3, n), x.expand(a.size()), x.expand_as(a),
            a[:, None, :].expand(-1, 2, -1), x.expand((3, 6)), (x * 2).expand(3, 4), a.expand(2, -1, -1)]
'''


@needs_frameworks
def test_expand_of_whole_arrays_is_broadcast_to_and_computes_what_pytorch_computes(tmp_path):
    r = t2j(EXPAND_WHOLE)
    assert "jnp.broadcast_to(x, (x.shape[-2], 5))" in r.output and "jnp.broadcast_to(x, a.shape)" in r.output
    assert_close(*run_both(tmp_path, EXPAND_WHOLE, [(3, 5), (3, 2)]))


# --- gradient clipping in a training loop ----------------------------------------------------------------------

CLIP = '''
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(torch.tanh(x))


def fit(model, x, y, max_norm=0.1):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    for step in range(4):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
    return model


def fit_always(model, x, y, clip=0.05):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    for step in range(4):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip, norm_type=2)
        optimizer.step()
    return model
'''

_CLIP_RUN = SIDE_HEAD + """
fn, kw = sys.argv[3], json.loads(sys.argv[4])
rng = np.random.default_rng(0)
w, b = rng.standard_normal((3, 4)), rng.standard_normal(3)
x, y = rng.standard_normal((8, 4)) * 2, rng.standard_normal((8, 3)) * 3
if side == "torch":
    import torch
    model = ns["Net"]().double()
    with torch.no_grad():
        model.fc.weight.copy_(torch.tensor(w)); model.fc.bias.copy_(torch.tensor(b))
    model = ns[fn](model, torch.tensor(x), torch.tensor(y), **kw)
    out = [model.fc.weight.detach().numpy().tolist(), model.fc.bias.detach().numpy().tolist()]
else:
    import equinox as eqx, jax.numpy as jnp
    model = ns["Net"](key=jax.random.key(0))
    model = eqx.tree_at(lambda m: (m.fc.weight, m.fc.bias), model, (jnp.asarray(w), jnp.asarray(b)))
    model = ns[fn](model, jnp.asarray(x), jnp.asarray(y), **kw)
    out = [np.asarray(model.fc.weight).tolist(), np.asarray(model.fc.bias).tolist()]
print(json.dumps(out))
"""


def test_clip_grad_norm_in_a_loop_goes_into_the_train_step():
    r = t2j(CLIP)
    assert not errors(r), r.findings
    assert "def train_step(model, opt_state, x, y, max_grad_norm):" in r.output
    assert "train_step(model, opt_state, x, y, max_norm if max_norm > 0 else None)" in r.output
    assert "train_step(model, opt_state, x, y, clip)" in r.output
    assert "grads = jax.tree_util.tree_map(lambda g: g * jnp.minimum(1.0, max_grad_norm / (grad_norm + 1e-6)), grads)" \
        in r.output and "clip_grad_norm_" not in r.output and "torch" not in r.output


@needs_frameworks
@pytest.mark.parametrize("fn, kw", [("fit", {}), ("fit", {"max_norm": 0.0}), ("fit", {"max_norm": 1e3}),
                                    ("fit_always", {})])
def test_clipped_training_steps_as_pytorch_does(tmp_path, fn, kw):
    import json
    import numpy as np
    r = t2j(CLIP)
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(textwrap.dedent(CLIP).lstrip("\n"))
    out.write_text(r.output)
    results = []
    for side, path in (("torch", src), ("jax", out)):
        results.append(printed_json(_CLIP_RUN, side, path, fn, json.dumps(kw)))
    for t, j in zip(*results):
        np.testing.assert_allclose(np.asarray(j), np.asarray(t), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("line", [
    "        total = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",  # its result read
    "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type=1)\n",
    "        torch.nn.utils.clip_grad_norm_(model.fc.parameters(), 1.0)\n",  # a part of the model
])
def test_other_clippings_stay_errors(line):
    src = textwrap.dedent(CLIP).replace("        if max_norm > 0:\n            torch.nn.utils.clip_grad_norm_("
                                        "model.parameters(), max_norm)\n", line)
    r = t2j(src)
    errs = errors(r)
    assert any(e.line == 21 for e in errs) and any("stays as written" in e.message for e in errs), r.findings
    assert "loss.backward()" in r.output.split("def fit_always")[0]


# --- elementwise functions and losses met in the wider set ------------------------------------------------------

FUNCTIONS = '''
import torch
import torch.nn.functional as F
from torch import nn

bce = nn.BCELoss()
bce_sum = nn.BCELoss(reduction="sum")


def fn(a, b, v):
    p = torch.sigmoid(a)
    t = (b > 0).double()
    return [torch.neg(a), torch.erf(a), torch.log1p(torch.abs(a)), torch.rsqrt(torch.abs(a) + 0.1), torch.tan(a),
            F.silu(a), F.elu(a), F.elu(a, alpha=0.3, inplace=False), torch.full_like(a, 2.5),
            torch.full_like(a, 3, dtype=torch.int64), torch.outer(v, v[:3]), F.l1_loss(a, b),
            F.l1_loss(a, b, reduction="sum"), F.l1_loss(a, b, reduction="none"), bce(p, t), bce_sum(p, t),
            bce(torch.zeros_like(p), torch.ones_like(t))]
'''


@needs_frameworks
def test_elementwise_functions_and_losses_compute_what_pytorch_computes(tmp_path):
    r = t2j(FUNCTIONS)
    assert "jax.scipy.special.erf(a)" in r.output and "jnp.full_like(a, 3, dtype=jnp.int64)" in r.output
    torch_outs, jax_outs = run_both(tmp_path, FUNCTIONS, [(3, 4), (3, 4), (5,)])
    assert jax_outs[9].dtype == torch_outs[9].dtype
    assert_close(torch_outs, jax_outs)
    assert float(jax_outs[-1]) == 100.0  # the log clamped at -100, as PyTorch clamps it


ACTIVATIONS = '''
import torch
import torch.nn.functional as F
from torch import nn


class Act(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 4)

    def forward(self, x):
        h = self.fc(x)
        return F.silu(h) + F.elu(h, alpha=0.5) + torch.erf(h) * torch.neg(h) + torch.tan(h * 0.1) + torch.log1p(h * h)
'''


@needs_frameworks
def test_the_elementwise_functions_in_a_module_verify(tmp_path):
    verify_model(tmp_path, ACTIVATIONS, "Act", ["float32[3,5]"])


# --- padding layers and F.pad ------------------------------------------------------------------------------------

PADS = '''
import torch
import torch.nn.functional as F
from torch import nn


class Pads(nn.Module):
    def __init__(self, k=3):
        super().__init__()
        self.reflect = nn.ReflectionPad2d(k // 2)
        self.conv = nn.Conv2d(2, 3, k)
        self.edge = nn.ReplicationPad2d((1, 0, 2, 1))
        self.zero = nn.ZeroPad2d(1)
        self.const = nn.ConstantPad2d((0, 1, 1, 0), -0.5)
        self.wrap = nn.CircularPad1d(2)

    def forward(self, x):
        h = self.conv(self.reflect(x))
        h = self.zero(self.edge(h)) + 0.1
        h = self.const(h)
        y = F.pad(h, (1, 1, 0, 1), mode="reflect") + F.pad(h, (2, 0, 1, 0), "replicate")
        z = F.pad(h, (0, 1, 1, 2), value=2.0) * F.pad(h, (1, 0, 2, 1), mode="circular")
        return y.sum(-1), z.mean(1), self.wrap(h.flatten(2)).sum(1)
'''


@needs_frameworks
def test_padding_layers_and_pad_verify_against_pytorch(tmp_path):
    r = t2j(PADS)
    assert 'self.reflect = Pad(k // 2, 2, mode="reflect")' in r.output and "self.const = Pad((0, 1, 1, 0), 2, value=-0.5)" \
        in r.output
    assert 'torch_pad(h, (1, 1, 0, 1), mode="reflect")' in r.output
    verify_model(tmp_path, PADS, "Pads", ["float32[2,2,5,6]"])


PAD_WHOLE = '''
import torch
import torch.nn.functional as F


def fn(img, m):
    return [F.pad(img, (0, 2, 0, 1, 0, 1)), F.pad(m, (0, 2, 0, 1), "constant", 1), F.pad(img, (1, 2, 0, 1), mode="reflect"),
            F.pad(img, (1, 1, 2, 0), mode="replicate"), F.pad(img, [2, 1, 1, 1], mode="circular")]
'''


@needs_frameworks
def test_pad_of_whole_arrays_computes_what_pytorch_computes(tmp_path):
    assert_close(*run_both(tmp_path, PAD_WHOLE, [(2, 3, 4, 5), (3, 4)]))


# --- functional pooling with padding -----------------------------------------------------------------------------

POOLS = '''
import torch
import torch.nn.functional as F
from torch import nn


class Pools(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)

    def forward(self, x):
        h = self.conv(x) - 1.0  # negative values: a max pool padded with zeros would differ
        a = F.max_pool2d(h, kernel_size=3, stride=1, padding=1)
        b = F.avg_pool2d(h, 3, stride=2, padding=1)
        c = F.max_pool1d(h.flatten(2), 2, padding=1)
        return a.sum(1), b, c
'''


@needs_frameworks
def test_functional_pools_with_padding_verify_against_pytorch(tmp_path):
    r = t2j(POOLS)
    assert "eqx.nn.MaxPool2d(3, stride=1, padding=1)(h)" in r.output
    verify_model(tmp_path, POOLS, "Pools", ["float32[2,2,7,6]"])


# --- global adaptive pooling ---------------------------------------------------------------------------------------

GLOBAL_POOL = '''
import torch
import torch.nn.functional as F
from torch import nn


class SE(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3)
        self.se = nn.Conv2d(c, c, 1)
        self.fc = nn.Linear(c, 2)

    def forward(self, x):
        h = self.conv(x)
        w = torch.sigmoid(self.se(F.adaptive_avg_pool2d(h, 1)))
        h = h * w + F.adaptive_max_pool2d(h, (1, 1))
        out = F.adaptive_avg_pool2d(h, 1)
        return self.fc(out.view(out.size(0), -1)), F.adaptive_max_pool1d(h.flatten(2), 1)
'''


@needs_frameworks
def test_global_adaptive_pools_verify_against_pytorch(tmp_path):
    r = t2j(GLOBAL_POOL)
    assert "jnp.mean(h, axis=(-2, -1), keepdims=True)" in r.output
    verify_model(tmp_path, GLOBAL_POOL, "SE", ["float32[2,3,6,7]"])


def test_adaptive_pools_to_other_sizes_are_errors():
    r = t2j("import torch\nimport torch.nn.functional as F\n\ny = F.adaptive_avg_pool2d(x, (2, 3))\n"
            "z = F.adaptive_max_pool2d(x, 1, return_indices=True)\n")
    errs = errors(r)
    assert [e.line for e in errs] == [4, 5] and "output_size=(2, 3)" in errs[0].message, r.findings


# --- channel dropout ---------------------------------------------------------------------------------------------

CHANNEL_DROP = '''
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 6, 3)
        self.drop = nn.Dropout2d(0.5)
        self.fc = nn.Linear(6, 4)
        self.drop1 = nn.Dropout2d(0.25)

    def forward(self, x):
        h = self.drop(F.relu(self.conv(x)))
        return self.drop1(self.fc(h.mean((2, 3))))
'''


@needs_frameworks
def test_channel_dropout_verifies_in_eval_and_drops_whole_channels_in_training(tmp_path):
    import jax
    import jax.numpy as jnp
    import numpy as np
    import runpy
    r = t2j(CHANNEL_DROP)
    assert "self.drop = ChannelDropout(0.5)" in r.output and "self.drop(jax.nn.relu(self.conv(x)), key=" in r.output
    verify_model(tmp_path, CHANNEL_DROP, "Net", ["float32[2,2,6,6]"])
    ns = runpy.run_path(str(tmp_path / "model_jax.py"))
    drop = ns["ChannelDropout"](0.5)
    x = jnp.arange(1.0, 1 + 8 * 3 * 4).reshape(8, 3, 4)
    y = np.asarray(drop(x, key=jax.random.key(3)))
    kept = [bool(np.all(y[c] == 2 * np.asarray(x[c]))) for c in range(8)]
    assert all(k or np.all(y[c] == 0) for c, k in enumerate(kept)) and 0 < sum(kept) < 8  # whole channels
    v = jnp.ones(5)
    outs = {float(np.asarray(drop(v, key=jax.random.key(s))).sum()) for s in range(12)}
    assert outs == {0.0, 10.0}  # one axis: the example zeroed or kept whole, as PyTorch's dropout2d of (N, C)
    assert np.array_equal(np.asarray(drop(x, inference=True)), np.asarray(x))


NEW_LEADING_AXIS = '''
import torch
from torch import nn


class PosAdd(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.pos = nn.Embedding.from_pretrained(torch.randn(6, 4), freeze=True)  # graykode's Transformer
        self.fc = nn.Linear(4, 3)

    def forward(self, tok):
        h = self.emb(tok) + self.pos(torch.LongTensor([[1, 2, 3, 4, 0]]))
        y = self.fc(h)
        return y[None] + y.unsqueeze(0) * 2 + y[None, ...] * 3
'''


def test_new_leading_axis_and_batch_of_one_constant_are_followed():
    r = t2j(NEW_LEADING_AXIS)
    assert not errors(r), r.findings
    # the literal's batch-of-one axis goes (one example); the batch axis of y[None] is PyTorch's second
    assert "self.pos(jnp.asarray([[1, 2, 3, 4, 0]], dtype=jnp.int64))[0]" in r.output
    assert "out_axes=1" in r.output


@needs_frameworks
def test_new_leading_axis_and_batch_of_one_constant_verify_against_pytorch(tmp_path):
    # torch: (1, B, 5, 3); per example + vmap must give the same layout, not (B, 1, 5, 3)
    verify_model(tmp_path, NEW_LEADING_AXIS, "PosAdd", ["int64[2,5]:10"])


@pytest.mark.parametrize("line, message", [
    ("h + torch.tensor([[1.0, 2.0, 3.0]])", "may meet its batch axis"),  # the rank of h is not known
    ("h[None, 0]", "the first index is the batch axis's"),
])
def test_leading_axes_that_cannot_be_followed_are_errors(line, message):
    r = t2j(per_example(f'''
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                h = self.fc(x)
                return {line}
        '''))  # (an LSTM held: per example)
    errs = errors(r)
    assert any(message in e.message and e.line == 13 for e in errs), r.findings


MASK_RESIZE = '''
import torch
import torch.nn.functional as F
from torch import nn


class MaskResize(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(4))

    def forward(self, x):
        m = x * self.scale
        return F.interpolate(m[None].float(), size=(3, 2)).contiguous()[0]  # DETR's backbone: (1, B, H, W)
'''


@needs_frameworks
def test_interpolate_of_a_batch_held_as_channels_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, MASK_RESIZE, "MaskResize", ["float32[2,6,4]"])
