"""TensorFlow's Python utilities with standard-library counterparts (fwport/packs/tf2torch/testcase.py,
utilities.py): a tf.test file translated runs under unittest with torch and each of its tests passes,
fails or errors exactly as the original does under TensorFlow; tf.io.gfile's file operations and
TensorFlow's logger behave as TensorFlow's do on local files."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from importlib.util import find_spec

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.packs.tf2torch import testcase
from runners import python

HAS_TF = find_spec("tensorflow") is not None
HAS_TORCH = find_spec("torch") is not None


def _translate(src: str, errors_ok: bool = False):
    r = translate_source(textwrap.dedent(src).lstrip(), "t_test.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    if not errors_ok:
        assert not errors, [f.message for f in errors]
    return r


# --- a tf.test file: outcomes per test, TensorFlow's against the translation's --------------------

_SEED_DRAW = int(np.random.RandomState(87654321).randint(1_000_000))

TF_TEST = f'''
import collections
import os

import numpy as np
import tensorflow as tf

Pair = collections.namedtuple("Pair", ["a", "b"])


class Base(tf.test.TestCase):

    def helper_value(self):
        return tf.constant([1.0, 2.0])


class UtilTest(Base):

    def test_close(self):
        self.assertAllClose(self.helper_value(), [1.0, 2.0 + 5e-7])

    def test_close_fails(self):
        self.assertAllClose(tf.constant([1.0, 2.0]), [1.0, 2.001])

    def test_close_rtol(self):
        self.assertAllClose(tf.constant([100.0]), [100.5], rtol=1e-2)

    def test_close_atol_fails(self):
        self.assertAllClose(tf.constant([0.0]), [1e-3], atol=1e-4)

    def test_close_nested(self):
        self.assertAllClose({{"a": tf.ones(2), "b": (tf.zeros(1), 3.0)}}, {{"a": [1.0, 1.0], "b": ([0.0], 3.0)}})

    def test_close_namedtuple(self):
        self.assertAllClose(Pair(tf.ones(2), 1.0), Pair([1.0, 1.0], 1.0))

    def test_close_keys_fail(self):
        self.assertAllClose({{"a": tf.ones(2)}}, {{"b": tf.ones(2)}})

    def test_close_shape_fails(self):
        self.assertAllClose(tf.ones((2, 1)), tf.ones((2,)))

    def test_close_dict_vs_list_errors(self):
        self.assertAllClose({{"a": 1.0}}, [1.0])

    def test_close_nan(self):
        self.assertAllClose([np.nan, 1.0], tf.constant([np.nan, 1.0]))

    def test_close_ragged(self):
        self.assertAllClose([tf.ones(2), tf.ones(3)], [np.ones(2), np.ones(3)])

    def test_not_close(self):
        self.assertNotAllClose(tf.ones(2), tf.zeros(2))

    def test_not_close_fails(self):
        self.assertNotAllClose(tf.ones(2), tf.ones(2))

    def test_equal(self):
        self.assertAllEqual(tf.constant([1, 2]), [1, 2])

    def test_equal_fails(self):
        self.assertAllEqual(tf.constant([1, 2]), [1, 3])

    def test_equal_shape_fails(self):
        self.assertAllEqual(tf.constant([[1, 2]]), [1, 2])

    def test_equal_nan(self):
        self.assertAllEqual(tf.constant([np.nan, 1.0]), [np.nan, 1.0])

    def test_not_equal(self):
        self.assertNotAllEqual(tf.constant([1, 2]), [1, 3])

    def test_evaluate(self):
        v = self.evaluate(tf.constant([1.0, 2.0]))
        self.assertIsInstance(v, np.ndarray)
        self.assertEqual(v.tolist(), [1.0, 2.0])

    def test_evaluate_scalar(self):
        v = self.evaluate(tf.constant(3.0))
        self.assertIsInstance(v, np.generic)
        self.assertEqual(float(v), 3.0)

    def test_evaluate_structure(self):
        d = self.evaluate({{"x": tf.ones(2), "y": [tf.zeros(1), None]}})
        self.assertIsInstance(d["y"], list)
        self.assertIsNone(d["y"][1])
        self.assertEqual(d["x"].tolist(), [1.0, 1.0])

    def test_evaluate_number_errors(self):
        self.evaluate(3)

    def test_evaluate_ndarray_errors(self):
        self.evaluate(np.ones(2))

    def test_shape(self):
        self.assertShapeEqual(np.zeros((2, 3)), tf.zeros((2, 3)))

    def test_shape_fails(self):
        self.assertShapeEqual(np.zeros((2, 3)), tf.zeros((3, 2)))

    def test_shape_list_errors(self):
        self.assertShapeEqual([1, 2], tf.zeros(2))

    def test_in_range(self):
        self.assertAllInRange(tf.constant([0.0, 0.5, 1.0]), 0.0, 1.0)

    def test_in_range_open_fails(self):
        self.assertAllInRange(tf.constant([0.0, 0.5]), 0.0, 1.0, open_lower_bound=True)

    def test_in_range_nan_fails(self):
        self.assertAllInRange(tf.constant([np.nan]), 0.0, 1.0)

    def test_in_set(self):
        self.assertAllInSet(tf.constant([1, 2, 2]), {{1, 2}})

    def test_in_set_fails(self):
        self.assertAllInSet(tf.constant([1, 3]), [1, 2])

    def test_near(self):
        self.assertNear(tf.constant(1.0), 1.05, 0.1)

    def test_near_fails(self):
        self.assertNear(1.0, 1.2, 0.1)

    def test_near_inf(self):
        self.assertNear(float("inf"), float("inf"), 0.0)

    def test_array_near(self):
        self.assertArrayNear([1.0, 2.0], [1.01, 2.0], 0.02)

    def test_ndarray_near_fails(self):
        self.assertNDArrayNear(np.ones(4), np.zeros(4), 1.0)

    def test_greater(self):
        self.assertAllGreater(tf.constant([2, 3]), 1)

    def test_greater_fails(self):
        self.assertAllGreater(tf.constant([1, 3]), 1)

    def test_less_equal(self):
        self.assertAllLessEqual(tf.constant([1, 3]), 3)

    def test_len(self):
        self.assertLen([1, 2, 3], 3)

    def test_len_fails(self):
        self.assertLen([1, 2, 3], 2)

    def test_between(self):
        self.assertBetween(5, 1, 5)

    def test_between_fails(self):
        self.assertBetween(6, 1, 5)

    def test_empty(self):
        self.assertEmpty([])
        self.assertNotEmpty([0])

    def test_empty_fails(self):
        self.assertEmpty([0])

    def test_items_equal(self):
        self.assertItemsEqual([1, 2, 2], [2, 1, 2])

    def test_temp_dir(self):
        d = self.get_temp_dir()
        self.assertTrue(os.path.isdir(d))
        self.assertEqual(d, self.get_temp_dir())

    def test_tempdir(self):
        d = self.create_tempdir()
        with open(os.path.join(d, "f.txt"), "w") as fh:
            fh.write("x")
        self.assertTrue(os.path.isfile(os.path.join(d.full_path, "f.txt")))
        inner = self.create_tempdir("sub/inner")
        self.assertTrue(inner.full_path.endswith(os.path.join("sub", "inner")))
        self.assertEqual(os.listdir(inner), [])

    def test_seeded(self):
        self.assertEqual(np.random.randint(1000000), {_SEED_DRAW})


if __name__ == "__main__":
    tf.test.main()
'''

_HARNESS = r'''
import importlib.util, json, sys, unittest
spec = importlib.util.spec_from_file_location("under_test", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
try:  # as tf.test.main does (absltest reads its flags, e.g. the temp folder's)
    from absl import flags
    flags.FLAGS(sys.argv[:1])
except ImportError:
    pass
result = unittest.TestResult()
unittest.defaultTestLoader.loadTestsFromModule(mod).run(result)
def flat(s):
    for t in s:
        yield from (flat(t) if isinstance(t, unittest.TestSuite) else [t])
out = {t.id().split(".")[-1]: "pass" for t in flat(unittest.defaultTestLoader.loadTestsFromModule(mod))}
for t, _ in result.failures:
    out[t.id().split(".")[-1]] = "fail"
for t, _ in result.errors:
    out[t.id().split(".")[-1]] = "error"
print("OUTCOMES" + json.dumps(out))
'''


def _outcomes(path, tmp_path) -> dict:
    harness = tmp_path / "harness.py"
    harness.write_text(_HARNESS)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([sys.executable, str(harness), str(path)], capture_output=True, text=True, env=env, timeout=600)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("OUTCOMES")), None)
    assert line is not None, p.stdout + p.stderr
    return json.loads(line[len("OUTCOMES"):])


def test_test_file_translates_cleanly():
    r = _translate(TF_TEST)
    assert "tensorflow" not in r.output and "class Base(TFTestCase):" in r.output
    assert "class UtilTest(Base):" in r.output and "unittest.main()" in r.output
    assert r.output.count("class TFTestCase(unittest.TestCase):") == 1
    # only what the file uses: no assertAllLess (unused), assertAllLessEqual (used)
    assert "def assertAllLessEqual" in r.output and "def assertAllLess(" not in r.output
    assert translate_source(r.output, "t_test.py").output == r.output  # the fixpoint


@pytest.mark.skipif(not (HAS_TF and HAS_TORCH), reason="needs TensorFlow and torch")
def test_translated_tests_pass_and_fail_as_tensorflows(tmp_path):
    original = tmp_path / "orig_test.py"
    original.write_text(TF_TEST.lstrip())
    translated = tmp_path / "torch_test.py"
    translated.write_text(_translate(TF_TEST).output)
    want = _outcomes(original, tmp_path)
    want.pop("test_session")  # tf.test.TestCase's own method, which its setUp skips
    got = _outcomes(translated, tmp_path)
    assert len(want) == TF_TEST.count("def test_")
    # the cases cover every kind of outcome, and the names say which one TensorFlow gives
    for name, outcome in want.items():
        expected = "error" if name.endswith("_errors") else "fail" if name.endswith("_fails") or name == "test_close_keys_fail" else "pass"
        assert outcome == expected, (name, outcome)
    assert got == want


def test_graph_sessions_and_methods_not_provided_are_errors():
    r = _translate('''
        import tensorflow as tf

        class T(tf.test.TestCase):
            def test_a(self):
                with self.cached_session() as sess:
                    pass
                with self.session():
                    pass
                self.assertProtoEquals("a: 1", p)
                self.assertAllClose(x, y)

        if __name__ == "__main__":
            tf.test.main()
        ''', errors_ok=True)
    errors = sorted((f.line, f.code, f.message.split(" (")[0]) for f in r.findings if f.severity is Severity.ERROR)
    assert errors == [(5, "unsupported-construct", "self.cached_session"), (7, "unsupported-construct", "self.session"),
                      (9, "unsupported-construct", "self.assertProtoEquals")]
    assert "# fwport: unsupported-construct: self.cached_session (tf.test.TestCase) runs a TensorFlow 1 graph" in r.output
    assert "class T(TFTestCase):" in r.output and "def assertAllClose" in r.output


def test_own_methods_and_unittest_methods_are_left_alone():
    r = _translate('''
        import tensorflow as tf

        class T(tf.test.TestCase):
            def assertAllEqual(self, a, b):
                self.assertEqual(list(a), list(b))

            def test_a(self):
                self.assertAllEqual(x, y)
                self.assertRaisesRegex(ValueError, "x")
        ''')
    assert "def _tf_numpy" not in r.output  # the class's own assertAllEqual: nothing else needed
    assert "class T(TFTestCase):" in r.output


@pytest.mark.skipif(not HAS_TF, reason="needs TensorFlow")
def test_method_tables_name_real_methods():
    """Every method the helper provides or refuses is one of tf.test.TestCase's (absltest's included),
    and none of them is unittest's own (which needs no helper)."""
    code = ("import json, unittest, tensorflow as tf; "
            "print(json.dumps([sorted(dir(tf.test.TestCase)), sorted(dir(unittest.TestCase))]))")
    p = python("-c", code, side="keras", env={"TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    tf_names, ut_names = map(set, json.loads(p.stdout.strip().splitlines()[-1]))
    assert testcase.PROVIDED <= tf_names and set(testcase.NOT_PROVIDED) <= tf_names
    assert not (testcase.PROVIDED | set(testcase.NOT_PROVIDED)) & ut_names
    assert not testcase.PROVIDED & set(testcase.NOT_PROVIDED)


# --- tf.io.gfile and logging -------------------------------------------------------------------------

def _run(src: str, **env) -> dict:
    r = _translate(src)
    assert "import tensorflow" not in r.output, r.output
    ns = dict(env)
    exec(compile(r.output, "translated.py", "exec"), ns)
    return ns


def test_gfile_operations_on_local_files(tmp_path):
    d = str(tmp_path / "a" / "b")
    ns = _run('''
        import tensorflow as tf

        tf.io.gfile.makedirs(d)
        tf.io.gfile.makedirs(d)
        tf.io.gfile.mkdir(d + "/m")
        tf.io.gfile.mkdir(d + "/m")
        tf.io.gfile.rmtree(d + "/m")
        try:
            tf.io.gfile.mkdir(d + "/no/parent")
            made = True
        except FileNotFoundError:
            made = False
        with tf.io.gfile.GFile(d + "/x.txt", "w") as f:
            f.write("é\\r\\nline2\\n")
        with tf.io.gfile.GFile(d + "/x.txt") as f:
            text = f.read()
        with tf.io.gfile.GFile(d + "/x.txt", "rb") as f:
            raw = f.read()
        tf.io.gfile.copy(d + "/x.txt", d + "/y.txt", overwrite=True)
        tf.io.gfile.copy(d + "/x.txt", d + "/y.txt", overwrite=True)
        tf.io.gfile.rename(d + "/y.txt", d + "/z.txt", overwrite=True)
        names = sorted(tf.io.gfile.listdir(d))
        found = sorted(tf.io.gfile.glob(d + "/*.txt"))
        walked = [(root, sorted(files)) for root, dirs, files in tf.io.gfile.walk(top)]
        tf.io.gfile.remove(d + "/z.txt")
        after = (tf.io.gfile.exists(d + "/z.txt"), tf.io.gfile.isdir(d))
        tf.io.gfile.rmtree(top)
        gone = tf.io.gfile.exists(top)
        ''', d=d, top=str(tmp_path / "a"))
    assert ns["text"] == "é\r\nline2\n"  # as GFile: UTF-8, no newline translation
    assert ns["raw"] == "é\r\nline2\n".encode("utf-8")
    assert ns["names"] == ["x.txt", "z.txt"] and ns["found"] == [d + "/x.txt", d + "/z.txt"]
    assert ns["walked"] == [(str(tmp_path / "a"), []), (d, ["x.txt", "z.txt"])]
    assert ns["after"] == (False, True) and ns["gone"] is False
    assert ns["made"] is False  # TensorFlow's mkdir needs the parent (NotFoundError there)


@pytest.mark.skipif(not HAS_TF, reason="needs TensorFlow")
def test_gfile_text_matches_tensorflow(tmp_path):
    """Read and written text as TensorFlow's GFile gives it (UTF-8, "\\r\\n" kept by read())."""
    p = tmp_path / "t.txt"
    code = textwrap.dedent(f'''
        import json, tensorflow as tf
        with tf.io.gfile.GFile({str(p)!r}, "w") as f:
            f.write("é\\r\\nb\\n")
        with tf.io.gfile.GFile({str(p)!r}) as f:
            print(json.dumps(f.read()))
        ''')
    out = python("-c", code, side="keras", env={"TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    tf_text = json.loads(out.stdout.strip().splitlines()[-1])
    tf_bytes = p.read_bytes()
    p.unlink()
    ns = _run(f'''
        import tensorflow as tf
        with tf.io.gfile.GFile({str(p)!r}, "w") as f:
            f.write("é\\r\\nb\\n")
        with tf.io.gfile.GFile({str(p)!r}) as f:
            text = f.read()
        ''')
    assert p.read_bytes() == tf_bytes and ns["text"] == tf_text


def test_gfile_copy_without_overwrite_is_refused():
    r = _translate('''
        import tensorflow as tf

        tf.io.gfile.copy(a, b)
        tf.io.gfile.rename(a, b, overwrite=flag)
        ''', errors_ok=True)
    errors = [(f.line, f.code) for f in r.findings if f.severity is Severity.ERROR]
    assert errors == [(3, "unsupported-argument"), (4, "unsupported-argument")]
    assert "\ntf.io.gfile.copy(a, b)\n" in r.output and "import shutil" not in r.output


def test_logging_goes_to_tensorflows_logger(caplog):
    with caplog.at_level(logging.DEBUG, logger="tensorflow"):
        ns = _run('''
            import tensorflow as tf

            tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARN)
            level = tf.get_logger().level
            tf.compat.v1.logging.info("hidden %d", 1)
            tf.compat.v1.logging.warning("shown %d", 2)
            tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
            tf.compat.v1.logging.info("now %s", "shown")
            ''')
    assert ns["level"] == logging.WARNING
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("tensorflow", logging.WARNING, "shown 2"), ("tensorflow", logging.INFO, "now shown")]
    logging.getLogger("tensorflow").setLevel(logging.NOTSET)


PRINTED_LOG = '''
import logging
import sys

import tensorflow as tf

tf.compat.v1.logging.info("hidden: the level is WARNING's until set")
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
tf.compat.v1.logging.info("step %d: %s", 3, "ok")
tf.compat.v1.logging.warn("careful %d", 1)
for step in range(3):
    tf.compat.v1.logging.log_every_n(tf.compat.v1.logging.INFO, "every %d", 2, step)
logging.basicConfig(stream=sys.stdout, format="ROOT %(name)s %(message)s")
tf.get_logger().error("after basicConfig")
'''


def _printed(path, cwd) -> tuple[str, str]:
    p = subprocess.run([sys.executable, str(path)], cwd=cwd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout, "".join(ln for ln in p.stderr.splitlines(keepends=True) if ":tensorflow:" in ln)


def test_tensorflows_logger_prints_what_tensorflow_prints(tmp_path):
    """TensorFlow gives its logger a handler of its own on import ("LEVEL:tensorflow:message" on standard error):
    the translation's tf_logger() helper does the same, so tf.compat.v1.logging.info prints once the verbosity is
    INFO (without a handler, the standard library prints nothing below WARNING, and a warning without its prefix);
    a later logging.basicConfig is still the program's own (TensorFlow's lines then print through both)."""
    r = _translate(PRINTED_LOG)
    assert "tf_logger().info(\"step %d: %s\", 3, \"ok\")" in r.output and "basicConfig" in r.output
    (tmp_path / "translated.py").write_text(r.output)
    want_err = ("INFO:tensorflow:step 3: ok\nWARNING:tensorflow:careful 1\nINFO:tensorflow:every 0\n"
                "INFO:tensorflow:every 2\nERROR:tensorflow:after basicConfig\n")
    want_out = "ROOT tensorflow after basicConfig\n"
    assert _printed(tmp_path / "translated.py", tmp_path) == (want_out, want_err)
    if HAS_TF:
        (tmp_path / "original.py").write_text(PRINTED_LOG)
        assert _printed(tmp_path / "original.py", tmp_path) == (want_out, want_err)


BENCH = '''
import tensorflow as tf


class ModelBenchmark(tf.test.Benchmark):

    def benchmark_step(self):
        self._report()

    def _report(self):
        self.report_benchmark(iters=3, wall_time=0.5, extras={"a": 1})

    def benchmark_named(self):
        self.report_benchmark(wall_time=2.0, name="custom")


def run():
    b = ModelBenchmark()
    b.benchmark_step()
    b.benchmark_named()
'''


def test_benchmark_reports_as_tensorflow(caplog):
    r = _translate(BENCH)
    assert "class ModelBenchmark(TFBenchmark):" in r.output
    assert [f.code for f in r.findings if f.severity is Severity.WARNING] == ["idiom-replaced"]
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        ns = {}
        exec(compile(r.output, "translated.py", "exec"), ns)
        ns["run"]()
    got = [rec.getMessage() for rec in caplog.records if rec.name == "tensorflow"]
    assert got == ["Benchmark [ModelBenchmark.benchmark_step] iters: 3, wall_time: 0.5, cpu_time: -1,throughput: -1, "
                   "extras: {'a': 1}, metrics: None",
                   "Benchmark [ModelBenchmark.custom] iters: -1, wall_time: 2, cpu_time: -1,throughput: -1, "
                   "extras: None, metrics: None"]
    if HAS_TF:  # the same lines from TensorFlow's own Benchmark
        code = BENCH + textwrap.dedent('''
            import logging
            seen = []
            class H(logging.Handler):
                def emit(self, rec):
                    seen.append(rec.getMessage())
            logging.getLogger("tensorflow").addHandler(H())
            logging.getLogger("tensorflow").setLevel(logging.INFO)
            run()
            import json
            print("SEEN" + json.dumps([s for s in seen if s.startswith("Benchmark [")]))
            ''')
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
        line = next(ln for ln in p.stdout.splitlines() if ln.startswith("SEEN"))
        assert json.loads(line[4:]) == got


def test_name_scope_as_a_context_is_a_null_context():
    r = _translate('''
        import tensorflow as tf

        def f(x):
            with tf.name_scope("block"):
                y = tf.add(x, 1.0)
            with tf.compat.v1.name_scope("v1"), open(p) as fh:
                pass
            return y
        ''')
    assert "with contextlib.nullcontext():\n        y = torch.add(x, 1.0)" in r.output
    assert "with contextlib.nullcontext(), open(p) as fh:" in r.output and "import contextlib" in r.output
    assert [f.code for f in r.findings if f.code == "idiom-replaced"] == ["idiom-replaced"] * 2


def test_keras_name_scopes_are_null_contexts():
    """Keras's name scopes (Keras 3's keras.name_scope, Keras 2's keras.backend.name_scope, which is tf.name_scope)
    only prefix names as TensorFlow's does."""
    r = _translate('''
        import keras
        from tensorflow.keras import backend as K

        def f(x):
            with keras.name_scope("block"):
                with K.name_scope("inner"):
                    y = x * 2.0
            return y
        ''')
    assert "with contextlib.nullcontext():\n        with contextlib.nullcontext():\n            y = x * 2.0" in r.output
    assert "keras" not in r.output


def test_name_scope_bound_with_as_stays_an_error():
    r = _translate('''
        import tensorflow as tf

        with tf.name_scope("outer") as scope:
            print(scope)
        ''', errors_ok=True)
    assert [(f.line, f.code) for f in r.findings if f.severity is Severity.ERROR] == [(3, "no-rule")]
    assert 'with tf.name_scope("outer") as scope:' in r.output


LOG_N = '''
import tensorflow as tf


def run():
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    for i in range(10):
        tf.compat.v1.logging.log_every_n(tf.compat.v1.logging.INFO, "every %d", 3, i)
        tf.compat.v1.logging.log_first_n(tf.compat.v1.logging.WARN, "first %d", 2, i)
    for i in range(4):
        tf.compat.v1.logging.log_every_n(tf.compat.v1.logging.INFO, "other place %d", 2, i)
'''


def test_log_every_n_and_first_n_count_per_place_as_tensorflow(caplog):
    # TensorFlow counts per place of the first frame outside the calling file: all of run()'s calls
    # share one count (20 calls in the first loop: "first 1" is the 4th call, not logged)
    want = ["every 0", "first 0", "every 3", "every 6", "every 9", "other place 0", "other place 2"]
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        ns = {}
        exec(compile(_translate(LOG_N).output, "translated.py", "exec"), ns)
        ns["run"]()
    assert [r.getMessage() for r in caplog.records if r.name == "tensorflow"] == want
    logging.getLogger("tensorflow").setLevel(logging.NOTSET)
    if HAS_TF:
        code = LOG_N + textwrap.dedent('''
            import json, logging
            seen = []
            class H(logging.Handler):
                def emit(self, rec):
                    seen.append(rec.getMessage())
            logging.getLogger("tensorflow").addHandler(H())
            run()
            print("SEEN" + json.dumps(seen))
            ''')
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
        line = next(ln for ln in p.stdout.splitlines() if ln.startswith("SEEN"))
        assert json.loads(line[4:]) == want


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_listed_devices_count_as_the_machine_has():
    import torch
    ns = _run('''
        import tensorflow as tf

        gpus = tf.config.list_physical_devices('GPU')
        cpus = tf.config.experimental.list_physical_devices('CPU')
        has_gpu = bool(tf.config.list_physical_devices('GPU'))
        ''')
    assert len(ns["gpus"]) == torch.cuda.device_count() and ns["has_gpu"] == torch.cuda.is_available()
    assert ns["cpus"] == [torch.device("cpu")]  # TensorFlow lists one CPU device


def test_a_users_own_tftestcase_is_not_overwritten():
    r = _translate('''
        import tensorflow as tf

        class TFTestCase(tf.test.TestCase):
            pass
        ''', errors_ok=True)
    assert [f.code for f in r.findings if f.severity is Severity.ERROR] == ["unsupported-construct"]
    assert "class TFTestCase(tf.test.TestCase):" in r.output


@pytest.mark.skipif(not (HAS_TORCH and find_spec("absl") is not None), reason="needs torch and absl")
def test_test_main_parses_absl_flags_as_tf_test_main(tmp_path):
    """tf.test.main() parses absl flags; in a file using them the translation runs absltest.main(),
    which does too (unittest.main() would leave FLAGS unparsed: an error reading FLAGS.n)."""
    r = _translate('''
        from absl import flags
        import tensorflow as tf

        flags.DEFINE_integer("n", 2, "a size")
        FLAGS = flags.FLAGS

        class T(tf.test.TestCase):
            def test_n(self):
                self.assertAllEqual(tf.zeros(FLAGS.n), [0.0] * 3)

        if __name__ == "__main__":
            tf.test.main()
        ''')
    assert "absltest.main()" in r.output and "unittest.main()" not in r.output
    f = tmp_path / "flags_test.py"
    f.write_text(r.output)
    ok = subprocess.run([sys.executable, str(f), "--n=3"], capture_output=True, text=True, timeout=300)
    bad = subprocess.run([sys.executable, str(f), "--n=2"], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and "OK" in ok.stderr, ok.stderr
    assert bad.returncode != 0 and "FAILED" in bad.stderr, bad.stderr


def test_create_tempdir_with_absl_folder_methods_is_refused():
    r = _translate('''
        import tensorflow as tf

        class T(tf.test.TestCase):
            def test_a(self):
                d = self.create_tempdir()
                f = d.create_file("a.txt", content="x")
        ''', errors_ok=True)
    errors = [(f.line, f.code, f.message.split(":")[0]) for f in r.findings if f.severity is Severity.ERROR]
    assert errors == [(5, "unsupported-construct", "self.create_tempdir (absltest) is written into TFTestCase as a path only (.full_path, os.PathLike)")]
    assert "def create_tempdir" not in r.output


def test_keras2_utils_submodule_spellings_are_the_public_names():
    """Keras 2 code imports from keras.utils.data_utils / np_utils / vis_utils: the same functions as
    keras.utils.X, translated by the same rules (before, each was a no-rule error)."""
    src = (
        "import tensorflow as tf\n"
        "from tensorflow.keras.utils.data_utils import get_file\n"
        "from keras.utils.np_utils import to_categorical\n"
        "path = get_file('mnist.npz', origin='https://example.com/mnist.npz')\n"
        "y = to_categorical([1, 2], num_classes=3)\n"
    )
    r = translate_source(src, "utils.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "def get_file(" in r.output and "def to_categorical(" in r.output
    import ast
    imported = [n.names[0].name if isinstance(n, ast.Import) else n.module for n in ast.walk(ast.parse(r.output))
                if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not [m for m in imported if m.split(".")[0] in ("tensorflow", "keras")], imported


def test_legacy_and_experimental_optimizer_spellings_are_the_optimizers():
    src = (
        "import tensorflow as tf\n"
        "model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(1)])\n"
        "opt = tf.keras.optimizers.legacy.Adam(learning_rate=0.01)\n"
        "opt2 = tf.keras.optimizers.experimental.SGD(learning_rate=0.1, momentum=0.9)\n"
        "def step(x, y):\n"
        "    with tf.GradientTape() as tape:\n"
        "        loss = tf.reduce_mean(tf.square(model(x) - y))\n"
        "    grads = tape.gradient(loss, model.trainable_variables)\n"
        "    opt.apply_gradients(zip(grads, model.trainable_variables))\n"
        "def step2(x, y):\n"
        "    with tf.GradientTape() as tape:\n"
        "        loss = tf.reduce_mean(tf.square(model(x) - y))\n"
        "    grads = tape.gradient(loss, model.trainable_variables)\n"
        "    opt2.apply_gradients(zip(grads, model.trainable_variables))\n"
    )
    r = translate_source(src, "opt.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "opt = torch.optim.Adam(model.parameters(), lr=0.01, eps=1e-07)" in r.output
    assert "opt2 = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)" in r.output


def test_a_device_scope_makes_its_tensors_on_that_device():
    """with tf.device("/CPU:0") → with torch.device("cpu"): torch's default-device context, where the tensors
    made inside (and the layers' parameters) land; a TPU has no torch device and stays an error."""
    torch = pytest.importorskip("torch")
    r = _translate('''
        import tensorflow as tf

        with tf.device("/device:CPU:0"):
            x = tf.zeros([2, 3])
    ''')
    assert 'with torch.device("cpu"):' in r.output
    ns: dict = {}
    exec(compile(r.output, "t.py", "exec"), ns)
    assert ns["x"].device == torch.device("cpu") and ns["x"].shape == (2, 3)
    tpu = _translate('import tensorflow as tf\nwith tf.device("/TPU:0"):\n    pass\n', errors_ok=True)
    assert [f.code for f in tpu.findings if f.severity is Severity.ERROR] == ["unsupported-argument"]
