"""``layer.trainable = False`` on a layer translated as a Lazy module (nn.LazyLinear before its first call):
torch's requires_grad_ raises ValueError on its parameters until they are materialized, so the translation sets
each parameter's requires_grad instead (training.py, _LazyFreeze); checked by a training step."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SRC = '''
import keras
from keras import layers

frozen = layers.Dense(4, activation="tanh")
frozen.trainable = False
model = keras.Sequential([layers.Input((3,)), frozen, layers.Dense(1)])
param = 0.5  # a name of the file's own: the loop's name must not clobber it
'''


def test_a_frozen_lazy_layer_keeps_its_weights_through_an_optimizer_step():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError):  # why: requires_grad_ on a Lazy module before its first call (torch 2.13)
        torch.nn.LazyLinear(4).requires_grad_(False)
    r = translate_source(textwrap.dedent(SRC).lstrip(), "frozen.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    assert "frozen = nn.LazyLinear(4)" in r.output or "nn.LazyLinear(4)" in r.output
    assert "for param1 in frozen.parameters():\n    param1.requires_grad = False\n" in r.output, r.output
    assert "requires_grad_" not in r.output
    ns: dict = {}
    exec(compile(r.output, "frozen_torch.py", "exec"), ns)
    model, frozen = ns["model"], ns["frozen"]
    assert ns["param"] == 0.5
    torch.manual_seed(0)
    x, t = torch.randn(8, 3), torch.randn(8, 1)
    model(x)  # the first call materializes the Lazy parameters: the flag set before stays
    assert [p.requires_grad for p in frozen.parameters()] == [False, False]
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    loss = ((model(x) - t) ** 2).mean()
    loss.backward()
    opt.step()
    after = dict(model.named_parameters())
    frozen_keys = {k for k in before if any(after[k] is p for p in frozen.parameters())}
    assert len(frozen_keys) == 2
    for k in before:
        if k in frozen_keys:
            torch.testing.assert_close(after[k].detach(), before[k], rtol=0, atol=0)
        else:
            assert not torch.allclose(after[k].detach(), before[k]), k
    again = translate_source(r.output, "frozen.py")
    assert again.output == r.output
