"""fwport torch2jax: random draws in a module's methods at call time (a VAE's ``torch.randn_like``).

PyTorch draws from a global generator; the translation draws from a key of the call: the drawing method
takes ``*, key``, ``__call__`` (required: the draw happens in inference too) splits its key for each
consumer (a dropout, a drawing method, a draw of its own), the written train_step hands one key per example,
and an evaluation call passes keys from the key in scope; with none in scope, an error. Never a name of the
script around the class (the module-level root key it happened to find before).
"""
from __future__ import annotations

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from helpers import error_findings as errors, needs
from runners import python

needs_jax = needs("jax", "equinox")

VAE = '''\
import torch
import torch.nn.functional as F
from torch import nn


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 5)
        self.fc21 = nn.Linear(5, 3)
        self.fc22 = nn.Linear(5, 3)
        self.drop = nn.Dropout(0.5)
        self.fc3 = nn.Linear(3, 6)

    def encode(self, x):
        h = F.relu(self.fc1(x))
        return self.fc21(h), self.fc22(h)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def forward(self, x):
        mu, logvar = self.encode(self.drop(x))
        z = self.reparameterize(mu, logvar) + 0.1 * torch.randn(3)
        return self.fc3(z), mu, logvar


torch.manual_seed(0)
model = VAE()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def fit(data):
    model.train()
    for _ in range(2):
        optimizer.zero_grad()
        recon, mu, logvar = model(data)
        loss = ((recon - data) ** 2).sum() - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss.backward()
        optimizer.step()


def evaluate(data):
    model.eval()
    with torch.no_grad():
        recon, mu, logvar = model(data)
    return recon
'''


def t2j(text: str):
    return translate_source(text, "vae.py", "torch2jax")


def test_a_draw_in_a_method_takes_the_key_of_the_call_split_per_consumer():
    r = t2j(VAE)
    assert not errors(r), r.findings
    out = r.output
    assert "    def reparameterize(self, mu, logvar, *, key):\n" in out
    assert "    def encode(self, x):\n" in out  # draws nothing: no key
    assert ("    def __call__(self, x, *, key):\n"  # required: the draws happen in inference too
            "        key1, key2, key3 = jax.random.split(key, 3)\n"
            "        mu, logvar = self.encode(self.drop(x, key=key1))\n"
            "        z = self.reparameterize(mu, logvar, key=key2) + 0.1 * jax.random.normal(key3, 3)\n") in out, out
    # the train step hands one key per example, split per step; evaluation passes keys from the root key
    assert "recon, mu, logvar = jax.vmap(model)(data, key=jax.random.split(key, data.shape[0]))\n" in out
    assert out.count("key=jax.random.split(key, data.shape[0])") == 2, out
    assert "key, step_key = jax.random.split(key)\n" in out
    said = [f for f in r.findings if f.code == "key-added" and "in its forward" in f.message]
    # evaluate() reads the module's root key: the same numbers at each call, a warning says what to write
    assert any("the same at every call" in f.message and f.severity is Severity.WARNING and f.line == 48
               for f in said), said


def test_a_draw_whose_key_cannot_be_plumbed_is_an_error_not_an_outer_name():
    r = t2j(VAE.replace("torch.manual_seed(0)\n", ""))  # no root key anywhere: the train_step has none to split
    errs = {f.line: f.message for f in errors(r)}
    assert sorted(errs) == [36, 38], r.findings  # the loop (its train_step and the call)
    assert "no key is in scope" in errs[38] and "no key of its own" in errs[36]
    assert "jax.vmap(model)(data)\n" in r.output  # left without a key: an error says so
    # evaluate(): keys.py makes its root key (the file draws and nothing seeds it) and splits it for the call
    assert ("    key = jax.random.key(0)  # fwport: PyTorch drew from its global generator here; seed fixed at 0\n"
            "    model = eqx.nn.inference_mode(model, True)\n"
            "    key, subkey = jax.random.split(key)\n"
            "    recon, mu, logvar = jax.vmap(model)(data, key=jax.random.split(subkey, data.shape[0]))\n") in r.output


def test_a_module_that_only_drops_out_keeps_an_optional_key():
    r = t2j(VAE.replace("        eps = torch.randn_like(std)\n", "        eps = std\n")
            .replace(" + 0.1 * torch.randn(3)", ""))
    assert "    def __call__(self, x, *, key=None):\n" in r.output
    assert "    def reparameterize(self, mu, logvar):\n" in r.output
    assert "jax.vmap(model)(data)\n" in r.output  # inference needs no key


