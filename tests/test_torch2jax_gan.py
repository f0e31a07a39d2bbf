"""torch2jax GAN code (eriklindernoren PyTorch-GAN wgan_gp.py): a legacy tensor type alias (``Tensor =
torch.cuda.FloatTensor if cuda else torch.FloatTensor``) and the gradient penalty's torch.autograd.grad of the
critic with respect to its input. tests/data/torch_wgan_gp.py is translated, run with torch unimportable from
the same critic weights and inputs, and compared with PyTorch: the penalty and its gradient with respect to the
critic's weights (the double backward that create_graph=True asks for)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import printed_json, python

pytest.importorskip("torch")
pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parent.parent
GP = ROOT / "tests" / "data" / "torch_wgan_gp.py"

_RUN = """
import importlib.util, sys
import numpy as np
side, path, out = sys.argv[1:4]
if side == "jax":
    sys.modules["torch"] = None  # the translation must not need it
spec = importlib.util.spec_from_file_location("gp", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
rng = np.random.default_rng(0)
w1, b1 = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
w2, b2 = rng.standard_normal((1, 8)).astype(np.float32), rng.standard_normal(1).astype(np.float32)
real = rng.standard_normal((5, 1, 4, 4)).astype(np.float32)
fake = rng.standard_normal((5, 1, 4, 4)).astype(np.float32)
if side == "torch":
    import torch
    D = mod.discriminator
    with torch.no_grad():
        for layer, w, b in ((D.model[0], w1, b1), (D.model[2], w2, b2)):
            layer.weight.copy_(torch.from_numpy(w))
            layer.bias.copy_(torch.from_numpy(b))
    np.random.seed(0)
    gp = mod.critic_step(torch.from_numpy(real), torch.from_numpy(fake))
    gp.backward()
    res = dict(gp=gp.detach().numpy(), gw1=D.model[0].weight.grad.numpy(), gw2=D.model[2].weight.grad.numpy())
else:
    import equinox as eqx
    import jax.numpy as jnp
    D = mod.discriminator
    for i, w, b in ((0, w1, b1), (2, w2, b2)):
        D = eqx.tree_at(lambda m: (m.model.layers[i].weight, m.model.layers[i].bias), D, (jnp.asarray(w), jnp.asarray(b)))
    mod.discriminator = D
    np.random.seed(0)
    gp = mod.critic_step(jnp.asarray(real), jnp.asarray(fake))
    np.random.seed(0)
    g = eqx.filter_grad(lambda d: mod.compute_gradient_penalty(d, jnp.asarray(real), jnp.asarray(fake)))(D)
    res = dict(gp=np.asarray(gp), gw1=np.asarray(g.model.layers[0].weight), gw2=np.asarray(g.model.layers[2].weight))
np.savez(out, **res)
"""


def _translate(src: str) -> tuple[str, list]:
    r = translate_source(src, "x.py", pack="torch2jax")
    return r.output, r.findings


def test_gradient_penalty_and_type_alias_translate_to_what_a_jax_user_writes():
    text, findings = _translate(GP.read_text())
    assert not [f for f in findings if f.severity >= Severity.WARNING], findings
    assert "gradients = jax.vmap(jax.grad(lambda x: jnp.sum(D(x))))(interpolates)" in text
    assert "interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples))\n" in text  # requires_grad_ gone
    assert "d_interpolates" not in text and "fake =" not in text  # D(x) and the ones: nothing reads them
    assert "gradients = gradients.reshape(gradients.shape[0], -1)" in text
    assert "jnp.linalg.norm(gradients, ord=2, axis=1)" in text
    assert "alpha = jnp.asarray(np.random.random((real_samples.shape[0], 1, 1, 1)), dtype=jnp.float32)" in text
    assert "real = real_imgs.astype(jnp.float32)" in text
    assert "Tensor =" not in text and "import torch" not in text  # the alias goes with its last use


def test_type_alias_calls():
    src = ("import torch\nimport numpy as np\ncuda = torch.cuda.is_available()\n"
           "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
           "def f(n, imgs):\n    z = Tensor(np.random.normal(0, 1, (n, 8)))\n    ones = Tensor(n, 1).fill_(1.0)\n"
           "    e = Tensor(n, 2)\n    s = Tensor(n, *imgs.shape).fill_(0.0)\n    u = Tensor(n, *imgs.shape)\n"
           "    return z, ones, e, s, u, imgs.type(Tensor)\n")
    text, findings = _translate(src)
    assert not [f for f in findings if f.severity >= Severity.WARNING], findings
    assert "z = jnp.asarray(np.random.normal(0, 1, (n, 8)), dtype=jnp.float32)" in text
    assert "ones = jnp.full((n, 1), 1.0, dtype=jnp.float32)" in text
    assert "e = jnp.empty((n, 2), dtype=jnp.float32)" in text
    # unpacked sizes (PyTorch-GAN's `Tensor(imgs.shape[0], *discriminator.output_shape).fill_(1.0)`)
    assert "s = jnp.full((n, *imgs.shape), 0.0, dtype=jnp.float32)" in text
    assert "u = jnp.empty((n, *imgs.shape), dtype=jnp.float32)" in text
    assert "imgs.astype(jnp.float32)" in text and "Tensor" not in text


_ALIAS_TENSOR = ("import torch\nimport numpy as np\ncuda = torch.cuda.is_available()\n"
                 "Tensor = torch.cuda.FloatTensor if cuda else torch.Tensor\n"
                 "def f(n, imgs):\n    z = Tensor(np.random.normal(0, 1, (n, 8)))\n    ones = Tensor(n, 1).fill_(1.0)\n"
                 "    twos = Tensor(n, *imgs.shape).fill_(2.0)\n"
                 "    return z, ones, twos, imgs.type(Tensor)\n")

_RUN_ALIAS = """import importlib.util, sys
import numpy as np
side, path, out = sys.argv[1:4]
if side == "jax":
    sys.modules["torch"] = None
spec = importlib.util.spec_from_file_location("m", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
imgs = np.arange(6, dtype=np.int64).reshape(2, 3)
if side == "torch":
    import torch
    imgs = torch.from_numpy(imgs)
np.random.seed(0)
z, ones, twos, cast = mod.f(3, imgs)
np.savez(out, **{k: np.asarray(v) for k, v in dict(z=z, ones=ones, twos=twos, cast=cast).items()})
"""


def test_type_alias_with_torch_tensor_on_the_cpu_equals_pytorch(tmp_path):
    # PyTorch-GAN's `torch.cuda.FloatTensor if cuda else torch.Tensor`: torch.Tensor builds and casts to float32
    import numpy as np
    text, findings = _translate(_ALIAS_TENSOR)
    assert not [f for f in findings if f.severity >= Severity.WARNING], findings
    assert "Tensor" not in text and "torch" not in text, text
    src, out = tmp_path / "src.py", tmp_path / "out.py"
    src.write_text(_ALIAS_TENSOR)
    out.write_text(text)
    res = {}
    for side, path in (("torch", src), ("jax", out)):
        p = python("-c", _RUN_ALIAS, side, path, tmp_path / f"{side}.npz", side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        res[side] = dict(np.load(tmp_path / f"{side}.npz"))
    for k in ("z", "ones", "twos", "cast"):
        assert res["jax"][k].dtype == res["torch"][k].dtype == np.float32, k
        np.testing.assert_array_equal(res["jax"][k], res["torch"][k], err_msg=k)


def test_type_alias_with_torch_tensor_follows_a_changed_default_dtype():
    # torch.Tensor is the default dtype, which this file changes: not float32, so the alias stays refused
    src = _ALIAS_TENSOR.replace("import numpy as np\n", "import numpy as np\ntorch.set_default_dtype(torch.float64)\n")
    text, findings = _translate(src)
    assert "jnp.float32" not in text
    assert any(f.severity == Severity.ERROR for f in findings), findings


@pytest.mark.parametrize("body", [
    # the outputs are not a model's output: no function to differentiate
    "    o = x * 2\n    g = torch.autograd.grad(outputs=o, inputs=x, grad_outputs=torch.ones_like(o))[0]\n",
    # grad_outputs that are not ones: a weighted vector-Jacobian product
    "    o = D(x)\n    w = torch.randn_like(o)\n    g = torch.autograd.grad(outputs=o, inputs=x, grad_outputs=w)[0]\n",
])
def test_other_autograd_grad_calls_stay_errors(body):
    src = ("import torch\nfrom torch import nn\nD = nn.Linear(3, 1)\nopt = torch.optim.SGD(D.parameters(), lr=0.1)\n"
           f"def f(x):\n{body}    return g\n")
    text, findings = _translate(src)
    assert any(f.severity == Severity.ERROR and "torch.autograd.grad" in f.message for f in findings), findings


#: other spellings of the penalty (dualgan.py, stargan.py): numpy's ones as grad_outputs through the type alias; a
#: critic with two outputs, the penalty on the first
_GP_SPELLINGS = {
    "numpy_ones": [("fake = Variable(Tensor(real_samples.shape[0], 1).fill_(1.0), requires_grad=False)",
                    "fake = Variable(Tensor(np.ones(d_interpolates.shape)), requires_grad=False)")],
    "two_outputs": [("        return self.model(img_flat)\n", "        return self.model(img_flat), img_flat.sum(1)\n"),
                    ("    d_interpolates = D(interpolates)\n", "    d_interpolates, _ = D(interpolates)\n")],
}


@pytest.mark.parametrize("spelling", sorted(_GP_SPELLINGS))
def test_other_gradient_penalty_spellings_translate(spelling):
    src = GP.read_text()
    for old, new in _GP_SPELLINGS[spelling]:
        assert old in src
        src = src.replace(old, new)
    text, findings = _translate(src)
    assert not [f for f in findings if f.severity >= Severity.WARNING], findings
    picked = "[0]" if spelling == "two_outputs" else ""
    assert f"gradients = jax.vmap(jax.grad(lambda x: jnp.sum(D(x){picked})))(interpolates)" in text, text
    assert "d_interpolates" not in text and "fake =" not in text  # D(x) and the ones: nothing reads them


@pytest.mark.parametrize("spelling", ["data_file", *sorted(_GP_SPELLINGS)])
def test_gradient_penalty_and_its_gradient_equal_pytorch(tmp_path, spelling):
    import numpy as np
    src = GP.read_text()
    for old, new in _GP_SPELLINGS.get(spelling, []):
        src = src.replace(old, new)
    original = tmp_path / "gp.py"
    original.write_text(src)
    text, _ = _translate(src)
    jax_file = tmp_path / "gp_jax.py"
    jax_file.write_text(text)
    outs = {}
    for side, path in (("torch", original), ("jax", jax_file)):
        p = python("-c", _RUN, side, path, tmp_path / f"{side}.npz", side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        outs[side] = dict(np.load(tmp_path / f"{side}.npz"))
    assert float(outs["torch"]["gp"]) > 1e-3 and np.abs(outs["torch"]["gw1"]).max() > 1e-4  # not a vacuous zero
    for name in ("gp", "gw1", "gw2"):
        np.testing.assert_allclose(outs["jax"][name], outs["torch"][name], rtol=1e-5, atol=1e-6, err_msg=name)


_TWO = """import numpy as np
import torch
from torch import nn
from torch.autograd import Variable

G = nn.Linear(4, 6)
D = nn.Linear(6, 1)
optimizer_G = torch.optim.Adam(G.parameters(), lr=0.001)
optimizer_D = torch.optim.Adam(D.parameters(), lr=0.001)
for x in batches:
    real = Variable(x)
    optimizer_D.zero_grad()
    d_loss = -torch.mean(D(real.data)) + noise_term(x)
    d_loss.backward()
    optimizer_D.step()


def noise_term(x):
    return float(np.random.random()) * 0.0
"""


def test_two_optimizers_in_one_scope_get_a_state_and_a_step_each():
    text, findings = _translate(_TWO)
    # written alike, each optimizer still initialises its own model's state, under its own name
    assert "opt_state_G = optimizer_G.init(eqx.filter(G, eqx.is_array))" in text
    assert "opt_state_D = optimizer_D.init(eqx.filter(D, eqx.is_array))" in text
    assert "D, opt_state_D, d_loss = train_step_D(D, opt_state_D, real" in text
    assert "def train_step_D(D, opt_state, real" in text
    assert "real.data" not in text and "jax.vmap(D)(real)" in text  # a Variable's .data is the array itself
    # numpy's random numbers inside a jitted step would be drawn once, when it is traced: this step is not jitted
    assert any(f.severity == Severity.INFO and "without @eqx.filter_jit" in f.message for f in findings), findings
    assert "@eqx.filter_jit\ndef train_step_D" not in text and "def train_step_D(" in text


_ONE_LOSS_TWO_STEPS = """import torch
from torch import nn

D_A = nn.Linear(6, 1)
D_B = nn.Linear(6, 1)
optimizer_D_A = torch.optim.Adam(D_A.parameters(), lr=0.001)
optimizer_D_B = torch.optim.Adam(D_B.parameters(), lr=0.001)
for a, b in batches:
    optimizer_D_A.zero_grad()
    optimizer_D_B.zero_grad()
    D_loss = torch.mean(D_A(a)) + torch.mean(D_B(b))
    D_loss.backward()
    optimizer_D_A.step()
    optimizer_D_B.step()
"""


def test_one_backward_stepped_by_two_optimizers_is_one_train_step_over_both_models():
    """dualgan's critics: one loss's backward() feeds two optimizers' step(): one train_step differentiating the loss
    with respect to both models together, each updated by its own optimizer (tests/test_torch2jax_joint_steps.py
    trains it against PyTorch). Where the optimizers come from the caller (not created in the scope), the loop stays
    with an error."""
    text, findings = _translate(_ONE_LOSS_TWO_STEPS)
    assert not [f for f in findings if f.severity is Severity.ERROR], findings
    assert "    D_loss, (grads_D_A, grads_D_B) = eqx.filter_value_and_grad(loss_fn)((D_A, D_B))\n" in text, text
    assert "    D_loss.backward()\n" not in text
    given = _ONE_LOSS_TWO_STEPS.replace("for a, b in batches:\n", "def train(D_A, D_B, optimizer_D_A, optimizer_D_B, "
                                        "batches):\n    for a, b in batches:\n").replace("\n    ", "\n        ")
    given = given.replace("\n        for a, b", "\n    for a, b")
    text, findings = _translate(given)
    errs = [f for f in findings if f.severity is Severity.ERROR]
    assert any("optimizer_D_A.step(): optimizer_D_A is not created in this function" in f.message for f in errs), \
        findings
    assert "        D_loss.backward()\n" in text and "def train_step" not in text


_BLOCKS = """import torch.nn as nn


def block(i, o, normalize=True):
    layers = [nn.Linear(i, o)]
    if normalize:
        layers.append(nn.LayerNorm(o))
    layers += [nn.ReLU()]
    return layers


class Net(nn.Module):
    def __init__(self, flag):
        super().__init__()
        self.a = nn.Sequential(*block(4, 8, normalize=False), *block(8, 2))
        self.b = nn.Sequential(*block(4, 8, normalize=flag), nn.ReLU())

    def forward(self, x):
        return self.a(x)
"""


def test_a_layer_list_helper_is_written_out_where_its_ifs_are_decided():
    text, findings = _translate(_BLOCKS)
    # literal arguments: one flat Sequential, the normalize=False call without its LayerNorm
    assert ("self.a = eqx.nn.Sequential([eqx.nn.Linear(4, 8, key=key1), eqx.nn.Lambda(jax.nn.relu), "
            "eqx.nn.Linear(8, 2, key=key2), eqx.nn.LayerNorm(2), eqx.nn.Lambda(jax.nn.relu)])") in text, text
    # a condition not known where the model is built: the helper stays, taking a key, and the Sequential spreads
    # what it returns (checked against PyTorch in test_starred_varargs.py)
    assert not [f for f in findings if f.severity == Severity.ERROR], findings
    assert "def block(i, o, normalize=True, *, key):" in text
    assert "self.b = eqx.nn.Sequential([*block(4, 8, normalize=flag, key=key3), eqx.nn.Lambda(jax.nn.relu)])" in text


def test_an_unrolled_helper_that_nothing_else_calls_goes():
    text, findings = _translate(_BLOCKS.replace("        self.b = nn.Sequential(*block(4, 8, normalize=flag), nn.ReLU())\n", ""))
    assert "def block(" not in text and not [f for f in findings if f.severity == Severity.ERROR], findings


N_CRITIC = ROOT / "tests" / "data" / "torch_gan_n_critic.py"

_RUN_N_CRITIC = """import json, os, runpy, sys
import numpy as np
path, side = sys.argv[1:3]
rng = np.random.default_rng(0)
shapes = {"g0": (8, 4), "g3": (3, 8), "d0": (8, 3), "d2": (1, 8)}
init = {k: (rng.standard_normal(s) * 0.5, rng.standard_normal(s[0]) * 0.1) for k, s in shapes.items()}
data = [(rng.standard_normal((6, 3)), rng.standard_normal((6, 4))) for _ in range(5)]
prep = type(sys)("gan_prep")
if side == "torch":
    import torch
    def prepare(g, d):
        with torch.no_grad():
            for layer, k in ((g.model[0], "g0"), (g.model[3], "g3"), (d.model[0], "d0"), (d.model[2], "d2")):
                layer.weight.copy_(torch.tensor(init[k][0])); layer.bias.copy_(torch.tensor(init[k][1]))
        return g, d
    prep.batches = [(torch.tensor(r, dtype=torch.float32), torch.tensor(z, dtype=torch.float32)) for r, z in data]
    read = lambda m, i: m.model[i].weight.detach().numpy().tolist()
else:
    sys.modules["torch"] = None
    import equinox as eqx, jax.numpy as jnp
    def prepare(g, d):
        for m, i, k in ((0, 0, "g0"), (0, 3, "g3"), (1, 0, "d0"), (1, 2, "d2")):
            w, b = (jnp.asarray(v, jnp.float32) for v in init[k])
            if m == 0:
                g = eqx.tree_at(lambda t: (t.model.layers[i].weight, t.model.layers[i].bias), g, (w, b))
            else:
                d = eqx.tree_at(lambda t: (t.model.layers[i].weight, t.model.layers[i].bias), d, (w, b))
        return g, d
    prep.batches = [(jnp.asarray(r, jnp.float32), jnp.asarray(z, jnp.float32)) for r, z in data]
    read = lambda m, i: np.asarray(m.model.layers[i].weight).tolist()
prep.prepare = prepare
sys.modules["gan_prep"] = prep
g = runpy.run_path(path, run_name="__main__")
print(json.dumps(dict(g0=read(g["generator"], 0), g3=read(g["generator"], 3), d0=read(g["discriminator"], 0),
                      g_losses=g["g_losses"], last_fake=g["last_fake"])))
"""


def test_a_generator_step_inside_an_if_becomes_its_own_train_step():
    """The generator's zero_grad() before `if i % n_critic == 0:` and its loss, backward() and step() inside it:
    a train_step_G called in the if (zero_grad gone), the critic's train_step_D at the loop's level, BatchNorm's
    state threaded through the generator's step (a loss_fn parameter, returned), the critic an argument (not a
    global the jit keeps as traced), the generator's output read after the step returned (has_aux)."""
    text, findings = _translate(N_CRITIC.read_text())
    assert not [f for f in findings if f.severity is Severity.ERROR], findings
    assert ".zero_grad()\n" not in text and ".backward()" not in text and ".step()" not in text
    assert "def train_step_G(generator, opt_state, state, z, discriminator):\n    def loss_fn(generator, state):\n" in text
    assert "    (g_loss, (fake, state)), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(generator, state)\n" in text
    assert ("    if i % n_critic == 0:\n        generator, opt_state_G, g_loss, fake, state = "
            "train_step_G(generator, opt_state_G, state, z, discriminator)\n") in text, text
    assert "discriminator, opt_state_D, d_loss = train_step_D(discriminator, opt_state_D, real, fake)\n" in text


def test_the_generator_step_inside_an_if_trains_as_pytorch_does(tmp_path):
    """Five batches, the critic stepped at each and the generator at every second one (Adam both, BatchNorm in the
    generator), from the same weights: the translation (run with torch unimportable) gives PyTorch's weights, its
    generator losses and the generator output read after the last step."""
    import numpy as np
    text, _ = _translate(N_CRITIC.read_text())
    out = tmp_path / "out.py"
    out.write_text(text)
    results = []
    for path, side in ((N_CRITIC, "torch"), (out, "jax")):
        results.append(printed_json(_RUN_N_CRITIC, path, side, side=side))
    t, j = results
    assert len(t["g_losses"]) == 3 and len(j["g_losses"]) == 3  # i = 0, 2, 4
    for k in ("g0", "g3", "d0", "g_losses", "last_fake"):
        np.testing.assert_allclose(j[k], t[k], rtol=1e-4, atol=1e-5, err_msg=k)


WGAN_GP = ROOT / "tests" / "data" / "torch_wgan_gp_train.py"
_RUN_WGAN_GP = (_RUN_N_CRITIC.replace('shapes = {"g0": (8, 4), "g3": (3, 8), "d0": (8, 3), "d2": (1, 8)}',
                                     'shapes = {"g0": (8, 3), "g2": (4, 8), "d0": (8, 4), "d2": (1, 8)}')
                .replace("rng.standard_normal((6, 3)), rng.standard_normal((6, 4))",
                         "rng.standard_normal((6, 1, 2, 2)), rng.standard_normal((6, 3))")
                .replace('(g.model[3], "g3")', '(g.model[2], "g2")').replace('(0, 3, "g3")', '(0, 2, "g2")')
                .replace('g3=read(g["generator"], 3)', 'd2=read(g["discriminator"], 2)')
                .replace('last_fake=g["last_fake"]', 'd_losses=g["d_losses"]'))


#: the penalty's own backward() before the critic's step (its gradients added to the loss's), its grad_outputs
#: torch.ones_like of the critic's output
_TWO_BACKWARDS = [
    ("    fake = Variable(Tensor(real_samples.shape[0], 1).fill_(1.0), requires_grad=False)\n",
     "    fake = torch.ones_like(d_interpolates)\n"),
    ("    d_loss = -torch.mean(real_validity) + torch.mean(fake_validity) + lambda_gp * gradient_penalty\n"
     "    d_loss.backward()\n",
     "    d_loss = -torch.mean(real_validity) + torch.mean(fake_validity)\n    d_loss.backward()\n"
     "    gp = lambda_gp * gradient_penalty\n    gp.backward()\n"),
    ("    d_losses.append(d_loss.item())\n", "    d_losses.append(d_loss.item() + gp.item())\n"),
]


@pytest.mark.parametrize("variant", ["one_loss", "two_backwards"])
def test_a_critic_step_with_the_gradient_penalty_trains_as_pytorch_does(tmp_path, variant):
    """WGAN-GP's loop (tests/data/torch_wgan_gp_train.py): the critic's loss adds lambda_gp times the gradient
    penalty, whose interpolation weights numpy draws at every step, stepped by Adam at each of five batches, the
    generator at every second. The critic's step is one eqx.filter_value_and_grad of a loss_fn holding the penalty
    (jax.grad of the critic with respect to its input, inside the differentiated loss), not jitted: the weights
    drawn at each step in PyTorch's order from the same numpy seed. Losses and weights equal PyTorch's; the same
    step jitted (its weights drawn once, when traced) does not. two_backwards: the penalty's backward() apart,
    before the same step: its loss added to the critic's in the one loss_fn."""
    import numpy as np
    src = WGAN_GP.read_text()
    for old, new in _TWO_BACKWARDS if variant == "two_backwards" else []:
        assert old in src
        src = src.replace(old, new)
    original = tmp_path / "orig.py"
    original.write_text(src)
    text, findings = _translate(src)
    assert not [f for f in findings if f.severity is Severity.ERROR], findings
    assert "jax.vmap(jax.grad(lambda x: jnp.sum(D(x))))(interpolates)" in text
    assert "autograd.grad(" not in text and ".backward()" not in text and "d_interpolates" not in text
    if variant == "one_loss":
        assert "    d_loss, grads = eqx.filter_value_and_grad(loss_fn)(discriminator)\n" in text
    else:
        assert "        return d_loss + gp, (d_loss, gp)\n" in text, text
    out = tmp_path / "out.py"
    out.write_text(text)
    runs = [(original, "torch"), (out, "jax")]
    if variant == "one_loss":
        jitted = tmp_path / "jitted.py"
        jitted.write_text(text.replace("def train_step_D(", "@eqx.filter_jit\ndef train_step_D("))
        runs.append((jitted, "jax"))
    t, j, *k = (printed_json(_RUN_WGAN_GP, path, side, side=side) for path, side in runs)
    assert len(t["d_losses"]) == 5 and len(t["g_losses"]) == 3
    for name in ("d_losses", "g_losses", "d0", "d2", "g0"):
        np.testing.assert_allclose(j[name], t[name], rtol=1e-4, atol=1e-5, err_msg=name)
    if k:  # jitted, the step reuses the interpolation weights drawn when it was traced: its later losses are not PyTorch's
        assert np.abs(np.asarray(k[0]["d_losses"][1:]) - np.asarray(t["d_losses"][1:])).max() > 1e-3


TWO_BN = ROOT / "tests" / "data" / "torch_gan_two_batchnorm.py"
_RUN_TWO_BN = (_RUN_N_CRITIC.replace('"d2": (1, 8)', '"d3": (1, 8)').replace('(d.model[2], "d2")', '(d.model[3], "d3")')
               .replace('(1, 2, "d2")', '(1, 3, "d3")').replace('g_losses=g["g_losses"], last_fake=g["last_fake"]',
                                                                  'd3=read(g["discriminator"], 3), g_losses=g["g_losses"], '
                                                                  'd_losses=g["d_losses"]'))


def test_two_models_with_batchnorm_each_thread_their_own_state():
    """A generator and a discriminator that both keep BatchNorm's state: each its own state variable
    (generator_state, discriminator_state, never one `state` for both), the discriminator's calls inside the loss
    expressions moved to statements of their own, and both steps at the loop's level rewritten (the second one
    after the first's train_step call)."""
    text, findings = _translate(TWO_BN.read_text())
    assert not [f for f in findings if f.severity is Severity.ERROR], findings
    assert "generator, generator_state = eqx.nn.make_with_state(Generator)(" in text
    assert "discriminator, discriminator_state = eqx.nn.make_with_state(Discriminator)(" in text
    assert ".backward()" not in text and ".step()" not in text and ".zero_grad()" not in text
    assert not re.search(r"\bstate\b", text.split("\nadversarial_loss = ", 1)[1]), text  # (outside the classes)
    # the generator's step runs the discriminator in training mode too: its statistics move, threaded as PyTorch's
    assert ("discriminator_out, discriminator_state = jax.vmap(discriminator, axis_name=\"batch\", in_axes=(0, None), "
            "out_axes=(0, None))(gen_imgs, discriminator_state)\n") in text, text
    assert "        real_loss = adversarial_loss(discriminator_out2, valid)\n" in text
    assert ("discriminator, opt_state_D, d_loss, discriminator_state = train_step_D(discriminator, opt_state_D, "
            "discriminator_state, real, valid, gen_imgs, fake)\n") in text, text


def test_two_models_with_batchnorm_train_as_pytorch_does(tmp_path):
    """Five batches, the generator's and then the discriminator's Adam step at each (BatchNorm in both, batch
    statistics in training mode), from the same weights: the translation (torch unimportable) gives PyTorch's
    losses at every step and its weights after the last."""
    import numpy as np
    text, _ = _translate(TWO_BN.read_text())
    out = tmp_path / "out.py"
    out.write_text(text)
    results = []
    for path, side in ((TWO_BN, "torch"), (out, "jax")):
        results.append(printed_json(_RUN_TWO_BN, path, side, side=side))
    t, j = results
    assert len(t["g_losses"]) == len(j["d_losses"]) == 5
    for k in ("g0", "g3", "d0", "d3", "g_losses", "d_losses"):
        np.testing.assert_allclose(j[k], t[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_a_stateful_call_evaluated_maybe_never_stays_an_error_naming_its_own_state():
    # inside a conditional expression the call may not run: it is not moved, the error names the model's state
    src = TWO_BN.read_text().replace("real_loss = adversarial_loss(discriminator(real), valid)",
                                     "real_loss = adversarial_loss(discriminator(real) if i else real[:, :1], valid)")
    text, findings = _translate(src)
    errs = [f for f in findings if f.severity is Severity.ERROR]
    assert any("discriminator keeps a layer state" in f.message and "discriminator_state" in f.message for f in errs), errs


def test_a_second_step_not_of_the_supported_shape_is_an_error_on_its_line():
    # the discriminator's step without its zero_grad(): never left silently as PyTorch code after the first step
    src = TWO_BN.read_text().replace("    optimizer_D.zero_grad()\n", "")
    text, findings = _translate(src)
    errs = [f for f in findings if f.severity is Severity.ERROR and "d_loss.backward() follows another step" in f.message]
    assert len(errs) == 1 and src.splitlines()[errs[0].line - 1].strip() == "d_loss.backward()", findings
