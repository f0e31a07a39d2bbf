"""``fwport tf2torch FILE --trace --model EXPR --input SPEC``: the sizes a source does not write down, taken
from one run of the original model under TensorFlow (in verify's Keras subprocess; the translating
process never imports TensorFlow)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from fwport.core.cli import main
from fwport.core.engine import LayerContext
from fwport.packs.tf2torch import trace
from runners import Warm

ROOT = Path(__file__).resolve().parent.parent

NET = '''import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class Block(layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.fc = layers.Dense(units)
        self.bn = layers.BatchNormalization()

    def call(self, x, training=False):
        return tf.nn.relu(self.bn(self.fc(x), training=training))


class Net(keras.Model):
    def __init__(self, classes=3):
        super().__init__()
        self.block = Block(16)
        self.conv = layers.Conv1D(4, 3, padding="same")
        self.norm = layers.LayerNormalization()
        self.head = layers.Dense(classes)

    def call(self, x, training=False):
        h = self.block(x, training=training)
        h = tf.concat([h, x], axis=-1)
        h = self.conv(h)
        return self.head(self.norm(h))
'''


def _has_tf() -> bool:
    return importlib.util.find_spec("tensorflow") is not None


def test_trace_without_tensorflow_says_so(tmp_path, monkeypatch):
    (tmp_path / "net.py").write_text(NET)
    real = importlib.util.find_spec
    monkeypatch.setattr(trace.importlib.util, "find_spec",
                        lambda name, *a: None if name in ("tensorflow", "tf_keras") else real(name, *a))
    r = CliRunner().invoke(main, ["tf2torch", str(tmp_path / "net.py"), "--trace", "--model", "Net",
                                  "--input", "float32[4,5,6]"])
    assert r.exit_code == 2
    assert "--trace runs the original model under TensorFlow, and tensorflow is not installed here" in r.output


@pytest.mark.parametrize("args, said", [
    (["--trace", "--input", "float32[4,6]"], "--trace needs --model EXPR"),
    (["--trace", "--model", "Net"], "--trace needs --input SPEC"),
    (["--model", "Net"], "--model, --input, --load, --args and --define go with --trace"),
])
def test_trace_options_are_checked_before_anything_runs(tmp_path, args, said):
    (tmp_path / "net.py").write_text(NET)
    r = CliRunner().invoke(main, ["tf2torch", str(tmp_path / "net.py"), *args])
    assert r.exit_code == 2 and said in r.output, r.output


def test_trace_takes_one_file(tmp_path):
    (tmp_path / "a.py").write_text(NET)
    r = CliRunner().invoke(main, ["tf2torch", str(tmp_path), "-o", str(tmp_path / "out"), "--trace", "--model", "Net",
                                  "--input", "float32[4,6]"])
    assert r.exit_code == 2 and "--trace runs the model of one file" in r.output


def _call(text: str) -> cst.Call:
    return cst.parse_expression(text)


def test_the_traced_shape_gives_rank_and_feature_axis_never_spatial_sizes():
    dense, conv_cf = _call("layers.Dense(4)"), _call('layers.Conv2D(4, 3, data_format="channels_first")')
    use = trace.observed_shape
    # nothing known: the rank and the last (feature) axis; the height and width stay unknown
    assert use(LayerContext(None), (32, 32, 3), _call("layers.Conv2D(4, 3)"), None) == (None, None, 3)
    assert use(LayerContext((None, None, None)), (32, 32, 3), dense, None) == (None, None, 3)
    assert use(LayerContext(None), (3, 32, 32), conv_cf, None) == (3, None, None)
    # what the passes know stays (a name, a size), a run of another rank is not taken
    assert use(LayerContext(("units",)), (16,), dense, None) == ("units",)
    assert use(LayerContext((None, 8)), (5,), dense, None) == (None, 8)
    # layers created at one place and called on inputs of different ranks; a channels-first region
    assert use(LayerContext(None), None, dense, None) is None
    assert use(LayerContext(None, "nchw"), (128,), dense, None) is None


@pytest.mark.skipif(not _has_tf(), reason="--trace runs the model under TensorFlow")
def test_trace_gives_the_sizes_and_the_translation_verifies(tmp_path):
    pytest.importorskip("torch")
    src = tmp_path / "net.py"
    src.write_text(NET)
    plain = CliRunner().invoke(main, ["tf2torch", str(src)])
    assert plain.exit_code == 1  # the BatchNormalization of unknown rank called on an expression: an error
    assert "self.bn: the input's rank is unknown" in plain.output and "nn.LazyLinear(units)" in plain.output
    # the translating process never imports TensorFlow: only verify's Keras subprocess does
    code = (f"import sys\nfrom fwport.core.cli import main\nsys.argv = ['fwport', 'tf2torch', {str(src)!r}, '--trace', "
            f"'--model', 'Net', '--input', 'float32[4,5,6]', '-o', {str(tmp_path / 'net_torch.py')!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'keras', 'tf_keras'))]))\n")
    p = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, cwd=ROOT)
    rc, imported = json.loads(p.stdout.strip().splitlines()[-1])
    assert rc == 0 and imported == [], (p.stderr[-2000:], imported)
    assert "shape-unknown" not in p.stderr and "--trace: ran Net under Keras 3" in p.stderr
    out = (tmp_path / "net_torch.py").read_text()
    for line in ("self.fc = nn.Linear(6, units)", "self.bn = nn.BatchNorm1d(units, momentum=0.01, eps=0.001)",
                 "self.conv = nn.Conv1d(22, 4, 3, padding=\"same\")", "self.norm = nn.LayerNorm(4, eps=0.001)",
                 "self.head = nn.Linear(4, classes)"):
        assert line in out, out
    assert "Lazy" not in out
    from fwport.verify import Options, verify
    cert = verify(Options(str(src), str(tmp_path / "net_torch.py"), "Net", inputs=["float32[4,5,6]"],
                          checks=("forward", "grad", "step"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
