"""tf.Variable and tapes whose gradients no optimizer applies (rules/tf2torch/variable.toml,
passes/variables.py, passes/training.py `_plain_tape`): the translations as text, and a whole
program (manual gradient descent on variables) run by both frameworks with the same numbers."""
from __future__ import annotations

import importlib.util
import json
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python


def _translate(src: str):
    r = translate_source(textwrap.dedent(src).lstrip(), "t.py")
    return r.output, [f for f in r.findings if f.severity is Severity.ERROR]


def test_variables_in_a_plain_class_and_their_methods():
    out, errors = _translate("""
        import tensorflow as tf

        class Line(object):
            def __init__(self):
                self.W = tf.Variable(10.0)
                self.n = tf.Variable(0, trainable=False)

        line = Line()
        line.W.assign_sub(0.5)
        line.W.assign([1.0])
        line.n.assign_add(1)
        v = line.W.read_value()
        print(line.W.numpy(), line.n.value(), line.W.trainable, line.W.shape)
        """)
    assert not errors
    assert "self.W = torch.tensor(10.0, requires_grad=True)" in out
    assert "self.n = torch.tensor(0, dtype=torch.int32)" in out
    assert "line.W.data.sub_(0.5)" in out
    assert "line.W.data.copy_(torch.as_tensor([1.0]))" in out
    assert "line.n.data.add_(1)" in out
    assert "v = line.W.clone()" in out
    assert "print(line.W.detach().numpy(), line.n.clone(), line.W.requires_grad, line.W.shape)" in out


def test_unknown_variable_method_is_an_error_and_left_in_place():
    out, errors = _translate("""
        import tensorflow as tf

        w = tf.Variable([1.0, 2.0])
        w.scatter_nd_update([[0]], [5.0])
        print(w.name)
        w.assign(x.numpy(), read_value=False)
        """)
    msgs = [f.message for f in errors]
    assert len(errors) == 3, msgs
    assert any("scatter_nd_update" in m for m in msgs) and any("attribute name" in m for m in msgs)
    assert "w.scatter_nd_update([[0]], [5.0])" in out and "w.assign(x.numpy(), read_value=False)" in out


def test_variable_in_a_layer_is_a_parameter():
    out, errors = _translate(src := """
        import tensorflow as tf

        class Scale(tf.keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.w = tf.Variable(tf.ones([4]), name="w")
                self.c = tf.Variable(2.0, trainable=False)

            def call(self, x):
                self.c.assign_add(1.0)
                return x * self.w * self.c
        """)
    assert not errors
    # Keras 3 (tf.keras in TensorFlow 2.16+) does not track a raw tf.Variable attribute: not trained
    assert "self.w = nn.Parameter(torch.ones([4]), requires_grad=False)" in out
    assert "self.c = nn.Parameter(torch.tensor(2.0), requires_grad=False)" in out
    assert "self.c.data.add_(1.0)" in out
    out2, errors2 = _translate("# fwport: keras=2\n" + textwrap.dedent(src))  # Keras 2 trains it
    assert not errors2
    assert "self.w = nn.Parameter(torch.ones([4]))" in out2
    assert "self.c = nn.Parameter(torch.tensor(2.0), requires_grad=False)" in out2


def test_the_guide_layer_initialised_by_an_initializer_object_trains():
    """TensorFlow's guide to custom layers: tf.Variable(initial_value=w_init(shape=..., dtype="float32"),
    trainable=True). A dtype named by a string had been read as not floating: the parameters came out frozen
    (requires_grad=False), with no finding, and the layer could not train. (Keras 2, which the guide was written
    for: Keras 3 does not train a raw tf.Variable attribute, test_functional_user_tuples.py.)"""
    out, errors = _translate("""
        # fwport: keras=2
        import tensorflow as tf

        class Linear(tf.keras.layers.Layer):
            def __init__(self, units=4, input_dim=3):
                super().__init__()
                w_init = tf.random_normal_initializer()
                self.w = tf.Variable(initial_value=w_init(shape=(input_dim, units), dtype="float32"), trainable=True)
                b_init = tf.zeros_initializer()
                self.b = tf.Variable(initial_value=b_init(shape=(units,), dtype="float32"), trainable=True)
                self.steps = tf.Variable(initial_value=0, dtype="int64", trainable=False)

            def call(self, inputs):
                return tf.matmul(inputs, self.w) + self.b
        """)
    assert not errors
    assert "requires_grad=False" not in out.split("self.steps")[0]
    torch = pytest.importorskip("torch")
    ns: dict = {}
    exec(compile(out, "t.py", "exec"), ns)
    layer = ns["Linear"]()
    assert {n for n, p in layer.named_parameters() if p.requires_grad} == {"w", "b"}
    assert layer.w.shape == (3, 4) and torch.equal(layer.b, torch.zeros(4)) and 0 < float(layer.w.detach().std()) < 0.2
    assert layer(torch.ones(2, 3)).shape == (2, 4)


