"""TensorFlow test files: ``class FooTest(tf.test.TestCase)`` → a subclass of ``TFTestCase``, a
``unittest.TestCase`` written into the output with the ``tf.test.TestCase`` (and absltest) methods
the file's test classes call, each with TensorFlow's semantics over numpy (torch tensors reach numpy
as ``x.detach().cpu().numpy()``); ``tf.test.main()`` is a rule (rules/tf2torch/test-main.toml).

A read-only planner (fwport/core/plan.py): for each top-level class whose base is
``tf.test.TestCase`` (or a test class of the file that is one), the base becomes ``TFTestCase``
(an edit the rule pass applies) and every ``self.<name>`` of the class is looked up: a method the
helper provides is written into the file (:func:`finish`, after the imports, only those used); a
``tf.test.TestCase`` / absltest method it does not provide (``self.session()``,
``self.cached_session()``: graph mode; ``assertProtoEquals``...) is an error naming it. Methods of
``unittest.TestCase`` and the class's own are left alone.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.context import FileContext
from fwport.core.finding import Severity
from fwport.core.names import scan

BASES = {"tensorflow.test.TestCase"}
HELPER = "TFTestCase"
BENCHMARK_BASES = {"tensorflow.test.Benchmark"}
BENCHMARK = "TFBenchmark"
_KEY = "tf2torch-testcase"

# --- the helper's methods: name → (text, the methods it calls, the imports it needs) --------------
# (each text is a method body at class level, indented four spaces)

_TO_NUMPY = '''
    @staticmethod
    def _tf_numpy(a):
        # as TensorFlow's test methods see a value: torch tensors (nested in lists or tuples too) as numpy
        # arrays, anything else through np.array (a ragged nesting as an object array)
        def plain(x):
            if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor
                x = x.detach().cpu()
                return (x.float() if x.dtype == torch.bfloat16 else x).numpy()
            if isinstance(x, (list, tuple)):
                return [plain(e) for e in x]
            return x
        a = plain(a)
        if isinstance(a, np.ndarray):
            return a
        try:
            return np.array(a)
        except ValueError as e:
            if "inhomogeneous shape" in str(e):
                return np.array(a, dtype=object)
            raise
'''

_SET_UP = '''
    def setUp(self):
        # tf.test.TestCase seeds Python's, NumPy's and the framework's generators before each test
        super().setUp()
        random.seed(87654321)
        np.random.seed(87654321)
        torch.manual_seed(87654321)
'''

_EVALUATE = '''
    def evaluate(self, tensors):
        # tensors as numpy (a nested list, tuple or dict keeps its structure; a callable is called
        # first); as in TensorFlow, anything else is a ValueError
        if tensors is None:
            return None
        if callable(tensors) and not hasattr(tensors, "detach"):
            return self.evaluate(tensors())
        if isinstance(tensors, dict):
            return type(tensors)((k, self.evaluate(v)) for k, v in tensors.items())
        if isinstance(tensors, tuple) and hasattr(tensors, "_fields"):
            return type(tensors)(*(self.evaluate(v) for v in tensors))
        if isinstance(tensors, (list, tuple)):
            return type(tensors)(self.evaluate(v) for v in tensors)
        if hasattr(tensors, "detach") and hasattr(tensors, "cpu"):
            t = tensors.detach().cpu()
            a = (t.float() if t.dtype == torch.bfloat16 else t).numpy()
            return a[()] if a.ndim == 0 else a
        raise ValueError(f"Unsupported type {type(tensors).__name__!r}.")
'''

_GET_TEMP_DIR = '''
    def get_temp_dir(self):
        # a temporary folder for this test, the same one on every call within it
        if getattr(self, "_tf_tempdir", None) is None:
            self._tf_tempdir = tempfile.mkdtemp()
        return self._tf_tempdir
'''

_ALL_CLOSE = '''
    def _tf_array_close(self, a, b, rtol, atol, msg):
        a = self._tf_numpy(a)
        b = self._tf_numpy(b)
        self.assertEqual(a.shape, b.shape, f"Shape mismatch: expected {a.shape}, got {b.shape}.")
        if not np.allclose(a, b, rtol=rtol, atol=atol):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=msg or "", equal_nan=True)

    def _tf_all_close(self, a, b, rtol, atol, path, msg):
        if hasattr(a, "_asdict"):
            a = a._asdict()
        if hasattr(b, "_asdict"):
            b = b._asdict()
        where = "".join(f"[{p}]" for p in path)
        if isinstance(a, Mapping) != isinstance(b, Mapping):
            raise ValueError(f"Can't compare dict to non-dict, a{where} vs b{where}. {msg or ''}")
        if isinstance(a, Mapping):
            self.assertCountEqual(a.keys(), b.keys(), msg=f"mismatched keys at a{where}, b{where}. {msg or ''}")
            for k in a:
                self._tf_all_close(a[k], b[k], rtol, atol, path + [k], msg)
        elif isinstance(a, (list, tuple)):
            try:  # as one array if it is one, else item by item
                self._tf_array_close(a, b, rtol, atol, f"Mismatched value: a{where} is different from b{where}. {msg or ''}")
            except (ValueError, TypeError, NotImplementedError):
                if len(a) != len(b):
                    raise ValueError(f"Mismatched length: a{where} has {len(a)} items, but b{where} has "
                                     f"{len(b)} items. {msg or ''}")
                for i, (x, y) in enumerate(zip(a, b)):
                    self._tf_all_close(x, y, rtol, atol, path + [str(i)], msg)
        else:
            self._tf_array_close(a, b, rtol, atol, f"Mismatched value: a{where} is different from b{where}. {msg or ''}")

    def assertAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):
        # |a - b| <= atol + rtol * |b| elementwise (NaN equal to NaN), equal shapes, over nested dicts,
        # lists and tuples
        self._tf_all_close(a, b, rtol, atol, [], msg)
'''

_NOT_ALL_CLOSE = '''
    def assertNotAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):
        try:
            self.assertAllClose(a, b, rtol=rtol, atol=atol, msg=msg)
        except AssertionError:
            return
        raise AssertionError(f"The two values are close at all elements. {msg or ''}")
'''

_ALL_EQUAL = '''
    def assertAllEqual(self, a, b, msg=None):
        # equal shapes and elements (NaN equal to NaN in floating arrays)
        a = self._tf_numpy(a)
        b = self._tf_numpy(b)
        self.assertEqual(a.shape, b.shape, f"Shape mismatch: expected {a.shape}, got {b.shape}. {msg or ''}")
        same = a == b
        if np.issubdtype(a.dtype, np.floating):
            same = np.logical_or(same, np.logical_and(np.isnan(a), np.isnan(b)))
        if not np.all(same):
            np.testing.assert_array_equal(a, b, err_msg=msg or "")
'''

_NOT_ALL_EQUAL = '''
    def assertNotAllEqual(self, a, b, msg=None):
        try:
            self.assertAllEqual(a, b)
        except AssertionError:
            return
        raise AssertionError(f"The two values are equal at all elements. {msg or ''}")
'''

_SHAPE_EQUAL = '''
    def assertShapeEqual(self, input_a, input_b, msg=None):
        # equal shapes of two numpy values or tensors
        for x in (input_a, input_b):
            if not (isinstance(x, (np.ndarray, np.generic)) or hasattr(x, "detach")):
                raise TypeError(f"expected a numpy ndarray, a numpy scalar or a tensor, got {type(x)}")
        self.assertAllEqual(list(input_a.shape), list(input_b.shape), msg=msg)
'''

_NEAR = '''
    def assertNear(self, f1, f2, err, msg=None):
        # |f1 - f2| <= err (equal values, infinities included, always pass)
        f1 = np.squeeze(self._tf_numpy(f1))
        f2 = np.squeeze(self._tf_numpy(f2))
        if f1 != f2:
            diff = math.fabs(f1 - f2)
            self.assertTrue(diff <= err, "%f != %f +/- %f (difference: %g)%s"
                            % (f1, f2, err, diff, " (%s)" % msg if msg is not None else ""))
'''

_ARRAY_NEAR = '''
    def assertArrayNear(self, farray1, farray2, err, msg=None):
        self.assertEqual(len(farray1), len(farray2), msg=msg)
        for f1, f2 in zip(farray1, farray2):
            self.assertNear(float(f1), float(f2), err, msg=msg)
'''

_ND_ARRAY_NEAR = '''
    def assertNDArrayNear(self, ndarray1, ndarray2, err, msg=None):
        # the Euclidean norm of the difference is below err
        diff = self._tf_numpy(ndarray1) - self._tf_numpy(ndarray2)
        self.assertTrue(np.linalg.norm(diff) < err, msg=msg)
'''

_ALL_IN_RANGE = '''
    def assertAllInRange(self, target, lower_bound, upper_bound, open_lower_bound=False, open_upper_bound=False):
        # every element of an int or float array in [lower_bound, upper_bound] (an open bound excludes
        # itself); NaN fails
        target = self._tf_numpy(target)
        if not (np.issubdtype(target.dtype, np.floating) or np.issubdtype(target.dtype, np.integer)):
            raise AssertionError(f"The value of {target} does not have an ordered numeric type, instead it "
                                 f"has type: {target.dtype}")
        if np.any(np.isnan(target)):
            raise AssertionError(f"{int(np.sum(np.isnan(target)))} of the {target.size} element(s) are NaN.")
        low = np.less_equal(target, lower_bound) if open_lower_bound else np.less(target, lower_bound)
        high = np.greater_equal(target, upper_bound) if open_upper_bound else np.greater(target, upper_bound)
        bad = np.logical_or(low, high)
        if np.any(bad):
            span = ("(" if open_lower_bound else "[") + f"{lower_bound}, {upper_bound}" + (")" if open_upper_bound else "]")
            raise AssertionError(f"{int(np.sum(bad))} of the {target.size} element(s) are outside the range {span}: "
                                 f"{target[bad]}")
'''

_ALL_IN_SET = '''
    def assertAllInSet(self, target, expected_set):
        target = self._tf_numpy(target)
        diff = np.setdiff1d(target.flatten(), list(expected_set))
        if np.size(diff):
            raise AssertionError(f"{np.size(diff)} unique element(s) are not in the set {expected_set}: {diff}")
'''


def _compare(name: str, reduce: str, check: str) -> str:
    return f'''
    def {name}(self, a, comparison_target):
        self.{check}(np.{reduce}(self._tf_numpy(a)), comparison_target)
'''


_LEN = '''
    def assertLen(self, container, expected_len, msg=None):
        # absltest's assertLen: len(container) == expected_len
        if not hasattr(container, "__len__"):
            self.fail(f"Expected a Sized object, got: {type(container).__name__!r}", msg)
        if len(container) != expected_len:
            self.fail(f"{container!r} has length of {len(container)}, expected {expected_len}.", msg)
'''

_EMPTY = '''
    def assertEmpty(self, container, msg=None):
        if not hasattr(container, "__len__"):
            self.fail(f"Expected a Sized object, got: {type(container).__name__!r}", msg)
        if len(container):
            self.fail(f"{container!r} has length of {len(container)}.", msg)
'''

_NOT_EMPTY = '''
    def assertNotEmpty(self, container, msg=None):
        if not hasattr(container, "__len__"):
            self.fail(f"Expected a Sized object, got: {type(container).__name__!r}", msg)
        if not len(container):
            self.fail(f"{container!r} has length of 0.", msg)
'''

_BETWEEN = '''
    def assertBetween(self, value, minv, maxv, msg=None):
        # absltest's assertBetween: minv <= value <= maxv
        if not minv <= value <= maxv:
            self.fail(f"{value!r} is not in range [{minv!r}, {maxv!r}]", msg)
'''

_ITEMS_EQUAL = '''
    def assertItemsEqual(self, first, second, msg=None):
        # absltest's assertItemsEqual is unittest's assertCountEqual
        self.assertCountEqual(first, second, msg)
'''

_FAIL = '''
    def fail(self, msg=None, user_msg=None):
        # absltest's fail(msg, user_msg): the user's message after the method's
        super().fail(self._formatMessage(user_msg, msg))
'''

BENCHMARK_TEXT = '''
class TFBenchmark:
    """tf.test.Benchmark's report_benchmark: the entry logged as TensorFlow logs it."""

    def report_benchmark(self, iters=None, cpu_time=None, wall_time=None, throughput=None, extras=None,
                         name=None, metrics=None):
        caller = None
        for frame in reversed(inspect.stack()):  # the outermost method of a benchmark object
            if isinstance(frame.frame.f_locals.get("self"), TFBenchmark):
                caller = frame.frame.f_locals["self"], frame.function
                break
        if caller is None:
            raise ValueError("Unable to determine calling Benchmark class.")
        name = "%s.%s" % (type(caller[0]).__name__, name or caller[1])
        if extras is not None and not isinstance(extras, dict):
            raise TypeError("extras must be a dict")
        logging.getLogger("tensorflow").info(
            "Benchmark [%s] iters: %d, wall_time: %g, cpu_time: %g,throughput: %g, extras: %s, metrics: %s", name,
            iters if iters is not None else -1, wall_time if wall_time is not None else -1,
            cpu_time if cpu_time is not None else -1, throughput if throughput is not None else -1,
            str(extras) if extras else "None", str(metrics) if metrics else "None")
