"""(read-only) The tf.data.Dataset methods the DataPipeline helper (datahelpers.py) does not have, called on a
dataset of the file: an error on the call (``ds.group_by_window(...)``), where the translation would raise an
AttributeError when it runs.

A dataset is what a tf.data constructor or a Keras dataset reader gives (``tf.data.Dataset.range(...)``,
``tf.data.TFRecordDataset(...)``, ``keras.utils.image_dataset_from_directory(...)``), a dataset method of one
(``.map(...)``, ``.batch(...)``), or a name every binding of which in the file (any scope: the analysis is
one table per file, so a name also bound otherwise, a parameter or a loop variable, is not one) is one. A few
method names no other library's object has are errors on any receiver (``_ONLY_TF_DATA``)."""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.names import scan
from fwport.core.position import render
from fwport.packs.tf2torch.passes import runtime
from fwport.packs.tf2torch.datahelpers import _DATA_PIPELINE

#: the public methods and properties of a tf.data.Dataset object (TensorFlow 2.21's dir(tf.data.Dataset) less
#: its static methods, which are tf.data.Dataset.<name> rules or no-rule errors; tests/test_tfsilent.py
#: checks the list against the TensorFlow installed)
DATASET_METHODS = frozenset({
    "apply", "as_numpy_iterator", "batch", "bucket_by_sequence_length", "cache", "cardinality", "concatenate",
    "element_spec", "enumerate", "filter", "fingerprint", "flat_map", "get_single_element", "group_by_window",
    "ignore_errors", "interleave", "map", "options", "padded_batch", "prefetch", "ragged_batch", "rebatch",
    "reduce", "rejection_resample", "repeat", "save", "scan", "shard", "shuffle", "skip", "snapshot",
    "sparse_batch", "take", "take_while", "unbatch", "unique", "window", "with_options"})

#: the methods DataPipeline has (read from its text: a method added there is no longer an error here)
PIPELINE_METHODS = frozenset(re.findall(r"^    def (\w+)\(", _DATA_PIPELINE, re.M))

#: the dataset methods a translated pipeline would not have
MISSING = DATASET_METHODS - PIPELINE_METHODS

#: the methods whose result is a dataset (a chain of them stays a dataset)
_GIVES_DATASET = DATASET_METHODS - {"as_numpy_iterator", "cardinality", "element_spec", "fingerprint",
                                    "get_single_element", "options", "reduce", "save"}

#: method names only tf.data datasets have: an error on any receiver when the pipeline lacks them
_ONLY_TF_DATA = frozenset({"bucket_by_sequence_length", "group_by_window", "ragged_batch", "sparse_batch",
                           "rejection_resample", "ignore_errors", "flat_map", "interleave"}) & MISSING

#: the calls (canonical names) whose result is a tf.data dataset, besides tensorflow.data.*
_READERS = ("keras.utils.image_dataset_from_directory", "keras.utils.text_dataset_from_directory",
            "keras.utils.audio_dataset_from_directory", "keras.utils.timeseries_dataset_from_array",
            "keras.preprocessing.image_dataset_from_directory", "keras.preprocessing.text_dataset_from_directory",
            "keras.preprocessing.timeseries_dataset_from_array")

#: what the error says for each (how to write it in the translation)
_ADVICE = {
    "bucket_by_sequence_length": "group the elements by length by hand (a dict of lists per bucket) and pad "
                                 "each batch (padded_batch)",
    "group_by_window": "group the elements by key by hand (a dict of lists, a batch when one holds window_size)",
    "scan": "a generator that carries the state: DataPipeline(lambda: my_generator(pipeline))",
    "unique": "a generator that keeps the elements seen: DataPipeline(lambda: my_generator(pipeline))",
    "take_while": "itertools.takewhile over the pipeline: DataPipeline(lambda: itertools.takewhile(pred, pipeline))",
    "element_spec": "the structure of next(iter(pipeline))",
}


def _advice(method: str) -> str:
    return _ADVICE.get(method, "write it over the pipeline's elements by hand (a DataPipeline wraps any "
                               "function that returns an iterator: DataPipeline(lambda: ...))")