def test_tf_module_subclass_is_an_nn_module_with_parameters():
    out, errors = _translate("""
        import tensorflow as tf

        class Affine(tf.Module):
            def __init__(self, n, name=None):
                super().__init__(name=name)
                self.w = tf.Variable(tf.random.normal([n, n]), name="w")
                self.steps = tf.Variable(0, trainable=False)

            def __call__(self, x):
                return tf.matmul(x, self.w)
        """)
    assert not errors, [f.message for f in errors]
    assert "class Affine(nn.Module):" in out and "super().__init__()" in out
    assert "self.w = nn.Parameter(torch.randn([n, n]))" in out
    assert "self.steps = nn.Parameter(torch.tensor(0, dtype=torch.int32), requires_grad=False)" in out


def test_refused_arguments_and_tape_sources():
    out, errors = _translate("""
        import tensorflow as tf

        w = tf.Variable(1.0, constraint=lambda t: t)
        x = tf.constant(1.0)
        with tf.GradientTape() as tape:
            y = x * x
        g = tape.gradient(y, {"x": x})
        """)
    msgs = [f.message for f in errors]
    assert any("constraint" in m for m in msgs), msgs
    assert any("tf.GradientTape" in m for m in msgs), msgs  # a dict of non-variables: still refused
    assert "tape.gradient(y, {" in out


def test_persistent_tape_and_single_source():
    out, errors = _translate("""
        import tensorflow as tf

        w = tf.Variable([1.0, -2.0])
        with tf.GradientTape(persistent=True) as tape:
            y = tf.reduce_sum(w * w)
            z = y * 2.0
        dy = tape.gradient(y, w)
        dz, = tape.gradient(z, [w])
        del tape
        q = tf.Variable(1.0, constraint=abs)
        """)
    assert [f.line for f in errors] == [10]  # located on the input: the lines that went are counted
    assert "dy = torch.autograd.grad(y.sum(), w, retain_graph=True)[0]" in out
    assert "dz, = torch.autograd.grad(z.sum(), [w])" in out
    assert "GradientTape" not in out and "del tape" not in out
    lines = out.splitlines()
    # the error's comment sits right above its statement although the `with` and `del` lines went
    at = next(i for i, t in enumerate(lines) if t.startswith("q = "))
    assert lines[at - 1].startswith("# fwport: unsupported-argument: constraint=abs")


# --- the same program run by TensorFlow and by its translation ------------------------------------

