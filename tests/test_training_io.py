"""Training-side runtime and I/O APIs of issue 9 (the most used ones bench/coverage.py --scope training
listed as untranslated): each translated one is executed without TensorFlow and compared with what
TensorFlow / Keras computes; each one fwport does not translate is an error that says what to write."""
from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _translate(src: str, errors_ok: bool = False):
    r = translate_source(textwrap.dedent(src).lstrip(), "train.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    if not errors_ok:
        assert not errors, [f.message for f in errors]
        imports = [ln for ln in r.output.splitlines() if ln.startswith(("import ", "from "))]
        assert not [ln for ln in imports if "tensorflow" in ln or "keras" in ln], r.output
    return r


def _run(src: str, **env) -> dict:
    """Translate ``src`` and execute the translation with ``env`` in its globals (TensorFlow unused)."""
    ns = dict(env)
    exec(compile(_translate(src).output, "translated.py", "exec"), ns)
    return ns


# --- APIs with no faithful translation: an error with guidance --------------------------------------

def test_pretrained_keras_applications_are_errors_naming_torchvision():
    """keras.applications models have no faithful translation (other weights, other preprocessing): each use is an
    error saying what PyTorch offers and how it differs. Their preprocess_input is Keras's own arithmetic and
    translates (imagenet_preprocess, tests/test_applications_preprocess.py)."""
    r = _translate('''
        from tensorflow import keras

        base = keras.applications.ResNet50V2(weights="imagenet", include_top=False)
        images = keras.applications.resnet_v2.preprocess_input(images)
    ''', errors_ok=True)
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.line for f in errors] == [3]
    assert 'images = imagenet_preprocess(images, "tf")' in r.output, r.output
    for f in errors:
        assert "torchvision.models" in f.message and "weights.transforms()" in f.message, f.message


def test_tfrecord_translates_and_file_readers_are_errors_with_guidance():
    """TFRecord reading, the Example messages, TextLineDataset and list_files translate (tests/test_tfrecord.py
    and tests/test_text_files.py run them); the CSV reader, and a bare reference to a message class, stay errors
    with what to write instead."""
    r = _translate('''
        import tensorflow as tf

        spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.VarLenFeature(tf.int64)}


        def parse(example):
            return tf.io.parse_single_example(example, spec)


        ds = tf.data.TFRecordDataset(["a.tfrecord"]).map(parse)
        lines = tf.data.TextLineDataset("a.txt").skip(1)
        files = tf.data.Dataset.list_files("imgs/*.jpg")
        feature = tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))
        csv = tf.data.experimental.make_csv_dataset("a.csv", batch_size=4)
        kind = tf.train.Example
    ''', errors_ok=True)
    by_line = {}
    for f in r.findings:
        if f.severity is Severity.ERROR:
            by_line.setdefault(f.line, []).append(f.message)
    # make_csv_dataset translates (tests/test_make_csv_dataset.py runs it against TensorFlow)
    assert sorted(by_line) == [15], by_line
    for line, messages in by_line.items():
        for message in messages:
            assert "no tf2torch translation" in message or "no translation" in message or "still references" \
                in message, message
    assert "\ncsv = make_csv_dataset(" in r.output
    assert 'lines = text_line_dataset("a.txt").skip(1)' in r.output
    assert 'files = list_files("imgs/*.jpg")' in r.output
    assert "tf.train.Example" in by_line[15][0]
    assert 'ds = tfrecord_dataset(["a.tfrecord"]).map(parse)' in r.output
    assert 'spec = {"image": FixedLenFeature([], bytes), "label": VarLenFeature(torch.int64)}' in r.output
    assert "feature = Feature(int64_list=Int64List(value=[1]))" in r.output


# --- keras.metrics functions: the losses' per-sample functions ---------------------------------------

