"""torch2jax: a function given to ``model.apply`` that re-initialises layers with the tensor methods
(``m.weight.data.normal_(0.0, 0.02)``, ``m.bias.data.fill_(0)``, ``.zero_()``, ``.uniform_(a, b)``, the older
DCGAN spelling) is translated as its ``nn.init.normal_ / constant_ / zeros_ / uniform_`` twin is: the same function
written. The translation is run under JAX (PyTorch hidden) and compared with PyTorch's weights: constants exactly,
draws by mean and standard deviation over many values."""
from __future__ import annotations

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import printed_json

pytest.importorskip("torch")
pytest.importorskip("jax")

METHODS = '''
import torch
import torch.nn as nn


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(0.0, 0.02)
        m.bias.data.fill_(0.25)
    elif classname.find("BatchNorm") != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.zero_()
    elif classname.find("Linear") != -1:
        m.weight.data.uniform_(-0.1, 0.1)
        m.bias.data.fill_(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 96, 3)
        self.bn = nn.BatchNorm2d(512)
        self.fc = nn.Linear(256, 128)

    def forward(self, x):
        return self.fc(x)


def build():
    model = Net()
    model.apply(weights_init)
    return model
'''

INITS = (METHODS.replace("m.weight.data.normal_(0.0, 0.02)", "nn.init.normal_(m.weight, 0.0, 0.02)")
         .replace("m.bias.data.fill_(0.25)", "nn.init.constant_(m.bias, 0.25)")
         .replace("m.weight.data.normal_(1.0, 0.02)", "nn.init.normal_(m.weight, 1.0, 0.02)")
         .replace("m.bias.data.zero_()", "nn.init.zeros_(m.bias)")
         .replace("m.weight.data.uniform_(-0.1, 0.1)", "nn.init.uniform_(m.weight, -0.1, 0.1)")
         .replace("m.bias.data.fill_(0)", "nn.init.constant_(m.bias, 0)"))

_STATS = r'''
import json, sys, runpy
import numpy as np

if sys.argv[1] == "torch":
    import torch
    torch.manual_seed(0)
    m = runpy.run_path(sys.argv[2])["build"]()
    arrays = [t.detach().numpy() for t in (m.conv.weight, m.conv.bias, m.bn.weight, m.bn.bias, m.fc.weight, m.fc.bias)]
else:
    sys.modules["torch"] = None  # the translation must not need PyTorch
    m = runpy.run_path(sys.argv[2])["build"]()
    if isinstance(m, tuple):
        m = m[0]
    arrays = [np.asarray(t) for t in (m.conv.weight, m.conv.bias, m.bn.weight, m.bn.bias, m.fc.weight, m.fc.bias)]
a = [np.asarray(x, dtype=np.float64).ravel() for x in arrays]  # (Equinox keeps a conv bias (C, 1, 1))
print(json.dumps({"conv": [a[0].mean(), a[0].std(), a[0].size], "conv_bias": sorted(set(a[1].tolist())),
                  "bn": [a[2].mean(), a[2].std()], "bn_bias": sorted(set(a[3].tolist())),
                  "fc": [a[4].mean(), a[4].std(), a[4].min(), a[4].max()], "fc_bias": sorted(set(a[5].tolist()))},
                 default=float))
'''


def _function(text: str) -> str:
    return text[text.index("def weights_init"):text.index("class Net")]


def test_the_tensor_methods_translate_as_their_init_functions_do():
    methods = translate_source(METHODS, "m.py", pack="torch2jax")
    twin = translate_source(INITS, "m.py", pack="torch2jax")
    assert not [f for f in methods.findings if f.severity is Severity.ERROR], methods.findings
    assert _function(methods.output) == _function(twin.output)
    out = methods.output
    assert "m = eqx.tree_at(lambda m: m.weight, m, 0.02 * jax.random.normal(key, m.weight.shape))\n" in out
    assert "m = eqx.tree_at(lambda m: m.bias, m, jnp.zeros(m.bias.shape))\n" in out
    assert "model = init_layers(model, weights_init, key=jax.random.key(0))" in out
    assert ".data" not in out and "import torch" not in out


