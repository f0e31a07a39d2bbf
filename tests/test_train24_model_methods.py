"""Keras model methods on models fwport translates (issue 9, train24): what used to stay an error
("... is a Keras model method; the translated model is an nn.Module, which has none") where the translation
can be exact. Each case is translated and run, and compared with Keras."""
from __future__ import annotations

import json
import tempfile
import textwrap
from pathlib import Path

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from runners import python

PACK = load_pack("tf2torch")


def tr(src: str, **opts):
    return translate_source(textwrap.dedent(src).lstrip("\n"), PACK, **opts)


def errors(result) -> list[str]:
    return [f.message for f in result.findings if f.severity == Severity.ERROR]


def _run(program: str, tail: str, before=None, **env_extra: str) -> dict:
    """Run ``program`` then ``tail`` as Python runs a file (in the test file's warm worker of the side its imports
    call for: TensorFlow unimportable for a translation); ``tail`` prints one JSON object last."""
    with tempfile.TemporaryDirectory() as d:
        if before is not None:
            before(d)
        path = Path(d) / "prog.py"
        path.write_text(textwrap.dedent(program) + "\n" + textwrap.dedent(tail))
        env = dict(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", **env_extra)
        p = python(path, env=env, timeout=600, cwd=d, check=True)
        return json.loads(p.stdout.strip().splitlines()[-1])


# --- model.build(...) of a Sequential (dragen1860's MNIST tutorials) ------------------------------------------

_SEQ_BUILD = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

features = 4 * 3
model = keras.Sequential([layers.Dense(8, activation="relu"), layers.BatchNormalization(), layers.Dense(3)])
model.build(input_shape=(None, features))
'''


def test_build_of_a_sequential_sizes_its_lazy_modules_and_moves_nothing():
    """model.build((None, features)) on a keras.Sequential without an Input → build_on_zeros: afterwards every
    lazy Linear has Keras's kernel size (transposed), the BatchNorm statistics and the training mode are as they
    were, parameters + running statistics count as Keras's count_params(), and with Keras's weights copied in the
    outputs agree."""
    r = tr(_SEQ_BUILD)
    assert not errors(r), errors(r)
    assert "build_on_zeros(model, (None, features))" in r.output
    k = _run(_SEQ_BUILD, '''
        import json
        x = np.random.RandomState(0).randn(5, 12).astype("float32")
        print(json.dumps({"weights": [w.tolist() for w in model.get_weights()], "count": int(model.count_params()),
                          "y": model(x, training=False).numpy().tolist()}))
    ''', TF_USE_LEGACY_KERAS="1")
    t = _run(r.output, '''
        import json
        k = json.loads(open(%r).read())
        mean, var, mode = float(model[2].running_mean.abs().sum()), float((model[2].running_var - 1).abs().sum()), model.training
        tracked = int(model[2].num_batches_tracked)
        count = sum(p.numel() for p in model.parameters()) + model[2].running_mean.numel() + model[2].running_var.numel()
        w = [torch.tensor(a) for a in k["weights"]]
        with torch.no_grad():
            model[0].weight.copy_(w[0].T); model[0].bias.copy_(w[1])
            model[2].weight.copy_(w[2]); model[2].bias.copy_(w[3])
            model[2].running_mean.copy_(w[4]); model[2].running_var.copy_(w[5])
            model[3].weight.copy_(w[6].T); model[3].bias.copy_(w[7])
        model.eval()
        x = torch.tensor(np.random.RandomState(0).randn(5, 12).astype("float32"))
        with torch.no_grad():
            y = model(x)
        print(json.dumps({"mean": mean, "var": var, "training": mode, "tracked": tracked, "count": count,
                          "shapes": [list(p.shape) for p in model.parameters()],
                          "err": float((y - torch.tensor(k["y"])).abs().max())}))
    ''' % _dump(k))
    assert t["mean"] == t["var"] == 0.0 and t["tracked"] == 0 and t["training"] is True
    assert t["count"] == k["count"] == 12 * 8 + 8 + 4 * 8 + 8 * 3 + 3
    assert t["shapes"][0] == [8, 12] and t["shapes"][-2] == [3, 8]
    assert t["err"] < 1e-5


def _dump(obj) -> str:
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(obj, f)
    f.close()
    return f.name


def test_build_of_a_sequential_of_more_axes_or_rebound_stays_an_error():
    """A Sequential's build of three or more axes (its layout may become channels-first) and a name bound to
    something else too keep the error."""
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers

        model = keras.Sequential([layers.Conv2D(4, 3), layers.Flatten(), layers.Dense(2)])
        model.build((None, 8, 8, 1))
    ''')
    assert any("build(...) is a Keras model method" in m for m in errors(r)), errors(r)
    assert "build_on_zeros" not in r.output
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers

        def make():
            return keras.Sequential([layers.Dense(2)])

        model = keras.Sequential([layers.Dense(2)])
        model = make()
        model.build((None, 4))
    ''')
    assert any("build(...) is a Keras model method" in m for m in errors(r)), errors(r)


# --- model.compile() with nothing, get_weights / set_weights round trips (keras-io's reptile) -----------------

_REPTILE_SRC = '''
import numpy as np
import tensorflow as tf
import keras
from keras import layers