def test_metric_functions_are_the_per_sample_losses():
    keras = pytest.importorskip("keras")
    rng = np.random.default_rng(0)
    y = rng.normal(size=(5, 3)).astype("float32")
    p = rng.normal(size=(5, 3)).astype("float32")
    probs = rng.random((5, 3)).astype("float32")
    onehot = np.eye(3, dtype="float32")[rng.integers(0, 3, 5)]
    classes = rng.integers(0, 3, 5)
    import torch
    ns = _run('''
        import tensorflow as tf
        from tensorflow import keras

        mae = keras.metrics.mean_absolute_error(y, p)
        mse = tf.keras.metrics.mean_squared_error(y, p)
        bce = keras.metrics.binary_crossentropy(onehot, probs)
        cce = keras.metrics.categorical_crossentropy(onehot, probs)
        scce = keras.metrics.sparse_categorical_crossentropy(classes, probs, from_logits=True)
    ''', y=torch.tensor(y), p=torch.tensor(p), probs=torch.tensor(probs), onehot=torch.tensor(onehot),
        classes=torch.tensor(classes))
    want = {"mae": keras.metrics.mean_absolute_error(y, p), "mse": keras.metrics.mean_squared_error(y, p),
            "bce": keras.metrics.binary_crossentropy(onehot, probs),
            "cce": keras.metrics.categorical_crossentropy(onehot, probs),
            "scce": keras.metrics.sparse_categorical_crossentropy(classes, probs, from_logits=True)}
    for k, v in want.items():
        assert tuple(ns[k].shape) == (5,), k
        np.testing.assert_allclose(ns[k].numpy(), np.asarray(v), rtol=1e-5, atol=1e-6, err_msg=k)


# --- tf.config -----------------------------------------------------------------------------------------

def test_list_logical_devices_counts_the_devices():
    import torch
    r = _translate('''
        import tensorflow as tf

        logical = tf.config.list_logical_devices("GPU")
        cpus = tf.config.experimental.list_logical_devices("CPU")
    ''')
    assert any("LogicalDevice" in f.message for f in r.findings)
    ns = {}
    exec(r.output, ns)
    assert len(ns["logical"]) == torch.cuda.device_count() and len(ns["cpus"]) == 1


# --- runtime settings, plot_model ------------------------------------------------------------------------

def test_settings_statements_are_removed_and_plot_model_prints(capsys):
    import torch
    r = _translate('''
        import tensorflow as tf
        from tensorflow import keras

        tf.debugging.set_log_device_placement(True)
        for gpu in tf.config.list_physical_devices("GPU"):
            tf.config.experimental.set_memory_growth(gpu, True)
        model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
        keras.utils.plot_model(model, to_file="m.png", show_shapes=True)
        done = True
    ''')
    out = r.output
    assert "set_memory_growth" not in out and "set_log_device_placement" not in out
    assert "    pass\n" in out and "print(model)" in out  # the loop keeps a body
    assert {f.code for f in r.findings if f.severity is Severity.WARNING} == {"idiom-replaced"}
    ns = {}
    exec(out, ns)
    assert ns["done"] and isinstance(ns["model"], torch.nn.Module)
    assert "Linear(in_features=3, out_features=2" in capsys.readouterr().out


MIXED = '''
import numpy as np
from tensorflow import keras

keras.mixed_precision.set_global_policy("mixed_float16")
model = keras.Sequential([keras.layers.Dense(16, activation="relu", input_shape=(8,)), keras.layers.Dense(4)])
'''


