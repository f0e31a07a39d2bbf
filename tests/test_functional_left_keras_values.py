"""A functional model fwport leaves as written stays Keras code whole: the source-framework calls of its
statements and of the functions its builder defines (``l2(1e-4)``, ``keras.initializers.RandomNormal(...)``,
``keras.ops.concatenate``) are left with its layer calls, instead of becoming torch values (the KerasRegularizer helper,
``torch.cat``) inside Keras layer calls, which break the Keras code when it runs (speech_commands model.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

SRC = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers
from tensorflow.keras.regularizers import l2


def build():
    inp = keras.Input((4,))
    reg = l2(1e-4)
    init = keras.initializers.RandomNormal(stddev=0.02)

    def block(x, n):
        x = layers.Dense(n, kernel_regularizer=l2(1e-3))(x)
        return keras.ops.concatenate([x, x], axis=-1)

    x = block(inp, 8)
    x = layers.Dense(4, kernel_regularizer=reg, kernel_initializer=init)(x)
    return keras.Model(inp, x)
'''


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 3})


def test_a_model_left_as_written_keeps_its_keras_values():
    # (reg bound twice, so that no layer of the model translates: a name bound once is followed)
    r = _tx(SRC.replace("    reg = l2(1e-4)\n", "    reg = l2(1e-4)\n    reg = l2(2e-4)\n"))
    errors = [f.message for f in r.findings if f.severity.value == "error"]
    assert any(m.startswith("this functional model is left as written") for m in errors), errors
    for kept in ("reg = l2(1e-4)", "init = keras.initializers.RandomNormal(stddev=0.02)",
                 "x = layers.Dense(n, kernel_regularizer=l2(1e-3))(x)", "return keras.ops.concatenate([x, x], axis=-1)"):
        assert kept in r.output, r.output
    code = "\n".join(line for line in r.output.splitlines() if not line.strip().startswith("#"))
    assert "KerasRegularizer" not in code and "KerasInitializer" not in code and "torch" not in code, code


def test_the_model_left_as_written_still_builds_in_keras(tmp_path):
    r = _tx(SRC)
    path = tmp_path / "left.py"
    path.write_text(r.output + textwrap.dedent('''
        import numpy as np
        model = build()
        y = model(np.ones((2, 4), "float32"))
        print("OK", tuple(y.shape), len(model.losses))
        '''))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "OK (2, 4) 2" in run.stdout, run.stdout



def test_a_refused_regularizer_is_a_reason_the_model_is_left_as_written():
    """A layer's regularizer argument the rule refuses (``kernel_regularizer=reg``, a name bound to a regularizer;
    ``activity_regularizer=``) is an error of the layer's emission, and so one of the reasons the pass leaves the
    model as written, not a leftover of it: with no other reason it is the only error above the model's own (which
    says "the errors above say where"), so it stays, also beside another reason (block(...) in SRC)."""
    # (reg bound twice: a regularizer name bound once is followed, and the model translated)
    twice = lambda s: s.replace("    reg = l2(1e-4)\n", "    reg = l2(1e-4)\n    reg = l2(2e-4)\n")
    once_bound = SRC[:SRC.index("    def block")] + SRC[SRC.index("    x = block"):]
    once_bound = once_bound.replace("    x = block(inp, 8)\n", "    x = layers.Dense(8, kernel_regularizer=l2(1e-3))(inp)\n")
    assert [f.message for f in _tx(once_bound).findings if f.severity.value == "error"] == []
    plain = twice(SRC[:SRC.index("    def block")] + SRC[SRC.index("    x = block"):])  # (no nested helper)
    only_reg = plain.replace("    x = block(inp, 8)\n", "    x = layers.Dense(8, kernel_regularizer=l2(1e-3))(inp)\n")
    only_act = plain.replace("    x = block(inp, 8)\n", "    x = layers.Dense(8, activity_regularizer=l2(1e-3))(inp)\n") \
        .replace("kernel_regularizer=reg, ", "")
    assert "block" not in only_reg and "activity_regularizer=l2(1e-3)" in only_act and "=reg" not in only_act
    for src, said in ((only_reg, "kernel_regularizer=reg: torch layers have no regularizers"),
                      (only_act, "activity_regularizer=l2(1e-3): torch layers have no activity regularizers"),
                      (twice(SRC), "kernel_regularizer=reg: torch layers have no regularizers")):
        errors = [f.message for f in _tx(src).findings if f.severity.value == "error"]
        assert any(m.startswith("this functional model is left as written") for m in errors), errors
        assert any(m.startswith(said) for m in errors), errors
    errors = [f.message for f in _tx(only_reg).findings if f.severity.value == "error"]
    assert len(errors) == 2, errors  # the regularizer's and the model's: nothing else explains it
    errors = [f.message for f in _tx(only_reg.replace("kernel_regularizer=reg, ", "")).findings
              if f.severity.value == "error"]
    assert errors == [], errors  # without it the model is translated: the regularizer was the reason
