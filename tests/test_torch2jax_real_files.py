"""torch2jax gaps of the real-world kit, each run against PyTorch on the same inputs and weights:

- a file seeding PyTorch in ``if __name__ == "__main__":`` and drawing at module level outside it (the kit's pt_pe_gcn
  with its spec appended): the root key bound in the guard does not reach the module's other statements, which run
  on import; the module takes a root key of its own above its first draw (keys.py, _SeededDraws);
- a model whose forward's view merges the batch axis into the sequence axis (word_language_model's
  ``decoded.view(-1, ntoken)`` of a sequence-first (L, N, V)): its call outside the classes merges the vmapped
  output's axes the same way, batch_merged(jax.vmap(model, ...)(x, h), (0, None)) (PyTorch's (L * N, V) rows);
- ``Net()(x)``: a module of the file built and called at once on a batch is vmapped (the kit's pt_gan_wgan_gp
  ``Discriminator()(model(x))``)."""
from __future__ import annotations

import textwrap
from pathlib import Path

from fwport.core.finding import Severity
from helpers import error_findings, needs, t2j
from runners import torch_and_jax

ROOT = Path(__file__).resolve().parent.parent
needs_frameworks = needs("jax", "torch", "equinox")

GUARDED_SEED = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return torch.tanh(self.fc(x))


if __name__ == "__main__":
    torch.manual_seed(1)
    net = Net()
    print(net(torch.randn(2, 4)).shape)


model = Net()
x = torch.randn(5, 4)
y = torch.rand(5, 3)
out = model(x)
'''


def test_a_seed_in_the_main_guard_does_not_key_the_modules_other_draws():
    r = t2j(GUARDED_SEED)
    assert not error_findings(r), r.findings
    out = r.output
    guard = out.index('if __name__ == "__main__":')
    root = out.index("key = jax.random.key(0)  # fwport: PyTorch drew from its global generator here")
    assert root < guard, out  # the module's own root key, above the guard (its code runs on import)
    assert "    key = jax.random.key(1)" in out  # the guard's seed, as before
    after = out[out.index("model = Net("):]
    assert "key, model_key = jax.random.split(key)" in out and "jax.random.normal(subkey, (5, 4))" in after
    assert any(f.code == "key-added" and f.severity is Severity.WARNING and "top-level code" in f.message
               for f in r.findings), r.findings


@needs_frameworks
def test_the_guarded_seed_file_imports_and_computes_pytorchs_model(tmp_path):
    """Imported (the guard not run), the translation binds every name the module's code reads; its model, given
    PyTorch's weights and input, computes PyTorch's output."""
    import numpy as np
    r = t2j(GUARDED_SEED)
    body = textwrap.dedent("""
    if side == "torch":
        w, b = ns["model"].fc.weight.detach().numpy(), ns["model"].fc.bias.detach().numpy()
        x = ns["x"].numpy()
        np.savez("torch_in.npz", w=w, b=b, x=x)
        out = ns["out"].detach().numpy()
        assert ns["y"].shape == (5, 3)
    else:
        z = np.load("torch_in.npz")
        own = ns["model"]
        # the translation's own module-level output: its model on its own input
        mine = np.tanh(np.asarray(ns["x"]) @ np.asarray(own.fc.weight).T + np.asarray(own.fc.bias))
        assert np.allclose(np.asarray(ns["out"]), mine, atol=1e-6) and ns["y"].shape == (5, 3)
        m = eqx.tree_at(lambda m: (m.fc.weight, m.fc.bias), own, (jnp.asarray(z["w"]), jnp.asarray(z["b"])))
        out = np.asarray(jax.vmap(m)(jnp.asarray(z["x"])))
    np.save(OUT, out)
    """)
    torch_out, jax_out = torch_and_jax(tmp_path, textwrap.dedent(GUARDED_SEED).lstrip("\n"), r.output, body)
    assert torch_out.shape == jax_out.shape == (5, 3)
    np.testing.assert_allclose(jax_out, torch_out, rtol=1e-6, atol=1e-6)


MERGED_VIEW = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class LM(nn.Module):
    def __init__(self, ntoken, ninp, nhid):
        super().__init__()
        self.ntoken = ntoken
        self.nhid = nhid
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, 1)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, input, hidden):
        emb = self.encoder(input)
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(1, bsz, self.nhid), weight.new_zeros(1, bsz, self.nhid))


def predict(model, x):
    return model(x, model.init_hidden(x.size(1)))


model = LM(11, 6, 5)
tokens = torch.zeros(7, 3, dtype=torch.long)
scores, hidden = predict(model, tokens)
'''