PROGRAM = '''
import json

import numpy as np
import tensorflow as tf


class Line(object):
    def __init__(self):
        self.slope = tf.Variable(4.0)
        self.offset = tf.Variable(-1.5)

    def __call__(self, x):
        return self.slope * x + self.offset


def mse(target, pred):
    return tf.reduce_mean(tf.square(target - pred))


rng = np.random.default_rng(7)
xs = tf.constant(rng.normal(size=200).astype("float32"))
ys = xs * 1.7 + 0.4 + tf.constant(rng.normal(scale=0.2, size=200).astype("float32"))
line = Line()
steps = tf.Variable(0)
lr = 0.05
losses = []
for step in range(40):
    with tf.GradientTape() as tape:
        loss = mse(ys, line(xs))

    d_slope, d_offset = tape.gradient(loss, [line.slope, line.offset])

    line.slope.assign_sub(lr * d_slope)
    line.offset.assign_sub(lr * d_offset)
    steps.assign_add(1)
    losses.append(float(loss))

w = tf.Variable([1.0, -2.0])
with tf.GradientTape(persistent=True) as tape:
    y = tf.reduce_sum(w * w * w)
    z = y * 2.0
dy = tape.gradient(y, w)
dz = tape.gradient(z, [w])
with tf.GradientTape() as tape:
    u = w * 3.0
du = tape.gradient(u, w)
snapshot = w.read_value()
w.assign([0.5, 0.25])
p = tf.Variable([0.5, -1.0])
q = tf.Variable(2.0)
opt = tf.keras.optimizers.SGD(0.1, momentum=0.9)
for step in range(5):
    with tf.GradientTape() as tape:
        fit = tf.reduce_sum((p * q - xs[:2]) ** 2)
    grads = tape.gradient(fit, [p, q])
    opt.apply_gradients(zip(grads, [p, q]))
c = tf.constant([1.0, 3.0])
with tf.GradientTape(persistent=True) as tape:
    tape.watch(c)
    c2 = c * c
    c4 = c2 * c2
dc4 = tape.gradient(c4, c)
dc2 = tape.gradient(c2, [c])
print(json.dumps({
    "slope": float(line.slope.numpy()), "offset": float(line.offset.numpy()), "losses": losses,
    "steps": int(steps.numpy()), "steps_dtype": str(steps.numpy().dtype),
    "slope_dtype": str(line.slope.numpy().dtype),
    "dy": dy.numpy().tolist(), "dz": dz[0].numpy().tolist(), "du": du.numpy().tolist(),
    "snapshot": snapshot.numpy().tolist(), "w": w.numpy().tolist(),
    "dc4": dc4.numpy().tolist(), "dc2": dc2[0].numpy().tolist(), "p": p.numpy().tolist(), "q": float(q.numpy()),
}))
'''

_BLOCK = '''
import runpy, sys
for name in ("tensorflow", "keras", "tf_keras"):
    sys.modules[name] = None  # import raises ImportError; importlib.util.find_spec (torch._dynamo asks) says absent
runpy.run_path(sys.argv[1], run_name="__main__")
'''


def _run(path, block: bool) -> dict:
    """The JSON a program prints last, run as Python runs a file: a translation (``block``) with TensorFlow
    unimportable, the original with it (each in the test file's warm worker of that side)."""
    args = ("-c", _BLOCK, path) if block else (path,)
    proc = python(*args, side="torch" if block else "keras", env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""},
                  timeout=300, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("torch") is None,
                    reason="needs TensorFlow and PyTorch")
def test_manual_gradient_descent_runs_like_tensorflow(tmp_path):
    r = translate_source(PROGRAM.lstrip(), "line.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    assert "tensorflow" not in r.output and "GradientTape" not in r.output
    assert r.output.count("\n") == PROGRAM.lstrip().count("\n") - 4  # the four `with` lines go (the optimizer's becomes zero_grad())
    src, out = tmp_path / "tf_program.py", tmp_path / "torch_program.py"
    src.write_text(PROGRAM)
    out.write_text(r.output)
    tf_result, torch_result = _run(src, block=False), _run(out, block=True)
    assert torch_result["steps"] == tf_result["steps"] == 40
    assert torch_result["steps_dtype"] == tf_result["steps_dtype"] == "int32"
    assert torch_result["slope_dtype"] == tf_result["slope_dtype"] == "float32"
    for key in ("slope", "offset"):
        assert torch_result[key] == pytest.approx(tf_result[key], rel=1e-5, abs=1e-6), key
    assert torch_result["slope"] == pytest.approx(1.7, abs=0.1)  # it did train
    assert torch_result["losses"] == pytest.approx(tf_result["losses"], rel=1e-5, abs=1e-6)
    assert "opt = torch.optim.SGD([p, q], lr=0.1, momentum=0.9)" in r.output
    for key in ("dy", "dz", "du", "snapshot", "w", "dc4", "dc2", "p", "q"):
        assert torch_result[key] == pytest.approx(tf_result[key], rel=1e-6), key
    assert tf_result["du"] == [3.0, 3.0] and tf_result["snapshot"] == [1.0, -2.0]
    assert tf_result["dc4"] == [4.0, 108.0] and tf_result["dc2"] == [2.0, 6.0]


MODEL_OUTPUT_NUMPY = '''
import json

import numpy as np
import tensorflow as tf


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.fc = tf.keras.layers.Dense(3)

    def call(self, x):
        return self.fc(x)


model = Net()
x = tf.constant(np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(2, 4))
y = model(x)
loss = tf.reduce_mean(tf.square(y))
print(json.dumps({"y": y.numpy().tolist(), "loss": float(loss.numpy()), "row": y[0].numpy().tolist(),
                  "x": x.numpy().tolist()}))
'''


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("torch") is None,
                    reason="needs TensorFlow and PyTorch")
