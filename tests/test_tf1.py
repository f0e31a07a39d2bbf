"""TensorFlow 1 code (issue 9): a graph-mode file gets one file-level error, tf1-graph-code, and is left as
written (fwport/packs/tf2torch/tf1.py); tf.compat.v1 names of TensorFlow 2 ops keep translating, by the
TF 2 op's rule (its names list the compat.v1 spelling where TensorFlow gives both the same signature,
which the last test checks against the installed TensorFlow).
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.result import Status
from fwport.core.rule import load_pack
from runners import python


def tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    again = translate_source(r.output, "model.py")
    assert again.output == r.output, "translating the output again must change nothing"
    return r


TF1 = '''
import tensorflow as tf

x = tf.placeholder(tf.float32, [None, 784])
W = tf.Variable(tf.zeros([784, 10]))
y = tf.nn.softmax(tf.matmul(x, W))
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    print(sess.run(y, feed_dict={x: data}))
'''


def test_tf1_graph_code_is_one_file_level_error():
    src = textwrap.dedent(TF1).lstrip("\n")
    r = translate_source(src, "old.py")
    assert r.status is Status.UNCHANGED and r.output == src  # needs attention (an error), not a failure
    assert [(f.severity, f.code, f.line) for f in r.findings] == [(Severity.ERROR, "tf1-graph-code", 3)]
    message = r.findings[0].message
    assert "tf.placeholder, tf.Session, tf.global_variables_initializer" in message and "tf_upgrade_v2" in message
    # the same through tf.compat.v1, and through `import tensorflow.compat.v1 as tf`
    v1 = src.replace("tf.placeholder", "tf.compat.v1.placeholder")
    assert translate_source(v1, "old.py").findings[0].code == "tf1-graph-code"
    aliased = src.replace("import tensorflow as tf", "import tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()")
    assert [f.line for f in translate_source(aliased, "old.py").findings] == [2]



# graph-mode uses however spelled: every one must pass the text selection before the walk
_SPELLINGS = [
    "import tensorflow as tf\nx = tf.placeholder(tf.float32)\n",
    "import tensorflow as tf\nx = (tf).placeholder(tf.float32)\n",
    "import tensorflow as tf\nx = (tf.compat  # v1\n     .v1.placeholder)(tf.float32)\n",
    "import tensorflow as tf\nx = tf.compat.v1 \\\n    .placeholder(tf.float32)\n",
    "import tensorflow as tf\nx = tf.compat.v2.placeholder(tf.float32)\n",
    "import tensorflow as tf\nv1 = tf.compat.v1\ny = v1.layers.dense(x, 3)\n",
    "from tensorflow.compat.v1 import layers as L\ny = L.dense(x, 3)\n",
    "from tensorflow.compat.v1 import placeholder\nx = placeholder(None)\n",
    "from tensorflow.compat.v1.layers import dense\ny = dense(x, 3)\n",
    "from tensorflow.layers import conv2d as C\ny = C(x, 3, 3)\n",
    "from tensorflow.compat.v1 import placeholder as P\nx = P(None)\n",
    "import tensorflow.compat.v1\nx = tensorflow.compat.v1.get_variable('w', [3])\n",
    "import tensorflow as tf\ncell = tf.contrib.rnn.LSTMCell(3)\n",
    "from tensorflow.contrib import slim\ny = slim.fully_connected(x, 3)\n",
    "import tensorflow as tf\nwith tf.Session() as s:\n    s.run(y)\n",
    "import tensorflow as tf\nopt = tf.train.AdamOptimizer(0.1)\n",
    "from tensorflow import keras\nx = tf.placeholder(None)\n",  # a fragment: tf taken as imported
]


@pytest.mark.parametrize("src", _SPELLINGS)
def test_the_selection_before_the_walk_keeps_every_graph_use(src, monkeypatch):
    from fwport.core.direction import Trigger
    from fwport.packs.tf2torch import tf1
    monkeypatch.setattr(tf1, "TRIGGER", Trigger("", ""))  # (the selection alone: the trigger lets all through)
    selected = translate_source(src, "old.py").findings
    monkeypatch.setattr(tf1, "_may_use_graph_apis", lambda *args: True)  # every file walked
    walked = translate_source(src, "old.py").findings
    assert [f.code for f in walked][:1] == ["tf1-graph-code"]
    assert selected == walked


@pytest.mark.parametrize("src", _SPELLINGS)
def test_the_trigger_lets_every_graph_use_through(src):
    """The cheap text trigger (no monkeypatch): a name imported from a TF1 module (``from
    tensorflow.compat.v1.layers import dense``) reaches the refusal as a dotted use does."""
    assert [f.code for f in translate_source(src, "old.py").findings][:1] == ["tf1-graph-code"]


def test_keras_files_the_trigger_matches_are_not_walked(monkeypatch):
    """layers.Dense, an Adam optimizer, trainable_variables, a Keras Session: words the cheap trigger matches,
    but no alias of TensorFlow reaches a graph API: the file's tree is not walked for one."""
    from fwport.packs.tf2torch import tf1

    class Walked(Exception):
        pass

    def refuse(*args):
        raise Walked
    monkeypatch.setattr(tf1, "_GraphUses", refuse)
    src = textwrap.dedent('''
        import tensorflow as tf
        from tensorflow import keras
        from tensorflow.keras import layers

        model = keras.Sequential([layers.Dense(3), layers.Dropout(0.5)])
        opt = keras.optimizers.Adam()  # a tf.keras Optimizer
        x = tf.nn.relu(tf.zeros([2, 3]))
        n = len(model.trainable_variables)
    ''').lstrip("\n")
    assert tf1.TRIGGER.search(src)  # the trigger alone would walk it
    assert translate_source(src, "model.py").status is Status.CONVERTED
    with pytest.raises(Walked):  # (a graph API in the same file is still walked for)
        translate_source(src + "p = tf.placeholder(tf.float32)\n", "model.py")

