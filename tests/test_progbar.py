"""keras.utils.Progbar → the written Progbar helper: the values it shows, averaged over the steps
each covers, against Keras's own bar (run in its process) for the same updates."""
from __future__ import annotations

import importlib.util
import re

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python

PROGRAM = '''
import numpy as np
import tensorflow as tf

for verbose in (1, 2):
    bar = tf.keras.utils.Progbar(10, verbose=verbose, interval=0.0, stateful_metrics=["lr"])
    bar.update(2, values=[("loss", 4.0), ("lr", 0.5)])
    bar.update(5, values=[("loss", 1.0), ("acc", np.float32(0.25)), ("lr", 0.25)])
    bar.add(1, values=[("loss", 0.0001), ("acc", 0.75)])
    bar.update(9, values=[("loss", 2.5)])
    bar.update(10, values=[("acc", 0.5)])
    print("|")
'''

_BLOCK = '''
import runpy, sys
for name in ("tensorflow", "keras", "tf_keras"):
    sys.modules[name] = None
runpy.run_path(sys.argv[1], run_name="__main__")
'''


def _lines(path, block: bool) -> list[str]:
    args = ("-c", _BLOCK, path) if block else (path,)  # the translation: in the torch worker, TensorFlow unimportable
    proc = python(*args, side="torch" if block else "keras", env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)  # Keras colours its line
    return [[(k, float(v)) for k, v in re.findall(r" - (\w+): ([-0-9.e+]+)", re.split(r"[\r\n]", part.strip())[-1])]
            for part in text.split("|")[:-1]]


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("torch") is None,
                    reason="needs TensorFlow and PyTorch")
def test_progbar_shows_the_values_keras_shows(tmp_path):
    r = translate_source(PROGRAM.lstrip(), "bar.py", "tf2torch", {"keras": 3})
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    assert "class Progbar" in r.output and "tensorflow" not in r.output
    src, out = tmp_path / "tf_bar.py", tmp_path / "torch_bar.py"
    src.write_text(PROGRAM)
    out.write_text(r.output)
    want, got = _lines(src, False), _lines(out, True)
    # the final line of each bar: loss averaged over the 9 steps it covers (the finalizing update does not
    # give it), acc at the value the finalizing update gives, lr (stateful) as last given
    assert want[0] == want[1] == [("loss", round((4.0 * 2 + 1.0 * 3 + 0.0001 + 2.5 * 3) / 9, 4)), ("lr", 0.25),
                                  ("acc", 0.5)]
    assert got == want
    # the averaging before the end: a bar that does not finish shows the weighted means
    partial = PROGRAM.replace("    bar.update(10, values=[(\"acc\", 0.5)])\n", "")
    r2 = translate_source(partial.lstrip(), "bar.py", "tf2torch", {"keras": 3})
    src.write_text(partial)
    out.write_text(r2.output)
    want, got = _lines(src, False), _lines(out, True)
    loss = (4.0 * 2 + 1.0 * 3 + 0.0001 * 1 + 2.5 * 3) / 9
    assert dict(want[0])["loss"] == pytest.approx(loss, abs=1e-4) and dict(want[0])["acc"] == pytest.approx(
        (0.25 * 3 + 0.75) / 4, abs=1e-4)
    assert got[0] == want[0]
