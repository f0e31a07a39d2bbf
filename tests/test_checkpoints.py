"""Saving and checkpoints (issue 9): tf.train.Checkpoint / CheckpointManager / latest_checkpoint become
helpers written into the output (saving.py), Keras's model.save_weights / load_weights / save and
keras.models.load_model / save_model become torch.save / torch.load, tf.saved_model is refused with
guidance (TensorFlow 1 graph-mode files: tests/test_tf1.py).

Numbers and files: a tape-step training script that checkpoints with a manager runs under TensorFlow and,
translated, under torch (subprocesses; TensorFlow unimportable in the torch one): both write the same
checkpoint names, keep the same ones, record the same latest, and restoring a checkpoint (model and
optimizer) then taking a step gives exactly the weights that step gave before.
"""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import numpy as np

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import keras_and_torch, python


def tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    again = translate_source(r.output, "model.py")
    assert again.output == r.output, "translating the output again must change nothing"
    return r


def errors(r) -> list:
    return [(f.line, f.code, f.message) for f in r.findings if f.severity is Severity.ERROR]


MANAGED = '''
import os

import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(1)])
optimizer = keras.optimizers.Adam(learning_rate=0.05)
loss_fn = keras.losses.MeanSquaredError()


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


def train(directory, x, y, steps):
    ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer)
    manager = tf.train.CheckpointManager(ckpt, directory, max_to_keep=2)
    ckpt.restore(manager.latest_checkpoint)
    saved = []
    for _ in range(steps):
        train_step(x, y)
        saved.append(manager.save())
    manual = ckpt.save(os.path.join(directory, "manual", "weights"))
    return saved, manager.checkpoints, tf.train.latest_checkpoint(directory), manual
'''

DRIVER = '''
import json, os, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
directory = os.path.join(sys.argv[1], "ckpts")
rng = np.random.default_rng(0)
x = rng.normal(size=(32, 4)).astype("float32")
y = (x[:, :1] * 2 - x[:, 1:2]).astype("float32")
if sys.argv[2] == "torch":
    import torch
    torch.manual_seed(0)
    for m in model:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.normal_(m.weight, std=0.5)
    x, y = torch.tensor(x), torch.tensor(y)
    weights = lambda: [p.detach().numpy().tolist() for p in model.parameters()]
else:
    import tensorflow as tf
    tf.keras.utils.set_random_seed(0)
    weights = lambda: [v.numpy().T.tolist() for v in model.trainable_variables]
rel = lambda p: None if p is None else os.path.relpath(p, directory)
saved, kept, latest, manual = train(directory, x, y, 3)
train_step(x, y)
after_3_and_one_step = weights()
train_step(x, y)  # moves the weights and the optimizer's moments away from checkpoint 3
again, kept2, latest2, manual2 = train(directory, x, y, 1)  # restores checkpoint 3, one step, saves
print("RESULT " + json.dumps({
    "saved": [rel(p) for p in saved], "kept": [rel(p) for p in kept], "latest": rel(latest), "manual": rel(manual),
    "again": [rel(p) for p in again], "kept2": [rel(p) for p in kept2], "latest2": rel(latest2),
    "manual2": rel(manual2), "files": sorted(f for f in os.listdir(directory) if f.startswith("ckpt-")),
    "expected": after_3_and_one_step, "restored_and_one_step": weights()}))
'''


def _run(tmp_path, src: str, driver: str) -> tuple[dict, dict]:
    trans = tx(src)
    assert errors(trans) == [], errors(trans)
    return keras_and_torch(tmp_path, textwrap.dedent(src), trans.output, driver)


def test_checkpoint_manager_names_keeps_and_restores_as_tensorflow_does(tmp_path):
    k, t = _run(tmp_path, MANAGED, DRIVER)
    # the same bookkeeping as TensorFlow's: numbered by the save counter (saved and restored with the
    # checkpoint), the last max_to_keep kept, the latest recorded for latest_checkpoint
    assert k["saved"] == ["ckpt-1", "ckpt-2", "ckpt-3"] and k["kept"] == ["ckpt-2", "ckpt-3"]
    assert k["manual"] == os.path.join("manual", "weights-4") and k["again"] == ["ckpt-4"]
    for key in ("saved", "kept", "latest", "manual", "again", "kept2", "latest2", "manual2"):
        assert t[key] == k[key], (key, t[key], k[key])
    assert [f for f in k["files"] if f.endswith(".index")] == ["ckpt-3.index", "ckpt-4.index"]
    assert t["files"] == ["ckpt-3", "ckpt-4"]  # one torch file per checkpoint (TensorFlow: .index + .data)
    # restoring checkpoint 3 (the module's state_dict and Adam's moments and step) and taking one step
    # gives exactly the weights the step after checkpoint 3 gave
    for a, b in zip(t["expected"], t["restored_and_one_step"]):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
    for a, b in zip(k["expected"], k["restored_and_one_step"]):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-6, atol=1e-7)


