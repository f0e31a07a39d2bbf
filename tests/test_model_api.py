"""The model-API pass: Keras model methods on translated models are errors that say what to write
instead (``summary()`` becomes ``print(model)``); the same method names on anything else are left
alone."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.packs.tf2torch.passes.model_api import METHODS
from fwport.core.rule import load_pack
from fwport.core.pipeline import translate_source
from runners import python

PACK = load_pack("tf2torch")


def tr(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "train.py", PACK)


def flagged(r) -> list[tuple[int, str]]:
    """(source line, method) of every model-API error."""
    out = []
    for f in r.findings:
        if f.severity is Severity.ERROR and f.code == "unsupported-construct" and "Keras model method" in f.message:
            out.append((f.line, f.message.split("(...)")[0].rsplit(".", 1)[-1]))
    return sorted(out)


def line_of(r, text: str) -> int:
    (line,) = [i + 1 for i, l in enumerate(r.source.splitlines()) if text in l]
    return line


def code_lines(text: str) -> list[str]:
    return [l for l in text.splitlines() if not l.lstrip().startswith("# fwport:")]


MODELS = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.fc = layers.Dense(3, input_shape=(4,))

    def call(self, x):
        return self.fc(x)


class Deeper(Net):
    pass


def build_model():
    model = keras.Sequential([keras.Input((4,)), layers.Dense(2)])
    return model


def build_functional():
    inputs = keras.Input((4,))
    return keras.Model(inputs, layers.Dense(2)(inputs))

'''


@pytest.mark.parametrize("receiver", ["build_model()", "Net()", "Deeper()", "build_functional()",
                                      "keras.Sequential([layers.Dense(2, input_shape=(3,))])"])
def test_every_kind_of_translated_model_is_recognised(receiver):
    # metrics=["mae", "auc"]: a compile the training pass's written-out loop does not reproduce (no written
    # class for the string "auc"), left to model_api
    r = tr(MODELS + f'''
model = {receiver}
model.compile(optimizer="adam", loss="mse", metrics=["mae", "auc"])
history = model.fit(x, y, epochs=2)
model.save_weights("model.weights.h5")
''')
    assert flagged(r) == [(line_of(r, "model.compile("), "compile"), (line_of(r, "model.fit("), "fit")]
    # each call is left as written, with the advice above it; no other line changes; save_weights (a
    # statement) is translated, on a model only
    assert code_lines(r.output)[-3:] == ['model.compile(optimizer="adam", loss="mse", metrics=["mae", "auc"])',
                                        "history = model.fit(x, y, epochs=2)",
                                        'torch.save(model.state_dict(), "model.weights.h5")']
    assert "# fwport: unsupported-construct: model.fit(...) is a Keras model method" in r.output


def test_each_method_says_what_to_write_instead():
    calls = "\n".join(f"_ = m.{name}(a)" for name in METHODS)  # (save / save_weights / load_weights statements are translated)
    r = tr(MODELS + "m = build_model()\n" + calls + "\n")
    # (predict, Keras 2's predict_generator and predict_on_batch need no compile: the training pass writes them out,
    # tests/test_training_params.py, tests/test_fit_generator.py, tests/test_train_on_batch.py)
    assert sorted(name for _, name in flagged(r)) == sorted(set(METHODS) - {"predict", "predict_generator",
                                                                            "predict_on_batch"})
    # (predict_generator and predict_on_batch: verbose=0)
    assert "\n_ = predict(m, a)\n" in r.output and r.output.count("_ = predict(m, a, verbose=0)\n") == 2
    msgs = {f.message.split("(...)")[0].rsplit(".", 1)[-1]: f.message for f in r.findings if "Keras model method" in f.message}
    assert "model.eval()" in msgs["test_on_batch"] and "torch.no_grad()" in msgs["test_on_batch"]
    assert "loss.backward()" in msgs["fit"] and "optimizer.step()" in msgs["fit"]
    assert "model.load_state_dict" in msgs["load_weights"] and "fwport weights" in msgs["load_weights"]


def test_summary_statement_becomes_print():
    r = tr(MODELS + '''
model = build_model()
model.summary()
build_model().summary()
''')
    assert code_lines(r.output)[-2:] == [
        'print(model, "\\nTrainable params:", sum(p.numel() for p in model.parameters() if p.requires_grad))',
        "print(build_model())"]
    infos = [f for f in r.findings if f.code == "idiom-replaced"]
    assert len(infos) == 2 and all(f.severity is Severity.INFO for f in infos)
    assert flagged(r) == []


def test_summary_with_arguments_or_as_a_value_is_an_error():
    r = tr(MODELS + '''
model = build_model()
model.summary(print_fn=log)
text = model.summary()
model.summary(line_length=80)
''')
    assert [m for _, m in flagged(r)] == ["summary", "summary"]
    assert code_lines(r.output)[-3:-1] == ["model.summary(print_fn=log)", "text = model.summary()"]
    # arguments that only lay out Keras's table: the same print
    assert code_lines(r.output)[-1].startswith("print(model, ")


def test_model_in_a_function_scope_and_a_global_seen_from_a_function():
    r = tr(MODELS + '''
model = build_model()


def main():
    net = Net()
    net.fit(x, y)
    model.evaluate(x)
''')
    assert [m for _, m in flagged(r)] == ["fit", "evaluate"]


def test_arguments_of_a_flagged_call_are_left_as_written():
    r = tr(MODELS + '''
model = build_model()
model.fit(tf.reduce_sum(x, axis=1), y)
''')
    assert code_lines(r.output)[-1] == "model.fit(tf.reduce_sum(x, axis=1), y)"


def test_same_method_names_on_other_objects_are_left_alone():
    src = MODELS + '''
import re
from sklearn.linear_model import LinearRegression

pattern = re.compile("a+")
clf = LinearRegression().fit(X, y)
clf.predict(X)


def train(model, data):  # a parameter: could be anything
    model.fit(data)


def rebound():
    model = build_model()
    model = LinearRegression()  # not only a model in this scope
    model.fit(X, y)


def shadow():
    build_model = LinearRegression
    build_model().fit(X, y)


class Trainer:
    def fit(self):
        self.compile()
        return self.model.fit(x)
'''
    r = tr(src)
    assert flagged(r) == []
    assert 'pattern = re.compile("a+")' in r.output and "model.fit(data)" in r.output
    assert not [f for f in r.findings if f.code == "idiom-replaced"]


def test_fixpoint():
    r = tr(MODELS + '''
model = build_model()
model.summary()
model.fit(x, y)
''')
    again = translate_source(r.output, "train.py", PACK)
    assert again.output == r.output


def test_a_translation_says_again_only_what_its_comment_is_about():
    # model.evaluate is a model method on a translated model; loaded.evaluate is not known to be one:
    # translating the output again must not start reporting loaded.evaluate from model's comment
    src = textwrap.dedent('''
        from keras import layers, models, saving

        def check(x):
            model = models.Sequential([layers.Dense(2)])
            loaded = saving.deserialize_keras_object(config)
            return model.evaluate(x) == loaded.evaluate(x)
    ''').lstrip("\\n")
    first = translate_source(src, "m.py")
    second = translate_source(first.output, "m.py")
    assert second.output == first.output
    msgs = [f.message.split(" is ")[0] for f in first.findings if f.code == "unsupported-construct"]
    assert msgs == ["model.evaluate(...)"]
    assert [f.message.split(" is ")[0] for f in second.findings if f.code == "unsupported-construct"] == msgs


def test_model_build_is_flagged_and_a_layers_own_build_is_not():
    """`model.build(shape)` was left as written without a finding (AttributeError when it ran)."""
    r = tr('''
import tensorflow as tf

class Scale(tf.keras.layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(name="w", shape=(input_shape[-1],))
        super().build(input_shape)

    def call(self, x):
        return x * self.w

class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.fc = tf.keras.layers.Dense(4)

    def call(self, x):
        return self.fc(x)

shape = (None, 8)
model = Net()
model.build(shape)
''')
    # (a literal shape on a subclass instance is translated: tests/test_layer_gaps.py)
    assert flagged(r) == [(line_of(r, "model.build("), "build")]
    assert "model(torch.zeros(1, ...))" in r.output


TARGET_NETWORK = '''
from tensorflow import keras
from tensorflow.keras import layers


def create_q_model():
    inputs = layers.Input(shape=(8, 8, 2))
    x = layers.Conv2D(4, 3, strides=2, activation="relu")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Flatten()(x)
    return keras.Model(inputs=inputs, outputs=layers.Dense(3)(x))


model = create_q_model()
model_target = create_q_model()
model_target.set_weights(model.get_weights())
'''


def test_a_target_network_copy_is_load_state_dict(tmp_path):
    # keras-io's DQN and DDPG: target.set_weights(model.get_weights()) → load_state_dict, every weight copied
    # (BatchNorm's moving statistics too); a get_weights() used as a list stays an error
    r = tr(TARGET_NETWORK + "w = model.get_weights()\n")
    assert "\nmodel_target.load_state_dict(model.state_dict())\n" in r.output
    assert flagged(r) == [(16, "get_weights")]
    pytest.importorskip("torch")
    code = tr(TARGET_NETWORK).output + textwrap.dedent('''
        import torch
        x = torch.randn(5, 8, 8, 2)
        with torch.no_grad():
            model(x)  # moves model's BatchNorm statistics away from the target's
        model.eval(); model_target.eval()
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.add_(0.5)
            model_target.load_state_dict(model.state_dict())
            a, b = model(x), model_target(x)
        assert torch.equal(a, b), (a - b).abs().max()
        other = create_q_model()
        other(x)
        with torch.no_grad():
            assert not torch.equal(other.eval()(x), a)
        print("same")
    ''')
    (tmp_path / "run.py").write_text(code)
    out = python(tmp_path / "run.py", side="torch", timeout=300)
    assert out.returncode == 0 and "same" in out.stdout, out.stderr[-2000:]


SOFT_UPDATE = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


def get_actor():
    inputs = layers.Input(shape=(3,))
    out = layers.Dense(4, activation="relu")(inputs)
    out = layers.BatchNormalization()(out)
    outputs = layers.Dense(1, activation="tanh")(out)
    return keras.Model(inputs, outputs)


actor_model = get_actor()
target_actor = get_actor()


def update_target(target_weights, weights, tau):
    for (a, b) in zip(target_weights, weights):
        a.assign(b * tau + a * (1 - tau))


n_trainable = len(actor_model.trainable_variables)
n_all = len(actor_model.variables)
'''


def test_a_soft_update_over_model_variables_runs_like_keras(tmp_path):
    """keras-io's DDPG: `update_target(target.variables, model.variables, tau)` with `a.assign(...)` in a loop
    over them translated "clean" and failed at run time (an nn.Module has no .variables, a tensor no .assign).
    Now: the parameters and buffers, and .data.copy_; checked by running both: every weight of the target
    moves to tau·model + (1 - tau)·target, in Keras and in torch alike."""
    r = tr(SOFT_UPDATE)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    assert "update_target" in r.output and ".variables" not in r.output and ".assign(" not in r.output
    assert "a.data.copy_(" in r.output
    check = textwrap.dedent('''
        import json
        import numpy as np
        def values(ws):
            return [np.array(w.detach().numpy() if hasattr(w, "detach") else w.numpy(), dtype=np.float64) for w in ws]
        before_t, before_m = values(WEIGHTS(target_actor)), values(WEIGHTS(actor_model))
        update_target(WEIGHTS(target_actor), WEIGHTS(actor_model), 0.25)
        after_t = values(WEIGHTS(target_actor))
        worst = max(float(np.abs(a - (0.25 * m + 0.75 * t)).max()) for a, m, t in zip(after_t, before_m, before_t))
        moved = sum(float(np.abs(a - t).max()) > 0 for a, t in zip(after_t, before_t))
        print(json.dumps({"worst": worst, "moved": moved, "n_trainable": n_trainable, "n_all": n_all}))
    ''')
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    import json
    results = {}
    for side, program, weights in (("keras", SOFT_UPDATE, "lambda m: m.variables"),
                                   ("torch", r.output, "lambda m: [*m.parameters(), *m.buffers()]")):
        path = tmp_path / f"{side}_side.py"
        path.write_text(program + f"\nWEIGHTS = {weights}\n" + check)
        out = python(path, side=side, timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
        assert out.returncode == 0, out.stderr[-2000:]
        results[side] = json.loads(out.stdout.strip().splitlines()[-1])
    for side, res in results.items():
        assert res["worst"] < 1e-6, (side, res)
    # Dense kernel, bias; BN gamma, beta; Dense kernel, bias (+ BN's moving mean/variance; torch: + num_batches_tracked)
    assert results["keras"]["n_trainable"] == results["torch"]["n_trainable"] == 6
    assert results["keras"]["n_all"] == 8 and results["torch"]["n_all"] == 9
    # the weights that differ between two fresh models moved (Keras: the two random kernels; torch: its random
    # biases too; the BatchNorm weights and statistics start equal in both)
    assert results["keras"]["moved"] == 2 and results["torch"]["moved"] == 4


def test_model_layers_is_an_error_that_a_second_translation_repeats():
    # (the ragged constant keeps TensorFlow imported, so the second run translates the file again)
    r = tr(SOFT_UPDATE + "first = actor_model.layers[1]\nz = tf.ragged.constant([[1], [2, 3]])\n")
    errs = [f for f in r.findings if f.severity is Severity.ERROR and "model attribute" in f.message]
    assert [(f.line, f.message.split(" is ")[0]) for f in errs] == [(line_of(r, "actor_model.layers[1]"),
                                                                     "actor_model.layers")]
    again = tr(r.output)
    assert [f.message for f in again.findings if f.severity is Severity.ERROR and "model attribute" in f.message] \
        == [errs[0].message]
    assert again.output == r.output


ADAPT_IN_SEQUENTIAL = '''
import json

import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

data_augmentation = keras.Sequential([layers.Normalization(), layers.RandomFlip("horizontal")], name="aug")
x_train = np.arange(2 * 4 * 4 * 3, dtype="float32").reshape(2, 4, 4, 3) ** 1.5
data_augmentation.layers[0].adapt(x_train)
y = data_augmentation(x_train[:1], training=False)
print(json.dumps({"y": np.asarray(y).tolist()}))
'''


def test_a_sequential_layer_by_index_is_its_torch_entry(tmp_path):
    """keras-io's `data_augmentation.layers[0].adapt(x_train)` (six examples): the Sequential's layer k is its
    torch entry where the sequential pass recorded one (a layer with weights); run against Keras."""
    r = tr(ADAPT_IN_SEQUENTIAL)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    assert "data_augmentation[0].adapt(x_train)" in r.output
    weightless = tr(ADAPT_IN_SEQUENTIAL.replace("data_augmentation.layers[0].adapt(x_train)",
                                                "flip = data_augmentation.layers[1]"))
    # a layer without weights: its entry too (the sequential pass's spans of each layer, test_model_layers_list.py)
    assert not [f for f in weightless.findings if f.severity is Severity.ERROR]
    assert "\nflip = data_augmentation[1]\n" in weightless.output
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    import json
    out = {}
    for side, program in (("keras", ADAPT_IN_SEQUENTIAL), ("torch", r.output.replace(  # (Keras takes a NumPy array, a torch module a tensor: not translated yet)
            "y = data_augmentation(x_train[:1])", "y = data_augmentation(torch.as_tensor(x_train[:1]))"))):
        path = tmp_path / f"{side}_side.py"
        path.write_text(program)
        p = python(path, side=side, timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
        assert p.returncode == 0, p.stderr[-2000:]
        out[side] = np.array(json.loads(p.stdout.strip().splitlines()[-1])["y"])
    assert out["keras"].shape == (1, 4, 4, 3) and np.abs(out["keras"]).max() > 0.5
    np.testing.assert_allclose(out["torch"], out["keras"], rtol=1e-5, atol=1e-5)


def test_a_model_handed_back_in_a_tuple_stays_a_model():
    # keras-io convmixer: `history, model = run_experiment(model)` returns the model it is given with its history;
    # the name is still the translated model, so Keras-only attributes on it are errors, not left as written
    # (model.layers[2].get_weights() would fail at run time in the translation)
    r = tr('''
        from tensorflow import keras


        def build():
            return keras.Sequential([keras.layers.Dense(4, input_shape=(3,))])


        def run_experiment(model, epochs=1):
            history = {"loss": [0.0]}
            return history, model


        model = build()
        history, model = run_experiment(model)
        w = model.layers[0].get_weights()[0]
        for layer in model.layers:
            print(layer)
        other, stats = run_experiment(build())
        print(stats.layers)
    ''')
    errors = sorted((f.line, f.message.split(" is ")[0]) for f in r.findings if f.severity is Severity.ERROR)
    assert (15, "model.layers") in errors and (16, "model.layers") in errors, r.findings
    assert not any(line == 18 for line, _ in errors), r.findings  # `other` is the history, not a model
    # f(...)[i] of a function returning a model there: the name bound to it is a model too
    assert (19, "stats.layers") in errors, r.findings