def test_the_reinitialised_weights_match_pytorch(tmp_path):
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(METHODS)
    out.write_text(translate_source(METHODS, "m.py", pack="torch2jax").output)
    t, j = printed_json(_STATS, "torch", str(src)), printed_json(_STATS, "jax", str(out))
    # the constants exactly
    assert j["conv_bias"] == t["conv_bias"] == [0.25]
    assert j["bn_bias"] == t["bn_bias"] == [0.0]
    assert j["fc_bias"] == t["fc_bias"] == [0.0]
    # the draws: normal(0, 0.02) over 55,296 values, normal(1, 0.02) over 512, uniform(-0.1, 0.1) over 32,768
    assert t["conv"][2] == j["conv"][2] == 64 * 96 * 9
    assert j["conv"][0] == pytest.approx(t["conv"][0], abs=5e-4) and j["conv"][1] == pytest.approx(0.02, rel=0.02)
    assert t["conv"][1] == pytest.approx(0.02, rel=0.02)
    assert j["bn"][0] == pytest.approx(t["bn"][0], abs=0.005) and j["bn"][1] == pytest.approx(t["bn"][1], abs=0.004)
    assert j["fc"][0] == pytest.approx(t["fc"][0], abs=0.002) and j["fc"][1] == pytest.approx(0.2 / 12 ** 0.5, rel=0.02)
    assert -0.1 <= j["fc"][2] < -0.099 and 0.099 < j["fc"][3] <= 0.1


LOOP = '''
import torch
import torch.nn as nn


def initialize_weights(net):
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            m.weight.data.normal_(0, 0.02)
            m.bias.data.zero_()
        elif isinstance(m, nn.Linear):
            m.weight.data.normal_(0, 0.05)
            m.bias.data.fill_(0.5)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 96, 3)
        self.model = nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 64))

        initialize_weights(self)

    def forward(self, x):
        return self.model(x)
'''

_LOOP_STATS = r'''
import json, sys, runpy
import numpy as np

if sys.argv[1] == "torch":
    import torch
    torch.manual_seed(0)
    m = runpy.run_path(sys.argv[2])["Net"]()
    arrays = [t.detach().numpy() for t in (m.conv.weight, m.conv.bias, m.model[0].weight, m.model[0].bias,
                                           m.model[2].weight, m.model[2].bias)]
else:
    sys.modules["torch"] = None
    import jax
    m = runpy.run_path(sys.argv[2])["Net"](key=jax.random.key(0))
    arrays = [np.asarray(t) for t in (m.conv.weight, m.conv.bias, m.model.layers[0].weight, m.model.layers[0].bias,
                                      m.model.layers[2].weight, m.model.layers[2].bias)]
a = [np.asarray(x, dtype=np.float64).ravel() for x in arrays]
print(json.dumps([[x.mean(), x.std(), sorted(set(x.tolist()))[:2]] for x in a], default=float))
'''


def test_a_function_looping_over_the_modules_it_is_given_is_written_into_init(tmp_path):
    """PyTorch-GAN's clustergan: ``initialize_weights(self)`` in __init__, a module-level loop over
    ``net.modules()`` → that loop in __init__ (reinit_layers over the fields built before it), the function gone."""
    r = translate_source(LOOP, "m.py", pack="torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "def initialize_weights" not in r.output and "initialize_weights(self)" not in r.output
    assert ('        self.conv, self.model = reinit_layers({"conv": self.conv, "model": self.model}, '
            'lambda m: isinstance(m, (eqx.nn.Conv2d, eqx.nn.Linear)), init_layer, key=key4)\n') in r.output
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(LOOP)
    out.write_text(r.output)
    t, j = printed_json(_LOOP_STATS, "torch", str(src)), printed_json(_LOOP_STATS, "jax", str(out))
    for (tm, ts, tc), (jm, js, jc), std in zip(t[::2], j[::2], (0.02, 0.05, 0.05)):  # the weights: drawn
        assert ts == pytest.approx(std, rel=0.05) and js == pytest.approx(std, rel=0.05)
        assert jm == pytest.approx(tm, abs=0.01)
    for (_, _, tc), (_, _, jc) in zip(t[1::2], j[1::2]):  # the biases: constants, exactly
        assert tc == jc
    assert [c for _, _, c in j[1::2]] == [[0.0], [0.5], [0.5]]