def test_a_merged_view_is_merged_at_the_call():
    r = t2j(MERGED_VIEW)
    assert not error_findings(r), r.findings
    assert "return batch_merged(jax.vmap(model, in_axes=(1, 1), out_axes=(1, 1))(x, model.init_hidden(x.shape[1])), " \
           "(0, None))" in r.output, r.output
    assert "def batch_merged(out, axes):" in r.output
    assert r.output.count("def batch_merged(") == 1
    again = t2j(r.output)  # translating the output again changes nothing
    assert again.output == r.output


@needs_frameworks
def test_a_merged_view_computes_pytorchs_rows(tmp_path):
    """PyTorch's (L * N, V) scores, the rows (step, example) pairs, and its final state (1, N, H), from the same
    weights (moved by the verifier's map) and tokens."""
    import numpy as np
    r = t2j(MERGED_VIEW)
    body = textwrap.dedent(f"""
    import json
    sys.path.insert(0, {str(ROOT / "fwport" / "verify")!r})
    tokens = np.random.default_rng(0).integers(0, 11, size=(7, 3))
    if side == "torch":
        torch.manual_seed(0)
        model = ns["LM"](11, 6, 5)
        from torch_source_side import _mapped_modules
        np.savez("state.npz", **{{k: v.detach().numpy() for k, v in model.state_dict().items()}})
        json.dump(_mapped_modules(model), open("modules.json", "w"))
        scores, (h, c) = ns["predict"](model, torch.tensor(tokens))
        scores, h, c = scores.detach().numpy(), h.detach().numpy(), c.detach().numpy()
    else:
        from jax_side import load_state
        model = ns["LM"](11, 6, 5, key=jax.random.PRNGKey(1))
        model, problems = load_state(model, dict(np.load("state.npz")), eqx, jnp, json.load(open("modules.json")))
        assert not problems, problems
        scores, (h, c) = ns["predict"](model, jnp.asarray(tokens))
        scores, h, c = np.asarray(scores), np.asarray(h), np.asarray(c)
    assert scores.shape == (21, 11) and h.shape == c.shape == (1, 3, 5), (scores.shape, h.shape)
    np.save(OUT, np.concatenate([scores.ravel(), h.ravel(), c.ravel()]))
    """)
    torch_out, jax_out = torch_and_jax(tmp_path, textwrap.dedent(MERGED_VIEW).lstrip("\n"), r.output, body)
    np.testing.assert_allclose(jax_out, torch_out, rtol=1e-9, atol=1e-9)


BUILT_CALL = '''
import torch
import torch.nn as nn


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 2)
        nn.init.constant_(self.fc.weight, 0.5)
        nn.init.constant_(self.fc.bias, -0.25)

    def forward(self, img):
        return torch.tanh(self.fc(img.view(img.shape[0], -1)))


x = torch.arange(24.0).reshape(4, 2, 3) / 10 - 1
y = Critic()(x)
'''


def test_a_module_built_and_called_at_once_is_vmapped():
    r = t2j(BUILT_CALL)
    assert not error_findings(r), r.findings
    assert "y = jax.vmap(Critic(key=jax.random.key(0)))(x)" in r.output, r.output


@needs_frameworks
def test_a_module_built_and_called_at_once_computes_pytorchs_output(tmp_path):
    """The module-level value itself (the weights fixed by the init calls): PyTorch's (4, 2) rows."""
    import numpy as np
    r = t2j(BUILT_CALL)
    body = "np.save(OUT, np.asarray(ns['y'].detach().numpy() if side == 'torch' else ns['y']))\n"
    torch_out, jax_out = torch_and_jax(tmp_path, textwrap.dedent(BUILT_CALL).lstrip("\n"), r.output, body)
    assert torch_out.shape == jax_out.shape == (4, 2)
    np.testing.assert_allclose(jax_out, torch_out, rtol=1e-6, atol=1e-6)


PENALTY = '''
import numpy as np
import torch
import torch.nn as nn
import torch.autograd as autograd

cuda = True if torch.cuda.is_available() else False
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 3)
        self.fc2 = nn.Linear(3, 1)
        nn.init.constant_(self.fc1.weight, 0.3)
        nn.init.constant_(self.fc1.bias, -0.1)
        nn.init.constant_(self.fc2.weight, 0.7)
        nn.init.constant_(self.fc2.bias, 0.05)

    def forward(self, img):
        return self.fc2(torch.tanh(self.fc1(img.view(img.shape[0], -1))))


def compute_gradient_penalty(D, real_samples, fake_samples, alpha):
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = D(interpolates)
    fake = Tensor(real_samples.shape[0], 1).fill_(1.0)
    gradients = autograd.grad(outputs=d_interpolates, inputs=interpolates, grad_outputs=fake, create_graph=True,
                              retain_graph=True, only_inputs=True)[0]
    gradients = gradients.view(gradients.size(0), -1)
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()


import types; cuda = False; Tensor = torch.FloatTensor
real = torch.arange(24.0).reshape(4, 2, 3) / 7
alpha = Tensor(np.linspace(0.1, 0.9, 4).reshape(4, 1, 1))
critic = Critic()
gp = compute_gradient_penalty(critic, real.data, (torch.ones(4, 2, 3) * 0.3).data, alpha)
'''


