"""torch2jax: training loops that step by hand instead of with an optimizer (pytorch/examples' regression and
word_language_model): ``model.zero_grad()``, the loss, ``backward()``, an optional ``clip_grad_norm_`` and
``for p in model.parameters(): p.data.add_(p.grad, alpha=-lr)`` (or ``add_(-lr * p.grad)``, ``sub_``, ``-=``).

They become a jitted ``sgd_step``: the loss in loss_fn, eqx.filter_value_and_grad, PyTorch's clipping and
``eqx.apply_updates`` of the update mapped over the gradients, the learning rate an argument read at each call.
Both sides run from the same weights and batches (the translation with torch unimportable, float64 both) and
the weights after the steps and the losses agree; the learning rate changes between steps, so a step that kept
the first one (a global the jit traced once) would not. Other hand-written updates stay errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python

pytest.importorskip("torch")
pytest.importorskip("jax")
pytest.importorskip("equinox")

ROOT = Path(__file__).resolve().parent.parent
MANUAL = ROOT / "tests" / "data" / "torch_manual_sgd.py"
REGRESSION = ROOT / "tests" / "data" / "torch_manual_sgd_regression.py"

_RUN = """import json, runpy, sys
import numpy as np
path, side, n_in = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(0)
data = [(rng.standard_normal((6, n_in)), rng.standard_normal((6, 1))) for _ in range(4)]
prep = type(sys)("sgd_prep")
if side == "torch":
    import torch
    torch.set_default_dtype(torch.float64)
    def layers(m):
        return [x for x in m.modules() if isinstance(x, torch.nn.Linear)]
    def prepare(m):
        with torch.no_grad():
            for layer in layers(m):
                layer.weight.copy_(torch.tensor(rng.standard_normal(tuple(layer.weight.shape))))
                layer.bias.copy_(torch.tensor(rng.standard_normal(tuple(layer.bias.shape))))
        return m
    prep.batches = [(torch.tensor(x), torch.tensor(y)) for x, y in data]
    read = lambda m: [w.detach().numpy().tolist() for layer in layers(m) for w in (layer.weight, layer.bias)]
else:
    sys.modules["torch"] = None
    import jax
    jax.config.update("jax_enable_x64", True)
    import equinox as eqx, jax.numpy as jnp
    is_linear = lambda x: isinstance(x, eqx.nn.Linear)
    def layers(m):
        return [x for x in jax.tree_util.tree_leaves(m, is_leaf=is_linear) if is_linear(x)]
    def prepare(m):
        for i, layer in enumerate(layers(m)):
            w = jnp.asarray(rng.standard_normal(layer.weight.shape))
            b = jnp.asarray(rng.standard_normal(layer.bias.shape))
            m = eqx.tree_at(lambda t: (layers(t)[i].weight, layers(t)[i].bias), m, (w, b))
        return m
    prep.batches = [(jnp.asarray(x), jnp.asarray(y)) for x, y in data]
    read = lambda m: [np.asarray(w).tolist() for layer in layers(m) for w in (layer.weight, layer.bias)]
