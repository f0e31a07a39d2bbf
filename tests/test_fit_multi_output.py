"""compile(loss=<a loss per output>, loss_weights=...) of a functional model of several outputs (issue 9).

Keras sums each output's loss times its loss_weights= factor (none: no factor); a dict of losses is keyed by the
outputs' names (their layers' name=), a list is in the outputs' order, one loss is given to every output. y is a
list of arrays in the outputs' order or a dict by their names. The History holds "loss" and "<output>_loss" (each
output's own loss, unweighted), and val_ likewise; evaluate returns [loss, *each output's loss].

Measured here (Keras 3.15 with TensorFlow, and tf_keras 2.21): "loss" is the batches' total losses averaged by
samples in both; each output's loss is averaged by samples in Keras 2 but over the batches in Keras 3 (its
Mean tracker is given the batch size from a shape that is unknown inside the traced step, so every batch counts
once). The two differ only where the last batch is partial, which every case here has (15 training samples, batches
of 4; 5 validation samples, batches of 4).

Numbers: each program is trained two epochs by Keras and by its translation from the same weights on fixed data
(shuffle=False; subprocesses, TensorFlow unimportable on the torch side); histories, evaluate and the kernels after
training are compared within 2e-4.
"""
from __future__ import annotations

import textwrap

import pytest
from runners import compare_fit, keras_and_torch_cases
from test_fit_callbacks import errors, tx

SRC = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input(shape=(4,))
h = layers.Dense(8, activation="tanh")(inputs)
out_a = layers.Dense(1, name="out_a")(h)
out_b = layers.Dense(1, activation="sigmoid", name="out_b")(h)
model = keras.Model(inputs, [out_a, out_b])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.2),
              loss={"out_a": "mse", "out_b": "binary_crossentropy"}, loss_weights={"out_a": 1.0, "out_b": 0.5})


def train(x, ya, yb):
    history = model.fit(x, {"out_a": ya, "out_b": yb}, validation_split=0.25, epochs=2, batch_size=4,
                        shuffle=False, verbose=0)
    return history.history, model.evaluate(x, {"out_a": ya, "out_b": yb}, batch_size=4, verbose=0)
'''

# a list of losses and of weights, y a list
LISTED = SRC.replace('loss={"out_a": "mse", "out_b": "binary_crossentropy"}, loss_weights={"out_a": 1.0, "out_b": 0.5}',
                     'loss=["mse", keras.losses.Huber(delta=0.5)], loss_weights=[2.0, 0.25]').replace(
    '{"out_a": ya, "out_b": yb}', "[ya, yb]")

# one loss for every output, no weights
ONE = SRC.replace('loss={"out_a": "mse", "out_b": "binary_crossentropy"}, loss_weights={"out_a": 1.0, "out_b": 0.5}',
                  'loss="mae"')

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(5)
W = [(rng.normal(size=(4, 8)) * 0.7).astype("float32"), (rng.normal(size=8) * 0.1).astype("float32"),
     (rng.normal(size=(8, 1)) * 0.7).astype("float32"), np.full(1, 0.1, "float32"),
     (rng.normal(size=(8, 1)) * 0.7).astype("float32"), np.full(1, -0.1, "float32")]
x = rng.normal(size=(20, 4)).astype("float32")
ya = (x[:, :1] * 1.5 - x[:, 1:2]).astype("float32")
yb = (x[:, 2:3] > 0).astype("float32")
if sys.argv[2] == "torch":
    import torch
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, k, bias in zip(linears, W[::2], W[1::2]):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(bias))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    model.set_weights(W)
    kernels = lambda: [w.tolist() for w in model.get_weights()[::2]]
h, ev = train(x, ya, yb)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": kernels()}))
'''

KEYS = ["loss", "out_a_loss", "out_b_loss", "val_loss", "val_out_a_loss", "val_out_b_loss"]


