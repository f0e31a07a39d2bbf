"""A model compiled and fitted by a function it is given (time_series.ipynb's ``compile_and_fit(model, window)``),
then evaluated and predicted with where the function was called: the written evaluate takes the compile's loss (and
metric objects) created again there, which keep no state between evaluations; predict needs nothing of the compile;
a fit there would go on with the optimizer the function keeps: an error. evaluate(return_dict=True) gives the
dict Keras gives ({"loss": ..., each metric's name: ...}); an argument of fit the loop does not take is an error
unless it is at its default (``initial_epoch=1`` is not: it was dropped, True == 1).

Numbers: the source trained by Keras and the translation by torch (TensorFlow unimportable there) from the same
weights; the fit's history, the evaluations and predictions compared."""
from __future__ import annotations

import numpy as np

from test_train_step import _run, errors, tx

GIVEN = '''
import numpy as np
import keras
from keras import layers

rng = np.random.default_rng(1)
x_train = rng.normal(size=(12, 4)).astype("float32")
y_train = (x_train[:, :2] * 0.5 + x_train[:, 2:]).astype("float32")


def compile_and_fit(model, epochs=2):
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss=keras.losses.Huber(delta=0.5),
                  metrics=[keras.metrics.MeanAbsoluteError(), "mse", keras.metrics.RootMeanSquaredError()])
    return model.fit(x_train, y_train, batch_size=5, epochs=epochs, shuffle=False, verbose=0)


def experiment(model):
    history = compile_and_fit(model)
    return history, [model.evaluate(x_train, y_train, batch_size=5, verbose=0, return_dict=True),
                     model.evaluate(x_train, y_train, verbose=0), model.predict(x_train, verbose=0).tolist()]


regressor = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(5, activation="tanh"), layers.Dense(2)])


if __name__ == "__main__":
    experiment(regressor)
'''

FIT = ("h, extra = experiment(regressor)\n"
       "h = h if hasattr(h, 'history') else type('History', (), {'history': h})()")
SHAPES = [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 2)), ("b1", (2,))]


