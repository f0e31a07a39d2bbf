"""TensorFlow 1 graph-mode files: out of scope, said once per file.

A file that builds a graph and runs it in a session (placeholders, ``sess.run``, variable scopes,
``tf.compat.v1.train.*Optimizer``, ``disable_eager_execution``...) has no call-by-call PyTorch
counterpart: its calls describe a graph that a session runs later, and its control flow is the
session's. Translating it call by call would leave hundreds of errors and a file that cannot run.
Such a file gets one error finding (code ``tf1-graph-code``) at its first graph-mode API, naming the
APIs found and the way forward (migrate it to TensorFlow 2 first: ``tf_upgrade_v2``, then eager code),
and is left as written (status failed: nothing was translated).

``tf.compat.v1`` names that are TensorFlow 2 functions under their old name (``tf.compat.v1.logging``,
``tf.compat.v1.gfile``, the ops) do not make a file TF1 graph code: they keep translating by their rules.
A session alone (``tf.compat.v1.Session(config=...)`` handed to Keras's ``set_session`` to let the GPU
memory grow) does not either, unless the file also runs something in it (``.run(``), and neither does
the default graph alone (``tf.compat.v1.get_default_graph().unique_name(...)`` in TF 2 Keras code,
``reset_default_graph()`` at the top of a notebook): graph code uses other APIs as well.
"""
from __future__ import annotations

import functools
import re

import libcst as cst

from fwport.core.direction import Trigger
from fwport.core.finding import Finding, Severity
from fwport.core.names import dotted, scan
from fwport.core.position import node_positions

#: graph-mode APIs (after ``tensorflow.`` / ``tensorflow.compat.v1.``): a file that uses one is TF1 graph code
GRAPH_APIS = frozenset({
    "placeholder", "placeholder_with_default", "sparse_placeholder", "global_variables_initializer",
    "local_variables_initializer", "initialize_all_variables", "variables_initializer", "tables_initializer",
    "get_variable", "variable_scope", "disable_eager_execution",
    "disable_v2_behavior", "get_collection", "add_to_collection", "trainable_variables", "global_variables",
    "train.Saver", "train.MonitoredTrainingSession", "train.Supervisor", "train.get_or_create_global_step",
    "train.get_global_step", "train.GradientDescentOptimizer", "train.AdamOptimizer", "train.MomentumOptimizer",
    "train.RMSPropOptimizer", "train.AdagradOptimizer", "train.AdadeltaOptimizer", "train.FtrlOptimizer",
    "train.Optimizer", "train.exponential_decay", "summary.FileWriter", "summary.merge_all",
    "layers.dense", "layers.conv2d", "layers.max_pooling2d", "layers.dropout", "layers.batch_normalization",
    "layers.flatten", "layers.conv1d", "layers.conv2d_transpose", "nn.rnn_cell.LSTMCell", "nn.rnn_cell.BasicLSTMCell",
    "nn.dynamic_rnn", "Session.run",
})
#: sessions: graph code only where the file also runs something (`sess.run(...)`)
SESSIONS = frozenset({"Session", "InteractiveSession"})

#: a cheap text test before any walk: one of the names above, tf.contrib, or a from-import of a TF1 module
#: (``from tensorflow.compat.v1 import layers as L``, ``from tensorflow.compat.v1.layers import dense``)
TRIGGER = Trigger(r"\b(?:placeholder\w*|\w+_initializer|initialize_all_variables|get_variable|variable_scope|"
                  r"disable_eager_execution|disable_v2_behavior|"
                  r"get_collection|add_to_collection|Saver|MonitoredTrainingSession|Supervisor|\w*global_step|"
                  r"\w+Optimizer|exponential_decay|FileWriter|merge_all|layers\.\w+|rnn_cell|dynamic_rnn|"
                  r"Session|InteractiveSession|contrib|trainable_variables|global_variables|"
                  r"(?:v1|tensorflow\.layers|v1\.layers)\s+import)\b",
                  "placeholder", "_initializer", "initialize_all_variables", "get_variable", "variable_scope",
                  "disable_eager_execution", "disable_v2_behavior", "get_collection", "add_to_collection", "Saver",
                  "MonitoredTrainingSession", "Supervisor", "global_step", "Optimizer", "exponential_decay",
                  "FileWriter", "merge_all", "layers.", "rnn_cell", "dynamic_rnn", "Session", "contrib",
                  "trainable_variables", "global_variables", "v1 import", "v1.layers", "tensorflow.layers")
_RUN = re.compile(r"\.\s*run\s*\(")