def test_checkpoint_translation_writes_each_helper_once():
    r = tx(MANAGED)
    out = r.output
    assert "ckpt = Checkpoint(model=model, optimizer=optimizer)" in out
    assert "manager = CheckpointManager(ckpt, directory, 2)" in out
    assert "latest_checkpoint(directory), manual" in out
    assert out.count("class Checkpoint:") == out.count("class CheckpointManager:") == 1
    assert out.count("def latest_checkpoint(checkpoint_dir):") == 1
    assert "tensorflow" not in out and "import os" in out


def test_checkpoint_status_checks_and_restore_of_none(tmp_path):
    """restore(None) restores nothing (its assert_consumed raises, as TensorFlow's); a checkpoint missing an
    object's value fails assert_consumed and assert_existing_objects_matched, passes expect_partial."""
    r = tx('''
        import tensorflow as tf

        step = tf.Variable(5)
        bias = tf.Variable([1.0, 2.0])
        ckpt = tf.train.Checkpoint(step=step)


        def latest(directory):
            return tf.train.latest_checkpoint(directory)
    ''')
    assert errors(r) == []
    script = r.output + textwrap.dedent(f'''
        import torch
        assert ckpt.restore(latest({str(tmp_path)!r})).expect_partial() is not None
        try:
            ckpt.restore(None).assert_consumed()
            raise SystemExit("restore(None).assert_consumed() must raise")
        except AssertionError:
            pass
        path = ckpt.save({str(tmp_path / "c")!r})
        with torch.no_grad():
            step.fill_(7)
        ckpt.restore(path).assert_consumed()
        assert int(step) == 5 and ckpt.save_counter == 1 and latest({str(tmp_path)!r}) == path
        wider = Checkpoint(step=step, bias=bias)
        status = wider.restore(path)
        status.expect_partial()
        for check in (status.assert_consumed, status.assert_existing_objects_matched):
            try:
                check()
                raise SystemExit(check.__name__ + " must raise")
            except AssertionError:
                pass
        print("OK")
    ''')
    p = python("-c", "import sys; sys.modules['tensorflow'] = None\n" + script, side="torch", timeout=300)
    assert p.stdout.strip().endswith("OK"), p.stderr[-3000:]


SAVED = '''
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(3)])
model.save_weights(WEIGHTS)
model.load_weights(WEIGHTS)
model.save(WHOLE)
restored = keras.models.load_model(WHOLE)
keras.models.save_model(model, WHOLE2, overwrite=True)
'''


def test_save_weights_load_weights_and_whole_model_round_trip(tmp_path):
    r = tx(SAVED)
    assert errors(r) == []
    out = r.output
    assert "torch.save(model.state_dict(), WEIGHTS)" in out
    assert "model.load_state_dict(torch.load(WEIGHTS))" in out
    assert "torch.save(model, WHOLE)" in out and "restored = torch.load(WHOLE, weights_only=False)" in out
    assert "torch.save(model, WHOLE2)" in out
    header = textwrap.dedent(f'''
        import torch
        torch.manual_seed(0)
        WEIGHTS, WHOLE, WHOLE2 = {str(tmp_path / "w.pt")!r}, {str(tmp_path / "m.pt")!r}, {str(tmp_path / "m2.pt")!r}
    ''')
    check = textwrap.dedent('''
        x = torch.randn(5, 4)
        assert torch.equal(restored(x), model(x)) and restored is not model
        fresh = type(model)(*[type(m)(m.in_features, m.out_features) for m in model])
        fresh.load_state_dict(torch.load(WEIGHTS))
        assert torch.equal(fresh(x), model(x))
        print("OK")
    ''')
    p = python("-c", "import sys; sys.modules['tensorflow'] = None\n" + header + out + check, side="torch", timeout=300)
    assert p.stdout.strip().endswith("OK"), p.stderr[-3000:]


def test_save_and_load_weights_with_other_arguments_stay_errors():
    r = tx('''
        from tensorflow import keras

        model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(3)])
        model.load_weights("w.h5", by_name=True)
        model.save("m.keras", overwrite=False)
        y = model.load_weights("w.h5")
    ''')
    found = errors(r)
    assert [line for line, _, _ in found] == [4, 5, 6], found
    assert "strict=False" in found[0][2] and "os.path.exists(path)" in found[1][2]