inputs = keras.Input(shape=(4,))
x = layers.Dense(6, activation="relu")(inputs)
x = layers.BatchNormalization()(x)
outputs = layers.Dense(3)(x)
model = keras.Model(inputs=inputs, outputs=outputs)
model.compile()
optimizer = keras.optimizers.SGD(learning_rate=0.1)


def meta_train(xs, ys, meta_iters=3, inner=2, step=0.5):
    for meta_iter in range(meta_iters):
        old_vars = model.get_weights()
        for i in range(inner):
            with tf.GradientTape() as tape:
                preds = model(xs, training=True)
                loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(ys, preds, from_logits=True))
            grads = tape.gradient(loss, model.trainable_weights)
            optimizer.apply_gradients(zip(grads, model.trainable_weights))
        new_vars = model.get_weights()
        for var in range(len(new_vars)):
            new_vars[var] = old_vars[var] + ((new_vars[var] - old_vars[var]) * step)
        model.set_weights(new_vars)
    return model.predict(xs, verbose=0)
'''

_DATA = '''
import json
rng = np.random.default_rng(3)
init = [rng.normal(size=(4, 6)), rng.normal(size=6) * 0.1, 1 + rng.normal(size=6) * 0.1, rng.normal(size=6) * 0.1,
        rng.normal(size=6) * 0.1, 1 + rng.uniform(size=6), rng.normal(size=(6, 3)), rng.normal(size=3) * 0.1]
init = [a.astype("float32") for a in init]
xs = rng.normal(size=(10, 4)).astype("float32")
ys = rng.integers(0, 3, size=10)
'''


def test_reptile_meta_step_trains_as_keras():
    """model.compile() with nothing → pass; W = model.get_weights() combined elementwise and given back by
    model.set_weights(W) → keras_get_weights / keras_set_weights: three meta-iterations of two tape steps
    each (Dense, BatchNormalization in training mode, Dense) from the same weights give Keras's weights, moving
    statistics and predictions."""
    r = tr(_REPTILE_SRC)
    assert not errors(r), errors(r)
    assert "\npass\n" in r.output and "old_vars = keras_get_weights(model)" in r.output
    assert "keras_set_weights(model, new_vars)" in r.output
    k = _run(_REPTILE_SRC, _DATA + '''
model.set_weights(init)
preds = meta_train(xs, ys)
print(json.dumps({"w": [w.tolist() for w in model.get_weights()], "p": preds.tolist()}))
''')
    t = _run(r.output, _DATA + '''
with torch.no_grad():
    model.fc1.weight.copy_(torch.tensor(init[0].T)); model.fc1.bias.copy_(torch.tensor(init[1]))
    model.bn.weight.copy_(torch.tensor(init[2])); model.bn.bias.copy_(torch.tensor(init[3]))
    model.bn.running_mean.copy_(torch.tensor(init[4])); model.bn.running_var.copy_(torch.tensor(init[5]))
    model.fc2.weight.copy_(torch.tensor(init[6].T)); model.fc2.bias.copy_(torch.tensor(init[7]))
preds = meta_train(torch.tensor(xs), torch.tensor(ys))
w = [model.fc1.weight.T, model.fc1.bias, model.bn.weight, model.bn.bias, model.bn.running_mean, model.bn.running_var,
     model.fc2.weight.T, model.fc2.bias]
out = {"w": [v.detach().numpy().tolist() for v in w], "p": np.asarray(preds).tolist()}
with torch.no_grad():  # (predict again with Keras's moving variance: see the test's note)
    model.bn.running_var.copy_(torch.tensor(json.loads(open("keras_var.json").read())))
