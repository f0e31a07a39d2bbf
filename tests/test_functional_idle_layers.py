"""Deep Learning with Python's chapter 15 (a character model, then a generation model of the same layers):

- a layer object the model's statements never call on a tensor (``tokenizer = layers.TextVectorization(...)``, only
  ``tokenizer.vocabulary_size()`` read) is no layer of the model: it stays at module level (the TextVectorization
  class written into the file, text21), and the int its method returns is a module name the class reads as any
  other run-time size;
- ``generation_model.set_weights(model.get_weights())`` between two functional models of the same layers, whose
  translations name their modules differently (``gru.0`` / ``gru``), copies layer by layer (``copy_layer_weights``),
  checked against Keras numerically.
"""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

from helpers import needs
from runners import keras_and_torch, python

PACK = load_pack("tf2torch")


def tr(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "chapter15.py", PACK)


def errors(r) -> list[tuple[int, str]]:
    return sorted((f.line, f.message) for f in r.findings if f.severity is Severity.ERROR)


TOKENIZER = '''
import keras
from keras import layers

texts = ["to be or not", "that is the question"]
tokenizer = layers.TextVectorization(split="character", output_sequence_length=12)
tokenizer.adapt(texts)
vocabulary_size = tokenizer.vocabulary_size()

inputs = layers.Input(shape=(12,), dtype="int", name="token_ids")
x = layers.Embedding(vocabulary_size, 6)(inputs)
x = layers.GRU(5, return_sequences=True)(x)
outputs = layers.Dense(vocabulary_size, activation="softmax")(x)
model = keras.Model(inputs, outputs)
token_ids = range(vocabulary_size)
'''


def test_a_layer_only_asked_for_a_size_is_not_part_of_the_model():
    r = tr(TOKENIZER)
    # the TextVectorization becomes the written vocabulary class at module level; nothing is refused
    assert errors(r) == []
    out = r.output
    assert "class Model(nn.Module):" in out and "model = Model()" in out
    assert "self.embedding = nn.Embedding(vocabulary_size, 6)" in out
    assert 'tokenizer = TextVectorization(split="character", output_sequence_length=12)' in out
    assert "vocabulary_size = tokenizer.vocabulary_size()" in out
    # the vocabulary part runs without Keras: "", "[UNK]" and the 13 characters of the two texts
    ns: dict = {}
    exec(compile(out[: out.index("\nclass Model(")], "chapter15.py", "exec"), ns)
    assert ns["vocabulary_size"] == 15 and ns["tokenizer"](["to be"]).shape == (1, 12)
    # the size is bound above the class's instance, which reads it when it is made
    assert out.index("vocabulary_size = tokenizer.vocabulary_size()") < out.index("model = Model()")
    assert "token_ids = range(vocabulary_size)" in out


def test_a_layer_called_on_a_tensor_or_read_otherwise_stays_a_layer():
    # called on the model's tensor: a layer of the model, whatever else reads it (here an attribute, outside the
    # model's statements: refused as before)
    r = tr('''
        import keras
        from keras import layers

        dense = layers.Dense(3)
        units = dense.units
        inputs = keras.Input(shape=(4,))
        outputs = dense(inputs)
        model = keras.Model(inputs, outputs)
    ''')
    assert [line for line, _ in errors(r)] == [5, 8] and "dense: a tensor or layer" in errors(r)[0][1]
    # an attribute's value (not a method's result: a layer's variable, norm.mean) is not taken for a plain value
    r = tr('''
        import keras
        from keras import layers

        norm = layers.Normalization()
        norm.adapt(data)
        mean = norm.mean
        inputs = keras.Input(shape=(4,))
        outputs = layers.Dense(3)(inputs) + mean
        model = keras.Model(inputs, outputs)
    ''')
    assert "model = keras.Model(inputs, outputs)" in r.output and "class Model" not in r.output
    assert any(m.startswith("norm.mean:") for _, m in errors(r))


@needs("torch", "tensorflow")
def test_the_model_reads_the_size_the_tokenizer_gives(tmp_path):
    # both programs run with Keras present (the tokenizer is Keras's on both sides): the torch model is sized by
    # tokenizer.vocabulary_size() at run time, as Keras's
    driver = textwrap.dedent('''
        import json, sys
        sys.path.insert(0, sys.argv[1])
        import numpy as np
        import model as m
        ids = np.array([[1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0]])
        if sys.argv[2] == "keras":
            shape = list(m.model(ids).shape)
        else:
            import torch
            shape = list(m.model(torch.as_tensor(ids)).shape)
        print("RESULT " + json.dumps({"vocabulary": int(m.vocabulary_size), "shape": shape}))
    ''')
    sides = {}
    for side, code in (("keras", textwrap.dedent(TOKENIZER)), ("torch", tr(TOKENIZER).output)):
        d = tmp_path / side
        d.mkdir()
        (d / "model.py").write_text(code)
        (d / "drive.py").write_text(driver)
        p = python(d / "drive.py", d, side, side="keras", timeout=600, env={"TF_CPP_MIN_LOG_LEVEL": "3"})
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        assert line, p.stderr[-3000:]
        sides[side] = json.loads(line[-1][len("RESULT "):])
    assert sides["torch"] == sides["keras"]
    assert sides["keras"]["shape"] == [1, 12, sides["keras"]["vocabulary"]]