_RUN = '''
import sys
sys.modules["torch"] = None
import jax, jax.numpy as jnp, equinox as eqx, numpy as np
ns = {"__name__": "vae"}
exec(open(sys.argv[1]).read().split("\\n\\nkey = jax.random.key(")[0], ns)
model = eqx.nn.inference_mode(ns["VAE"](key=jax.random.key(1)))
x = jax.random.normal(jax.random.key(2), (4, 6))
keys = jax.random.split(jax.random.key(3), 4)
recon, mu, logvar = jax.vmap(model)(x, key=keys)
again = jax.vmap(model)(x, key=keys)[0]
other = jax.vmap(model)(x, key=jax.random.split(jax.random.key(4), 4))[0]
def expected(xi, k):  # what PyTorch computes, with the draws of the split keys
    k1, k2, k3 = jax.random.split(k, 3)
    m, lv = model.encode(xi)
    z = m + jax.random.normal(k2, (3,)) * jnp.exp(0.5 * lv) + 0.1 * jax.random.normal(k3, (3,))
    return model.fc3(z)
want = jnp.stack([expected(x[i], keys[i]) for i in range(4)])
print(float(jnp.max(jnp.abs(recon - want))), float(jnp.max(jnp.abs(recon - again))), float(jnp.max(jnp.abs(recon - other))))
'''


@needs_jax
def test_the_translated_draws_use_the_keys_given_one_per_example(tmp_path):
    path = tmp_path / "vae_t.py"
    path.write_text(t2j(VAE).output, encoding="utf-8")
    p = python("-c", _RUN, path, side="jax", timeout=300, env={"JAX_PLATFORMS": "cpu"})
    assert p.returncode == 0, p.stderr[-3000:]
    err, same, differ = map(float, p.stdout.split())
    assert err < 1e-6 and same == 0.0 and differ > 1e-3, p.stdout


OTHER_DRAWS = '''\
import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def noise(self, h):
        return h + torch.rand(4) + torch.randint(0, 5, (4,)) + torch.randperm(4)

    def forward(self, x):
        h = self.noise(self.fc(x))
        e = torch.empty(4).normal_()
        return h + e
'''


def test_other_draws_take_the_same_path_and_an_in_place_fill_is_an_error():
    r = t2j(OTHER_DRAWS)
    assert ("    def noise(self, h, *, key):\n        key1, key2, key3 = jax.random.split(key, 3)\n"
            "        return h + jax.random.uniform(key1, 4) + jax.random.randint(key2, (4,), 0, 5) + "
            "jax.random.permutation(key3, 4)\n") in r.output, r.output
    assert "        h = self.noise(self.fc(x), key=key1)\n" in r.output
    # a fill of a fresh tensor is the draw building it (fills.py: tests/test_torch2jax_fresh_fills.py)
    assert "        e = jax.random.normal(key2, 4)\n" in r.output and not errors(r), r.findings
    # a fill of a tensor a name holds: an error
    r = t2j(OTHER_DRAWS.replace("e = torch.empty(4).normal_()", "e = torch.empty(4)\n        e.normal_()"))
    errs = errors(r)
    assert [(f.line, f.code) for f in errs] == [(16, "unsupported-construct")], r.findings
    assert ".normal_() fills a tensor in place" in errs[0].message


NESTED = '''\
import torch
from torch import nn


class Sampler(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) + torch.randn_like(x)


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = Sampler()
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(self.s(x))
'''


def test_a_module_of_the_file_drawing_at_call_time_gets_a_key_from_its_holder():
    r = t2j(NESTED)
    assert not errors(r), r.findings
    assert "    def __call__(self, x, *, key):\n        return self.fc(x) + jax.random.normal(key, x.shape, x.dtype)\n" \
        in r.output
    assert ("    def __call__(self, x, *, key):\n        key1, key2 = jax.random.split(key)\n"
            "        return self.drop(self.s(x, key=key1), key=key2)\n") in r.output, r.output


# --- the model's methods called from the script around the class ---------------------------------------------

