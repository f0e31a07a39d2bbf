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
    r = _tx(SRC)
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