GENERATION = '''
import keras
from keras import layers

vocabulary_size = 11
embedding_dim = 6
hidden_dim = 5

inputs = layers.Input(shape=(7,), dtype="int", name="token_ids")
x = layers.Embedding(vocabulary_size, embedding_dim)(inputs)
x = layers.GRU(hidden_dim, return_sequences=True)(x)
x = layers.Dropout(0.1)(x)
outputs = layers.Dense(vocabulary_size, activation="softmax")(x)
model = keras.Model(inputs, outputs)

inputs = keras.Input(shape=(1,), dtype="int", name="token_ids")
input_state = keras.Input(shape=(hidden_dim,), name="state")
x = layers.Embedding(vocabulary_size, embedding_dim)(inputs)
x, output_state = layers.GRU(hidden_dim, return_state=True)(
    x, initial_state=input_state
)
outputs = layers.Dense(vocabulary_size, activation="softmax")(x)
generation_model = keras.Model(
    inputs=(inputs, input_state),
    outputs=(outputs, output_state),
)
generation_model.set_weights(model.get_weights())
'''

COPY = "copy_layer_weights(generation_model, model, [('embedding', 'embedding'), ('gru', 'gru.0'), ('fc', 'fc')])"


def test_set_weights_between_models_of_the_same_layers_copies_layer_by_layer():
    r = tr(GENERATION)
    assert errors(r) == []
    assert r.output.rstrip().endswith("\n" + COPY)
    assert "\ndef copy_layer_weights(target, source, pairs):" in r.output
    (f,) = [f for f in r.findings if f.code == "idiom-replaced" and "set_weights" in f.message]
    assert f.line == 26 and COPY in f.message
    # other layers (a Dense where the model has its GRU): no pairing by layer, the copy by name (an error at run time
    # where the names differ, never a mix)
    other = GENERATION.replace("x, output_state = layers.GRU(hidden_dim, return_state=True)(\n    x, initial_state="
                               "input_state\n)", "x = layers.Dense(hidden_dim)(x)\noutput_state = input_state")
    r = tr(other)
    assert "generation_model.load_state_dict(model.state_dict())" in r.output
    assert "copy_layer_weights" not in r.output


@needs("torch", "tensorflow")
def test_set_weights_between_models_of_the_same_layers_runs_like_keras(tmp_path):
    # Keras: the trained model's weights set to seeded values, then the program's copy; its generation model run
    # on one token and a state. Torch: the same values moved into the translated model by its weight records (as
    # fwport weights moves them), then the translation's copy; its generation model on the same token and state
    from fwport.verify.transfer import plan, transfer
    r = tr(GENERATION)
    records = [rec for rec in r.layers if rec.scope == "model"]
    moves = plan(records, PACK)
    keys = [[m.key, int(m.layer[len("layers["):-1]), m.var] for m in moves]
    arrays = tmp_path / "arrays.npz"
    state = tmp_path / "state.npz"
    driver = textwrap.dedent('''
        import json, sys
        sys.path.insert(0, sys.argv[1])
        import numpy as np
        import model as m
        program = open(sys.argv[1] + "/model.py").read().rstrip().splitlines()
        copy = program[-1]  # the program's set_weights statement, run again once the model has the values
        token, start = np.array([[3]]), np.linspace(-1, 1, 5, dtype="float32")[None]
        if sys.argv[2] == "keras":
            rng = np.random.default_rng(0)
            m.model.set_weights([rng.normal(size=w.shape).astype("float32") for w in m.model.get_weights()])
            found = {}
            for key, index, var in json.loads(sys.argv[3]):
                obj = m.model.layers[index]
                for part in var.split("."):
                    obj = getattr(obj, part)
                found[key] = np.asarray(obj)
            np.savez(sys.argv[4], **found)
            exec(copy, vars(m))
            probs, state = m.generation_model((token, start))
            probs, state = np.asarray(probs), np.asarray(state)
        else:
            import torch
            loaded = np.load(sys.argv[5])
            m.model.load_state_dict({k: torch.as_tensor(loaded[k]) for k in loaded.files})
            exec(copy, vars(m))
            m.generation_model.eval()
            with torch.no_grad():
                probs, state = m.generation_model(torch.as_tensor(token), torch.as_tensor(start))
            probs, state = probs.numpy(), state.numpy()
        print("RESULT " + json.dumps({"probs": probs.tolist(), "state": state.tolist()}))
    ''')
    from runners import run_side
    k = run_side(tmp_path / "keras", "keras", textwrap.dedent(GENERATION), driver, "keras", json.dumps(keys),
                 str(arrays), str(state))
    moved = transfer(dict(np.load(arrays)), moves)
    np.savez(state, **moved)
    t = run_side(tmp_path / "torch", "torch", r.output, driver, "torch", json.dumps(keys), str(arrays), str(state))
    np.testing.assert_allclose(t["probs"], k["probs"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t["state"], k["state"], rtol=1e-5, atol=1e-6)
    # (the values matter: a generation model left with its own initial weights gives others)
    assert np.abs(np.asarray(k["state"])).max() > 0.1