SCRIPT = VAE.split("\n\ntorch.manual_seed(0)")[0].replace("        self.drop = nn.Dropout(0.5)\n", "") \
    .replace("self.encode(self.drop(x))", "self.encode(x)") + '''

    def noise(self, n):
        out = []
        for _ in range(n):
            out.append(torch.randn(3))
        return torch.stack(out)


torch.manual_seed(0)
model = VAE()


def encode_all(m, x):
    return m.encode(x)


def sample(m, x):
    mu, logvar = m.encode(x)
    return m.reparameterize(mu, logvar)


def run(net, x):
    return net(x)[0]


x = torch.rand(5, 6)
mu, logvar = model.encode(x)
z = model.reparameterize(mu, logvar)
noise = model.noise(4)
h = encode_all(model, x)
s = sample(model, x)
y = run(model, x)
'''


def test_methods_called_outside_the_class_are_vmapped_and_keyed():
    r = t2j(SCRIPT)
    assert not errors(r), r.findings
    out = r.output
    assert "    return jax.vmap(m.encode)(x)\n" in out  # a function given the model (every caller passes one)
    assert "    return jax.vmap(m.reparameterize)(mu, logvar, key=jax.random.split(key, mu.shape[0]))\n" in out
    assert "    return jax.vmap(net)(x, key=jax.random.split(key, x.shape[0]))[0]\n" in out
    assert "mu, logvar = jax.vmap(model.encode)(x)\n" in out
    # the seeded scope's key split for the statement first: a new key at each call (keys.py's _SeededDraws)
    assert ("key, subkey = jax.random.split(key)\n"
            "z = jax.vmap(model.reparameterize)(mu, logvar, key=jax.random.split(subkey, mu.shape[0]))\n") in out
    assert "noise = model.noise(4, key=key)\n" in out  # a method seeing whole arrays: one key, not vmapped
    # a draw in a loop: a new key each iteration, as PyTorch's generator moves on
    assert ("        for _ in range(n):\n            key, draw_key = jax.random.split(key)\n"
            "            out.append(jax.random.normal(draw_key, 3))\n") in out, out


def test_a_drawing_method_called_without_a_key_in_scope_is_an_error():
    r = t2j(SCRIPT.replace("torch.manual_seed(0)\n", ""))
    lines = SCRIPT.replace("torch.manual_seed(0)\n", "").splitlines()
    # the script's own draw (x = torch.rand(...)) has no key either: keys.py makes a root key for it, with a warning
    (own,) = [f for f in r.findings if f.severity is Severity.WARNING and "root key" in f.message]
    assert lines[own.line - 1].startswith("x = torch.rand(")
    calls = errors(r)
    errs = sorted((f.line, f.message.split(":")[0]) for f in calls)
    # keys.py makes the module's root key (the script draws, nothing seeds it): each call of a method drawing per
    # example takes a split of it, and a function of the file calling one takes `*, key` from its callers
    out = r.output
    assert ("key, subkey = jax.random.split(key)\n"
            "z = jax.vmap(model.reparameterize)(mu, logvar, key=jax.random.split(subkey, mu.shape[0]))\n") in out, out
    assert "def run(net, x, *, key):\n    return jax.vmap(net)(x, key=jax.random.split(key, x.shape[0]))[0]\n" in out
    assert "key, subkey = jax.random.split(key)\ny = run(model, x, key=subkey)\n" in out
    # a method seeing whole arrays (one key, not a split per example) is still refused
    want = [i + 1 for i, ln in enumerate(lines) if "model.noise(4)" in ln]
    assert [ln for ln, _ in errs] == want, (errs, want)
    assert all("no key is in scope" in f.message for f in calls), calls
    # a model of unknown class calling a method that draws: said, not left without a key
    r = t2j(SCRIPT + "\nother = torch.load('m.pt')\nother.parameters()\nw = other.reparameterize(mu, logvar)\n")
    assert any("other.reparameterize" in e.message and "not known" in e.message for e in errors(r)), r.findings