def test_saved_model_is_refused_with_guidance():
    r = tx('''
        import tensorflow as tf

        tf.saved_model.save(model, "export")
        loaded = tf.saved_model.load("export")
    ''')
    found = errors(r)
    assert [line for line, _, _ in found] == [3, 4]
    assert "torch.export" in found[0][2] and "torch.export.load" in found[1][2]
    assert 'tf.saved_model.save(model, "export")' in r.output  # left as written


def test_a_loaded_model_is_a_model():
    """keras.models.load_model gives a model back (torch.load: an nn.Module): its Keras methods are
    written as functions over it (predict), its save a torch.save."""
    r = tx('''
        import tensorflow as tf

        model = tf.keras.models.load_model("m.keras")
        y = model.predict(x)
        model.save("again.keras")
    ''')
    assert errors(r) == []
    assert "y = predict(model, x)" in r.output and "def predict(model, x" in r.output
    assert 'torch.save(model, "again.keras")' in r.output


# --- the checkpoint_restore fixture: restored outputs, and Keras's weights converted by fwport weights --------

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "tf2torch" / "checkpoint_restore"

FIXTURE_DRIVER = '''
import json, os, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
directory, side = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
x = rng.normal(size=(16, 8, 8, 2)).astype("float32")
y = rng.integers(0, 5, size=(16,)).astype("int64")
probe = rng.normal(size=(6, 8, 8, 2)).astype("float32")
if side == "torch":
    import torch
    torch.manual_seed(0)
    x, y, probe = torch.tensor(x), torch.tensor(y), torch.tensor(probe)
    out = lambda m: m.eval()(probe).detach().numpy().tolist()
    converted = None
    if len(sys.argv) > 3:  # Keras's weights, converted by fwport weights, in a fresh translated model
        fresh = build_model()
        fresh.load_state_dict(torch.load(sys.argv[3]))
        converted = out(fresh)
else:
    import tensorflow as tf
    tf.keras.utils.set_random_seed(0)
    out = lambda m: np.asarray(m(probe, training=False)).tolist()
    converted = None
path = train_and_save(os.path.join(directory, "ckpts"), x, y, 3)
trained = out(model)
restored = out(restore(path))
loaded = out(save_and_load_weights(os.path.join(directory, "model.weights.h5")))
train_step(x, y)  # the model moves on: a restore that shares memory with it would move too
print("RESULT " + json.dumps({"path": os.path.relpath(path, directory), "trained": trained, "restored": restored,
                              "loaded": loaded, "converted": converted,
                              "kept": sorted(f for f in os.listdir(os.path.join(directory, "ckpts"))
                                             if f.startswith("ckpt-") and not f.endswith(".index"))}))
'''


def test_checkpoint_fixture_restores_and_takes_kerass_converted_weights(tmp_path):
    """The checkpoint_restore fixture, Keras and its expected translation: the model restored from the
    manager's last checkpoint, and the one reloaded by load_weights / load_state_dict, give exactly the
    trained model's outputs on each side; and the weights Keras saved (model.weights.h5), converted by
    `fwport weights`, loaded into a fresh translated model give Keras's outputs."""
    from click.testing import CliRunner

    from fwport.verify.cli import weights_command
    from runners import run_side

    src, out = (FIXTURE / "model.py").read_text(), (FIXTURE / "expected.py").read_text()
    k = run_side(tmp_path / "keras", "keras", src, FIXTURE_DRIVER, "keras")
    pt = tmp_path / "converted.pt"
    r = CliRunner().invoke(weights_command, [str(tmp_path / "keras" / "model.weights.h5"), "--source",
                                             str(FIXTURE / "model.py"), "--model", "build_model", "--translated",
                                             str(FIXTURE / "expected.py"), "--to", str(pt)])
    assert r.exit_code == 0, r.output
    t = run_side(tmp_path / "torch", "torch", out, FIXTURE_DRIVER, "torch", str(pt))
    assert t["path"] == k["path"] == os.path.join("ckpts", "ckpt-3")
    assert k["kept"] == ["ckpt-2.data-00000-of-00001", "ckpt-3.data-00000-of-00001"] and t["kept"] == ["ckpt-2", "ckpt-3"]
    for side in (k, t):
        trained = np.asarray(side["trained"])
        assert trained.shape == (6, 5) and np.abs(trained).max() > 0.1
        np.testing.assert_array_equal(np.asarray(side["restored"]), trained)
        np.testing.assert_array_equal(np.asarray(side["loaded"]), trained)
    # Keras's trained weights (conv kernel transposed, the Dense rows after Flatten put in (c, h, w) order)
    np.testing.assert_allclose(np.asarray(t["converted"]), np.asarray(k["trained"]), rtol=1e-5, atol=1e-5)
    # ... and not by accident: the torch side trained from its own initial weights to other outputs
    assert not np.allclose(np.asarray(t["trained"]), np.asarray(k["trained"]), atol=1e-3)