def _compare(keras_out: dict, torch_out: dict) -> None:
    assert sorted(torch_out["history"]) == sorted(keras_out["history"])
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    as_dict, as_list, predicted = keras_out["extra"]
    assert sorted(torch_out["extra"][0]) == sorted(as_dict) == ["loss", "mean_absolute_error", "mse",
                                                                "root_mean_squared_error"]
    for k, v in as_dict.items():
        np.testing.assert_allclose(torch_out["extra"][0][k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(torch_out["extra"][1], as_list, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(torch_out["extra"][2], predicted, rtol=1e-5, atol=1e-6)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_a_model_evaluated_after_the_function_that_compiled_it_evaluates_as_keras(tmp_path):
    r = tx(GIVEN)
    assert errors(r) == [], errors(r)
    assert ("    return history, [evaluate(model, nn.HuberLoss(delta=0.5), {\"mean_absolute_error\": "
            "MeanAbsoluteError(), \"mse\": MeanSquaredError(), \"root_mean_squared_error\": RootMeanSquaredError()}, "
            "x_train, y_train, batch_size=5, verbose=0, return_dict=True),\n") in r.output
    assert "predict(model, x_train, verbose=0).tolist()]" in r.output
    keras_out, torch_out = _run(tmp_path, GIVEN, {"shapes": SHAPES, "n": 12, "width": 4, "x_map": "",
                                                  "models": "(regressor,)", "fit": FIT})
    _compare(keras_out, torch_out)


def test_return_dict_with_one_error_metric_gives_keras_names(tmp_path):
    src = GIVEN.replace('metrics=[keras.metrics.MeanAbsoluteError(), "mse", keras.metrics.RootMeanSquaredError()]',
                        'metrics=["mae"]')
    src = src.replace('''    return history, [model.evaluate(x_train, y_train, batch_size=5, verbose=0, return_dict=True),''',
                      '''    return history, [model.evaluate(x_train, y_train, batch_size=5, verbose=0, return_dict=True),
                     model.evaluate(x_train, y_train, verbose=0, return_dict=False),''')
    r = tx(src)
    assert errors(r) == [], errors(r)
    assert '    return dict(zip(["loss", "mae"], result)) if return_dict else result\n' in r.output
    keras_out, torch_out = _run(tmp_path, src, {"shapes": SHAPES, "n": 12, "width": 4, "x_map": "",
                                                "models": "(regressor,)", "fit": FIT})
    as_dict, as_list, as_list_again, predicted = keras_out["extra"]
    assert sorted(torch_out["extra"][0]) == sorted(as_dict) == ["loss", "mae"]
    for k, v in as_dict.items():
        np.testing.assert_allclose(torch_out["extra"][0][k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(torch_out["extra"][1], as_list, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(torch_out["extra"][2], as_list_again, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(torch_out["extra"][3], predicted, rtol=1e-5, atol=1e-6)


def test_a_fit_after_the_function_that_compiled_it_is_an_error_naming_the_optimizer():
    src = GIVEN.replace("                     model.evaluate(x_train, y_train, verbose=0),",
                        "                     model.fit(x_train, y_train, verbose=0),")
    r = tx(src)
    msgs = [m for _, m in errors(r)]
    assert any("model was compiled inside compile_and_fit(), and Keras's fit goes on with the optimizer" in m
               for m in msgs), msgs
    assert "model.fit(x_train, y_train, verbose=0)" in r.output  # left as written, under its error


def test_a_loss_made_of_the_function_s_own_names_is_an_error():
    src = GIVEN.replace("def compile_and_fit(model, epochs=2):", "def compile_and_fit(model, epochs=2, delta=0.5):")
    src = src.replace("keras.losses.Huber(delta=0.5)", "keras.losses.Huber(delta=delta)")
    r = tx(src)
    msgs = [m for _, m in errors(r)]
    assert len([m for m in msgs if "its loss there is not one fwport can create again here" in m]) == 2, msgs
    assert "    loss_fn = nn.HuberLoss(delta=delta)\n" in r.output  # the function's own compile is still written


def test_a_compile_under_a_condition_in_the_function_is_not_taken_for_the_call():
    src = GIVEN.replace("    model.compile(", "    if epochs:\n        model.compile(").replace(
        "                  metrics=[", "                      metrics=[")
    r = tx(src)
    assert "evaluate(model, nn.HuberLoss" not in r.output
    # (the evaluates do not take the compile of compile_and_fit's own `model`, whose loss_fn is bound there)
    assert "return history, [evaluate(" not in r.output
    assert [line for line, m in errors(r) if "model.evaluate(...) is a Keras model method" in m] == [19, 20], errors(r)


def test_an_argument_at_a_value_that_is_not_its_default_is_an_error():
    src = GIVEN.replace("shuffle=False, verbose=0)", "shuffle=False, verbose=0, initial_epoch=1)")
    r = tx(src)
    assert any("initial_epoch= is not translated" in m for _, m in errors(r)), errors(r)
    src = GIVEN.replace("shuffle=False, verbose=0)", "shuffle=False, verbose=0, initial_epoch=0, callbacks=[])")
    assert errors(tx(src)) == []


def test_return_dict_of_a_second_model_sharing_the_written_evaluate():
    # two compiles whose loops are the same text share one evaluate: the first one's, which must take return_dict
    src = '''
import numpy as np
import keras

x = np.ones((8, 4), "float32")
a = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
a.compile(loss="mse", optimizer="adam", metrics=["mae"])
a.fit(x, x[:, :1], epochs=1)
b = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
b.compile(loss="mse", optimizer="adam", metrics=["mae"])
r = b.evaluate(x, x[:, :1], return_dict=True)
'''
    out = tx(src).output
    assert out.count("def evaluate(") == 1 and "def evaluate(model, loss_fn, x, y, batch_size=None, verbose=1, " \
        "return_dict=False):" in out
    assert "r = evaluate(b, b_loss_fn, x, x[:, :1], return_dict=True)" in out