def _cases() -> dict:
    """Every program the tests train, by name: (its source, whether it is Keras 2 code, its driver)."""
    cases = {f"dict-keras{2 if k2 else 3}": (SRC, k2, DRIVER) for k2 in (False, True)}
    cases["evaluate-dict"] = (SRC.replace('model.evaluate(x, {"out_a": ya, "out_b": yb}, batch_size=4, verbose=0)',
                                          'model.evaluate(x, [ya, yb], batch_size=4, verbose=0, return_dict=True)'),
                              False, DRIVER)
    cases["one"] = (ONE, False, DRIVER)
    cases["two-in"] = (TWO_IN, False, TWO_IN_DRIVER)
    for k2 in (False, True):
        n = 2 if k2 else 3
        cases[f"listed-keras{n}"] = (LISTED, k2, DRIVER)
        cases[f"classes-keras{n}"] = (CLASSES, k2, CLASSES_DRIVER)
        cases[f"stopped-keras{n}"] = (STOPPED, k2, DRIVER)
        cases[f"outputs-dict-keras{n}"] = (DICT.replace(
            "    return history.history, model.evaluate(",
            '    history.history["predict"] = model.predict(x[:5], verbose=0)["b"].tolist()\n'
            "    return history.history, model.evaluate("), k2, DRIVER)
    for (metrics, k2, _), name in zip(PER_OUTPUT, PER_OUTPUT_IDS, strict=True):
        cases[f"metrics-{name}"] = (_with_metrics(metrics), k2, DRIVER)
    return cases


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each case of _cases translated, and trained by Keras and by its translation (all in one Keras subprocess and
    one torch subprocess per Keras version): (the translations by name, runners.Runs)."""
    outs, todo = {}, {}
    for name, (src, keras2, driver) in _cases().items():
        src = textwrap.dedent(src)
        if keras2:  # tensorflow.keras is tf_keras, and fwport translates the file as Keras 2 code
            src = "# fwport: keras=2\n" + src.lstrip("\n")
        trans = tx(src)
        outs[name] = trans.output
        torch_code = trans.output if not errors(trans) else AssertionError(f"translation errors: {errors(trans)}")
        todo[name] = (src, torch_code, driver, {"TF_USE_LEGACY_KERAS": "1"} if keras2 else {})
    return outs, keras_and_torch_cases(tmp_path_factory.mktemp("fits"), todo)


def _run(runs, name: str):
    """The translation of case ``name`` of _cases, and (Keras's results, the translation's)."""
    outs, results = runs
    return outs[name], results[name]


@pytest.mark.parametrize("keras2", [False, True], ids=["keras3", "keras2"])
def test_a_dict_of_losses_and_weights_trains_as_keras(runs, keras2):
    out, (keras_out, torch_out) = _run(runs, f"dict-keras{2 if keras2 else 3}")
    assert 'loss_fn = {"out_a": nn.MSELoss(), "out_b": ' in out
    assert "loss = 1.0 * losses[0] + 0.5 * losses[1]" in out
    compare_fit(keras_out, torch_out, KEYS)
    kh = keras_out["history"]
    assert kh["loss"][1] < kh["loss"][0]  # it trained
    # the total is not the weighted sum of the outputs' averages where a batch is partial (Keras 3: by batches)
    if not keras2:
        assert abs(kh["loss"][0] - (kh["out_a_loss"][0] + 0.5 * kh["out_b_loss"][0])) > 1e-4


def test_keras2_and_keras3_average_each_output_differently(runs):
    """The same program, the same weights: Keras 2's and Keras 3's "loss" agree, their "out_a_loss" do not
    (averaged by samples, by batches), and each translation gives its Keras's."""
    _, (k3, t3) = _run(runs, "dict-keras3")
    _, (k2, t2) = _run(runs, "dict-keras2")
    assert abs(k3["history"]["loss"][0] - k2["history"]["loss"][0]) < 1e-5
    assert abs(k3["history"]["out_a_loss"][0] - k2["history"]["out_a_loss"][0]) > 1e-3
    assert abs(t3["history"]["out_a_loss"][0] - k3["history"]["out_a_loss"][0]) < 1e-5
    assert abs(t2["history"]["out_a_loss"][0] - k2["history"]["out_a_loss"][0]) < 1e-5