def test_compat_v1_names_of_tf2_functions_and_a_config_session_keep_translating():
    r = tx('''
        import tensorflow as tf
        from tensorflow import keras

        tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
        config = tf.compat.v1.ConfigProto()
        sess = tf.compat.v1.Session(config=config)
        tf.compat.v1.reset_default_graph()
        name = tf.compat.v1.get_default_graph().unique_name("ema")
        model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(3)])
    ''')
    assert r.status is Status.CONVERTED
    assert all(f.code != "tf1-graph-code" for f in r.findings)
    assert "nn.Linear(4, 3)" in r.output and "tf_logger().setLevel" in r.output


def test_compat_v1_ops_translate_as_their_tf2_names():
    body = '''
        def f(x, y):
            z = tf.concat([tf.cast(x, tf.float32), y], axis=1)
            return tf.reduce_sum(tf.maximum(z, 0.0), axis=1, keepdims=True), tf.expand_dims(tf.sqrt(z), -1)
    '''
    v1 = tx("import tensorflow.compat.v1 as tf\n" + textwrap.dedent(body))
    v2 = tx("import tensorflow as tf\n" + textwrap.dedent(body))
    assert [f for f in v1.findings if f.severity is Severity.ERROR] == []
    assert v1.output.split("\n", 2)[2] == v2.output.split("\n", 2)[2]  # the same code below the imports
    # a compat.v1-only argument is refused, never bound to another parameter
    r = tx("import tensorflow.compat.v1 as tf\ny = tf.reduce_mean(x, reduction_indices=[1])\n")
    assert [f.code for f in r.findings if f.severity is Severity.ERROR] == ["unsupported-construct"]


_SIGNATURES = """
import inspect, json, sys
import tensorflow as tf
out = {}
for name, tf2_name in json.loads(sys.argv[1]).items():
    v1 = tf.compat.v1
    for part in name.split("."):
        v1 = getattr(v1, part)
    v2 = tf
    for part in tf2_name.split("."):
        v2 = getattr(v2, part)
    out[name] = [[(p.name, p.kind.name, repr(p.default)) for p in inspect.signature(f).parameters.values()]
                 for f in (v1, v2)]
print(json.dumps(out))
"""