def test_an_alias_rebound_on_a_line_of_several_statements_and_data_of_tensors():
    """``cuda = False; Tensor = torch.FloatTensor`` (the alias bound again among other statements of one line) is the
    alias's dtype, as on a line of its own (it was left: a residue error); ``.data`` of a name bound only to
    tensors, or of a tensor a torch function makes, is the array itself (a jax array has no .data)."""
    r = t2j(PENALTY)
    assert not error_findings(r), r.findings
    assert "import types; cuda = False; Tensor = jnp.float32" in r.output, r.output
    assert "gp = compute_gradient_penalty(critic, real, (jnp.ones((4, 2, 3)) * 0.3), alpha)" in r.output, r.output
    assert ".data" not in r.output.split("import types")[1]


@needs_frameworks
def test_the_gradient_penalty_computes_pytorchs_value(tmp_path):
    """torch.autograd.grad(create_graph=True) of the critic at the interpolates: jax.vmap(jax.grad(...)), the same
    penalty as PyTorch's, and its gradient with respect to the real samples too (create_graph: differentiable)."""
    import numpy as np
    r = t2j(PENALTY)
    body = textwrap.dedent("""
    if side == "torch":
        real = ns["real"].clone().requires_grad_(True)
        gp = ns["compute_gradient_penalty"](ns["Critic"](), real, torch.ones(4, 2, 3) * 0.3, ns["alpha"])
        (g,) = torch.autograd.grad(gp, real)
        out = np.concatenate([[float(ns["gp"]), float(gp)], g.numpy().ravel()])
    else:
        critic = ns["Critic"](key=jax.random.key(0))
        f = lambda real: ns["compute_gradient_penalty"](critic, real, jnp.ones((4, 2, 3)) * 0.3, ns["alpha"])
        gp, g = jax.value_and_grad(f)(jnp.asarray(ns["real"]))
        out = np.concatenate([[float(ns["gp"]), float(gp)], np.asarray(g).ravel()])
    np.save(OUT, out)
    """)
    torch_out, jax_out = torch_and_jax(tmp_path, textwrap.dedent(PENALTY).lstrip("\n"), r.output, body)
    assert abs(torch_out[0]) > 1e-3 and np.abs(torch_out[2:]).max() > 1e-6  # a penalty and a gradient that count
    np.testing.assert_allclose(jax_out, torch_out, rtol=1e-6, atol=1e-7)


TRAINING_CALL = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 64)
        nn.init.constant_(self.fc.weight, 0.25)
        nn.init.constant_(self.fc.bias, 0.5)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x))


def evaluate(model, x):
    model.eval()
    with torch.no_grad():
        return model(x)