@pytest.mark.parametrize("keras2", [False, True], ids=["keras3", "keras2"])
def test_a_list_of_losses_with_a_loss_object_and_a_list_of_weights(runs, keras2):
    out, (keras_out, torch_out) = _run(runs, f"listed-keras{2 if keras2 else 3}")
    assert 'loss_fn = {"out_a": nn.MSELoss(), "out_b": nn.HuberLoss(delta=0.5)}' in out
    assert "loss = 2.0 * losses[0] + 0.25 * losses[1]" in out
    compare_fit(keras_out, torch_out, KEYS)


def test_one_loss_is_every_outputs_loss(runs):
    out, (keras_out, torch_out) = _run(runs, "one")
    assert 'loss_fn = {"out_a": nn.L1Loss(), "out_b": nn.L1Loss()}' in out
    assert "loss = losses[0] + losses[1]" in out
    compare_fit(keras_out, torch_out, KEYS)


def test_evaluate_return_dict_has_keras_keys(runs):
    out, (keras_out, torch_out) = _run(runs, "evaluate-dict")
    assert "return_dict=True" in _cases()["evaluate-dict"][0]
    assert sorted(keras_out["evaluate"]) == sorted(torch_out["evaluate"]) == ["loss", "out_a_loss", "out_b_loss"]
    for k, v in keras_out["evaluate"].items():
        assert abs(torch_out["evaluate"][k] - v) <= 2e-4 * abs(v) + 1e-6, k


def _compile_error(src: str) -> str:
    r = tx(src)
    found = [m for _, m in errors(r) if m.startswith("model.compile(...)")]
    assert len(found) == 1, errors(r)
    assert "model.compile(" in r.output and "model.fit(" in r.output  # left as written, with the errors
    return found[0]


@pytest.mark.parametrize("loss, said", [
    ('loss={"out_a": "mse"}', "is not keyed by exactly the names of model's outputs (out_a, out_b)"),
    ('loss=["mse"]', "gives 1 losses, and model has 2 outputs (out_a, out_b)"),
    ('loss=["mse", None]', "gives model's output 'out_b' no loss (None)"),
    ('loss={"out_a": "mse", "out_b": None}', "gives model's output 'out_b' no loss (None)"),
    ('loss=["mse", "mse"], loss_weights=[1.0]', "not a literal list of one number per output"),
    ('loss=["mse", "mse"], loss_weights={"out_c": 1.0}', "loss_weights={...} is not keyed by names of model's outputs"),
    ('loss=["mse", "mse"], loss_weights=weights', "loss_weights=weights is not a literal list"),
    ('loss=["mse", "mse"], metrics=["mae"]', "gives 1 metrics, and the model has 2 outputs: Keras 3 refuses it"),
    ('loss=["mse", my_loss]', "the loss of output 'out_b', my_loss, is neither one of Keras's loss names"),
])
def test_what_the_loop_does_not_sum_as_keras_is_an_error(loss, said):
    src = SRC.replace('loss={"out_a": "mse", "out_b": "binary_crossentropy"}, loss_weights={"out_a": 1.0, "out_b": 0.5}',
                      loss)
    msg = _compile_error(src)
    assert said in msg, msg


def test_outputs_without_layer_names_are_an_error():
    src = SRC.replace(', name="out_a"', "")
    assert "fwport does not know the name of each" in _compile_error(src)
    # one loss for all: the History's keys still need the names
    src = ONE.replace(', name="out_b"', "")
    assert "fwport does not know the name of each" in _compile_error(src)


def test_what_the_fit_gives_that_the_loop_does_not_read_is_an_error():
    src = SRC.replace('model.fit(x, {"out_a": ya, "out_b": yb}, validation_split=0.25,', "model.fit(dataset,")
    errs = errors(tx(src))
    assert any("iterable of batches" in m for _, m in errs), errs


