"""tf.distribute strategies bound several times in one scope, a TPU connection with its fallback, a MirroredStrategy
given its devices, and TensorFlow's device set-up statements (passes/runtime.py): each translated program runs in
one process and is compared with TensorFlow's numbers; what a dropped statement would change stays an error."""
from __future__ import annotations

import os
import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import keras_and_torch

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _translate(src: str):
    return translate_source(textwrap.dedent(src).lstrip(), "train.py")


def _errors(r) -> list:
    return [f for f in r.findings if f.severity is Severity.ERROR]


# two replicas on two logical CPUs (set up by the file, removed in the translation): each replica computes its half
# of every global batch, strategy.reduce sums them: the global batch's loss, which the one process computes
TWO_REPLICAS = '''
import numpy as np
import tensorflow as tf

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration(),
                                                     tf.config.LogicalDeviceConfiguration()])
tf.config.optimizer.set_jit(True)
if len(cpus) > 5:
    strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
else:
    strategy = tf.distribute.MirroredStrategy(devices=["/cpu:1", "/cpu:0"])
GLOBAL_BATCH = 4 * strategy.num_replicas_in_sync
with strategy.scope():
    w = tf.Variable(np.arange(3, dtype="float32") - 1.0)


def step(x):
    per_example = tf.reduce_sum(x * w, axis=1) ** 2
    return tf.reduce_sum(per_example) / GLOBAL_BATCH


x = (np.arange(48, dtype="float32").reshape(16, 3) - 20.0) / 10
ds = tf.data.Dataset.from_tensor_slices(x).batch(GLOBAL_BATCH)
losses = []
for batch in strategy.experimental_distribute_dataset(ds):
    per_replica = strategy.run(step, args=(batch,))
    losses.append(float(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)))
'''

DRIVER = '''
import json, runpy, sys
ns = runpy.run_path(sys.argv[1] + "/model.py")
print("RESULT " + json.dumps({"losses": ns["losses"], "batch": ns["GLOBAL_BATCH"]}))
'''


def test_a_strategy_bound_in_both_branches_over_two_given_devices_computes_tensorflows_losses(tmp_path):
    pytest.importorskip("tensorflow")
    import numpy as np
    r = _translate(TWO_REPLICAS)
    assert not _errors(r), [f.message for f in _errors(r)]
    out = r.output
    code = out[out.index("cpus = "):]  # (the data pipeline's helpers above)
    assert "tf." not in code and "strategy" not in code and "GLOBAL_BATCH = 4 * 2" in code, code
    assert "per_replica = step(batch)" in out and "losses.append(float(per_replica))" in out, out
    infos = [f.message for f in r.findings if f.severity is Severity.INFO and "removed" in f.message]
    assert any("set_logical_device_configuration" in m and "no number changes" in m for m in infos), infos
    assert any("set_jit" in m and "torch.compile" in m for m in infos), infos
    warn = [f.message for f in r.findings if f.severity is Severity.WARNING and "MirroredStrategy" in f.message]
    assert len(warn) == 2 and all("num_replicas_in_sync = 2, its devices' number" in m and "bound to a strategy 2 "
                                  "times" in m for m in warn), warn
    keras, torch = keras_and_torch(tmp_path, textwrap.dedent(TWO_REPLICAS), out, DRIVER)
    assert keras["batch"] == torch["batch"] == 8
    assert len(keras["losses"]) == len(torch["losses"]) == 2
    np.testing.assert_allclose(torch["losses"], keras["losses"], rtol=1e-6)


def test_strategies_whose_replica_counts_differ_keep_their_errors_where_the_count_is_read():
    # which binding a read of num_replicas_in_sync gets is decided where the program runs (one GPU or two
    # given devices): the strategies stay TensorFlow's with their errors; read nowhere, they translate
    src = '''
        import tensorflow as tf

        if use_two:
            strategy = tf.distribute.MirroredStrategy(devices=["/gpu:0", "/gpu:1"])
        else:
            strategy = tf.distribute.get_strategy()
        batch = 8 * strategy.num_replicas_in_sync
    '''
    r = _translate(src)
    assert sorted(f.line for f in _errors(r)) == [4, 6] and "strategy.num_replicas_in_sync" in r.output
    r = _translate(src.replace("batch = 8 * strategy.num_replicas_in_sync", "with strategy.scope():\n            w = 1"))
    assert not _errors(r) and "with contextlib.nullcontext():" in r.output and "strategy" not in r.output


def test_a_mirrored_strategy_given_devices_it_cannot_count_keeps_its_error_where_the_count_is_read():
    # MirroredStrategy(gpus): as many replicas as gpus holds; the count was max(torch.cuda.device_count(), 1) before
    r = _translate('''
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy(gpus)
        batch = 8 * strategy.num_replicas_in_sync
    ''')
    assert [f.line for f in _errors(r)] == [3] and "device_count" not in r.output