def test_numpy_of_a_model_output_detaches_it(tmp_path):
    """TensorFlow's eager tensors always give numpy(); torch refuses it on a tensor that requires grad, which
    every model output, loss and weight is: each x.numpy() is x.detach().numpy(), in files without tf.Variable
    too (as written, torch raised RuntimeError on the first one)."""
    r = translate_source(MODEL_OUTPUT_NUMPY.lstrip(), "out.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    assert r.output.count(".detach().numpy()") == 4 and ".numpy()" not in r.output.replace(".detach().numpy()", "")
    src, out = tmp_path / "tf_out.py", tmp_path / "torch_out.py"
    src.write_text(MODEL_OUTPUT_NUMPY)
    out.write_text(r.output)
    tf_result, torch_result = _run(src, block=False), _run(out, block=True)
    # the weights are each framework's own random ones: the values read through numpy() agree with each other
    assert torch_result["x"] == tf_result["x"]
    for res in (tf_result, torch_result):
        y = np.array(res["y"])
        assert y.shape == (2, 3) and np.abs(y).max() > 0
        assert res["row"] == pytest.approx(y[0].tolist(), rel=1e-6)
        assert res["loss"] == pytest.approx(float(np.mean(y ** 2)), rel=1e-5)


def test_a_receiver_spread_over_lines_keeps_its_lines():
    """keras-io probing_vits: `(model.layers[1]\\n.get_layer("p")\\n.kernel.numpy())` crashed the translation (the
    receiver was rendered and parsed again as text, which a line break outside parentheses cannot be)."""
    src = textwrap.dedent('''
        import tensorflow as tf

        projections = (
            model.layers[1]
            .get_layer("projection")
            .kernel.numpy()
        )
        target = (
            weights[0]
        )
        (
            target
            .kernel
        ).assign(projections)
    ''').lstrip()
    r = translate_source(src, "p.py")
    assert r.status.value != "failed", [f.message for f in r.findings]
    assert '    .get_layer("projection")\n    .kernel.detach().numpy()\n)' in r.output
    assert ").data.copy_(torch.as_tensor(projections))" in r.output
    compile(r.output, "p.py", "exec")
    again = translate_source(r.output, "p.py")
    assert again.output == r.output


STAGES_PROGRAM = '''
import json

import numpy as np
import tensorflow as tf


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.stages = [tf.keras.layers.Dense(4), tf.keras.layers.Dense(2)]
        self.head = tf.keras.layers.Dense(1)

    def call(self, x):
        for stage in self.stages:
            x = stage(x)
        return self.head(x)


def stage_variables(net):
    return [stage.trainable_variables for stage in net.stages]


net = Net()
x = tf.constant(np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3))
net(x)
per_stage = stage_variables(net)
print(json.dumps({"counts": [len(v) for v in per_stage],
                  "sizes": [sorted(int(np.prod(w.shape)) for w in v) for v in per_stage],
                  "head": sum(int(np.prod(w.shape)) for w in net.head.trainable_weights)}))
'''


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("torch") is None,
                    reason="needs TensorFlow and PyTorch")