def test_a_weight_dict_missing_an_output():
    """Keras 3 raises a KeyError for it (measured: keras 3.15), Keras 2 gives that output no factor (tf_keras 2.21:
    evaluate equal to the factor 1.0's)."""
    src = SRC.replace('loss_weights={"out_a": 1.0, "out_b": 0.5}', 'loss_weights={"out_b": 0.5}')
    assert "gives no factor to some of model's outputs (out_a, out_b), which Keras 3 refuses" in _compile_error(src)
    out = tx("# fwport: keras=2\n" + textwrap.dedent(src).lstrip("\n")).output
    assert "loss = losses[0] + 0.5 * losses[1]" in out


CLASSES = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input(shape=(4,))
h = layers.Dense(8, activation="tanh")(inputs)
kind = layers.Dense(3, activation="softmax", name="kind")(h)
flag = layers.Dense(1, name="flag")(h)
model = keras.Model(inputs, [kind, flag])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3),
              loss={"flag": keras.losses.BinaryCrossentropy(from_logits=True), "kind": "sparse_categorical_crossentropy"},
              loss_weights=[0.3, 1.5])


def train(x, ya, yb):
    labels = (np.abs(ya[:, 0]) * 2).astype("int64") % 3
    history = model.fit(x, [labels, yb], validation_data=(x[:6], [labels[:6], yb[:6]]), epochs=2, batch_size=6,
                        shuffle=False, verbose=0)
    return history.history, model.evaluate(x, {"kind": labels, "flag": yb}, batch_size=6, verbose=0)
'''

CLASSES_DRIVER = DRIVER.replace("(rng.normal(size=(8, 1)) * 0.7).astype(\"float32\"), np.full(1, 0.1, \"float32\")",
                                "(rng.normal(size=(8, 3)) * 0.7).astype(\"float32\"), np.full(3, 0.1, \"float32\")")


@pytest.mark.parametrize("keras2", [False, True], ids=["keras3", "keras2"])
def test_sparse_labels_and_a_logits_loss_per_output(runs, keras2):
    """A softmax output's sparse cross-entropy (labels (n,), a class axis) and a logits output's binary one; the
    dict of losses in another order than the outputs', a list of weights in theirs; validation_data with a list."""
    out, (keras_out, torch_out) = _run(runs, f"classes-keras{2 if keras2 else 3}")
    assert 'loss_fn = {"kind": nn.CrossEntropyLoss(), "flag": nn.BCEWithLogitsLoss()}' in out
    assert "loss = 0.3 * losses[0] + 1.5 * losses[1]" in out
    compare_fit(keras_out, torch_out, ["loss", "kind_loss", "flag_loss", "val_loss", "val_kind_loss",
                                       "val_flag_loss"])


def test_a_none_loss_of_an_unnamed_output_says_none():
    # keras-io text_generation_with_miniature_gpt: loss=[loss_fn, None] for outputs=[outputs, x] built in a function
    src = SRC.replace(', name="out_b"', "").replace(
        'loss={"out_a": "mse", "out_b": "binary_crossentropy"}, loss_weights={"out_a": 1.0, "out_b": 0.5}',
        'loss=["mse", None]')
    assert "loss= gives one of model's outputs no loss (None)" in _compile_error(src)


def test_a_frozen_batchnorm_runs_in_inference_mode_in_the_loop_of_several_outputs():
    """The written fit of several outputs puts a frozen BatchNorm in eval mode, as the single-output fit does (the
    generator itself: the functional pass follows no `.trainable = False` of a layer of the model)."""
    from fwport.packs.tf2torch.passes import fitloop

    c = fitloop.Compiled("model", None, ("string", "keras.optimizers.SGD", None), ("string", "x", None),
                         outputs=[("a", None, False, ""), ("b", None, False, "0.5")], frozen_batchnorm=True)
    c.names = {"fit": "fit", "evaluate": "evaluate", "predict": "predict", "tensor": "as_float32"}
    text = fitloop.multi_helpers(c, [{}, {"target": "float"}], lambda q: q)
    assert text.count("module.eval()") == 1 and "if isinstance(module, (torch.nn.BatchNorm1d" in text
    assert "loss = losses[0] + 0.5 * losses[1]" in text
    assert 'losses = [loss_fn["a"](pred[0], yb[0]), loss_fn["b"](pred[1], yb[1].float().view_as(pred[1]))]' in text
    compile(text, "fit.py", "exec")  # valid Python


TWO_IN = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

left = keras.Input(shape=(4,), name="left")
right = keras.Input(shape=(2,), name="right")
h = layers.Dense(8, activation="tanh")(layers.Concatenate()([left, right]))
out_a = layers.Dense(1, name="out_a")(h)
out_b = layers.Dense(1, activation="sigmoid", name="out_b")(h)
model = keras.Model([left, right], [out_a, out_b])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.2),
              loss={"out_a": "mse", "out_b": "binary_crossentropy"}, loss_weights=[1.0, 0.5])


def train(x, ya, yb):
    history = model.fit({"right": x[:, 2:], "left": x}, [ya, yb], validation_split=0.25, epochs=2, batch_size=4,
                        shuffle=False, verbose=0)
    return history.history, model.evaluate([x, x[:, 2:]], {"out_a": ya, "out_b": yb}, batch_size=4, verbose=0)
'''

