"""torch2jax BatchNorm's approximate warning: what it says of the running statistics (what eval mode normalises
with) is checked against PyTorch and the translation, run in separate processes on the same batches: after n
training steps PyTorch's running mean is (1 - (1 - m)^n) times Equinox's debiased one, and its running variance
(1 - m)^n + N/(N-1) * ((1 - (1 - m)^n) * Equinox's - (1 - m)^n) (N the values per channel in a batch)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import printed_json

pytest.importorskip("torch")
pytest.importorskip("jax")

_SRC = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(3, momentum=0.2)

    def forward(self, x):
        return self.bn(x)
"""

_RUN = """import importlib.util, json, sys
import numpy as np
side, path, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
if side == "jax":
    sys.modules["torch"] = None
spec = importlib.util.spec_from_file_location("m", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
rng = np.random.default_rng(0)
xs = [(rng.standard_normal((8, 3)) * 2 + 1).astype(np.float32) for _ in range(steps)]
if side == "torch":
    import torch
    net = mod.Net()
    for x in xs:
        net(torch.from_numpy(x))
    mean, var = net.bn.running_mean.numpy(), net.bn.running_var.numpy()
else:
    import equinox as eqx, jax, jax.numpy as jnp
    try:
        net, state = eqx.nn.make_with_state(mod.Net)()
    except TypeError:
        net, state = eqx.nn.make_with_state(mod.Net)(key=jax.random.key(0))
    f = jax.vmap(net, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
    for x in xs:
        _, state = f(jnp.asarray(x), state)
    bn = net.bn
    n = int(state.get(bn.batch_counter))
    hidden_mean, hidden_var = state.get(bn.batch_state_index)
    scale = 1 - bn.momentum ** n  # Equinox's debiasing in inference mode
    mean, var = np.asarray(hidden_mean) / scale, np.asarray(hidden_var) / scale
print(json.dumps(dict(mean=np.asarray(mean).tolist(), var=np.asarray(var).tolist())))
"""


def _warning():
    r = translate_source(_SRC, "x.py", pack="torch2jax")
    found = [f for f in r.findings if f.severity is Severity.WARNING and "BatchNorm running statistics" in f.message]
    assert len(found) == 1, r.findings
    return r.output, found[0].message


def test_the_warning_gives_the_numbers_for_its_momentum():
    _, message = _warning()
    assert "(1 - 0.8^n) times Equinox's" in message
    assert "0.2 times after one step" in message
    assert f"within 1% only after {math.ceil(math.log(0.01) / math.log(0.8))} steps" in message  # 21
    assert "0.8^n + N/(N-1) * ((1 - 0.8^n) * Equinox's - 0.8^n)" in message


@pytest.mark.parametrize("steps", [1, 5, 21])
def test_the_running_statistics_differ_as_the_warning_says(tmp_path, steps):
    text, _ = _warning()
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(_SRC)
    out.write_text(text)
    res = {}
    for side, path in (("torch", src), ("jax", out)):
        res[side] = {k: np.asarray(v) for k, v in printed_json(_RUN, side, path, steps).items()}
    m, n, per_channel = 0.2, steps, 8
    factor = 1 - (1 - m) ** n
    np.testing.assert_allclose(res["torch"]["mean"], factor * res["jax"]["mean"], rtol=1e-4)
    start = (1 - m) ** n  # (both start from variance 1)
    np.testing.assert_allclose(res["torch"]["var"], start + per_channel / (per_channel - 1)
                               * (factor * res["jax"]["var"] - start), rtol=1e-4)
    if n == 1:  # not a slight difference: a tenth, here a fifth, of Equinox's after one step
        assert np.all(np.abs(res["torch"]["mean"] - res["jax"]["mean"]) > 0.1 * np.abs(res["jax"]["mean"]))