_RUN_SCRIPT = '''
import sys, functools
import numpy as np
side, path, out = sys.argv[1:4]
ns = {"__name__": "script"}
if side == "torch":
    import torch
    exec(open(path).read(), ns)
    m = ns["model"]
    x = torch.as_tensor(np.linspace(-1, 1, 30, dtype=np.float32).reshape(5, 6))
    with torch.no_grad():
        mu, lv = ns["encode_all"](m, x)
        d = ns["decode_like"](m, mu) if "decode_like" in ns else mu
    np.savez(out, mu=mu.numpy(), lv=lv.numpy(), **{k: v.detach().numpy() for k, v in m.state_dict().items()})
else:
    sys.modules["torch"] = None
    import jax, jax.numpy as jnp, equinox as eqx
    exec(open(path).read(), ns)
    w = dict(np.load(sys.argv[4]))
    names = [k for k in w if k not in ("mu", "lv")]
    m = eqx.tree_at(lambda t: [functools.reduce(getattr, n.split("."), t) for n in names], ns["model"],
                    [jnp.asarray(w[n]) for n in names])
    x = jnp.asarray(np.linspace(-1, 1, 30, dtype=np.float32).reshape(5, 6))
    mu, lv = ns["encode_all"](m, x)
    keys = jax.random.split(jax.random.key(7), 5)
    z = jax.vmap(m.reparameterize)(mu, lv, key=keys)
    want = jnp.stack([mu[i] + jax.random.normal(keys[i], (3,)) * jnp.exp(0.5 * lv[i]) for i in range(5)])
    rows = m.noise(4, key=jax.random.key(3))
    np.savez(out, mu=np.asarray(mu), lv=np.asarray(lv), z=np.asarray(z), want=np.asarray(want), rows=np.asarray(rows))
'''


@needs("torch", "jax", "equinox")
def test_a_method_called_outside_the_class_computes_as_pytorch_on_the_batch(tmp_path):
    import numpy as np
    src = SCRIPT
    (tmp_path / "orig.py").write_text(src)
    (tmp_path / "jax.py").write_text(t2j(src).output)
    p = python("-c", _RUN_SCRIPT, "torch", tmp_path / "orig.py", tmp_path / "t.npz", side="torch", timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    p = python("-c", _RUN_SCRIPT, "jax", tmp_path / "jax.py", tmp_path / "j.npz", tmp_path / "t.npz", side="jax",
               timeout=300, env={"JAX_PLATFORMS": "cpu"})
    assert p.returncode == 0, p.stderr[-3000:]
    t, j = np.load(tmp_path / "t.npz"), np.load(tmp_path / "j.npz")
    np.testing.assert_allclose(j["mu"], t["mu"], rtol=1e-5, atol=1e-6)  # the batch through the per-example method
    np.testing.assert_allclose(j["lv"], t["lv"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(j["z"], j["want"], rtol=1e-6, atol=1e-6)  # one key per example
    rows = j["rows"]
    assert rows.shape == (4, 3) and len({tuple(r) for r in rows.round(6)}) == 4, rows  # new draws per iteration


NOISY = '''\
import torch
import torch.nn as nn

torch.manual_seed(0)


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x) + torch.randn_like(x)


model = Noisy()
x = torch.zeros(2, 3)
'''


def test_a_drawing_model_called_again_in_a_seeded_scope_takes_a_split_per_statement():
    """Two calls (or one in a loop) in the seeded scope: each statement splits the key first and the call's keys come
    from the split, so every call draws anew as PyTorch's (test_torch2jax_keys32 runs it). Where the scope already
    uses the name subkey the key is read as it is: then a warning where the scope calls the model again."""
    cases = {"a = model(x)\nb = model(x)\n": 2, "for _ in range(3):\n    b = model(x)\n": 1, "a = model(x)\n": 1}
    for tail, calls in cases.items():
        r = translate_source(NOISY + tail, "noisy.py", "torch2jax")
        assert not [f for f in r.findings if f.severity is Severity.WARNING and "key as it is" in f.message], r.findings
        assert r.output.count("key, subkey = jax.random.split(key)\n") == calls, r.output
        assert r.output.count("key=jax.random.split(subkey, x.shape[0])") == calls, r.output
        assert "key=jax.random.split(key, x.shape[0])" not in r.output
    for tail, warned in {"subkey = 1\na = model(x)\nb = model(x)\n": 2, "subkey = 1\na = model(x)\n": 0}.items():
        r = translate_source(NOISY + tail, "noisy.py", "torch2jax")
        said = [f for f in r.findings if f.severity is Severity.WARNING and "this scope's key as it is" in f.message]
        assert len(said) == warned, (tail, r.findings)
        assert "key=jax.random.split(key, x.shape[0])" in r.output