TWO_IN_DRIVER = DRIVER.replace("W = [(rng.normal(size=(4, 8)) * 0.7)", "W = [(rng.normal(size=(6, 8)) * 0.7)")


def test_several_inputs_and_several_outputs(runs):
    """keras-io's guides (functional_api, training_with_built_in_methods): x a dict by the inputs' names (or a list),
    y a list or a dict by the outputs' names."""
    out, (keras_out, torch_out) = _run(runs, "two-in")
    assert "fit(model, optimizer, loss_fn, [x, x[:, 2:]], [ya, yb]," in out
    assert "pred = model(*xb)" in out
    compare_fit(keras_out, torch_out, KEYS)


# EarlyStopping on one output's validation loss, a run long enough for it to stop (mode="min": Keras 3.15's "auto"
# raises ValueError for a monitor that is neither "loss" nor a compiled metric's name, such as val_out_a_loss)
STOPPED = SRC.replace(
    'validation_split=0.25, epochs=2, batch_size=4,\n                        shuffle=False, verbose=0)',
    'validation_split=0.25, epochs=12, batch_size=4,\n                        shuffle=False, verbose=0, '
    'callbacks=[keras.callbacks.EarlyStopping(monitor="val_out_a_loss", patience=2, mode="min")])')


@pytest.mark.parametrize("keras2", [False, True], ids=["keras3", "keras2"])
def test_callbacks_see_each_outputs_history_keys(runs, keras2):
    """keras-io training_with_built_in_methods: callbacks of a fit of several outputs; EarlyStopping monitoring
    val_out_a_loss stops both at the same epoch (fewer than the 12 asked), with the same History."""
    assert "callbacks=[keras.callbacks.EarlyStopping(" in STOPPED
    out, (keras_out, torch_out) = _run(runs, f"stopped-keras{2 if keras2 else 3}")
    assert "callbacks=[EarlyStopping(" in out and "callback.on_epoch_end(epoch, logs)" in out
    assert 2 < len(keras_out["history"]["loss"]) < 12
    compare_fit(keras_out, torch_out, KEYS)


def test_a_fit_after_the_model_is_bound_again_is_an_error():
    """`model = get_model()` after the compile of several outputs: the fit trains another model than the compile's,
    which the written loop of that compile would train with its loss and optimizer (keras-io
    training_with_built_in_methods rebinds model so)."""
    src = SRC.replace("\n\ndef train(x, ya, yb):", "\n\ndef get_model():\n    return keras.Sequential([layers.Dense(1)])\n\n\n"
                      "model = get_model()\n\n\ndef train(x, ya, yb):")
    errs = errors(tx(src))
    assert any("may be bound here to another model than the one of 2 outputs" in m for _, m in errs), errs


