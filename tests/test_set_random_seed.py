"""keras.utils.set_random_seed seeds Python's random, NumPy's global generator and the backend: the translation's
written set_random_seed seeds the same three (random, np.random, torch), so a program's own numpy and random draws
after it are the Keras program's, number for number."""
from __future__ import annotations

import textwrap

from fwport.core.pipeline import translate_source
from helpers import needs
from runners import keras_and_torch

SRC = '''
import random

import keras
import numpy as np


def draws(seed):
    keras.utils.set_random_seed(seed)
    return [random.random(), float(np.random.rand()), int(np.random.randint(1000))]
'''

DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from model import draws
out = {"a": draws(7), "b": draws(7), "c": draws(8)}
if sys.argv[2] == "torch":
    import torch
    torch.manual_seed(0)
    base = torch.rand(3).tolist()
    draws(5)
    first = torch.rand(3).tolist()
    draws(5)
    out["torch"] = [first, torch.rand(3).tolist(), base]
print("RESULT " + json.dumps(out))
'''


def test_the_translation_seeds_what_keras_seeds():
    r = translate_source(textwrap.dedent(SRC).lstrip("\n"), "m.py", "tf2torch")
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert "set_random_seed(seed)" in r.output and "keras" not in r.output.replace("keras.utils.set_random_seed", "")
    assert "    random.seed(seed)\n    np.random.seed(seed)\n    torch.manual_seed(seed)" in r.output


@needs("tensorflow", "torch")
def test_seeded_numpy_and_random_draws_equal_the_keras_programs(tmp_path):
    r = translate_source(textwrap.dedent(SRC).lstrip("\n"), "m.py", "tf2torch")
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(SRC), r.output, DRIVER)
    for k in ("a", "b", "c"):
        assert torch_out[k] == keras_out[k], k  # Python's and NumPy's generators: the same numbers
    assert keras_out["a"] == keras_out["b"] != keras_out["c"]
    first, again, unseeded = torch_out["torch"]
    assert first == again != unseeded  # torch is seeded too