def test_a_mixed_precision_policy_is_removed_with_a_warning_that_sizes_the_difference():
    """Keras under mixed_float16 computes each layer in float16; the translation computes in float32: the
    warning's "about 1e-3 relative" is measured here against Keras's mixed-precision outputs."""
    import torch
    keras = pytest.importorskip("keras")
    r = _translate(MIXED)
    assert "set_global_policy" not in r.output
    warn = [f for f in r.findings if f.severity is Severity.WARNING and "mixed_float16" in f.message]
    assert len(warn) == 1 and warn[0].line == 4 and "about 1e-3 relative" in warn[0].message
    assert "torch.autocast" in warn[0].message and "GradScaler" in warn[0].message
    try:
        want = {}
        exec(textwrap.dedent(MIXED), want)
        kmodel = want["model"]
        x = np.random.default_rng(0).normal(size=(64, 8)).astype("float32")
        y_keras = np.asarray(kmodel(x), dtype="float32")
        assert kmodel.layers[0].compute_dtype == "float16"
    finally:
        keras.mixed_precision.set_global_policy("float32")
    ns = {}
    exec(r.output, ns)
    linears = [m for m in ns["model"] if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for lin, layer in zip(linears, kmodel.layers):
            kernel, bias = (np.asarray(w) for w in layer.get_weights())
            lin.weight.copy_(torch.from_numpy(kernel.T.copy()))
            lin.bias.copy_(torch.from_numpy(bias))
        y_torch = ns["model"](torch.from_numpy(x)).numpy()
    rel = np.abs(y_torch - y_keras).max() / np.abs(y_keras).max()
    assert 1e-5 < rel < 5e-3, rel  # float16 rounding: about 1e-3, not float32 agreement and not a bug's size


def test_other_dtype_policies_keep_their_error():
    r = _translate('''
        from tensorflow import keras

        keras.mixed_precision.set_global_policy("float64")
        keras.mixed_precision.set_global_policy(policy)
    ''', errors_ok=True)
    assert sorted(f.line for f in r.findings if f.severity is Severity.ERROR) == [3, 4]


def test_plot_model_as_a_value_is_an_error():
    r = _translate('''
        from tensorflow import keras

        image = keras.utils.plot_model(model)
    ''', errors_ok=True)
    assert [f.line for f in r.findings if f.severity is Severity.ERROR] == [3]


# --- tf.distribute.MirroredStrategy: one process over the global batch -------------------------------------

STRATEGY = '''
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
print("Number of devices: {}".format(strategy.num_replicas_in_sync))
GLOBAL_BATCH = 4 * strategy.num_replicas_in_sync

with strategy.scope():
    w = tf.Variable(np.arange(3, dtype="float32"))


def step(x):
    per_example = tf.reduce_sum(x * w, axis=1) ** 2
    return tf.reduce_sum(per_example) / GLOBAL_BATCH


def distributed_step(x):
    per_replica = strategy.run(step, args=(x,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


x = tf.constant(np.arange(12, dtype="float32").reshape(4, 3) / 10)
loss = float(distributed_step(x))
'''


def test_mirrored_strategy_runs_in_one_process_with_tensorflows_numbers():
    tf = pytest.importorskip("tensorflow")
    import torch
    r = _translate(STRATEGY)
    # a loop of the file's own: torchrun's processes where torchrun starts it (tests/test_distributed.py), one
    # process here
    code = "\n".join(ln for ln in r.output.splitlines() if not ln.startswith("    "))  # (the helpers' docstrings)
    assert "tf." not in code and "strategy" not in code.replace("distributed_step", "")
    assert "contextlib.nullcontext()" in r.output and "per_replica = step(x)" in r.output
    assert 'reduce_replicas("sum", per_replica)' in r.output and "init_replicas()" in r.output
    info = [f for f in r.findings if "MirroredStrategy" in f.message]
    assert len(info) == 1 and info[0].severity is Severity.INFO and "torchrun" in info[0].message
    ns = {}
    exec(r.output, ns)
    assert ns["GLOBAL_BATCH"] == 4 * max(torch.cuda.device_count(), 1)
    want = {}
    exec(textwrap.dedent(STRATEGY), want)
    assert want["GLOBAL_BATCH"] == ns["GLOBAL_BATCH"]  # one replica per GPU, one without: TensorFlow's count
    np.testing.assert_allclose(ns["loss"], want["loss"], rtol=1e-6)


def test_a_strategy_used_otherwise_is_left_with_its_error():
    r = _translate('''
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        dist = strategy.distribute_datasets_from_function(make)
    ''', errors_ok=True)
    assert [f.line for f in r.findings if f.severity is Severity.ERROR] == [3]
    assert "tf.distribute.MirroredStrategy()" in r.output


def test_a_strategy_reduce_with_a_starred_argument_is_not_guessed():
    # reduce(op, *args): whether args holds the value alone or the value and the axis is unknown, so the
    # strategy keeps its error rather than becoming a call that returns the whole tuple
    r = _translate('''
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy()
        args = (per_replica, None)
        total = strategy.reduce(tf.distribute.ReduceOp.SUM, *args)
    ''', errors_ok=True)
    assert "total = args" not in r.output and "strategy.reduce(" in r.output
    assert 3 in [f.line for f in r.findings if f.severity is Severity.ERROR]


# --- tf.summary: scalars into TensorBoard event files ------------------------------------------------------

def _scalars(logdir) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    out = {}
    for tag in acc.Tags().get("scalars", []):
        out[tag] = [(e.step, e.value) for e in acc.Scalars(tag)]
    for tag in acc.Tags().get("tensors", []):  # TensorFlow 2 writes scalars as tensor summaries
        import tensorflow as tf
        out[tag] = [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]
    return out


SUMMARY = '''
import tensorflow as tf

writer = tf.summary.create_file_writer(logdir)
for epoch in range(3):
    with writer.as_default():
        tf.summary.scalar("loss", 1.0 / (epoch + 1), step=epoch)
        tf.summary.scalar("accuracy", data=0.25 * epoch, step=epoch)
    with writer.as_default(step=epoch + 10):
        tf.summary.scalar("lr", 0.5 ** epoch)
writer.flush()
'''


def test_summary_scalars_reach_tensorboard_as_tensorflow_writes_them(tmp_path):
    pytest.importorskip("tensorflow")
    pytest.importorskip("tensorboard")
    r = _translate(SUMMARY)
    assert "SummaryWriter(logdir)" in r.output and 'writer.add_scalar("lr", 0.5 ** epoch, epoch + 10)' in r.output
    exec(r.output, {"logdir": str(tmp_path / "torch")})
    exec(textwrap.dedent(SUMMARY), {"logdir": str(tmp_path / "tf")})
    got, want = _scalars(tmp_path / "torch"), _scalars(tmp_path / "tf")
    assert sorted(got) == sorted(want) == ["accuracy", "loss", "lr"]
    for tag in want:
        assert [s for s, _ in got[tag]] == [s for s, _ in want[tag]], tag
        np.testing.assert_allclose([v for _, v in got[tag]], [v for _, v in want[tag]], rtol=1e-6, err_msg=tag)


LOGGER = '''
import tensorflow as tf


class Logger:
    def __init__(self, logdir):
        self.epoch = 0
        self.summary_writer = tf.summary.create_file_writer(logdir)

    def log(self, name, value):
        self.epoch += 1
        with self.summary_writer.as_default():
            tf.summary.scalar(name, value, step=self.epoch)
            self.summary_writer.flush()


logger = Logger(logdir)
for i in range(3):
    logger.log("jaccard", 0.5 + 0.125 * i)
'''


def test_a_writer_held_by_self_writes_the_scalars_tensorflow_writes(tmp_path):
    """keras-io's callbacks hold the writer: self.summary_writer = tf.summary.create_file_writer(...) in
    __init__, with self.summary_writer.as_default() in a method."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("tensorboard")
    r = _translate(LOGGER)
    assert "self.summary_writer.add_scalar(name, value, self.epoch)" in r.output
    exec(r.output, {"logdir": str(tmp_path / "torch"), "__name__": "m"})
    exec(textwrap.dedent(LOGGER), {"logdir": str(tmp_path / "tf"), "__name__": "m"})
    got, want = _scalars(tmp_path / "torch"), _scalars(tmp_path / "tf")
    assert sorted(got) == sorted(want) == ["jaccard"]
    assert [s for s, _ in got["jaccard"]] == [s for s, _ in want["jaccard"]] == [1, 2, 3]
    np.testing.assert_allclose([v for _, v in got["jaccard"]], [v for _, v in want["jaccard"]], rtol=1e-6)


def test_an_attribute_of_self_that_is_also_something_else_keeps_its_error():
    r = _translate('''
        import tensorflow as tf

        class Logger:
            def __init__(self, logdir):
                self.writer = tf.summary.create_file_writer(logdir)

            def reset(self, other):
                self.writer = other

            def log(self, v):
                with self.writer.as_default():
                    tf.summary.scalar("v", v, step=1)
    ''', errors_ok=True)
    assert sorted(f.line for f in r.findings if f.severity is Severity.ERROR) == [12]


def test_a_scalar_without_a_writer_block_is_left_with_its_error():
    r = _translate('''
        import tensorflow as tf

        writer = tf.summary.create_file_writer("logs")
        writer.set_as_default()
        tf.summary.scalar("loss", 0.1, step=1)
    ''', errors_ok=True)
    assert sorted(f.line for f in r.findings if f.severity is Severity.ERROR) == [5]


# --- tf.io.read_file and the image decoders ------------------------------------------------------------------

def _images(tmp_path) -> dict:
    from PIL import Image
    rng = np.random.default_rng(5)
    rgb = rng.integers(0, 256, (7, 9, 3), dtype=np.uint8)
    paths = {}
    for name, img in {"rgb.png": Image.fromarray(rgb), "rgba.png": Image.fromarray(
            np.concatenate([rgb, rng.integers(0, 256, (7, 9, 1), dtype=np.uint8)], -1)),
            "gray.png": Image.fromarray(rgb[:, :, 0]), "palette.png": Image.fromarray(rgb).quantize(16),  # 4 bits
            "palette8.png": Image.fromarray(rgb).quantize(200), "bits.png": Image.fromarray(rgb[:, :, 0] > 128),
            "photo.jpg": Image.fromarray(np.repeat(np.repeat(rgb, 4, 0), 4, 1)),
            "still.bmp": Image.fromarray(rgb)}.items():
        paths[name] = str(tmp_path / name)
        img.save(paths[name])
    return paths


DECODE = '''
import tensorflow as tf


def load(path, channels):
    return tf.io.decode_png(tf.io.read_file(path), channels=channels)


out = {}
for name in ["rgb.png", "rgba.png", "gray.png", "palette.png", "palette8.png", "bits.png"]:
    for channels in (0, 3, 4):
        out[(name, channels)] = load(paths[name], channels)
out["gray1"] = tf.io.decode_png(tf.io.read_file(paths["gray.png"]), channels=1)
out["bmp"] = tf.io.decode_image(tf.io.read_file(paths["still.bmp"]), dtype=tf.float32)
out["any_png"] = tf.image.decode_image(tf.io.read_file(paths["rgba.png"]), channels=3, expand_animations=False)
out["jpeg"] = tf.io.decode_jpeg(tf.io.read_file(paths["photo.jpg"]), channels=3)
'''


def test_read_file_and_decoders_give_tensorflows_pixels(tmp_path):
    pytest.importorskip("tensorflow")
    paths = _images(tmp_path)
    r = _translate(DECODE)
    assert "pathlib.Path(path).read_bytes()" in r.output
    warned = [f for f in r.findings if f.code == "approximate"]
    # channels not a literal (may be 1), channels=1, decode_image (the format known at run time), decode_jpeg
    assert {f.line for f in warned} == {5, 12, 13, 14, 15}
    got, want = {"paths": paths}, {"paths": paths}
    exec(r.output, got)
    exec(textwrap.dedent(DECODE), want)
    for key, value in want["out"].items():
        value = value.numpy()
        mine = got["out"][key].numpy()
        assert mine.shape == value.shape and mine.dtype == value.dtype, (key, mine.shape, value.shape)
        if key == "jpeg":
            assert np.abs(mine.astype(int) - value.astype(int)).max() <= 6, key  # the warning's few levels
        else:
            np.testing.assert_array_equal(mine, value, err_msg=str(key))


def test_a_sixteen_bit_decode_is_refused():
    r = _translate('''
        import tensorflow as tf

        depth = tf.io.decode_png(raw, dtype=tf.uint16)
    ''', errors_ok=True)
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert len(errors) == 1 and "dtype=tf.uint16" in errors[0].message


# --- keras.losses.Loss subclasses → KerasLoss (an nn.Module) -------------------------------------------------

LOSS_SUBCLASS = '''
import tensorflow as tf
from tensorflow import keras


class FocalLoss(keras.losses.Loss):
    def __init__(self, gamma=2.0, **kwargs):
        super().__init__(**kwargs)
        self.gamma = gamma

    def call(self, y_true, y_pred):
        p = tf.clip_by_value(y_pred, 1e-7, 1 - 1e-7)
        return tf.reduce_sum(tf.pow(1 - p, self.gamma) * -y_true * tf.math.log(p), axis=-1)


out = {
    "mean": FocalLoss(gamma=1.5)(labels, probs),
    "sum": FocalLoss(reduction="sum")(labels, probs),
    "none": FocalLoss(reduction=None)(labels, probs),
    "weighted": FocalLoss()(labels, probs, sample_weight=weights),
}
'''


def test_a_loss_subclass_reduces_as_keras_does():
    pytest.importorskip("tensorflow")
    import torch
    rng = np.random.default_rng(2)
    labels = np.eye(4, dtype="float32")[rng.integers(0, 4, 6)]
    probs = rng.dirichlet(np.ones(4), 6).astype("float32")
    weights = rng.random(6).astype("float32")
    r = _translate(LOSS_SUBCLASS)
    assert "class FocalLoss(KerasLoss):" in r.output and "class KerasLoss(nn.Module):" in r.output
    got = {"labels": labels.astype("float64"), "probs": torch.tensor(probs), "weights": weights}  # cast as Keras does
    exec(r.output, got)
    assert isinstance(got["FocalLoss"](), torch.nn.Module)
    want = {"labels": labels, "probs": probs, "weights": weights}
    exec(textwrap.dedent(LOSS_SUBCLASS), want)
    for k, v in want["out"].items():
        mine = got["out"][k]
        assert mine.dtype == torch.float32 and tuple(mine.shape) == tuple(v.shape), k
        np.testing.assert_allclose(mine.numpy(), np.asarray(v), rtol=1e-6, err_msg=k)
    # it trains: the reduced loss has a gradient
    p = torch.tensor(probs, requires_grad=True)
    got["FocalLoss"]()(torch.tensor(labels), p).backward()
    assert p.grad is not None and float(p.grad.abs().sum()) > 0


def test_auc_options_it_does_not_compute_are_refused():
    r = _translate('''
        from tensorflow import keras

        per_label = keras.metrics.AUC(multi_label=True, num_labels=3)
        fixed = keras.metrics.AUC(thresholds=[0.2, 0.5])
    ''', errors_ok=True)
    assert sorted(set(f.line for f in r.findings if f.severity is Severity.ERROR)) == [3, 4]


# --- per-example losses of a distributed step: Reduction.NONE and compute_average_loss ---------------------

PER_EXAMPLE = '''
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
GLOBAL_BATCH_SIZE = 6 * strategy.num_replicas_in_sync

with strategy.scope():
    sparse = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=tf.keras.losses.Reduction.NONE)
    dense = tf.keras.losses.CategoricalCrossentropy(reduction="sum")

    def compute_loss(labels, logits):
        per_example_loss = sparse(labels, logits)
        return tf.nn.compute_average_loss(per_example_loss, global_batch_size=GLOBAL_BATCH_SIZE)


def step(labels, logits, onehot, probs, weights):
    per_example = sparse(labels, logits)
    return {"per_example": per_example, "average": compute_loss(labels, logits),
            "weighted": tf.nn.compute_average_loss(per_example, sample_weight=weights), "sum": dense(onehot, probs)}


out = strategy.run(step, args=(labels, logits, onehot, probs, weights))
'''


def test_per_example_losses_and_their_average_are_tensorflows():
    pytest.importorskip("tensorflow")
    import torch
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 3, 6)
    logits = rng.normal(size=(6, 3)).astype("float32")
    onehot = np.eye(3, dtype="float32")[labels]
    probs = rng.dirichlet(np.ones(3), 6).astype("float32")
    weights = rng.random(6).astype("float32")
    r = _translate(PER_EXAMPLE)
    assert 'nn.CrossEntropyLoss(reduction="none")' in r.output and "per_example_loss.sum() / GLOBAL_BATCH_SIZE" in r.output
    got = {k: torch.tensor(v) for k, v in dict(labels=labels, logits=logits, onehot=onehot, probs=probs,
                                                 weights=weights).items()}
    exec(r.output, got)
    want = dict(labels=labels, logits=logits, onehot=onehot, probs=probs, weights=weights)
    exec(textwrap.dedent(PER_EXAMPLE), want)
    for k, v in want["out"].items():
        mine = got["out"][k]
        assert tuple(mine.shape) == tuple(v.shape), k
        np.testing.assert_allclose(mine.numpy(), v.numpy(), rtol=2e-6, atol=1e-6, err_msg=k)


def test_a_per_example_loss_given_to_compile_is_refused():
    r = _translate('''
        import tensorflow as tf

        model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(reduction="none"))
        model.fit(x, y)
    ''', errors_ok=True)
    assert [f.line for f in r.findings if f.severity is Severity.ERROR]
    assert "loss=tf.keras.losses.SparseCategoricalCrossentropy" in r.output


# --- keras.utils.timeseries_dataset_from_array --------------------------------------------------------------

TIMESERIES = '''
from tensorflow import keras

plain = keras.utils.timeseries_dataset_from_array(data, targets, sequence_length=5, batch_size=4)
strided = keras.utils.timeseries_dataset_from_array(data, targets, 4, sequence_stride=3, sampling_rate=2,
                                                     batch_size=3, start_index=2, end_index=27)
unlabeled = keras.utils.timeseries_dataset_from_array(data, None, sequence_length=6, batch_size=None)
shuffled = keras.utils.timeseries_dataset_from_array(data, targets, sequence_length=3, batch_size=5, shuffle=True, seed=7)
'''


def test_timeseries_windows_are_keras_batches():
    pytest.importorskip("tensorflow")
    rng = np.random.default_rng(8)
    data = rng.normal(size=(30, 2))  # float64: kept, as TensorFlow keeps a numpy array's dtype
    targets = np.arange(30)
    r = _translate(TIMESERIES)
    assert [f.line for f in r.findings if f.code == "approximate"] == [7]
    got, want = {"data": data, "targets": targets}, {"data": data, "targets": targets}
    exec(r.output, got)
    exec(textwrap.dedent(TIMESERIES), want)

    def batches(ds, torch_side):
        out = []
        for b in ds:
            parts = b if isinstance(b, tuple) else (b,)
            out.append(tuple(p.numpy() for p in parts))
        return out
    for name in ("plain", "strided", "unlabeled"):
        mine, theirs = batches(got[name], True), batches(want[name], False)
        assert len(mine) == len(theirs) > 1, name
        for a, b in zip(mine, theirs):
            for x, y in zip(a, b):
                assert x.dtype == y.dtype and x.shape == y.shape, name
                np.testing.assert_array_equal(x, y, err_msg=name)
    # shuffled: the same windows, in another order
    def windows(ds):
        return sorted((tuple(x.ravel().round(12)), int(y)) for xb, yb in ds for x, y in zip(xb.numpy(), yb.numpy()))
    assert windows(got["shuffled"]) == windows(want["shuffled"])


def test_other_untranslated_training_apis_say_what_to_write():
    r = _translate('''
        import tensorflow as tf
        from tensorflow import keras

        gen = keras.preprocessing.image.ImageDataGenerator(rotation_range=20)
        try:
            pass
        except tf.errors.InvalidArgumentError:
            pass
        clone = keras.models.clone_model(model)
        tokenizer = tf.keras.preprocessing.text.Tokenizer(num_words=100)
    ''', errors_ok=True)
    by_line = {f.line: f.message for f in r.findings if f.severity is Severity.ERROR}
    # clone_model, Tokenizer and ImageDataGenerator are translated (test_clone_model.py, test_tokenizer.py,
    # test_image_data_generator.py)
    assert sorted(by_line) == [7]
    assert "RuntimeError" in by_line[7]
    assert "clone = clone_model(model)" in r.output and "tokenizer = Tokenizer(num_words=100)" in r.output
    assert "gen = ImageDataGenerator(rotation_range=20)" in r.output


CARDINALITY = '''
import numpy as np
import tensorflow as tf

ds = tf.data.Dataset.from_tensor_slices(np.arange(10)).batch(3)
sizes = [int(tf.data.experimental.cardinality(d).numpy()) for d in (ds, ds.repeat(), ds.filter(lambda x: True))]
head = ds.take(tf.data.experimental.cardinality(ds) // 2)
first = [b.numpy().tolist() for b in head]
'''


def test_cardinality_is_tf_datas():
    pytest.importorskip("tensorflow")
    r = _translate(CARDINALITY)
    got, want = {}, {}
    exec(r.output, got)
    exec(textwrap.dedent(CARDINALITY), want)
    assert got["sizes"] == want["sizes"] == [4, -1, -2]
    assert got["first"] == want["first"] == [[0, 1, 2], [3, 4, 5]]


# --- keras.metrics.Metric subclasses → KerasMetric -------------------------------------------------------------

METRIC_SUBCLASS = '''
import tensorflow as tf
from tensorflow import keras


class F1Score(keras.metrics.Metric):
    def __init__(self, name="f1", **kwargs):
        super().__init__(name=name, **kwargs)
        self.tp = self.add_weight(name="tp", initializer="zeros")
        self.fp = self.add_weight(name="fp", initializer="zeros")
        self.fn = self.add_weight(name="fn", initializer="zeros")
        self.seen = self.add_variable(shape=(2,), initializer="ones", name="seen")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = tf.cast(y_pred > 0.5, tf.float32)
        y_true = tf.cast(y_true, tf.float32)
        self.tp.assign_add(tf.reduce_sum(y_true * y_pred))
        self.fp.assign_add(tf.reduce_sum((1 - y_true) * y_pred))
        self.fn.assign_sub(-tf.reduce_sum(y_true * (1 - y_pred)))
        self.seen.assign(self.seen + tf.constant([1.0, 2.0]))

    def result(self):
        p = self.tp / (self.tp + self.fp + 1e-7)
        r = self.tp / (self.tp + self.fn + 1e-7)
        return 2 * p * r / (p + r + 1e-7) + self.seen[1] / 1000


def run(batches):
    f1, out = F1Score(), []
    for i, (y, p) in enumerate(batches):
        if i == 2:
            f1.reset_state()
        out.append(float(f1(y, p)))
    return out
'''


def test_a_metric_subclass_keeps_its_state_as_keras_does():
    pytest.importorskip("tensorflow")
    import torch
    rng = np.random.default_rng(6)
    batches = [((rng.random(n) > 0.5).astype("float32"), rng.random(n).astype("float32")) for n in (9, 7, 5)]
    r = _translate(METRIC_SUBCLASS)
    assert "class F1Score(KerasMetric):" in r.output and "self.tp.data.add_(" in r.output
    got, want = {}, {}
    exec(r.output, got)
    exec(textwrap.dedent(METRIC_SUBCLASS), want)
    mine = got["run"]([(torch.tensor(y), torch.tensor(p)) for y, p in batches])
    theirs = want["run"](batches)
    np.testing.assert_allclose(mine, theirs, rtol=1e-6)
    assert len(set(theirs)) == 3  # the batches and the reset tell the states apart


def test_string_ops_are_errors_naming_the_python_counterpart():
    """tf.strings has no torch counterpart (no string tensors): each op is an error at its line that names the
    Python str operation to use where the text is prepared; lower and regex_replace, which a TextVectorization's
    standardize function calls on each text, become helpers written into the file that do it on a Python str
    (their exactness against TensorFlow: tests/test_text_vectorization.py)."""
    r = _translate('''
        import tensorflow as tf


        def clean(text):
            text = tf.strings.lower(text)
            text = tf.strings.regex_replace(text, "[!?]", "")
            return tf.strings.reduce_join(tf.strings.unicode_split(text, "UTF-8"), separator=" ")
    ''', errors_ok=True)
    by_line = {}
    for f in r.findings:
        if f.severity is Severity.ERROR:
            by_line.setdefault(f.line, []).append(f.message)
    # reduce_join and unicode_split are Python-string helpers (tests/test_strings_reduce_join.py
    # compares them with TensorFlow): no error is left
    assert sorted(by_line) == [], by_line
    assert "    text = strings_lower(input=text)\n" in r.output
    assert '    text = regex_replace(input=text, pattern="[!?]", rewrite="")\n' in r.output
    assert '    return reduce_join(unicode_split(text, "UTF-8"), separator=" ")\n' in r.output