def test_trainable_variables_of_a_loop_variable_are_its_parameters(tmp_path):
    """keras-io shiftvit: `[stage.trainable_variables for stage in self.stages]`, where fwport cannot tell the
    loop variable is a model, stayed as written: an AttributeError at run time with no finding. Only Keras layers
    and models have trainable_variables, so on any receiver they are its trainable parameters."""
    r = translate_source(STAGES_PROGRAM.lstrip(), "stages.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    assert "trainable_variables" not in r.output and "trainable_weights" not in r.output
    src, out = tmp_path / "tf_stages.py", tmp_path / "torch_stages.py"
    src.write_text(STAGES_PROGRAM)
    out.write_text(r.output)
    tf_result, torch_result = _run(src, block=False), _run(out, block=True)
    assert torch_result == tf_result
    assert tf_result == {"counts": [2, 2], "sizes": [[4, 12], [2, 8]], "head": 3}


def test_a_file_s_own_trainable_variables_attribute_is_left_alone():
    out, errs = _translate('''
        import tensorflow as tf


        class Agent:
            def __init__(self, actor):
                self.trainable_variables = actor.trainable_variables


        def weights(agent, other):
            return agent.trainable_variables, other.non_trainable_weights
        ''')
    assert "agent.trainable_variables" in out and "actor.trainable_variables" in out
    assert [e.line for e in errs] == [10] and "other.non_trainable_weights" in errs[0].message


LATER_FUNCTIONS = '''
import json

import numpy as np
import tensorflow as tf

W = tf.Variable(np.array([[1.0, -2.0], [0.5, 3.0]], dtype=np.float32))
b = tf.Variable(np.array([0.25, -1.0], dtype=np.float32))
x = tf.constant(np.array([[1.0, 2.0], [-3.0, 0.5]], dtype=np.float32))
with tf.GradientTape() as tape:
    y = tf.matmul(x, W) + b
gw, gb = tape.gradient(y, [W, b])


def cube_grad():
    with tf.GradientTape() as tape:
        s = tf.reduce_sum(W * W * W)
    d = tape.gradient(s, W)
    return d


opt = tf.keras.optimizers.SGD(0.1)


def apply(grads, weights):
    opt.apply_gradients(zip(grads, weights))


def update(grads, weights):
    for g, w in zip(grads, weights):
        w.assign_sub(0.1 * g)


dw = cube_grad()
update([gw, gb], [W, b])
print(json.dumps({"gw": gw.numpy().tolist(), "gb": gb.numpy().tolist(), "dw": dw.numpy().tolist(),
                  "W": W.numpy().tolist(), "b": b.numpy().tolist()}))
'''


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("torch") is None,
                    reason="needs TensorFlow and PyTorch")
def test_plain_tape_followed_by_functions_with_their_own_tapes_runs_like_tensorflow(tmp_path):
    """A notebook's module-level tape whose gradients no optimizer applies, followed by functions defined later
    that bind a tape of their own or apply gradients they are given (chapter 2 of Deep Learning with Python):
    those functions neither run there nor read this tape's gradients, so the tape is translated (it was refused
    for the later apply_gradients); the values are TensorFlow's. The optimizer over unknown variables keeps its
    own error (the torch program runs with it left as written)."""
    r = translate_source(LATER_FUNCTIONS.lstrip(), "later.py")
    errors = [f.message for f in r.findings if f.severity is Severity.ERROR]
    assert len(errors) == 1 and errors[0].startswith("opt = tf.keras.optimizers.SGD(0.1): a torch optimizer"), errors
    assert "gw, gb = torch.autograd.grad(y.sum(), [W, b])" in r.output
    assert "d = torch.autograd.grad(s.sum(), W)[0]" in r.output and "GradientTape" not in r.output
    src, out = tmp_path / "tf_program.py", tmp_path / "torch_program.py"
    src.write_text(LATER_FUNCTIONS)
    out.write_text(r.output)
    tf_result, torch_result = _run(src, block=False), _run(out, block=False)
    for key in ("gw", "gb", "dw", "W", "b"):
        np.testing.assert_allclose(torch_result[key], tf_result[key], rtol=1e-6, err_msg=key)
    assert tf_result["dw"] == [[3.0, 12.0], [0.75, 27.0]]

