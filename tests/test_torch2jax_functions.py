"""torch.split / torch.unbind / torch.norm / torch.flatten / F.linear / F.conv2d / F.conv1d inside a module's forward (written
for one example by batch.py, run under jax.vmap) and outside (the rules, on whole batches), and the functional
pools and pad_sequence outside a module: translated, run with torch unimportable, compared in float64 with PyTorch on the same
inputs and weights."""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from runners import SIDE_HEAD, saved_arrays

pytest.importorskip("torch")
pytest.importorskip("jax")

PACK = load_pack("torch2jax")

SOURCE = '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pad_sequence


class Fns(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 3, 3, 3))
        self.b = nn.Parameter(torch.randn(4))
        self.g = nn.Parameter(torch.randn(6, 2, 2, 2))
        self.e = nn.Parameter(torch.randn(2, 3, 2, 2))
        self.lw = nn.Parameter(torch.randn(5, 96))
        self.lb = nn.Parameter(torch.randn(5))
        self.k = nn.Parameter(torch.randn(2, 4, 3))
        self.kb = nn.Parameter(torch.randn(2))

    def forward(self, x):
        h = F.conv2d(x, self.w, self.b, padding=1)
        s = F.conv2d(h, self.g, stride=2, groups=2)
        same = F.conv2d(x, self.e, padding="same")
        dil = 2 * F.conv2d(x, self.w, self.b, padding=(2, 1), dilation=2)
        a, b = torch.split(h, 3, dim=1)
        p, q, r = torch.split(h, [1, 2, 1], dim=1)
        parts = torch.unbind(s, dim=1)
        z = torch.flatten(s, 1)
        n = torch.norm(z, dim=-1, keepdim=True)
        n1 = torch.norm(s, p=1, dim=(2, 3))
        y = F.linear(z / n, self.lw, self.lb)
        c = F.conv1d(torch.flatten(h, 2), self.k, self.kb, padding=1)
        return h, s, same, dil, a, b, p, q, r, parts[0], parts[5], z, n, n1, y, F.linear(z, self.lw), c


def outside(x, w, b, lw, m, k8):
    a, c = torch.split(x, 5, dim=2)
    seqs = [m[:2], m[1:6], m[3:]]
    return [torch.flatten(x), torch.flatten(x, 1), torch.flatten(x, 1, 2), torch.flatten(x, -2),
            torch.norm(x), torch.norm(m, p=2), torch.norm(m, p=1), torch.norm(m, dim=0), torch.norm(x, 3, (1, 3)),
            a, c, *torch.split(m, [2, 1, 3]), *torch.unbind(m), *torch.unbind(x, dim=1),
            F.linear(torch.flatten(x, 1), lw), F.conv2d(x, w, b, stride=2, padding=1), F.conv2d(x, w, groups=1),
            F.max_pool2d(x, 2), F.avg_pool2d(x, kernel_size=3, stride=1, padding=1), F.max_pool2d(-x, 3, 2, 1),
            F.max_pool1d(x[:, 0], 2), F.avg_pool1d(x[:, 0], 3, padding=1),
            F.conv1d(x[:, 0], k8, padding="same", dilation=2), F.conv1d(x[:, 0], k8, None, 2),
            pad_sequence(seqs), pad_sequence(seqs, batch_first=True, padding_value=-1.5, padding_side="left")]
'''

RUN = SIDE_HEAD + """
rng = np.random.default_rng(0)
x = rng.standard_normal((3, 3, 8, 8))
weights = {k: rng.standard_normal(s) for k, s in (("w", (4, 3, 3, 3)), ("b", (4,)), ("g", (6, 2, 2, 2)),
                                                  ("e", (2, 3, 2, 2)), ("lw", (5, 96)), ("lb", (5,)),
                                                  ("k", (2, 4, 3)), ("kb", (2,)))}
lw, m, k8 = rng.standard_normal((5, 192)), rng.standard_normal((6, 4)), rng.standard_normal((3, 8, 4))
if side == "torch":
    import torch
    model = ns["Fns"]()
    with torch.no_grad():
        for k, v in weights.items():
            getattr(model, k).data = torch.from_numpy(v)
        outs = list(model(torch.from_numpy(x)))
    t = [torch.from_numpy(a) for a in (x, weights["w"], weights["b"], lw, m, k8)]
else:
    import equinox as eqx
    import jax.numpy as jnp
    model = ns["Fns"](key=jax.random.PRNGKey(0))
    names = sorted(weights)
    model = eqx.tree_at(lambda mo: [getattr(mo, k) for k in names], model, [jnp.asarray(weights[k]) for k in names])
    outs = list(jax.vmap(model)(jnp.asarray(x)))
    t = [jnp.asarray(a) for a in (x, weights["w"], weights["b"], lw, m, k8)]
outs += ns["outside"](*t)
np.savez(sys.argv[3], *[np.asarray(o.detach() if hasattr(o, "detach") else o) for o in outs])
"""


def test_split_unbind_norm_flatten_linear_conv2d_pools_compute_what_pytorch_computes(tmp_path):
    r = translate_source(SOURCE, "fns.py", PACK)
    assert not [f for f in r.findings if f.severity is not Severity.INFO], r.findings
    assert "torch" not in r.output and "F." not in r.output, r.output
    original, translated = tmp_path / "fns.py", tmp_path / "fns_jax.py"
    original.write_text(SOURCE)
    translated.write_text(r.output)
    torch_out = saved_arrays(RUN, "torch", original, tmp_path / "torch.npz")
    jax_out = saved_arrays(RUN, "jax", translated, tmp_path / "jax.npz")
    assert len(torch_out) == len(jax_out) == 17 + 35
    for i, (t, j) in enumerate(zip(torch_out, jax_out)):
        assert t.shape == j.shape, f"output {i}: {t.shape} vs {j.shape}"
        np.testing.assert_allclose(j, t, rtol=1e-10, atol=1e-10, err_msg=f"output {i}")


HEAD = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\nclass Net(nn.Module):\n" \
       "    def __init__(self):\n        super().__init__()\n        self.w = nn.Parameter(torch.randn(4, 3, 3, 3))\n" \
       "        self.rnn = nn.LSTM(3, 3, batch_first=True)\n\n" \
       "    def forward(self, x):\n        return "


@pytest.mark.parametrize("call,message", [
    ("torch.norm(x)", "torch.norm: the dimension (none: all of them)"),
    ("torch.unbind(x)", "torch.unbind: dimension 0 is the batch axis"),
    ("torch.split(x, 2)", ".split: dimension 0 is the batch axis"),
    ("F.linear(x[1:], x)", "F.linear with a weight or bias computed from the batch"),
    ("F.conv2d(x, self.w, stride=s)", "F.conv2d: stride=s: translated when it is an integer literal or a tuple of 2"),
])
def test_what_one_example_cannot_compute_is_an_error_naming_it(call, message):
    # (HEAD's LSTM keeps the module per example: one that can be batched is, tests/test_torch2jax_batched.py)
    r = translate_source(HEAD + call + "\n", "net.py", PACK)
    errors = [f.message for f in r.findings if f.severity is Severity.ERROR]
    assert len(errors) == 1 and message in errors[0], r.findings
    assert call in r.output, r.output  # left as written
