"""keras.models.clone_model → the clone_model helper (keras-io knowledge_distillation's student_scratch): a model
of the same structure whose weights are drawn again, in Keras and in the translation alike, and which the file's
compile / fit then train as a model of its own."""
from __future__ import annotations

import json
from importlib.util import find_spec

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python

SOURCE = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

student = keras.Sequential([keras.Input(shape=(8, 8, 1)), layers.Conv2D(4, 3, padding="same"),
                            layers.BatchNormalization(), layers.Flatten(), layers.Dense(3)])
student_scratch = keras.models.clone_model(student)
student_scratch.compile(optimizer=keras.optimizers.Adam(), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
'''

_REPORT = '''
import json
x = np.random.default_rng(0).standard_normal((2, 8, 8, 1)).astype("float32")


def weights(m):  # every weight array (torch: the state_dict, BatchNorm's statistics included)
    if hasattr(m, "state_dict"):
        return [w.detach().numpy().copy() for w in m.state_dict().values()]
    return [np.asarray(w).copy() for w in m.weights]


a, b = weights(student), weights(student_scratch)
if hasattr(student, "state_dict"):  # the translation: channels-first inside
    import torch
    y = student_scratch(torch.from_numpy(x).permute(0, 3, 1, 2)).detach().numpy()
else:
    y = np.asarray(student_scratch(x))
print(json.dumps({"shapes_equal": [p.shape for p in a] == [q.shape for q in b],
                  "differ": sum(int(p.size > 1 and not np.array_equal(p, q)) for p, q in zip(a, b)),
                  "out": list(y.shape)}))
'''


def _run(src: str) -> dict:
    p = python("-c", src, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}, timeout=600)  # the side its imports call for
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_clone_model_draws_new_weights_like_keras():
    for mod in ("tensorflow", "keras", "torch"):
        if find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed")
    r = translate_source(SOURCE, "kd.py")
    assert [f.message for f in r.findings if f.severity is Severity.ERROR] == []
    assert "student_scratch = clone_model(student)" in r.output
    assert "torch.optim.Adam(student_scratch.parameters()" in r.output  # compile: a model of its own
    keras_side = _run(SOURCE + _REPORT)
    torch_side = _run("import sys\nsys.modules['tensorflow'] = None\nsys.modules['keras'] = None\n"
                      + r.output.replace("student_scratch_optimizer =", "_unused =") + _REPORT)
    for side in (keras_side, torch_side):
        assert side["shapes_equal"]
        # every weight array of more than one value is drawn again (kernels; BatchNormalization's gamma / beta
        # and statistics start at constants, so they equal the original's, which was never trained)
        assert side["differ"] >= 2
    # the same output (a clone of the structure: Keras channels-last, the translation channels-first at the input)
    assert keras_side["out"] == torch_side["out"] == [2, 3]


def test_clone_model_refuses_what_it_cannot_reinitialise_and_other_arguments():
    r = translate_source("from tensorflow import keras\n\nm2 = keras.models.clone_model(m, clone_function=f)\n",
                         "c.py")
    assert [(f.line, f.code) for f in r.findings if f.severity is Severity.ERROR] == [(3, "unsupported-argument")]
    helper = translate_source("from tensorflow import keras\n\nm2 = keras.models.clone_model(m)\n", "c.py").output
    if find_spec("torch") is None:
        pytest.skip("torch is not installed")
    src = helper.split("m2 =")[0] + '''
import torch
from torch import nn

class Own(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

try:
    clone_model(nn.Sequential(nn.Linear(2, 2), Own()))
except TypeError as e:
    print(json.dumps({"error": str(e)}))
'''
    out = _run("import json\n" + src)
    assert "1 (Own) has weights of its own and no reset_parameters()" in out["error"]
