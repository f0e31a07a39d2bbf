"""torch2jax: a module-level function re-initialising layers, given to ``model.apply`` (DCGAN, PyTorch-GAN's
weights_init_normal), selecting the layers by class name or isinstance. The translation is run under JAX
(PyTorch hidden) and its drawn weights compared with what PyTorch draws: the same distribution (mean, std),
the same constants, the layers it leaves alone left alone."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import printed_json

pytest.importorskip("torch")
pytest.importorskip("jax")

SOURCE = '''
import torch
import torch.nn as nn


def weights_init_normal(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight.data, 0.0, 0.02)
        if hasattr(m, "bias") and m.bias is not None:
            torch.nn.init.constant_(m.bias.data, 0.0)
    elif classname.find("BatchNorm2d") != -1:
        torch.nn.init.normal_(m.weight.data, 1.0, 0.02)
        torch.nn.init.constant_(m.bias.data, 0.0)


def weights_init(m):
    if isinstance(m, nn.Linear):
        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        nn.init.zeros_(m.bias)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 96, 3)
        self.up = nn.ConvTranspose2d(96, 64, 4, stride=2, bias=False)
        self.bn = nn.BatchNorm2d(512)
        self.fc = nn.Linear(256, 128)

    def forward(self, x):
        return self.fc(x)


def build():
    model = Net()
    model.apply(weights_init_normal)
    return model


def build_linear():
    model = Net()
    model.apply(weights_init)
    return model
'''

_STATS = r'''
import json, sys, runpy
import numpy as np

def stats(conv_w, conv_b, up_w, bn_w, bn_b, fc_w, fc_b):
    a = lambda x: np.asarray(x, dtype=np.float64)
    return {"conv": [a(conv_w).mean(), a(conv_w).std()], "conv_bias": float(np.abs(a(conv_b)).max()),
            "up": [a(up_w).mean(), a(up_w).std()], "bn": [a(bn_w).mean(), a(bn_w).std()],
            "bn_bias": float(np.abs(a(bn_b)).max()), "fc": [a(fc_w).mean(), a(fc_w).std(), float(np.abs(a(fc_w)).max())],
            "fc_bias": float(np.abs(a(fc_b)).max())}

if sys.argv[1] == "torch":
    import torch
    torch.manual_seed(0)
    ns = runpy.run_path(sys.argv[2])
    out = []
    for build in ("build", "build_linear"):
        m = ns[build]()
        out.append(stats(*(t.detach().numpy() for t in (m.conv.weight, m.conv.bias, m.up.weight, m.bn.weight,
                                                         m.bn.bias, m.fc.weight, m.fc.bias))))
else:
    sys.modules["torch"] = None  # the translation must not need PyTorch
    import jax
    ns = runpy.run_path(sys.argv[2])
    out = []
    for build in ("build", "build_linear"):
        m = ns[build]()
        if isinstance(m, tuple):
            m = m[0]
        assert m.up.bias is None
        out.append(stats(m.conv.weight, m.conv.bias, m.up.weight, m.bn.weight, m.bn.bias, m.fc.weight, m.fc.bias))
print(json.dumps(out, default=float))
'''


def _run(*args: str) -> list:
    return printed_json(_STATS, *args)


@pytest.fixture(scope="module")
def translated():
    return translate_source(SOURCE, "m.py", pack="torch2jax")


def test_the_init_functions_and_their_apply_are_translated(translated):
    assert [f for f in translated.findings if f.severity == Severity.ERROR] == []
    out = translated.output
    assert "def weights_init_normal(m, *, key):" in out and "def weights_init(m, *, key):" in out
    assert "if isinstance(m, (eqx.nn.Conv, eqx.nn.ConvTranspose)):" in out
    assert "elif isinstance(m, eqx.nn.BatchNorm):" in out and "if isinstance(m, eqx.nn.Linear):" in out
    assert "m = eqx.tree_at(lambda m: m.weight, m, 0.02 * jax.random.normal(key, m.weight.shape))" in out
    assert "model = init_layers(model, weights_init_normal, key=jax.random.key(0))" in out
    assert ".data" not in out and "import torch" not in out
    warnings = [f.message for f in translated.findings if f.severity == Severity.WARNING]
    assert any("BatchNorm1d and BatchNorm3d layers are too" in w for w in warnings)


def test_the_drawn_weights_match_pytorch(translated, tmp_path):
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(SOURCE)
    out.write_text(translated.output)
    tr, jx = _run("torch", str(src)), _run("jax", str(out))
    for t, j in zip(tr, jx):
        # normal_(0, 0.02) (apply(weights_init_normal)), or as built (apply(weights_init); a ConvTranspose as built
        # has Equinox's own fans, not PyTorch's, which the conv-transpose rule's finding says)
        for k in ("conv", "up") if t is tr[0] else ("conv",):
            assert j[k][0] == pytest.approx(t[k][0], abs=0.002)
            assert j[k][1] == pytest.approx(t[k][1], rel=0.05)
        assert j["conv_bias"] == t["conv_bias"] == 0.0 or (j["conv_bias"] > 0 and t["conv_bias"] > 0)
        assert j["bn"][0] == pytest.approx(t["bn"][0], abs=0.005)  # normal_(1, 0.02) or ones
        assert j["bn"][1] == pytest.approx(t["bn"][1], abs=0.004)
        assert j["bn_bias"] == t["bn_bias"] == 0.0
        assert j["fc"][1] == pytest.approx(t["fc"][1], rel=0.05)  # left as built, or kaiming_normal_(fan_out)
        assert j["fc_bias"] == pytest.approx(t["fc_bias"], abs=0.01)
    assert jx[0]["conv"][1] == pytest.approx(0.02, rel=0.05) and jx[0]["conv_bias"] == 0.0
    assert jx[1]["fc"][1] == pytest.approx((2 / 128) ** 0.5, rel=0.05) and jx[1]["fc_bias"] == 0.0


@pytest.mark.parametrize("body, message", [
    ("class ConvBlock(nn.Module):\n    pass\n", "also selects the module class ConvBlock"),
    ("layer = nn.BatchNorm1d(4)\n", "which the BatchNorm1d layers this file builds are too"),
])
def test_a_selection_equinox_cannot_make_is_an_error(body, message):
    src = textwrap.dedent('''
        import torch.nn as nn


        def init(m):
            classname = m.__class__.__name__
            if classname.find("Conv") != -1 or classname.find("BatchNorm2d") != -1:
                nn.init.normal_(m.weight.data, 0.0, 0.02)


        ''') + body
    r = translate_source(src, "m.py", pack="torch2jax")
    errors = [f.message for f in r.findings if f.severity == Severity.ERROR]
    assert len(errors) == 1 and message in errors[0], errors
    assert "def init(m):" in r.output


def test_an_init_function_read_otherwise_is_left_to_its_findings():
    src = ("import torch.nn as nn\n\n\ndef init(m):\n    if isinstance(m, nn.Linear):\n"
           "        nn.init.zeros_(m.weight)\n\n\nlayer = nn.Linear(2, 3)\ninit(layer)\n")
    r = translate_source(src, "m.py", pack="torch2jax")
    assert "def init(m):" in r.output and "init_layers" not in r.output


LOCAL = '''
import torch
from torch import nn


class Film(nn.Module):
    def __init__(self, dim):
        super().__init__()
        proj = nn.Linear(dim, dim * 2)
        nn.init.normal_(proj.weight, std=0.5)
        nn.init.zeros_(proj.bias)
        self.to_gamma_beta = nn.Sequential(proj, nn.ReLU())
        out_batch_norm = nn.BatchNorm1d(dim)
        nn.init.zeros_(out_batch_norm.weight)
        self.out = nn.Sequential(nn.Linear(dim, dim), out_batch_norm)

    def forward(self, x):
        return self.to_gamma_beta(x)
'''

_LOCAL_STATS = r'''
import json, sys, runpy
import numpy as np
if sys.argv[1] == "torch":
    import torch
    m = runpy.run_path(sys.argv[2])["Film"](256)
    w, b, bn = (t.detach().numpy() for t in (m.to_gamma_beta[0].weight, m.to_gamma_beta[0].bias, m.out[1].weight))
else:
    sys.modules["torch"] = None
    import jax
    m = runpy.run_path(sys.argv[2])["Film"](256, key=jax.random.key(0))
    w, b, bn = m.to_gamma_beta.layers[0].weight, m.to_gamma_beta.layers[0].bias, m.out.layers[1].weight
w, b, bn = (np.asarray(a, dtype=np.float64) for a in (w, b, bn))
print(json.dumps([w.mean(), w.std(), float(np.abs(b).max()), float(np.abs(bn).max())], default=float))
'''


def test_a_layer_bound_to_a_name_is_reinitialised_before_it_is_held(tmp_path):
    r = translate_source(LOCAL, "m.py", pack="torch2jax")
    assert [f for f in r.findings if f.severity == Severity.ERROR] == []
    assert "proj = eqx.tree_at(lambda m: m.weight, proj, 0.5 * jax.random.normal(" in r.output
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(LOCAL)
    out.write_text(r.output)
    res = []
    for side, path in (("torch", src), ("jax", out)):
        res.append(printed_json(_LOCAL_STATS, side, path))
    (tm, ts, tb, tbn), (jm, js, jb, jbn) = res
    assert jm == pytest.approx(tm, abs=0.01) and js == pytest.approx(ts, rel=0.03) and js == pytest.approx(0.5, rel=0.03)
    assert tb == jb == 0.0 and tbn == jbn == 0.0


def test_a_layer_reinitialised_after_a_container_holds_it_is_moved_up(tmp_path):
    # (once an error) the Sequential only holds the layer in between: the re-initialisation moves up, right
    # after the layer is built, which gives the Sequential PyTorch's arrays (modules._hoisted_inits)
    src = LOCAL.replace("        nn.init.zeros_(out_batch_norm.weight)\n        self.out = nn.Sequential(nn.Linear(dim, dim), out_batch_norm)\n",
                        "        self.out = nn.Sequential(nn.Linear(dim, dim), out_batch_norm)\n        nn.init.zeros_(out_batch_norm.weight)\n")
    r = translate_source(src, "m.py", pack="torch2jax")
    assert [f for f in r.findings if f.severity == Severity.ERROR] == []
    assert r.output.index("out_batch_norm = eqx.tree_at(lambda m: m.weight, out_batch_norm, jnp.zeros(") \
        < r.output.index("self.out = eqx.nn.Sequential(")
    src_path, out = tmp_path / "src.py", tmp_path / "out.py"
    src_path.write_text(src)
    out.write_text(r.output)
    (*_, tbn), (*_, jbn) = (printed_json(_LOCAL_STATS, side, path) for side, path in (("torch", src_path), ("jax", out)))
    assert tbn == jbn == 0.0  # the BatchNorm's weight, zero on both sides


def test_a_layer_whose_arrays_are_read_before_its_reinitialisation_is_an_error():
    src = LOCAL.replace("        nn.init.zeros_(out_batch_norm.weight)\n        self.out = nn.Sequential(nn.Linear(dim, dim), out_batch_norm)\n",
                        "        self.out = nn.Sequential(nn.Linear(dim, dim), out_batch_norm)\n"
                        "        self.start = out_batch_norm.weight * 1.0\n        nn.init.zeros_(out_batch_norm.weight)\n")
    r = translate_source(src, "m.py", pack="torch2jax")
    errors = [f.message for f in r.findings if f.severity == Severity.ERROR]
    assert len(errors) == 1 and "re-initialises the layer `out_batch_norm` after it is used" in errors[0]


APPLIED = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 64, 3)
        self.bn = nn.BatchNorm2d(1024)
        self.apply(self._init)

    def _init(self, m):
        if isinstance(m, nn.Conv2d):
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias, 0.5)

    def forward(self, x):
        return self.bn(self.conv(x))
'''

_APPLIED_STATS = r'''
import json, sys, runpy
import numpy as np
if sys.argv[1] == "torch":
    import torch
    m = runpy.run_path(sys.argv[2])["Net"]()
    arrays = [t.detach().numpy() for t in (m.conv.weight, m.bn.weight, m.bn.bias)]
else:
    sys.modules["torch"] = None
    import jax, equinox as eqx
    m, state = eqx.nn.make_with_state(runpy.run_path(sys.argv[2])["Net"])(key=jax.random.key(0))
    arrays = [m.conv.weight, m.bn.weight, m.bn.bias]
print(json.dumps([[float(np.mean(a)), float(np.std(a))] for a in arrays]))
'''


def test_self_apply_tests_equinox_classes_and_reads_data_as_the_array(tmp_path):
    r = translate_source(APPLIED, "m.py", pack="torch2jax")
    assert [f for f in r.findings if f.severity == Severity.ERROR] == []
    assert "lambda m: isinstance(m, (eqx.nn.Conv2d, eqx.nn.BatchNorm)), self._init" in r.output
    assert "elif isinstance(m, eqx.nn.BatchNorm):" in r.output and ".data" not in r.output
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(APPLIED)
    out.write_text(r.output)
    res = []
    for side, path in (("torch", src), ("jax", out)):
        res.append(printed_json(_APPLIED_STATS, side, path))
    for (tm, ts), (jm, js) in zip(*res):
        assert jm == pytest.approx(tm, abs=0.004) and js == pytest.approx(ts, abs=0.002)
    assert res[1][2] == [0.5, 0.0]


STATIC = '''
import torch
import torch.nn as nn


def exists(val):
    return val is not None


class Net(nn.Module):
    def __init__(self, seq_pool=True):
        super().__init__()
        self.fc = nn.Linear(256, 512)
        self.norm = nn.LayerNorm(256)
        if not seq_pool:
            self.cls = nn.Parameter(torch.zeros(1, 256))
        else:
            self.pool = nn.Linear(256, 512)
        self.apply(self.init_weight)

    def forward(self, x):
        return self.fc(self.norm(x))

    @staticmethod
    def init_weight(m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=.02)
            if isinstance(m, nn.Linear) and exists(m.bias):
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.LayerNorm):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)
'''

_STATIC_STATS = r'''
import json, sys, runpy
import numpy as np
if sys.argv[1] == "torch":
    import torch
    m = runpy.run_path(sys.argv[2])["Net"]()
    arrays = [t.detach().numpy() for t in (m.fc.weight, m.fc.bias, m.norm.weight, m.norm.bias, m.pool.weight,
                                           m.pool.bias)]
else:
    sys.modules["torch"] = None
    import jax
    m = runpy.run_path(sys.argv[2])["Net"](key=jax.random.key(0))
    arrays = [np.asarray(a) for a in (m.fc.weight, m.fc.bias, m.norm.weight, m.norm.bias, m.pool.weight, m.pool.bias)]
print(json.dumps([[str(a.dtype), float(a.mean()), float(a.std()), float(np.abs(a).max())] for a in arrays]))
'''


def test_a_static_method_given_to_self_apply_and_its_constant_fills(tmp_path):
    """vit-pytorch's cct: ``self.apply(self.init_weight)``, init_weight a staticmethod (``def init_weight(m)``) testing
    ``exists(m.bias)`` (a module-level function that only tests its argument) and filling biases with
    ``nn.init.constant_(m.bias, 0)``, over every layer __init__ builds (under an ``else:`` too): the fills keep the
    array's float dtype (an int ``jnp.full`` would make the bias an int32 array, which no optimizer trains)."""
    r = translate_source(STATIC, "m.py", pack="torch2jax")
    assert [f for f in r.findings if f.severity == Severity.ERROR] == []
    assert "    @staticmethod\n    def init_weight(m, *, key):" in r.output
    assert "isinstance(m, (eqx.nn.Linear, eqx.nn.LayerNorm)), self.init_weight" in r.output
    assert "m = eqx.tree_at(lambda m: m.bias, m, jnp.full_like(m.bias, 0))" in r.output
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(STATIC)
    out.write_text(r.output)
    res = []
    for side, path in (("torch", src), ("jax", out)):
        res.append(printed_json(_STATIC_STATS, side, path))
    for (td, tm, ts, _), (jd, jm, js, _) in zip(*res):
        assert jd == td == "float32"
        assert jm == pytest.approx(tm, abs=0.002) and js == pytest.approx(ts, abs=0.002)
    fills = [[0.0, 0.0, 0.0], [1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    assert [r[1:] for r in res[1][1:4]] == [r[1:] for r in res[0][1:4]] == fills  # exactly
    # the layer built under `else:` is re-initialised too (else Equinox's default init: std 0.036, a bias)
    assert res[1][5][1:] == res[0][5][1:] == [0.0, 0.0, 0.0]


def test_a_function_the_init_method_calls_that_does_more_than_test_is_refused():
    """Only a module-level function returning a test of its argument without calls is taken as a test."""
    src = STATIC.replace("    return val is not None", "    return val.numel() > 0")
    r = translate_source(src, "m.py", pack="torch2jax")
    assert any("self.apply(fn) runs fn on every submodule" in f.message for f in r.findings
               if f.severity == Severity.ERROR)


MODULES = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 96, 3)
        self.bn = nn.BatchNorm2d(96)
        self.fc = nn.Linear(96, 10)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_uniform_(m.weight, a=1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 0.5)
                nn.init.constant_(m.bias, 0.25)

    def forward(self, x):
        return self.fc(self.bn(self.conv(x)).mean(dim=(2, 3)))
'''

_MODULES_STATS = r'''
import json, sys, runpy
import numpy as np
if sys.argv[1] == "torch":
    import torch
    m = runpy.run_path(sys.argv[2])["Net"]()
    arrays = [t.detach().numpy() for t in (m.conv.weight, m.conv.bias, m.bn.weight, m.bn.bias, m.fc.weight)]
else:
    sys.modules["torch"] = None
    import jax, equinox as eqx
    m, state = eqx.nn.make_with_state(runpy.run_path(sys.argv[2])["Net"])(key=jax.random.key(0))
    arrays = [np.asarray(a) for a in (m.conv.weight, m.conv.bias, m.bn.weight, m.bn.bias, m.fc.weight)]
print(json.dumps([[str(a.dtype), float(a.mean()), float(a.std()), float(np.abs(a).max())] for a in arrays]))
'''


def test_a_loop_over_self_modules_reinitialises_as_pytorch_does(tmp_path):
    """DETR's mask head: ``for m in self.modules(): if isinstance(m, nn.Conv2d): nn.init.kaiming_uniform_(m.weight,
    a=1); nn.init.constant_(m.bias, 0)``: the body becomes a local function given to reinit_layers; the layers it
    does not test (the Linear) keep their initialisation."""
    r = translate_source(MODULES, "m.py", pack="torch2jax")
    assert [f for f in r.findings if f.severity == Severity.ERROR] == []
    assert "def init_layer(m, *, key):" in r.output and "for m in" not in r.output
    assert "lambda m: isinstance(m, (eqx.nn.Conv2d, eqx.nn.BatchNorm)), init_layer, key=" in r.output
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(MODULES)
    out.write_text(r.output)
    res = []
    for side, path in (("torch", src), ("jax", out)):
        res.append(printed_json(_MODULES_STATS, side, path))
    (tw, tb, tg, tbb, tf), (jw, jb, jg, jbb, jf) = res
    # kaiming_uniform_(a=1): U(-sqrt(3 / fan_in), ...) over 55296 weights; the Linear's own init over 960
    for t, j, mean, rel in ((tw, jw, 0.001, 0.02), (tf, jf, 0.01, 0.1)):
        assert j[0] == t[0] == "float32"
        assert j[1] == pytest.approx(t[1], abs=mean) and j[2] == pytest.approx(t[2], rel=rel)
        assert j[3] == pytest.approx(t[3], rel=0.01)
    assert jb[1:] == tb[1:] == [0.0, 0.0, 0.0] and jb[0] == "float32"
    assert jg[1:] == tg[1:] == [0.5, 0.0, 0.5] and jbb[1:] == tbb[1:] == [0.25, 0.0, 0.25]


def test_a_loop_over_self_modules_doing_more_is_refused():
    src = MODULES.replace("                nn.init.constant_(m.bias, 0)\n",
                          "                nn.init.constant_(m.bias, 0)\n                print(m)\n")
    r = translate_source(src, "m.py", pack="torch2jax")
    assert any("a loop over self.modules() re-initialising layers is translated when" in f.message
               for f in r.findings if f.severity == Severity.ERROR)
