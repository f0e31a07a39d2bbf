"""Keras model methods on models fwport translates (issue 9, train24): what used to stay an error
("... is a Keras model method; the translated model is an nn.Module, which has none") where the translation
can be exact. Each case is translated and run, and compared with Keras."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")


def tr(src: str, **opts):
    return translate_source(textwrap.dedent(src).lstrip("\n"), PACK, **opts)


def errors(result) -> list[str]:
    return [f.message for f in result.findings if f.severity == Severity.ERROR]


def _run(program: str, tail: str, **env_extra: str) -> dict:
    """Run ``program`` then ``tail`` in a fresh interpreter; ``tail`` prints one JSON object last."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "prog.py"
        path.write_text(textwrap.dedent(program) + "\n" + textwrap.dedent(tail))
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", **env_extra)
        p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=600, cwd=d)
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout.strip().splitlines()[-1])


# --- model.build(...) of a Sequential (dragen1860's MNIST tutorials) ------------------------------------------

_SEQ_BUILD = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

features = 4 * 3
model = keras.Sequential([layers.Dense(8, activation="relu"), layers.BatchNormalization(), layers.Dense(3)])
model.build(input_shape=(None, features))
'''


def test_build_of_a_sequential_sizes_its_lazy_modules_and_moves_nothing():
    """model.build((None, features)) on a keras.Sequential without an Input → build_on_zeros: afterwards every
    lazy Linear has Keras's kernel size (transposed), the BatchNorm statistics and the training mode are as they
    were, parameters + running statistics count as Keras's count_params(), and with Keras's weights copied in the
    outputs agree."""
    r = tr(_SEQ_BUILD)
    assert not errors(r), errors(r)
    assert "build_on_zeros(model, (None, features))" in r.output
    k = _run(_SEQ_BUILD, '''
        import json
        x = np.random.RandomState(0).randn(5, 12).astype("float32")
        print(json.dumps({"weights": [w.tolist() for w in model.get_weights()], "count": int(model.count_params()),
                          "y": model(x, training=False).numpy().tolist()}))
    ''', TF_USE_LEGACY_KERAS="1")
    t = _run(r.output, '''
        import json
        k = json.loads(open(%r).read())
        mean, var, mode = float(model[2].running_mean.abs().sum()), float((model[2].running_var - 1).abs().sum()), model.training
        tracked = int(model[2].num_batches_tracked)
        count = sum(p.numel() for p in model.parameters()) + model[2].running_mean.numel() + model[2].running_var.numel()
        w = [torch.tensor(a) for a in k["weights"]]
        with torch.no_grad():
            model[0].weight.copy_(w[0].T); model[0].bias.copy_(w[1])
            model[2].weight.copy_(w[2]); model[2].bias.copy_(w[3])
            model[2].running_mean.copy_(w[4]); model[2].running_var.copy_(w[5])
            model[3].weight.copy_(w[6].T); model[3].bias.copy_(w[7])
        model.eval()
        x = torch.tensor(np.random.RandomState(0).randn(5, 12).astype("float32"))
        with torch.no_grad():
            y = model(x)
        print(json.dumps({"mean": mean, "var": var, "training": mode, "tracked": tracked, "count": count,
                          "shapes": [list(p.shape) for p in model.parameters()],
                          "err": float((y - torch.tensor(k["y"])).abs().max())}))
    ''' % _dump(k))
    assert t["mean"] == t["var"] == 0.0 and t["tracked"] == 0 and t["training"] is True
    assert t["count"] == k["count"] == 12 * 8 + 8 + 4 * 8 + 8 * 3 + 3
    assert t["shapes"][0] == [8, 12] and t["shapes"][-2] == [3, 8]
    assert t["err"] < 1e-5


def _dump(obj) -> str:
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(obj, f)
    f.close()
    return f.name


def test_build_of_a_sequential_of_more_axes_or_rebound_stays_an_error():
    """A Sequential's build of three or more axes (its layout may become channels-first) and a name bound to
    something else too keep the error."""
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers

        model = keras.Sequential([layers.Conv2D(4, 3), layers.Flatten(), layers.Dense(2)])
        model.build((None, 8, 8, 1))
    ''')
    assert any("build(...) is a Keras model method" in m for m in errors(r)), errors(r)
    assert "build_on_zeros" not in r.output
    r = tr('''
        from tensorflow import keras
        from tensorflow.keras import layers

        def make():
            return keras.Sequential([layers.Dense(2)])

        model = keras.Sequential([layers.Dense(2)])
        model = make()
        model.build((None, 4))
    ''')
    assert any("build(...) is a Keras model method" in m for m in errors(r)), errors(r)