out["p_keras_var"] = predict(model, torch.tensor(xs), verbose=0).tolist()
print(json.dumps(out))
''', before=lambda d: (Path(d) / "keras_var.json").write_text(json.dumps(k["w"][5])))
    import numpy as np
    assert len(k["w"]) == len(t["w"]) == 8
    for i, (a, b) in enumerate(zip(k["w"], t["w"])):
        if i != 5:
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5, err_msg=str(i))
    # the moving variance: torch keeps the unbiased batch variance, Keras 3 the biased one (semantic-traps.md,
    # "BatchNorm running-variance estimator"): n/(n-1) = 10/9 on each update's 1 - momentum share
    np.testing.assert_allclose(t["w"][5], k["w"][5], rtol=2e-2)
    assert not np.allclose(t["w"][5], k["w"][5], rtol=1e-5)  # (the trap, not a mix-up of positions)
    np.testing.assert_allclose(t["p_keras_var"], k["p"], rtol=1e-4, atol=1e-5)
    assert max(abs(np.asarray(a) - np.asarray(i)).max() for a, i in zip(k["w"], json.loads(json.dumps(
        [x.tolist() for x in _init_arrays()])))) > 1e-3  # (it trained)


def _init_arrays():
    import numpy as np
    scope: dict = {"np": np}
    exec(_DATA, scope)
    return scope["init"]


def test_weight_lists_read_otherwise_and_compiles_used_otherwise_stay_errors():
    """A weights list read by position (its shape is Keras's, not torch's), set_weights of arrays from
    elsewhere, and a compile() of a model that is then fitted or handed to a function keep their errors."""
    base = _REPTILE_SRC.split("def meta_train")[0]
    r = tr(base + "w = model.get_weights()\nprint(w[0].shape)\nmodel.set_weights(w)\n")
    assert sum("get_weights(...) is a Keras model method" in m for m in errors(r)) == 1, errors(r)
    assert sum("set_weights(...) is a Keras model method" in m for m in errors(r)) == 1, errors(r)
    r = tr(base + "w = model.get_weights()\nw[0] = np.zeros((4, 6))\nmodel.set_weights(w)\n")
    assert any("set_weights(...) is a Keras model method" in m for m in errors(r)), errors(r)
    r = tr(base + "model.set_weights([np.zeros((4, 6))])\n")
    assert any("set_weights(...) is a Keras model method" in m for m in errors(r)), errors(r)
    r = tr(base + "model.fit(np.zeros((2, 4)), np.zeros(2))\n")
    assert any("compile(...) is a Keras model method" in m for m in errors(r)), errors(r)
    assert "\npass\n" not in r.output
    r = tr(base + "def run(m):\n    return m\n\nrun(model)\n")
    assert any("compile(...) is a Keras model method" in m for m in errors(r)), errors(r)


# --- model.count_params() ---------------------------------------------------------------------------------

_COUNT_SRC = '''
import keras
from keras import layers

inputs = keras.Input(shape=(8, 8, 3))
x = layers.Conv2D(4, 3, activation="relu")(inputs)
x = layers.BatchNormalization()(x)
x = layers.MaxPooling2D()(x)
x = layers.Flatten()(x)
x = layers.LayerNormalization()(x)
outputs = layers.Dense(5, use_bias=False)(x)
model = keras.Model(inputs, outputs)
n = model.count_params()
'''


def test_count_params_counts_every_weight_as_keras():
    """model.count_params() → keras_count_params(model): parameters and BatchNorm's running statistics (not
    num_batches_tracked) give Keras's count of every weight, trainable or not."""
    r = tr(_COUNT_SRC)
    assert not errors(r), errors(r)
    assert "n = keras_count_params(model)" in r.output
    k = _run(_COUNT_SRC, 'import json\nprint(json.dumps({"n": int(n)}))\n')
    t = _run(r.output, 'import json\nprint(json.dumps({"n": int(n)}))\n')
    assert t["n"] == k["n"] == (3 * 3 * 3 * 4 + 4) + 4 * 4 + 2 * 36 + 36 * 5


def test_count_params_with_layers_torch_holds_otherwise_stays_an_error():
    """An LSTM (torch's two biases), a BatchNormalization without beta: the counts differ, the error stays."""
    for layer in ('layers.LSTM(4)(layers.Reshape((4, 3))(inputs))', 'layers.BatchNormalization(center=False)(inputs)'):
        src = f'''
import keras
from keras import layers

inputs = keras.Input(shape=(12,))
x = {layer}
model = keras.Model(inputs, layers.Dense(2)(x))
n = model.count_params()
'''
        r = tr(src)
        assert any("count_params(...) is a Keras model method" in m for m in errors(r)), (layer, errors(r))


def test_count_params_of_a_translation_with_lazy_modules_is_an_error():
    """Keras tuner's guide: Dense(units=units_1, input_shape=(20,)) then Dense(units_2): the second becomes an
    nn.LazyLinear, whose parameters have no size before the first call, where Keras's built model counts them:
    an error with its comment, not a count that would fail at run time."""
    r = tr('''
        import keras
        from keras import layers


        def build_model(hp):
            units_1 = hp.Int("units_1", 10, 40, step=10)
            units_2 = hp.Int("units_2", 10, 30, step=10)
            model = keras.Sequential([layers.Dense(units=units_1, input_shape=(20,)), layers.Dense(units=units_2)])
            num_params = model.count_params()
            return model, num_params
    ''')
    assert "nn.LazyLinear" in r.output
    assert any("count_params() is a Keras model method; the translated model holds lazy modules" in m
               for m in errors(r)), errors(r)
    assert "# fwport: unsupported-construct: model.count_params()" in r.output
