"""optimizer.exclude_from_weight_decay(var_names=[...]) (issue 9): Keras searches each name, a regular expression,
in every variable's name (Variable.name: kernel, bias, gamma, beta, embeddings) and skips the decay of those it
matches. The translation calls a written exclude_from_weight_decay(optimizer, model, var_names=...), which gives
the parameters whose Keras name (by their module) matches a group of their own with weight_decay 0.

Numbers: a Dense → LayerNormalization → Dense model trained by Keras and by its translation from the same
weights (AdamW, and Adam(weight_decay=...), which Keras decays alike), the losses and every weight after training
compared; without the exclusion Keras trains to other weights (the case would tell a dropped exclusion).
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
from runners import keras_and_torch
from test_fit_callbacks import errors, tx

SRC = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8), layers.LayerNormalization(), layers.Dense(3)])
# (epsilon: Keras adds Adam's before the bias correction, torch after it, a warning of the translation)
optimizer = keras.optimizers.AdamW(learning_rate=0.05, weight_decay=0.5, epsilon=1e-12)
optimizer.exclude_from_weight_decay(var_names=["bias", "gamma"])
model.compile(optimizer=optimizer, loss="mse")


def train(x, y):
    return model.fit(x, y, epochs=3, batch_size=16, shuffle=False, verbose=0).history
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(2)
W = [rng.normal(size=(6, 8)).astype("float32"), rng.normal(size=8).astype("float32"),
     (1 + 0.5 * rng.normal(size=8)).astype("float32"), rng.normal(size=8).astype("float32"),
     rng.normal(size=(8, 3)).astype("float32"), rng.normal(size=3).astype("float32")]
x = rng.normal(size=(48, 6)).astype("float32")
y = rng.normal(size=(48, 3)).astype("float32")
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():
        for i, (a, b) in zip((0, 1, 2), (W[:2], W[2:4], W[4:])):
            model[i].weight.copy_(torch.tensor(a.T if a.ndim == 2 else a))
            model[i].bias.copy_(torch.tensor(b))
    weights = lambda: [p.detach().numpy().T.tolist() for p in model.parameters()]
else:
    model.set_weights(W)
    weights = lambda: [w.tolist() for w in model.get_weights()]
h = train(x, y)
print("RESULT " + json.dumps({"loss": h["loss"], "weights": weights()}))
'''


def _compare(keras_out: dict, torch_out: dict) -> None:
    np.testing.assert_allclose(torch_out["loss"], keras_out["loss"], rtol=2e-4)
    for a, b in zip(keras_out["weights"], torch_out["weights"], strict=True):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("optimizer", ["AdamW", "Adam"])
def test_excluded_parameters_are_not_decayed_as_in_keras(tmp_path, optimizer):
    src = SRC.replace("keras.optimizers.AdamW(", f"keras.optimizers.{optimizer}(")
    r = tx(src)
    assert errors(r) == [], errors(r)
    assert 'exclude_from_weight_decay(optimizer, model, var_names=["bias", "gamma"])' in r.output
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(src), r.output, DRIVER)
    _compare(keras_out, torch_out)
    # the exclusion counts: without it Keras decays the biases and the norm's gamma too
    plain = src.replace('optimizer.exclude_from_weight_decay(var_names=["bias", "gamma"])\n', "")
    (tmp_path / "plain").mkdir()
    plain_out, plain_torch = keras_and_torch(tmp_path / "plain", textwrap.dedent(plain), tx(plain).output, DRIVER)
    _compare(plain_out, plain_torch)
    gamma = 2  # (the norm's beta, not matched, is decayed in both runs)
    assert not np.allclose(plain_out["weights"][gamma], keras_out["weights"][gamma], atol=1e-3)
    assert not np.allclose(plain_out["weights"][1], keras_out["weights"][1], atol=1e-3)


def test_var_list_is_an_error_naming_the_call():
    src = SRC.replace('var_names=["bias", "gamma"]', "var_list=[model.layers[0].bias]")
    errs = errors(tx(src))
    assert any("var_list= gives Keras variables themselves" in m for _, m in errs), errs
    assert "exclude_from_weight_decay(optimizer, model" not in tx(src).output


def test_an_optimizer_of_unknown_parameters_is_an_error():
    src = '''
from tensorflow import keras

optimizer = keras.optimizers.AdamW(learning_rate=0.05, weight_decay=0.5)
optimizer.exclude_from_weight_decay(var_names=["bias"])
'''
    errs = errors(tx(src))
    assert any("fwport cannot tell which model's parameters optimizer updates" in m for _, m in errs), errs


def test_the_written_function_refuses_a_module_whose_names_it_does_not_know():
    import torch
    from torch import nn
    ns: dict = {}
    exec(tx(SRC).output.split("\n\n\ndef as_float32")[0], ns)
    model = nn.Sequential(nn.Linear(2, 2), nn.LSTM(2, 2))
    optimizer = torch.optim.AdamW(model.parameters(), weight_decay=0.1)
    with pytest.raises(ValueError, match="1.weight_ih_l0 of LSTM has no Keras variable name"):
        ns["exclude_from_weight_decay"](optimizer, model, var_names=["bias"])
    linear = nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(linear.parameters(), weight_decay=0.1)
    ns["exclude_from_weight_decay"](optimizer, linear, var_names=["bi"])  # a regular expression searched, as Keras
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.1, 0.0]
    assert optimizer.param_groups[1]["params"][0] is linear.bias


def test_a_conv_that_may_be_a_depthwise_or_pointwise_kernel_is_refused_where_the_names_decide():
    """DepthwiseConv2D and SeparableConv2D translate to grouped and 1x1 nn.Conv2d, whose Keras names are
    depthwise_kernel / pointwise_kernel: a pattern that tells them from "kernel" cannot be decided on the torch
    module; one that matches all of them alike can."""
    import torch
    from torch import nn
    ns: dict = {}
    exec(tx(SRC).output.split("\n\n\ndef as_float32")[0], ns)
    for conv, names in ((nn.Conv2d(4, 4, 3, groups=4), ["depthwise"]), (nn.Conv2d(4, 8, 1), ["pointwise"])):
        optimizer = torch.optim.AdamW(conv.parameters(), weight_decay=0.1)
        with pytest.raises(ValueError, match="0.weight of Conv2d is Keras's kernel or"):
            ns["exclude_from_weight_decay"](optimizer, nn.Sequential(conv), var_names=names)
    conv = nn.Conv2d(4, 4, 3, groups=4)
    optimizer = torch.optim.AdamW(conv.parameters(), weight_decay=0.1)
    ns["exclude_from_weight_decay"](optimizer, conv, var_names=["kernel"])  # kernel and depthwise_kernel alike
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.1, 0.0]
    assert optimizer.param_groups[1]["params"][0] is conv.weight
    conv = nn.Conv2d(4, 8, 3)  # a plain 3x3 conv is a Keras kernel: "depthwise" does not match it
    optimizer = torch.optim.AdamW(conv.parameters(), weight_decay=0.1)
    ns["exclude_from_weight_decay"](optimizer, conv, var_names=["depthwise"])
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.1]


# the optimizer compile creates, excluded through model.optimizer before the first fit (after one, Keras 3 keeps
# decaying them: the train function the first fit traced decays as configured then)
COMPILED = SRC.replace(
    'optimizer = keras.optimizers.AdamW(learning_rate=0.05, weight_decay=0.5, epsilon=1e-12)\n'
    'optimizer.exclude_from_weight_decay(var_names=["bias", "gamma"])\n'
    'model.compile(optimizer=optimizer, loss="mse")\n',
    'model.compile(optimizer=keras.optimizers.AdamW(learning_rate=0.05, weight_decay=0.5, epsilon=1e-12), loss="mse")\n'
    'model.optimizer.exclude_from_weight_decay(var_names=["bias", "gamma"])\n')


def test_the_compiled_optimizer_excluded_through_model_optimizer_trains_as_keras(tmp_path):
    assert COMPILED != SRC
    r = tx(COMPILED)
    assert errors(r) == [], errors(r)
    assert 'exclude_from_weight_decay(optimizer, model, var_names=["bias", "gamma"])' in r.output
    assert "model.optimizer" not in r.output
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(COMPILED), r.output, DRIVER)
    _compare(keras_out, torch_out)


def test_model_optimizer_excluded_after_a_fit_is_an_error():
    src = COMPILED.replace('model.optimizer.exclude_from_weight_decay(var_names=["bias", "gamma"])\n',
                           'model.fit(np.zeros((4, 6)), np.zeros((4, 3)), verbose=0)\n'
                           'model.optimizer.exclude_from_weight_decay(var_names=["bias", "gamma"])\n')
    errs = errors(tx(src))
    assert len(errs) == 1 and "exclude them before the first fit" in errs[0][1], errs