TPU = '''
import tensorflow as tf

try:
    tpu = tf.distribute.cluster_resolver.TPUClusterResolver.connect()
    print("Device:", tpu.master())
    strategy = tf.distribute.TPUStrategy(tpu)
except ValueError:
    print("Not connected to a TPU runtime. Using CPU/GPU strategy")
    strategy = tf.distribute.get_strategy()
replicas = strategy.num_replicas_in_sync
with strategy.scope():
    w = tf.Variable([1.0, 2.0])
'''


def test_a_tpu_connection_with_a_fallback_becomes_the_fallback(capsys):
    import torch
    r = _translate(TPU)
    assert not _errors(r), [f.message for f in _errors(r)]
    out = r.output
    assert "try:" not in out and "tpu" not in out.replace("TPU runtime", ""), out
    warn = [f for f in r.findings if f.severity is Severity.WARNING and "TPU connection" in f.message]
    assert len(warn) == 1 and warn[0].line == 3 and "torch_xla" in warn[0].message
    ns = {}
    exec(out, ns)
    assert ns["replicas"] == 1 and isinstance(ns["w"], torch.Tensor)  # TensorFlow's default strategy: one replica
    assert capsys.readouterr().out == "Not connected to a TPU runtime. Using CPU/GPU strategy\n"


def test_a_tpu_try_that_does_more_or_whose_resolver_is_read_later_is_left_alone():
    more = TPU.replace('    print("Device:", tpu.master())\n', '    model = build()\n')
    later = TPU + "print(tpu)\n"
    for src in (more, later):
        r = _translate(src)
        assert "try:" in r.output and any("TPUStrategy" in (f.api or "") for f in _errors(r)), r.output


def test_device_setup_that_a_device_count_reads_keeps_its_error():
    # two logical GPUs of one: list_logical_devices counts them, MirroredStrategy() replicates over them; one
    # logical device with a memory cap changes no count and is removed
    split = '''
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        tf.config.set_logical_device_configuration(gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=1024),
                                                             tf.config.LogicalDeviceConfiguration(memory_limit=1024)])
        tf.config.set_visible_devices(gpus[0], "GPU")
        logical = tf.config.list_logical_devices("GPU")
    '''
    r = _translate(split)
    errors = {(f.line, f.api) for f in _errors(r)}
    assert {line for line, _ in errors} == {4, 5, 6}, errors  # (4 and 5: the LogicalDeviceConfigurations too)
    messages = " ".join(f.message for f in _errors(r))
    assert "counts TensorFlow's logical devices" in messages and "CUDA_VISIBLE_DEVICES" in messages
    capped = split.replace(",\n                                                             tf.config.LogicalDeviceConfiguration(memory_limit=1024)", "")
    r = _translate(capped)
    assert [f.line for f in _errors(r)] == [5] and "set_logical_device_configuration" not in r.output
    r = _translate(split.replace('logical = tf.config.list_logical_devices("GPU")', "n = len(gpus)"))
    assert not _errors(r) and "set_visible_devices" not in r.output and "CUDA_VISIBLE_DEVICES" in " ".join(
        f.message for f in r.findings)


def test_a_displayed_element_spec_is_removed_and_one_that_is_used_keeps_its_error():
    # a notebook cell's `ds.element_spec` displays the structure and computes nothing in a script; bound to a name,
    # it is a value the DataPipeline does not have: an error
    import numpy as np
    src = '''
        import numpy as np
        import tensorflow as tf

        ds = tf.data.Dataset.from_tensor_slices(np.arange(12, dtype="float32").reshape(6, 2)).batch(4)
        ds.element_spec
        ds.element_spec.shape
        rows = [x.numpy().sum(axis=1).tolist() for x in ds]
    '''
    r = _translate(src)
    assert not _errors(r) and "element_spec" not in r.output
    assert [f.line for f in r.findings if "element_spec" in f.message and f.severity is Severity.INFO] == [5, 6]
    ns, want = {}, {}
    exec(r.output, ns)
    exec(textwrap.dedent(src), want)
    np.testing.assert_allclose(np.concatenate(ns["rows"]), np.concatenate(want["rows"]))
    r = _translate(src.replace("        ds.element_spec.shape\n", "        spec = ds.element_spec\n"))
    assert [f.line for f in _errors(r)] == [6]


def test_per_replica_values_of_several_given_devices_keep_the_error():
    # two given devices: run(f) computes f on each replica (two values); run(step, args=(x,)) of a tensor that is not
    # the distributed dataset's gives each replica all of x, so reduce(SUM) is twice the one process's value
    for body in ('print(strategy.run(lambda: g.normal([])))',
                 'total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step, args=(x,)), axis=None)',
                 'for b in strategy.experimental_distribute_dataset(ds):\n'
                 '            out = strategy.run(step, args=(b,))\n            print(out)'):
        r = _translate(f'''
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
        {body}
        ''')
        assert [f.line for f in _errors(r) if "MirroredStrategy" in (f.api or "")] == [3], (body, r.output)
        assert "strategy.run(" in r.output