def test_compat_v1_names_in_rules_have_the_tf2_signature():
    """A rule of a TF 2 name lists tensorflow.compat.v1.X beside it only where TF 2's parameters come first in
    X's, in the same order and with the same defaults (keepdims: None, which is False): a call binds the same
    under both. (A rule of TF 1's name alone, tensorflow.compat.v1.X first, has X's own signature, which
    test_rule_signatures checks; to_float or multinomial have no TF 2 name.)"""
    pytest.importorskip("tensorflow")
    pack = load_pack("tf2torch")
    # each TF 1 name → the TF 2 name its rule is of (random_uniform → random.uniform)
    names = {n[len("tensorflow.compat.v1."):]: r.names[0][len("tensorflow."):] for r in pack.rules.values()
             for n in r.names
             if r.names[0].startswith("tensorflow.") and not r.names[0].startswith("tensorflow.compat.v1.")
             and n.startswith("tensorflow.compat.v1.") and not n.startswith("tensorflow.compat.v1.logging")
             and "gfile" not in n and "name_scope" not in n}
    assert len(names) >= 40
    p = python("-c", _SIGNATURES, json.dumps(names), env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    for name, (v1, v2) in json.loads(p.stdout.strip().splitlines()[-1]).items():
        assert [q[0] for q in v1[:len(v2)]] == [q[0] for q in v2], name
        for (n1, _, d1), (_, _, d2) in zip(v1, v2):
            assert d1 == d2 or (n1 == "keepdims" and (d1, d2) == ("None", "False")) or (n1, d1) == ("axis", "None"), (
                name, n1, d1, d2)


_SAME = """
import json, sys
import tensorflow as tf
def get(root, name):
    for part in name.split("."):
        root = getattr(root, part)
    return root
print(json.dumps([k for k, v in json.loads(sys.argv[1]).items() if get(tf.compat.v1, k) is not get(tf, v)]))
"""


def test_compat_v1_same_object_table_names_tf2_objects():
    """compat_v1.SAME_OBJECT reads tf.compat.v1.X as tf.Y only where they are one object in TensorFlow (the
    rule of Y then says what X does), and each Y is a name the pack translates or explains."""
    pytest.importorskip("tensorflow")
    from fwport.packs.tf2torch import DIRECTION
    from fwport.packs.tf2torch.compat_v1 import SAME_OBJECT
    from fwport.packs.tf2torch.guidance import GUIDANCE
    from fwport.packs.tf2torch.passes.decorators import COMPILABLE
    from fwport.packs.tf2torch.passes.training import TAPE
    PASS_NAMES = {TAPE, *COMPILABLE}
    pack = load_pack("tf2torch")
    ruled = {n for r in pack.rules.values() for n in r.names}
    assert len(SAME_OBJECT) >= 100
    for v1, v2 in SAME_OBJECT.items():
        assert DIRECTION.source.canonical(f"tensorflow.compat.v1.{v1}") == f"tensorflow.{v2}"
        assert f"tensorflow.{v2}" in ruled or f"tensorflow.{v2}" in GUIDANCE or f"tensorflow.{v2}" in PASS_NAMES, v2
    p = python("-c", _SAME, json.dumps(SAME_OBJECT), env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == []


def test_compat_v1_tape_and_function_are_tf2s():
    """tf.compat.v1.GradientTape / function are TF 2's objects: the training and decorator passes translate them."""
    src = textwrap.dedent('''
        import tensorflow as tf

        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(3,))])
        optimizer = tf.keras.optimizers.SGD(0.1)


        @tf.compat.v1.function
        def train_step(x, y):
            with tf.compat.v1.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        ''')
    r = translate_source(src, "step.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "loss.backward()" in r.output and "optimizer.step()" in r.output and "tf." not in r.output, r.output


def test_a_commented_out_block_after_tf_does_not_hang_the_graph_check():
    """A notebook's ``%%writefile`` cell comes out as a commented-out block; each ``# `` line in it once gave
    the dotted-name pattern two ways to match, so a word ``tf`` before a few dozen of them took the search
    exponential time (tensorflow/docs' multi_worker_with_ctl notebook hung the whole tree run). Run in a
    subprocess with a limit far above a linear search's time (milliseconds) and far below the exponential one's
    (45 such lines took a second, each further line doubles it): a hang fails the test instead of the suite."""
    block = "".join(f"#   x{i} = tf.reduce_sum(y)  # a note \n# \n" for i in range(60))
    src = f"import tensorflow as tf\n# import tensorflow as tf\n{block}z = tf.zeros([3])\n"
    graph = src + "p = tf.placeholder(tf.float32)\n"
    code = ("import json, sys\nfrom fwport.core.pipeline import translate_source\n"
            "print(json.dumps([[f.code for f in translate_source(s, 'nb.py').findings] for s in json.load(sys.stdin)]))")
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps([src, graph]), capture_output=True, text=True,
                         timeout=120, check=True)
    plain, refused = json.loads(out.stdout)
    assert "tf1-graph-code" not in plain
    assert refused[:1] == ["tf1-graph-code"]  # the pattern still finds a graph API after the block