def test_class_weight_of_several_outputs_is_refused_as_keras_refuses_it():
    """Keras 3.15 and tf_keras 2.21 raise ValueError ("class_weight is only supported for Models with a single
    output"): an error, not a loop."""
    src = SRC.replace("shuffle=False, verbose=0)", "shuffle=False, verbose=0, class_weight={0: 1.0, 1: 2.0})")
    errs = errors(tx(src))
    assert any("Keras refuses it" in m for _, m in errs), errs


def _with_metrics(metrics: str, src: str = SRC) -> str:
    return src.replace('loss_weights={"out_a": 1.0, "out_b": 0.5})', 'loss_weights={"out_a": 1.0, "out_b": 0.5},\n'
                       f'              metrics={metrics})')


def _metric_keys(*names: str) -> list[str]:
    return KEYS + [*names] + [f"val_{k}" for k in names]


# (the metrics compile gives, whether the file is Keras 2 code, the History's metric keys); measured: both Keras give
# a dict's and a list of lists' metrics to their outputs; a flat list is every output's in Keras 2, one metric per
# output in Keras 3 (Keras 3.15 raises ValueError for a flat list of another length than the outputs')
PER_OUTPUT = [
    ('{"out_a": "mae", "out_b": ["accuracy", keras.metrics.AUC(name="auc")]}', False,
     ["out_a_mae", "out_b_accuracy", "out_b_auc"]),
    ('{"out_a": "mae", "out_b": ["accuracy", "mse"]}', True, ["out_a_mae", "out_b_accuracy", "out_b_mse"]),
    ('[["mse", "mae"], ["binary_accuracy"]]', False, ["out_a_mse", "out_a_mae", "out_b_binary_accuracy"]),
    ('["mae", "accuracy"]', False, ["out_a_mae", "out_b_accuracy"]),
    ('["mae", "accuracy"]', True, ["out_a_mae", "out_a_accuracy", "out_b_mae", "out_b_accuracy"]),
    ('{"out_b": "accuracy"}', True, ["out_b_accuracy"]),
]


PER_OUTPUT_IDS = ["dict-keras3", "dict-keras2", "lists-keras3", "flat-keras3", "flat-keras2", "some-keras2"]


@pytest.mark.parametrize("metrics, keras2, names", PER_OUTPUT, ids=PER_OUTPUT_IDS)
def test_each_outputs_metrics_have_keras_history_keys_and_values(runs, request, metrics, keras2, names):
    """Each metric on its output, named "<output>_<metric>" in the History (val_ likewise), averaged by samples;
    evaluate's list in Keras's order (Keras 3: the metrics sorted by name after the losses; Keras 2: output by
    output as given)."""
    name = "metrics-" + request.node.callspec.id
    assert _cases()[name][:2] == (_with_metrics(metrics), keras2)
    out, (keras_out, torch_out) = _run(runs, name)
    assert "metric.update_state(yb[at], pred[at])" in out
    compare_fit(keras_out, torch_out, _metric_keys(*names))
    assert len(torch_out["evaluate"]) == 3 + len(names)


def test_metrics_keras_refuses_or_the_loop_cannot_give_are_errors():
    for metrics, said in [('["mae"]', "gives 1 metrics, and the model has 2 outputs: Keras 3 refuses it"),
                          ('{"out_c": "mae"}', "is not keyed by names of the model's outputs"),
                          ('["mae", ["mse"]]', "mixes lists and metrics"),
                          ('[["mae"]]', "gives 1 lists of metrics, and the model has 2 outputs"),
                          ('{"out_a": "no_such_metric"}', "the metric 'no_such_metric' is not translated")]:
        msg = _compile_error(_with_metrics(metrics))
        assert said in msg, (metrics, msg)
    # Keras 2 gives every output a flat list's metrics: an object would be shared by both
    src = "# fwport: keras=2\n" + textwrap.dedent(_with_metrics('[keras.metrics.AUC()]')).lstrip("\n")
    msg = _compile_error(src)
    assert "Keras 2 gives every output each of them" in msg, msg


