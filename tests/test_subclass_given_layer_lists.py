"""Layers held in a list that a class's ``__init__`` is given (``MLP([Linear(5, 4), Linear(4, 3)])``: TF's MLP
tutorial's ``tf.Module``, or a Keras Model's ``self.blocks = blocks``): Keras and tf.Module track the variables of
the layers in a list attribute; torch registers a module's parameters only in an ``nn.ModuleList`` (subclass.py
``_given_list``). Before, the translation kept the plain list: the forward computed the same, but the layers were
missing from ``model.parameters()``, so the translated optimizer never trained them (and state_dict / ``.to``
missed them), with no finding.

Numbers: the translation takes one SGD step from its initial weights; Keras runs the original from the same weights
(read from the translation's state_dict) and the same step: every weight moves, and by the same amount on both
sides; the parameter counts equal Keras's trainable variable counts."""
from __future__ import annotations

import importlib.util
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import keras_and_torch, run_side

needs_both = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None
                                or importlib.util.find_spec("torch") is None, reason="needs TensorFlow and PyTorch")

PROGRAM = '''
import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class Linear(tf.Module):
    def __init__(self, in_dim, out_dim, activation=None):
        super().__init__()
        self.w = tf.Variable(tf.random.normal([in_dim, out_dim]))
        self.b = tf.Variable(tf.zeros([out_dim]))
        self.activation = activation

    def __call__(self, x):
        y = tf.matmul(x, self.w) + self.b
        return y if self.activation is None else self.activation(y)


class MLP(tf.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = layers

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Stack(keras.Model):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = blocks

    def call(self, x, training=None):
        for block in self.blocks:
            x = block(x, training=training)
        return x


mlp = MLP([Linear(5, 4, tf.nn.relu), Linear(4, 3)])
stack = Stack([layers.Dense(4, activation="tanh"), layers.Dense(3)])
mlp_optimizer = keras.optimizers.SGD(learning_rate=0.1)
stack_optimizer = keras.optimizers.SGD(learning_rate=0.1)


def mlp_step(x, t):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(mlp(x) - t))
    grads = tape.gradient(loss, mlp.trainable_variables)
    mlp_optimizer.apply_gradients(zip(grads, mlp.trainable_variables))
    return loss


def stack_step(x, t):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(stack(x, training=True) - t))
    grads = tape.gradient(loss, stack.trainable_variables)
    stack_optimizer.apply_gradients(zip(grads, stack.trainable_variables))
    return loss
'''

# inputs and targets of the step, the same on both sides
DATA = '''
import numpy as np
x = np.linspace(-1.0, 1.0, 15).reshape(3, 5).astype("float32")
t = np.linspace(0.5, -0.5, 9).reshape(3, 3).astype("float32")
'''

TORCH_DRIVER = DATA + '''
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
import model as m
x, t = torch.from_numpy(x), torch.from_numpy(t)
with torch.no_grad():
    m.stack(x)  # (its LazyLinear modules take their sizes)
weights = {name: {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}
           for name, module in (("mlp", m.mlp), ("stack", m.stack))}
np.savez(sys.argv[1] + "/weights.npz", **{f"{n}/{k}": v for n, w in weights.items() for k, v in w.items()})
m.mlp_step(x, t)
m.stack_step(x, t)
print("RESULT " + json.dumps({
    "before": {f"{n}/{k}": v.tolist() for n, w in weights.items() for k, v in w.items()},
    "after": {f"{n}/{k}": v.detach().numpy().tolist() for n, module in (("mlp", m.mlp), ("stack", m.stack))
              for k, v in module.state_dict().items()},
    "counts": [len(list(m.mlp.parameters())), len(list(m.stack.parameters()))]}))
'''

KERAS_DRIVER = DATA + '''
import json, sys
sys.path.insert(0, sys.argv[1])
import model as m
w = np.load(sys.argv[3])
m.stack(x)
for i, layer in enumerate(m.mlp.layers):
    layer.w.assign(w[f"mlp/layers.{i}.w"])
    layer.b.assign(w[f"mlp/layers.{i}.b"])
for block, key in zip(m.stack.blocks, ("stack/blocks.0.0", "stack/blocks.1")):
    block.set_weights([w[key + ".weight"].T, w[key + ".bias"]])
m.mlp_step(x, t)
m.stack_step(x, t)
after = {f"mlp/layers.{i}.{k}": np.asarray(getattr(layer, k)).tolist()
         for i, layer in enumerate(m.mlp.layers) for k in ("w", "b")}
for block, key in zip(m.stack.blocks, ("stack/blocks.0.0", "stack/blocks.1")):
    kernel, bias = block.get_weights()
    after[key + ".weight"], after[key + ".bias"] = kernel.T.tolist(), bias.tolist()
print("RESULT " + json.dumps({"after": after,
                              "counts": [len(m.mlp.trainable_variables), len(m.stack.trainable_variables)]}))
'''