'''

_CREATE_TEMPDIR = '''
    def create_tempdir(self, name=None, cleanup=None):
        # absltest's create_tempdir: a new, empty folder, removed after the test: an os.PathLike
        # (os.path.join(d, "f")) with .full_path
        if cleanup is not None:
            raise NotImplementedError("create_tempdir(cleanup=...) is not written into TFTestCase")
        base = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, base, ignore_errors=True)
        path = os.path.join(base, name) if name else base
        os.makedirs(path, exist_ok=True)

        class TempDir(os.PathLike):
            full_path = path

            def __fspath__(self):
                return self.full_path

        return TempDir()
'''

#: name → (text, methods it calls, modules it needs)
METHODS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "_tf_numpy": (_TO_NUMPY, (), ("numpy", "torch")),
    "setUp": (_SET_UP, (), ("random", "numpy", "torch")),
    "evaluate": (_EVALUATE, (), ("torch",)),
    "get_temp_dir": (_GET_TEMP_DIR, (), ("tempfile",)),
    "assertAllClose": (_ALL_CLOSE, ("_tf_numpy",), ("numpy", "Mapping")),
    "assertNotAllClose": (_NOT_ALL_CLOSE, ("assertAllClose",), ()),
    "assertAllEqual": (_ALL_EQUAL, ("_tf_numpy",), ("numpy",)),
    "assertNotAllEqual": (_NOT_ALL_EQUAL, ("assertAllEqual",), ()),
    "assertShapeEqual": (_SHAPE_EQUAL, ("assertAllEqual",), ("numpy",)),
    "assertNear": (_NEAR, ("_tf_numpy",), ("numpy", "math")),
    "assertArrayNear": (_ARRAY_NEAR, ("assertNear",), ()),
    "assertNDArrayNear": (_ND_ARRAY_NEAR, ("_tf_numpy",), ("numpy",)),
    "assertAllInRange": (_ALL_IN_RANGE, ("_tf_numpy",), ("numpy",)),
    "assertAllInSet": (_ALL_IN_SET, ("_tf_numpy",), ("numpy",)),
    "assertAllGreater": (_compare("assertAllGreater", "min", "assertGreater"), ("_tf_numpy",), ("numpy",)),
    "assertAllGreaterEqual": (_compare("assertAllGreaterEqual", "min", "assertGreaterEqual"), ("_tf_numpy",), ("numpy",)),
    "assertAllLess": (_compare("assertAllLess", "max", "assertLess"), ("_tf_numpy",), ("numpy",)),
    "assertAllLessEqual": (_compare("assertAllLessEqual", "max", "assertLessEqual"), ("_tf_numpy",), ("numpy",)),
    "assertLen": (_LEN, ("fail",), ()),
    "assertEmpty": (_EMPTY, ("fail",), ()),
    "assertNotEmpty": (_NOT_EMPTY, ("fail",), ()),
    "assertBetween": (_BETWEEN, ("fail",), ()),
    "assertItemsEqual": (_ITEMS_EQUAL, (), ()),
    "create_tempdir": (_CREATE_TEMPDIR, (), ("tempfile", "shutil", "os")),
    "fail": (_FAIL, (), ()),
}
_ORDER = list(METHODS)

_IMPORTS = {"numpy": "import numpy as np", "torch": "import torch", "random": "import random",
            "shutil": "import shutil", "os": "import os",
            "tempfile": "import tempfile", "math": "import math", "Mapping": "from collections.abc import Mapping"}

#: tf.test.TestCase's and absltest.TestCase's own methods (beyond unittest.TestCase's) that the helper
#: does not provide, with what to do instead
_GRAPH = ("runs a TensorFlow 1 graph session, which eager PyTorch does not have: run the code of the "
          "`with` block directly and use the values it computes")
NOT_PROVIDED: dict[str, str] = {
    "session": _GRAPH, "cached_session": _GRAPH, "test_session": _GRAPH,
    "assertProtoEquals": "compares protocol buffers, which a PyTorch program does not build",
    "assertProtoEqualsVersion": "compares protocol buffers, which a PyTorch program does not build",
    "assertDTypeEqual": "compares with a TensorFlow dtype: compare x.dtype with the torch dtype",
    "assertDeviceEqual": "compares TensorFlow device names: compare torch.device values",
    "assertRaisesOpError": "expects a TensorFlow OpError: use assertRaises with the error the torch code raises",
    "assertRaisesIncompatibleShapesError": "expects TensorFlow's shape error: use assertRaises(RuntimeError)",
    "assertRaisesWithPredicateMatch": "is not written into TFTestCase: use assertRaises / assertRaisesRegex",
    "assertAllCloseAccordingToType": "picks tolerances by TensorFlow dtype: use assertAllClose with the tolerance",
    "evaluate_if_both_tensors": "is a TensorFlow graph-mode utility",
    "captureWritesToStream": "is not written into TFTestCase: use contextlib.redirect_stdout / redirect_stderr",
    "checkedThread": "is not written into TFTestCase: use threading.Thread and join it",
    "create_tempfile": "(absltest) is not written into TFTestCase: write a file under self.get_temp_dir()",
    "enter_context": "(absltest) is not written into TFTestCase: use contextlib.ExitStack with addCleanup",
}
for _n in ("assertCommandFails", "assertCommandSucceeds", "assertContainsExactSubsequence", "assertContainsInOrder",
           "assertContainsSubsequence", "assertContainsSubset", "assertDataclassEqual", "assertDictAlmostEqual",
           "assertEndsWith", "assertIsSubclass", "assertJsonEqual", "assertMappingEqual", "assertNoCommonElements",
           "assertNotEndsWith", "assertNotIsSubclass", "assertNotStartsWith", "assertRaisesWithLiteralMatch",
           "assertRegexMatch", "assertSameElements", "assertSameStructure", "assertSequenceAlmostEqual",
           "assertSequenceStartsWith", "assertStartsWith", "assertTotallyOrdered", "assertUrlEqual",
           "get_recorded_properties", "record_property", "tempfile_cleanup"):
    NOT_PROVIDED.setdefault(_n, "(absltest) is not written into TFTestCase: write the check with unittest's assertions")
PROVIDED = {n for n in METHODS if not n.startswith("_") and n not in ("setUp", "fail")}


class _SelfUses(cst.CSTVisitor):
    """``self.<name>`` read in a class body, and the names the class defines (methods, attributes
    it assigns)."""

    def __init__(self) -> None:
        self.used: list[tuple[str, cst.Attribute]] = []
        self.defined: set[str] = set()
        self.tempdir_methods: set[str] = set()  # .create_file / .mkdir calls (absltest's _TempDir methods)
        self._depth = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._depth == 0:
            self.defined.add(node.name.value)
        self._depth += 1

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._depth -= 1

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == "self":
            self.used.append((node.attr.value, node))
        elif node.attr.value in ("create_file", "mkdir") and not (
                isinstance(node.value, cst.Name) and node.value.value in ("os", "pathlib")):
            self.tempdir_methods.add(f".{node.attr.value}()")

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        t = node.target
        if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
            self.defined.add(t.attr.value)


def _is_tf_base(expr: cst.BaseExpression, ctx: FileContext, local: set[str]) -> bool:
    if isinstance(expr, cst.Name) and expr.value in local:
        return True
    return isinstance(expr, (cst.Name, cst.Attribute)) and ctx.imports.resolve(expr) in BASES


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Plans the base edits, reports the methods not provided, records the ones to write; returns
    ``module`` itself."""
    local: dict[str, set[str]] = {}  # test classes of the file → the names they and their bases define
    wanted: set[str] = set()
    benchmarks = False
    taken = {st.name.value for st in module.body if isinstance(st, (cst.ClassDef, cst.FunctionDef))}
    for st in module.body:
        if not isinstance(st, cst.ClassDef):
            continue
        if BENCHMARK not in taken:
            benchmarks = _plan_benchmark(st, ctx) or benchmarks
        bases = [a for a in st.bases if a.keyword is None and _is_tf_base(a.value, ctx, set(local))]
        if not bases:
            continue
        if HELPER in taken and not local:
            ctx.report(Severity.ERROR, "unsupported-construct", f"the file defines its own {HELPER}, the name of the "
                       "unittest.TestCase fwport writes for tf.test.TestCase: rename it and translate again", bases[0])
            return module
        uses = _SelfUses()
        scan(st.body, uses)
        defined = set(uses.defined)
        for a in bases:
            if isinstance(a.value, cst.Name) and a.value.value in local:
                defined |= local[a.value.value]
            else:
                # (on the Arg: the rule pass runs the planned node's own hooks, and an Attribute's is the residue scan)
                ctx.plans.add(a, lambda orig, upd: upd.with_changes(value=cst.Name(HELPER)), descend=False, by="testcase")
        local[st.name.value] = defined
        for name, node in uses.used:
            if name in defined:
                continue
            if name == "create_tempdir" and uses.tempdir_methods:
                ctx.report(Severity.ERROR, "unsupported-construct", "self.create_tempdir (absltest) is written into "
                           "TFTestCase as a path only (.full_path, os.PathLike): the class calls "
                           f"{', '.join(sorted(uses.tempdir_methods))} (absltest's folder methods): write the files "
                           "with open() under the folder", node, api="tensorflow.test.TestCase.create_tempdir")
                continue
            if name in PROVIDED:
                wanted.add(name)
            elif name in NOT_PROVIDED:
                ctx.report(Severity.ERROR, "unsupported-construct",
                           f"self.{name} (tf.test.TestCase) {NOT_PROVIDED[name]}", node, api=f"tensorflow.test.TestCase.{name}")
    if local:
        ctx.analyses[_KEY] = wanted
    if benchmarks:
        ctx.analyses[_KEY + "-benchmark"] = True
    return module


_BENCHMARK_NOT_PROVIDED = {
    "run_op_benchmark": "runs an op in a TensorFlow 1 session: time the code with time.perf_counter() and pass "
                        "the time to self.report_benchmark(wall_time=...)",
    "evaluate": "evaluates TensorFlow tensors: use the torch values (x.detach().cpu().numpy())",
}


def _plan_benchmark(st: cst.ClassDef, ctx: FileContext) -> bool:
    """``class B(tf.test.Benchmark)`` → ``class B(TFBenchmark)``, with a warning: TensorFlow's runner
    (``tf.test.main()`` with ``--benchmarks=REGEX``) is not reproduced."""
    bases = [a for a in st.bases if a.keyword is None and isinstance(a.value, (cst.Name, cst.Attribute))
             and ctx.imports.resolve(a.value) in BENCHMARK_BASES]
    if not bases:
        return False
    for a in bases:
        ctx.plans.add(a, lambda orig, upd: upd.with_changes(value=cst.Name(BENCHMARK)), descend=False, by="testcase")
    ctx.report(Severity.WARNING, "idiom-replaced", f"{st.name.value} derives from TFBenchmark (report_benchmark logs "
               "as TensorFlow's does); unittest.main() does not run benchmark methods, which tf.test.main() ran only "
               "with --benchmarks=REGEX: call them yourself", bases[0])
    uses = _SelfUses()
    scan(st.body, uses)
    for name, node in uses.used:
        if name in _BENCHMARK_NOT_PROVIDED and name not in uses.defined:
            ctx.report(Severity.ERROR, "unsupported-construct",
                       f"self.{name} (tf.test.Benchmark) {_BENCHMARK_NOT_PROVIDED[name]}", node,
                       api=f"tensorflow.test.Benchmark.{name}")
    return True


def helper_text(names: set[str]) -> tuple[str, set[str]]:
    """The TFTestCase class with ``names`` (and what they call) and the import lines it needs."""
    todo = {"setUp"} | set(names)
    stack = list(todo)
    while stack:
        for dep in METHODS[stack.pop()][1]:
            if dep not in todo:
                todo.add(dep)
                stack.append(dep)
    imports = {"import unittest"}
    body = []
    for n in _ORDER:
        if n in todo:
            text, _, mods = METHODS[n]
            body.append(text)
            imports |= {_IMPORTS[m] for m in mods}
    doc = ('    """tf.test.TestCase\'s methods that this file uses, with TensorFlow\'s semantics over numpy."""\n')
    return f"class {HELPER}(unittest.TestCase):\n{doc}" + "".join(body), imports


def finish(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Writes TFTestCase after the imports (unless the file defines it already)."""
    from fwport.core.imports import insert_after_imports
    defined = {st.name.value for st in module.body if isinstance(st, cst.ClassDef)}
    if ctx.analyses.get(_KEY + "-benchmark") and BENCHMARK not in defined:
        ctx.needed_imports |= {"import inspect", "import logging"}
        module = insert_after_imports(module, BENCHMARK_TEXT, ctx)
    wanted = ctx.analyses.get(_KEY)
    if wanted is None or HELPER in defined:
        return module
    text, imports = helper_text(wanted)
    ctx.needed_imports |= imports
    return insert_after_imports(module, text, ctx)