# a dict of outputs (in another order than its keys'), its losses, weights, metrics and labels keyed by its keys
DICT = SRC.replace("model = keras.Model(inputs, [out_a, out_b])", 'model = keras.Model(inputs, {"b": out_b, "a": out_a})') \
    .replace('loss={"out_a": "mse", "out_b": "binary_crossentropy"}, loss_weights={"out_a": 1.0, "out_b": 0.5})',
             'loss={"a": "mse", "b": "binary_crossentropy"}, loss_weights={"a": 1.0, "b": 0.5},\n'
             '              metrics={"a": "mae", "b": ["accuracy"]})') \
    .replace('{"out_a": ya, "out_b": yb}', '{"a": ya, "b": yb}')


@pytest.mark.parametrize("keras2", [False, True], ids=["keras3", "keras2"])
def test_a_dict_of_outputs(runs, keras2):
    """keras.Model(inputs, {"b": out_b, "a": out_a}): Keras orders the outputs by their keys; the History names them
    by the keys in Keras 3 ("a_loss", "a_mae") and by the output layers' names in Keras 2 ("out_a_loss"), measured;
    predict gives a dict of arrays."""
    assert DICT.count('"a"') == 6  # the model, loss, weights, metrics, fit's and evaluate's labels
    out, (keras_out, torch_out) = _run(runs, f"outputs-dict-keras{2 if keras2 else 3}")
    assert "pred = [pred[name] for name in loss_fn]" in out
    names = ["out_a", "out_b"] if keras2 else ["a", "b"]
    keys = ["loss", *(f"{n}_loss" for n in names), f"{names[0]}_mae", f"{names[1]}_accuracy"]
    compare_fit(keras_out, torch_out, [*keys, *(f"val_{k}" for k in keys), "predict"])


def test_a_dict_of_outputs_unnamed_in_keras2_is_an_error():
    src = "# fwport: keras=2\n" + textwrap.dedent(DICT.replace(', name="out_a"', "")).lstrip("\n")
    assert "does not know the name of each output's layer, by which Keras 2" in _compile_error(src)
    assert not errors(tx(DICT.replace(', name="out_a"', "")))  # Keras 3 names them by the keys


def test_a_model_factory_of_several_outputs_still_translates():
    """`model = get_model()` of the factory that compiled it is the compiled model (not another one bound after it)."""
    body = SRC.split("inputs = keras.Input", 1)[1].split("\n\n\ndef train", 1)[0]
    src = SRC.split("inputs = keras.Input", 1)[0] + "def get_model():\n" + textwrap.indent(
        "inputs = keras.Input" + body + "\nreturn model", "    ") + "\n\n\nmodel = get_model()\n\n\ndef train" + \
        SRC.split("\n\n\ndef train", 1)[1]
    r = tx(src)
    assert errors(r) == [], errors(r)
    assert "history = fit(model, optimizer, loss_fn, x, " in r.output


def test_test_on_batch_of_several_outputs_is_an_error_in_keras3():
    """Keras 3's test_on_batch gives each output's loss of the one batch; the written evaluate averages each output's
    loss over its batches of 32, as Keras 3's evaluate does (measured: 40 samples, out_b_loss 7.12 against 8.56):
    an error. Keras 2 averages by samples, where the two agree."""
    src = SRC.split("def train(")[0] + '''def train(x, ya, yb):
    return {}, model.test_on_batch(x, {"out_a": ya, "out_b": yb})
'''
    errs = errors(tx(src))
    assert len(errs) == 1 and "test_on_batch of a model of several outputs: Keras 3 gives" in errs[0][1], errs
    r = tx("# fwport: keras=2\n" + textwrap.dedent(src).lstrip("\n"))
    assert errors(r) == [], errors(r)
    assert 'evaluate(model, loss_fn, x, {"out_a": ya, "out_b": yb}, verbose=0)' in r.output