@needs_both
def test_a_given_list_of_layers_trains_every_weight(tmp_path):
    program = textwrap.dedent(PROGRAM).lstrip()
    r = translate_source(program, "prog.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert not errors, [f.message for f in errors]
    assert "self.layers = nn.ModuleList(layers)" in r.output
    assert "self.blocks = nn.ModuleList(blocks)" in r.output
    torch_result = run_side(tmp_path / "torch", "torch", r.output, TORCH_DRIVER, "torch")
    keras_result = run_side(tmp_path / "keras", "keras", program, KERAS_DRIVER, "keras",
                            str(tmp_path / "torch" / "weights.npz"))
    assert torch_result["counts"] == keras_result["counts"] == [4, 4]
    before, after = torch_result["before"], torch_result["after"]
    assert sorted(after) == sorted(keras_result["after"]) == sorted(before)
    for key in before:
        moved = np.asarray(after[key]) - np.asarray(before[key])
        assert np.abs(moved).max() > 1e-4, key  # the step reached this weight
        np.testing.assert_allclose(after[key], keras_result["after"][key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_a_given_list_is_wrapped_only_where_its_items_are_layers():
    r = translate_source(textwrap.dedent('''
        import tensorflow as tf
        from tensorflow import keras
        from tensorflow.keras import layers


        class Stack(keras.Model):
            def __init__(self, blocks, acts, sizes):
                super().__init__()
                self.blocks = blocks
                self.acts = acts
                self.sizes = sizes

            def call(self, x, training=None):
                for block in self.blocks:
                    x = block(x, training=training)
                for act in self.acts:
                    x = act(x)
                return x * len(self.sizes)


        class Free(keras.Model):
            def __init__(self, steps, scales):
                super().__init__()
                self.steps = steps
                self.scales = scales

            def call(self, x):
                for s in self.scales:
                    x = x * s
                return self.steps[0](x)


        class Mixed(keras.Model):
            def __init__(self, things):
                super().__init__()
                self.things = things

            def call(self, x):
                return self.things[0](x)


        stack = Stack([layers.Dense(4), layers.Dropout(0.1)], [tf.nn.relu, lambda t: t * 2], [4, 2])
        mixed = Mixed([layers.Dense(4), tf.nn.relu])
    ''').lstrip(), "prog.py")
    out = r.output
    assert "self.blocks = nn.ModuleList(blocks)" in out and "x = block(x)\n" in out  # (a module takes no training)
    assert "self.acts = acts\n" in out and "self.sizes = sizes\n" in out  # functions, numbers: a list as they were
    # Free is made nowhere in the file: its steps' items are called, so taken to be layers; its scales are not
    assert "self.steps = nn.ModuleList(steps)" in out and "self.scales = scales\n" in out
    wrapped = [f for f in r.findings if f.code == "idiom-replaced" and "nn.ModuleList(" in f.message]
    assert [(f.line, f.severity, "taken to be layers" in f.message) for f in wrapped] == [
        (9, Severity.INFO, False), (24, Severity.INFO, True)]
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.line for f in errors] == [36] and "nn.ModuleList" in errors[0].message, [f.message for f in errors]
    assert "self.things = things\n" in out


def test_a_given_dict_of_layers_becomes_a_module_dict():
    r = translate_source(textwrap.dedent('''
        import tensorflow as tf
        from tensorflow import keras
        from tensorflow.keras import layers


        class Heads(keras.Model):
            def __init__(self, heads, acts):
                super().__init__()
                self.heads = heads
                self.acts = acts

            def call(self, x):
                return self.acts["a"](self.heads["a"](x))


        class Free(keras.Model):
            def __init__(self, heads):
                super().__init__()
                self.heads = heads

            def call(self, x):
                return self.heads["out"](x)


        model = Heads({"a": layers.Dense(2), "b": layers.Dense(3)}, {"a": tf.nn.relu})
    ''').lstrip(), "prog.py")
    out = r.output
    assert out.count("self.heads = nn.ModuleDict(heads)") == 2, out  # (Free: made nowhere, its values called)
    assert "self.acts = acts\n" in out  # a dict of functions stays a dict
    assert not [f for f in r.findings if f.severity is Severity.ERROR]


VARIABLES = '''
import numpy as np
import tensorflow as tf
from tensorflow import keras


class MLP(tf.Module):
    def __init__(self, sizes):
        super().__init__()
        self.ws = [tf.Variable(tf.ones([a, b]) * 0.1) for a, b in zip(sizes[:-1], sizes[1:])]
        self.bs = []
        for b in sizes[1:]:
            self.bs.append(tf.Variable(tf.zeros([b])))

    def __call__(self, x):
        for w, b in zip(self.ws, self.bs):
            x = tf.tanh(tf.matmul(x, w) + b)
        return x


mlp = MLP([5, 4, 3])
optimizer = keras.optimizers.SGD(learning_rate=0.5)


def step(x, t):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(mlp(x) - t))
    grads = tape.gradient(loss, mlp.trainable_variables)
    optimizer.apply_gradients(zip(grads, mlp.trainable_variables))
    return loss
'''

VARIABLES_DRIVER = DATA + '''
import json, sys
sys.path.insert(0, sys.argv[1])
import model as m
if sys.argv[2] == "torch":
    import torch
    x, t = torch.from_numpy(x), torch.from_numpy(t)
m.step(x, t)
weights = [np.asarray(v.detach() if hasattr(v, "detach") else v).tolist() for v in [*m.mlp.ws, *m.mlp.bs]]
count = len(list(m.mlp.parameters())) if sys.argv[2] == "torch" else len(m.mlp.trainable_variables)
print("RESULT " + json.dumps({"weights": weights, "count": count}))
'''


@needs_both
def test_a_list_of_variables_becomes_a_parameter_list_that_trains(tmp_path):
    program = textwrap.dedent(VARIABLES).lstrip()
    r = translate_source(program, "prog.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.output
    assert "self.ws = nn.ParameterList([nn.Parameter(" in r.output and "self.bs = nn.ParameterList()" in r.output
    keras_result, torch_result = keras_and_torch(tmp_path, program, r.output, VARIABLES_DRIVER)
    assert keras_result["count"] == torch_result["count"] == 4
    for k, t in zip(keras_result["weights"], torch_result["weights"]):
        np.testing.assert_allclose(t, k, rtol=1e-5, atol=1e-6)
    assert np.abs(np.asarray(torch_result["weights"][0]) - 0.1).max() > 1e-3  # the step moved the weights