#: what may stand between the names and dots of one dotted name: blanks, line breaks (in brackets or
#: after a backslash), comments, parentheses (``(tf).placeholder``). Possessive (``*+``): a comment is
#: taken to its line's end and the run is never given back, so the search stays linear; with plain ``*``
#: each ``# `` of a commented-out block (a notebook's ``%%writefile`` cell) could be split two ways, and a
#: few dozen such lines after ``tf`` took the search exponential time (the whole file hung).
_SEP = r"(?:[\s()\\]|#[^\n]*+)*+"
#: the last names of the graph-mode APIs: a use ``alias.….name`` of one ends in one of them (``dense`` of
#: ``layers.dense``), or goes through ``contrib``; ``Session`` / ``InteractiveSession`` where the file runs
_LAST_NAMES = frozenset(api.rsplit(".", 1)[-1] for api in GRAPH_APIS) | {"contrib"}


@functools.lru_cache(maxsize=64)
def _uses_pattern(heads: tuple[str, ...], runs: bool) -> re.Pattern:
    """A dotted name that starts at one of ``heads`` (the file's TensorFlow aliases) and reaches a graph API's
    last name: every use the walk finds matches (and far from every match is one)."""
    last = sorted(_LAST_NAMES | SESSIONS) if runs else sorted(_LAST_NAMES)
    return re.compile(rf"\b(?:{'|'.join(map(re.escape, heads))}){_SEP}\.{_SEP}(?:\w+{_SEP}\.{_SEP})*"
                      rf"(?:{'|'.join(last)})\b")


def _may_use_graph_apis(imports, source: str, runs: bool) -> bool:
    """Whether the file may use a graph-mode API: a name imported as one (``from tensorflow.compat.v1 import
    placeholder``), or a dotted name in the text from an alias of TensorFlow (``tf``, ``v1``...: what resolves
    under ``tensorflow``, Keras's modules not) to one of the APIs' last names. False spares the walk of the
    tree; most Keras files that the trigger matches (``layers.Dense``, ``Adam`` ...Optimizer...) use none."""
    heads = []
    for alias in imports.aliases:
        qualified = imports.resolve_parts([alias])
        if not qualified or not (qualified == "tensorflow" or qualified.startswith("tensorflow.")):
            continue
        if _graph_name(qualified, runs) is not None:
            return True  # the bare name is an API
        heads.append(alias)
    return bool(heads) and _uses_pattern(tuple(sorted(heads)), runs).search(source) is not None


def _graph_name(qualified: str | None, runs: bool) -> str | None:
    """The TF1 API a canonical name is (``tensorflow.compat.v1.placeholder`` → ``placeholder``), or None."""
    if not qualified:
        return None
    for prefix in ("tensorflow.compat.v1.", "tensorflow."):
        if qualified.startswith(prefix):
            rest = qualified[len(prefix):]
            if rest in GRAPH_APIS or rest.startswith("contrib.") or rest == "contrib" or (runs and rest in SESSIONS):
                return rest
            return None
    return None


class _GraphUses(cst.CSTVisitor):
    def __init__(self, imports, runs: bool):
        self.imports = imports
        self.runs = runs
        self.found: list[tuple[str, cst.CSTNode]] = []

    def _check(self, node: cst.BaseExpression) -> bool:
        parts = dotted(node)
        if parts is None:
            return True  # (a call's or subscript's attribute: look inside)
        name = _graph_name(self.imports.resolve_parts(parts), self.runs)
        if name is not None:
            self.found.append((".".join(parts), node))
        return False  # a dotted name's own prefixes are not other uses

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return self._check(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._check(node)

    def visit_Import(self, node) -> bool:
        return False  # imports name modules; their uses are what counts

    def visit_ImportFrom(self, node) -> bool:
        return False


def refuse_graph_code(module: cst.Module, imports, source: str, path: str) -> Finding | None:
    """One error finding when the file is TF1 graph-mode code (see the module docstring), else None."""
    if not TRIGGER.search(source):
        return None
    runs = _RUN.search(source) is not None
    if not _may_use_graph_apis(imports, source, runs):
        return None
    uses = _GraphUses(imports, runs)
    scan(module, uses)
    if not uses.found:
        return None
    first = uses.found[0][1]
    line, col = node_positions(module, [first]).get(id(first), (0, 0))
    names: list[str] = []
    for text, _ in uses.found:
        if text not in names:
            names.append(text)
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return Finding(Severity.ERROR, "tf1-graph-code",
                   f"TensorFlow 1 graph-mode code ({shown}; {len(uses.found)} uses) is out of scope: fwport translates "
                   "TensorFlow 2 (eager) and Keras code, and a graph run in a session has no call-by-call PyTorch "
                   "counterpart. Migrate the file to TensorFlow 2 first (tf_upgrade_v2 renames the API; then replace "
                   "placeholders and sess.run with functions called on tensors, tf.compat.v1 variables and layers with "
                   "tf.Variable / Keras layers, tf.compat.v1.train optimizers with keras.optimizers and a "
                   "tf.GradientTape step), then translate it; the file was left as written",
                   path, line, col, api="tensorflow.compat.v1 (graph mode)")