prep.prepare = prepare
sys.modules["sgd_prep"] = prep
g = runpy.run_path(path, run_name="__main__")
model = g.get("model", g.get("fc"))
print(json.dumps(dict(weights=read(model), losses=[float(v) for v in g["losses"]])))
"""


def _translate(src: str) -> tuple[str, list]:
    r = translate_source(src, "x.py", pack="torch2jax")
    return r.output, r.findings


def _errors(findings) -> list:
    return [f for f in findings if f.severity is Severity.ERROR]


def _both(tmp_path, path: Path, n_in: int, text: str | None = None) -> tuple[dict, dict]:
    text = text if text is not None else _translate(path.read_text())[0]
    out = tmp_path / "out.py"
    out.write_text(text)
    results = []
    for p, side in ((path, "torch"), (out, "jax")):
        run = python("-c", _RUN, p, side, n_in, side=side, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        results.append(json.loads(run.stdout.strip().splitlines()[-1]))
    return results[0], results[1]


def _close(t: dict, j: dict) -> None:
    import numpy as np
    assert len(t["losses"]) == len(j["losses"]) == 4
    np.testing.assert_allclose(j["losses"], t["losses"], rtol=1e-9, atol=1e-12)
    for a, b in zip(t["weights"], j["weights"], strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)


def test_a_hand_written_sgd_step_becomes_a_jitted_sgd_step():
    text, findings = _translate(MANUAL.read_text())
    assert not _errors(findings), findings
    assert "def sgd_step(model, x, y, lr, max_grad_norm):\n    def loss_fn(model):\n" in text
    assert "    model = eqx.apply_updates(model, jax.tree_util.tree_map(lambda g: -lr * g, grads))\n" in text
    assert "    model, loss = sgd_step(model, x, y, lr, clip)\n" in text
    code = text.split("import torch")[0] if "import torch" in text else text.split("\nimport ", 1)[1]
    assert ".zero_grad()\n" not in code and ".backward()\n" not in code and ".parameters():" not in code
    assert any(f.code == "idiom-replaced" and "hand-written SGD update of model's parameters" in f.message
               for f in findings)


def test_the_hand_written_step_with_clipping_and_a_changing_rate_trains_as_pytorch_does(tmp_path):
    _close(*_both(tmp_path, MANUAL, 3))


def test_a_step_that_keeps_the_first_learning_rate_is_caught(tmp_path):
    """The check can fail: the same translation with the rate fixed at its first value (what a jit that captured
    the global would do) does not give PyTorch's weights."""
    text, _ = _translate(MANUAL.read_text())
    planted = text.replace("sgd_step(model, x, y, lr, clip)", "sgd_step(model, x, y, 0.5, clip)")
    assert planted != text
    with pytest.raises(AssertionError):
        _close(*_both(tmp_path, MANUAL, 3, planted))


def test_the_regression_example_steps_as_pytorch_does(tmp_path):
    text, findings = _translate(REGRESSION.read_text())
    assert not _errors(findings), findings
    assert "    fc = eqx.apply_updates(fc, jax.tree_util.tree_map(lambda g: -0.1 * g, grads))\n" in text
    assert "    fc, output = sgd_step(fc, batch_x, batch_y)\n    loss = output.item()\n" in text
    _close(*_both(tmp_path, REGRESSION, 3))


@pytest.mark.parametrize("old, new, why", [
    ("p.data.add_(p.grad, alpha=-lr)", "p.data.add_(-lr * (p.grad + 0.01 * p.data))", "training loop is rewritten"),
    ("p.data.add_(p.grad, alpha=-lr)", "p.data.add_(p.grad, alpha=-args.lr)", "reads more than names and numbers"),
    ("    losses.append(loss.item())\n", "    losses.append(loss.item())\n    print(p.grad)\n", "reads gradients"),
    ("    losses.append(loss.item())\n", "    losses.append(p.sum().item())\n", "reads gradients"),
    ("    model.zero_grad()\n", "", "training loop is rewritten"),
])
def test_other_hand_written_updates_stay_errors(old, new, why):
    src = MANUAL.read_text()
    assert old in src
    text, findings = _translate(src.replace(old, new))
    assert any(why in f.message for f in _errors(findings)), findings
    assert "sgd_step" not in text


def test_a_model_given_as_a_parameter_stays_an_error():
    """A function stepping the model its caller gives: PyTorch updates the caller's model in place, a rebinding
    of the parameter would not; an error saying so."""
    src = MANUAL.read_text().replace("for x, y in batches:\n", "def train(model, batches, lr):\n    for x, y in batches:\n")
    body = src.split("    for x, y in batches:\n")[1]
    src = src.replace(body, "".join("    " + ln if ln.strip() else ln for ln in body.splitlines(keepends=True)))
    text, findings = _translate(src)
    assert any("not assigned in this function" in f.message for f in _errors(findings)), findings
    assert "sgd_step" not in text