model = Net()
x = torch.rand(3, 4)
out = model(x)
'''


def test_a_functions_eval_does_not_put_the_modules_model_in_inference():
    """``model.eval()`` inside a function (run when it is called, on its own argument) does not make the module's
    own call of its model an inference one: PyTorch's model is in training mode there, its dropout draws, and the
    call takes a key (it was called without one: 'Dropout requires a key' at run time); where the file draws nothing
    else, the module takes a root key of its own for it (seed fixed at 0, a warning says so)."""
    r = t2j(TRAINING_CALL)
    assert not error_findings(r), r.findings
    assert "key, subkey = jax.random.split(key)\nout = jax.vmap(model)(x, key=jax.random.split(subkey, x.shape[0]))" \
        in r.output, r.output
    r = t2j(TRAINING_CALL.replace("torch.rand(3, 4)", "torch.ones(3, 4)"))
    assert not error_findings(r), r.findings
    assert "key = jax.random.key(0)" in r.output and \
        "out = jax.vmap(model)(x, key=jax.random.split(subkey, x.shape[0]))" in r.output, r.output
    assert any("seed fixed at 0" in f.message or "root key made above its first draw" in f.message
               for f in r.findings if f.severity.name == "WARNING"), r.findings


@needs_frameworks
def test_the_training_call_drops_as_pytorchs_dropout(tmp_path):
    """PyTorch's inference output is 0.25 * sum(x) + 0.5 per unit (the constant weights); the translation's training
    call gives 0 or twice that for its own x (inverted dropout), both kinds present."""
    import numpy as np
    r = t2j(TRAINING_CALL)
    body = ("y = ns['evaluate'](ns['model'], ns['x']).numpy() if side == 'torch' else np.asarray(ns['out'])\n"
            "np.save(OUT, np.concatenate([np.asarray(ns['x']), y], axis=1))\n")
    torch_out, jax_out = torch_and_jax(tmp_path, textwrap.dedent(TRAINING_CALL).lstrip("\n"), r.output, body)
    assert torch_out.shape == jax_out.shape == (3, 68)
    ref = lambda x: 0.25 * x.sum(axis=1, keepdims=True) + 0.5  # noqa: E731
    np.testing.assert_allclose(torch_out[:, 4:], np.broadcast_to(ref(torch_out[:, :4]), (3, 64)), rtol=1e-6)
    out, want = jax_out[:, 4:], np.broadcast_to(2 * ref(jax_out[:, :4]), (3, 64))
    dropped = np.isclose(out, 0.0)
    np.testing.assert_allclose(out[~dropped], want[~dropped], rtol=1e-6)
    assert 0 < dropped.sum() < dropped.size



SEEDED_IN_MAIN = TRAINING_CALL + """

def main():
    torch.manual_seed(1)
    print(evaluate(Net(), torch.rand(2, 4)))


if __name__ == "__main__":
    main()
"""


@needs_frameworks
def test_a_module_level_call_of_a_file_seeding_only_in_main_takes_the_modules_root_key(tmp_path):
    """pytorch/examples' mnist seeds torch in main() and draws nothing else at module level but a notebook's
    `out = model(x)` (its dropout in training mode): main's seeded key does not reach it (main runs only as a
    script), so the module's top-level draws take a root key of the module's, and the model call a split of it
    (it was an error, 'no key is in scope here'); the translation's call drops as PyTorch's dropout does."""
    import numpy as np
    r = t2j(SEEDED_IN_MAIN)
    assert not error_findings(r), r.findings
    assert "key = jax.random.key(0)" in r.output and \
        "out = jax.vmap(model)(x, key=jax.random.split(subkey, x.shape[0]))" in r.output, r.output
    body = ("y = ns['evaluate'](ns['model'], ns['x']).numpy() if side == 'torch' else np.asarray(ns['out'])\n"
            "np.save(OUT, np.concatenate([np.asarray(ns['x']), y], axis=1))\n")
    torch_out, jax_out = torch_and_jax(tmp_path, textwrap.dedent(SEEDED_IN_MAIN).lstrip("\n"), r.output, body)
    assert torch_out.shape == jax_out.shape == (3, 68)
    out, want = jax_out[:, 4:], np.broadcast_to(2 * (0.25 * jax_out[:, :4].sum(axis=1, keepdims=True) + 0.5), (3, 64))
    dropped = np.isclose(out, 0.0)
    np.testing.assert_allclose(out[~dropped], want[~dropped], rtol=1e-6)
    assert 0 < dropped.sum() < dropped.size

MERGED_TRAINED = MERGED_VIEW.replace("scores, hidden = predict(model, tokens)\n", """targets = torch.ones(7, 3, dtype=torch.long)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    optimizer.zero_grad()
    scores, _ = model(tokens, model.init_hidden(3))
    loss = F.nll_loss(scores, targets.view(-1))
    loss.backward()
    optimizer.step()
""")


def test_a_merged_view_in_a_train_step_reads_the_helper_as_a_global(tmp_path):
    """The train_step a loop becomes calls batch_merged as the module's function (not an argument it is given), and
    the loss reads PyTorch's (L * N, V) scores against the (L * N,) targets: the translation runs."""
    from runners import python
    r = t2j(MERGED_TRAINED)
    assert not error_findings(r), r.findings
    out = r.output
    step = out[out.index("def train_step("):]
    assert "batch_merged" not in step[:step.index(":")], step[:200]
    assert "batch_merged(jax.vmap(model, in_axes=(1, 1), out_axes=(1, 1))(tokens, model.init_hidden(3)), (0, None))" \
        in step, step
    (tmp_path / "lm.py").write_text(out + "\nprint('LOSS', float(loss))\n")
    p = python("-c", "import sys, runpy; sys.modules['torch'] = None; runpy.run_path(sys.argv[1])", tmp_path / "lm.py",
               side="jax", timeout=300)
    assert p.returncode == 0 and "LOSS" in p.stdout, p.stderr[-2000:]