class _Bindings(cst.CSTVisitor):
    """Every name's bindings in the file: the values of ``name = value`` (None for any other binding)."""

    def __init__(self) -> None:
        self.values: dict[str, list[cst.BaseExpression | None]] = {}

    def _other(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.values.setdefault(target.value, []).append(None)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self._other(e.value)
        elif isinstance(target, cst.StarredElement):
            self._other(target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.values.setdefault(t.target.value, []).append(node.value)
            else:
                self._other(t.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name):
            self.values.setdefault(node.target.value, []).append(node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._other(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._other(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._other(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._other(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._other(node.target)

    def visit_Param(self, node: cst.Param) -> None:
        self._other(node.name)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._other(node.name)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._other(node.name)

    def visit_Global(self, node: cst.Global) -> None:
        for n in node.names:
            self._other(n.name)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for n in node.names:
            self._other(n.name)


class _Missing(cst.CSTVisitor):
    def __init__(self, ctx, datasets: set[str]) -> None:
        self.ctx, self.datasets = ctx, datasets
        self.shown: set[int] = set()  # the element_spec reads that are a whole statement (a notebook's display)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        """``ds.element_spec`` (or an attribute of it) as a statement: a notebook cell's display of the dataset's
        structure, which computes nothing in a script: removed, with an info finding."""
        if len(node.body) != 1 or not isinstance(node.body[0], cst.Expr):
            return
        value = node.body[0].value
        while isinstance(value, cst.Attribute) and value.attr.value != "element_spec":
            value = value.value
        if isinstance(value, cst.Attribute) and dataset(value.value, self.datasets, self.ctx) and \
                self.ctx.imports.resolve(value) is None and self.ctx.plans.get(node.body[0].value) is None:
            self.shown.add(id(value))
            self.ctx.report("info", "idiom-replaced", f"{render(node.body[0].value)} removed: a statement that only "
                            "reads the dataset's element_spec (a notebook cell displays it) computes nothing in a "
                            "script; the structure of a translated pipeline's elements is that of "
                            "next(iter(pipeline))", node.body[0].value)
            runtime.drop_statement(self.ctx, node.body[0].value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        method = node.attr.value
        if method not in MISSING or id(node) in self.shown:
            return
        if not (method in _ONLY_TF_DATA or dataset(node.value, self.datasets, self.ctx)):
            return
        if self.ctx.imports.resolve(node) is not None:
            return  # tf.data.Dataset.<name> itself: its rule or no-rule error
        self.ctx.report("error", "no-rule", f".{method}: the tf.data.Dataset method {method} has no tf2torch "
                        f"translation (the DataPipeline written into the file does not have it: the translation "
                        f"would raise AttributeError when it runs): {_advice(method)}", node,
                        api=f"tensorflow.data.Dataset.{method}")


def dataset(node: cst.BaseExpression, datasets: set[str], ctx) -> bool:
    """A tf.data dataset: a constructor's call, a dataset name, a dataset method of one."""
    if isinstance(node, cst.Name):
        return node.value in datasets
    if not isinstance(node, cst.Call):
        return False
    q = ctx.imports.resolve(node.func)
    if q is not None:
        return q.startswith("tensorflow.data.") or q in _READERS
    return isinstance(node.func, cst.Attribute) and node.func.attr.value in _GIVES_DATASET \
        and dataset(node.func.value, datasets, ctx)


def run(module: cst.Module, ctx) -> cst.Module:
    """Planner: errors on the dataset methods the DataPipeline lacks (read-only)."""
    b = _Bindings()
    scan(module, b)
    # the names bound only by `name = value`, less those with a value that is not a dataset, until nothing changes
    # (`ds = tf.data.Dataset.range(9)` then `ds = ds.map(f)`: ds is one, read with ds taken to be one)
    datasets = {name for name, values in b.values.items() if None not in values}
    changed = True
    while changed:
        changed = False
        for name in list(datasets):
            if not all(dataset(v, datasets, ctx) for v in b.values[name]):
                datasets.discard(name)
                changed = True
    scan(module, _Missing(ctx, datasets))
    return module
