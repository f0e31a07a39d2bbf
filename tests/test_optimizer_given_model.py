"""An optimizer created in a function whose model is a parameter (keras-io's tabtransformer: ``def
run_experiment(model, ...): optimizer = AdamW(...); model.compile(optimizer=optimizer, ...); model.fit(...)``),
the file binding ``model`` again in functions after it. The model exists when the function starts, so the torch
optimizer created there over ``model.parameters()`` is right; it was refused as "created before model"
(training._given_model). Checked numerically: the Keras and torch histories and kernels after the fit."""
from __future__ import annotations


import numpy as np

from fwport.core.pipeline import translate_source
from helpers import error_messages, needs
from runners import ONE_DENSE_KERNEL, one_dense_result

SRC = '''import numpy as np
from tensorflow import keras


def run_experiment(model, x, y, learning_rate):
    optimizer = keras.optimizers.Adam(learning_rate=learning_rate)
    model.compile(optimizer=optimizer, loss="mse")
    return model.fit(x, y, epochs=3, batch_size=4, shuffle=False, verbose=0)


def create_model():
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
    return model


x = np.linspace(-1, 1, 24, dtype="float32").reshape(8, 3)
y = np.linspace(0, 1, 8, dtype="float32").reshape(8, 1)
net = create_model()
init(net)
history = run_experiment(net, x, y, 0.05)
'''
PRINT = '''
import json
print("RESULT" + json.dumps({"loss": hist(history), "kernel": kernel(net)}))
'''


def test_the_optimizer_is_created_over_the_given_model():
    r = translate_source(SRC, "f.py")
    assert not error_messages(r), error_messages(r)
    assert "optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate, eps=1e-07)" in r.output


@needs("tensorflow", "torch")
def test_the_fit_matches_keras(tmp_path):
    r = translate_source(SRC, "f.py")
    assert not error_messages(r), error_messages(r)
    keras = one_dense_result(tmp_path / "k.py", "keras", SRC + PRINT)
    torch = one_dense_result(tmp_path / "t.py", "torch", r.output + PRINT)
    assert len(torch["loss"]) == 3
    np.testing.assert_allclose(torch["loss"], keras["loss"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(torch["kernel"], keras["kernel"], rtol=1e-4, atol=1e-6)
    assert keras["kernel"] != [k[0] for k in ONE_DENSE_KERNEL]  # the fit moved it


def test_a_model_the_function_binds_again_after_the_optimizer_is_still_refused():
    src = SRC.replace('    optimizer = keras.optimizers.Adam(learning_rate=learning_rate)\n',
                      '    optimizer = keras.optimizers.Adam(learning_rate=learning_rate)\n'
                      '    model = create_model()\n')
    msgs = error_messages(translate_source(src, "f.py"))
    assert any("is created before model" in m for m in msgs), msgs
