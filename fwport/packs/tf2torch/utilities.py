"""Call transforms for TensorFlow's Python utilities that have standard-library counterparts:
``tf.io.gfile`` (local paths: ``open``, ``os``, ``shutil``, ``glob``) and TensorFlow's logger
(``tf.get_logger()``, ``tf.compat.v1.logging``), which is the standard library's ``logging`` logger
named "tensorflow". The plain one-to-one mappings are data rules (rules/tf2torch/gfile-*.toml,
logging-*.toml); what needs a decision per call is here. The ``tf.test`` base class is testcase.py.
"""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.engine import build_call, code
from fwport.core.names import scan
from fwport.packs.tf2torch.registry import call_transform

#: TensorFlow's logger is logging.getLogger("tensorflow") (tf_logging.get_logger), which importing TensorFlow gives a
#: handler of its own where the root logger has none: the tf_logger helper does the same when the translation is
#: imported (its call after the definition), so TensorFlow's messages print as they do beside TensorFlow
_TF_LOGGER = '''
def tf_logger():
    """TensorFlow's logger, logging.getLogger("tensorflow"), set up as importing TensorFlow sets it up (once in the
    process): where the root logger has no handler yet, a handler of its own that prints "LEVEL:tensorflow:message"
    to standard error (to standard output, from the INFO level on, in an interactive session). A logging.basicConfig
    after the imports is the program's own, as beside TensorFlow (the messages then print twice, as TensorFlow's)."""
    import logging
    import sys
    logger = logging.getLogger("tensorflow")
    if not logger.__dict__.get("tf_handler_set"):
        logger.tf_handler_set = True
        if not logging.getLogger().handlers:
            interactive = hasattr(sys, "ps1") or bool(sys.flags.interactive)
            if interactive:
                logger.setLevel(logging.INFO)
            handler = logging.StreamHandler(sys.stdout if interactive else sys.stderr)
            handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
            logger.addHandler(handler)
    return logger


tf_logger()  # TensorFlow sets its logger up when it is imported

'''
def _logger(ctx) -> cst.BaseExpression:
    return cst.Call(cst.Name(_helpers.use(ctx, "tf_logger")), [])


@call_transform("tf-logger")
def tf_logger(m, ctx):
    """``tf.get_logger()`` → ``tf_logger()`` (``logging.getLogger("tensorflow")`` given TensorFlow's handler, as
    importing TensorFlow gives it); with the rule's option ``method``, ``tf.compat.v1.logging.<f>(...)`` →
    ``tf_logger().<method>(...)`` (TensorFlow's module-level functions call that method of that logger, arguments
    as given)."""
    method = m.rule.emit.get("options", {}).get("method")
    if not method:
        return _logger(ctx)
    out = build_call(m, ctx, target="__fwport_logger__")
    if out is None:
        return None
    return out.with_changes(func=cst.Attribute(_logger(ctx), cst.Name(method)))


@call_transform("gfile-open")
def gfile_open(m, ctx):
    """``tf.io.gfile.GFile(name, mode)`` → ``open(name, mode)``. GFile reads and writes text as UTF-8
    with no newline translation, so a text mode gets ``encoding="utf-8", newline="\\n"`` (lines end at
    "\\n" only, "\\r\\n" is kept as written); a binary mode is ``open``'s own. A mode that is not a
    literal is refused (text and binary need different arguments). TensorFlow's line reads drop every
"\\r" (even in binary mode), open's keep them: a mode that reads gets a warning saying so."""
    mode = m.bound.values.get("mode")
    lit = "r" if mode is None else literal_value(mode, NOT_LITERAL)
    if not isinstance(lit, str):
        m.fail(ctx, "unsupported-argument", f"mode={m.written('mode')}: GFile's mode must be a literal to choose "
               "between open(name, mode) (binary) and open(name, mode, encoding=\"utf-8\", newline=\"\\n\") (text)")
        return None
    if "r" in lit or "+" in lit:
        ctx.report("warning", "idiom-replaced", "GFile's line reads (readline, readlines, iterating the file) drop "
                   "every \"\\r\" of the file; open's keep them: the same lines for files without \"\\r\" "
                   "(read() returns the bytes as they are in both)", m.node, m.rule)
    if "b" not in lit:
        m.kwargs["encoding"] = cst.SimpleString('"utf-8"')
        m.kwargs["newline"] = cst.SimpleString('"\\n"')
    return build_call(m, ctx, target="open")


@call_transform("gfile-overwrite")
def gfile_overwrite(m, ctx):
    """``tf.io.gfile.copy / rename(src, dst, overwrite=True)`` → ``shutil.copy(src, dst)`` /
    ``os.replace(src, dst)`` (both replace an existing destination). TensorFlow raises when the
    destination exists and ``overwrite`` is False (the default), which neither does: such a call is
    refused unless the program states ``overwrite=True``."""
    over = m.bound.values.get("overwrite")
    lit = False if over is None else literal_value(over, NOT_LITERAL)
    if lit is not True:
        shown = "overwrite omitted" if over is None else f"overwrite={m.written('overwrite')}"
        m.fail(ctx, "unsupported-argument", f"{shown}: {m.rule.names[0]} raises if the destination exists, "
               f"{m.rule.emit['target']} replaces it; check os.path.exists(dst) first, or pass overwrite=True")
        return None
    m.kwargs.pop("overwrite", None)
    return build_call(m, ctx, target=m.rule.emit["target"])


@call_transform("with-keywords")
def with_keywords(m, ctx):
    """The rule's target with the keywords of its option ``keywords`` (name → Python text) added:
    ``tf.io.gfile.makedirs(p)`` → ``os.makedirs(p, exist_ok=True)`` (TensorFlow's makedirs does not
    fail on a folder that exists)."""
    for k, v in m.rule.emit.get("options", {}).get("keywords", {}).items():
        m.kwargs.setdefault(k, cst.parse_expression(v))
    return build_call(m, ctx, target=m.rule.emit["target"])


# helpers written into the output (fwport/packs/tf2torch/helpers.py writes those the output calls)
from fwport.packs.tf2torch import helpers as _helpers  # noqa: E402
from fwport.packs.tf2torch.datahelpers import DATA_DEPS  # noqa: E402

_helpers.HELPERS["tf_logger"] = _TF_LOGGER

_helpers.HELPERS["gfile_mkdir"] = '''
def gfile_mkdir(path):
    """tf.io.gfile.mkdir: create the folder (its parent must exist) unless the path exists."""
    if not {os}path.exists(path):
        {os}mkdir(path)
'''


@call_transform("gpu-device-name")
def gpu_device_name(m, ctx):
    """``tf.test.gpu_device_name()`` → ``("/device:GPU:0" if torch.cuda.is_available() else "")``: the
    name TensorFlow gives its first GPU, or "" without one."""
    avail = ctx.spell_text("torch.cuda.is_available")
    return cst.parse_expression(f'("/device:GPU:0" if {avail}() else "")')


# --- `with tf.name_scope(...):` -----------------------------------------------------------------------
#: canonical names; Keras's own (keras.name_scope, Keras 2's keras.backend.name_scope) only name ops and variables too
NAME_SCOPES = {"tensorflow.name_scope", "tensorflow.compat.v1.name_scope", "keras.name_scope", "keras.backend.name_scope"}


class _NameScopes(cst.CSTVisitor):
    def __init__(self, ctx):
        self.ctx = ctx

    def visit_WithItem(self, node: cst.WithItem) -> None:
        call = node.item
        if not isinstance(call, cst.Call):
            return
        q = self.ctx.imports.resolve(call.func)
        if q is None or self.ctx.imports.names.canonical(q) not in NAME_SCOPES:
            return
        if node.asname is not None:
            return  # `as scope` binds the scope's name ("outer/inner/"): the call's no-rule error stays
        ctx = self.ctx
        ctx.report("info", "idiom-replaced", "a name scope only prefixes the names of TensorFlow operations and "
                   "variables, which torch does not have: contextlib.nullcontext()", call)
        ctx.plans.add(call, lambda orig, upd: cst.Call(ctx.spell("contextlib.nullcontext"), []),
                      descend=False, by="name_scopes")


def run_name_scopes(module: cst.Module, ctx) -> cst.Module:
    """Planner: ``with tf.name_scope("block"):`` → ``with contextlib.nullcontext():`` (the body keeps its
    place and indentation). A name scope only names TensorFlow operations; torch has no op names. A
    scope bound with ``as`` (its name string is used) stays, with the call's error."""
    scan(module, _NameScopes(ctx))
    return module


class _DataframeFlows(cst.CSTVisitor):
    def __init__(self, ctx):
        self.ctx = ctx

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "flow_from_dataframe":
            self.ctx.report("error", "unsupported-construct",
                            "ImageDataGenerator.flow_from_dataframe is not translated (the written ImageDataGenerator "
                            "raises NotImplementedError there): list the frame's file paths and labels and load each "
                            "image in a torch Dataset's __getitem__ (PIL.Image.open(path).convert('RGB').resize(size)), "
                            "or move the files into class folders for flow_from_directory", node)


_TORCH_DTYPES = ("float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool", "complex64")


class _PlaceholderInputs(cst.CSTVisitor):
    """``keras.Input(shape=(10,), batch_size=4, dtype=...)`` left by the functional pass (no functional model of the
    file starts there): a symbolic tensor of a fully known shape, given to a model or layer call (a test reading
    the output's shape, a model built by a first call). An error that says which tensor to give instead."""

    def __init__(self, ctx):
        self.ctx = ctx

    def visit_Call(self, node: cst.Call) -> None:
        from fwport.core.bind import NOT_LITERAL, call_argument, literal_value

        q = self.ctx.imports.resolve(node.func)
        if q is None or self.ctx.imports.names.canonical(q) not in ("keras.Input", "keras.layers.Input") \
                or self.ctx.is_settled(node):
            return
        shape = literal_value(call_argument(node, "shape", 0), NOT_LITERAL)
        given = call_argument(node, "batch_size", 1)
        batch = literal_value(given, NOT_LITERAL) if given is not None else None
        if batch is NOT_LITERAL and isinstance(given, cst.Name):
            batch = given.value  # (a name: written as it is)
        if not (isinstance(shape, tuple) and all(type(d) is int for d in shape) and type(batch) in (int, str)):
            return
        dtype = call_argument(node, "dtype")  # (keyword only: Keras 2 and 3 put it at different positions)
        kind = None
        if dtype is not None:
            dq = self.ctx.imports.resolve(dtype) if not isinstance(dtype, cst.SimpleString) else None
            kind = (dq.rsplit(".", 1)[-1] if dq else literal_value(dtype, None))
        dims = ", ".join(map(str, (batch, *shape)))
        torch_dtype = "" if kind in (None, "float32") else f", dtype=torch.{kind}" if kind in _TORCH_DTYPES else \
            f", dtype=<torch's {kind}>"
        self.ctx.report("error", "unsupported-construct",
                        f"keras.Input(shape={shape}, batch_size={batch}) outside a functional model fwport translates: "
                        "a symbolic tensor of a known shape, given here to a model or layer call (for its output's "
                        "shape, or to build it); torch has no symbolic tensors, a module is called on real ones: give "
                        f"torch.zeros(({dims}){torch_dtype}) and call the module under torch.no_grad() in eval() "
                        "(Keras's symbolic call trains nothing: a call in train() would move BatchNorm statistics and "
                        "draw dropout); the output's .shape is then Keras's", node)
        self.ctx.settle(node)


def run_placeholder_inputs(module: cst.Module, ctx) -> cst.Module:
    """Planner (read-only): a ``keras.Input`` of a known batch and shape left outside a functional model is an error
    saying which tensor to give instead (:class:`_PlaceholderInputs`)."""
    scan(module, _PlaceholderInputs(ctx))
    return module


def run_dataframe_flows(module: cst.Module, ctx) -> cst.Module:
    """Planner (read-only): ``datagen.flow_from_dataframe(...)`` is an error saying what to write."""
    scan(module, _DataframeFlows(ctx))
    return module


@call_transform("list-devices")
def list_devices(m, ctx):
    """``tf.config.list_physical_devices("GPU")`` → ``[torch.device("cuda", i) for i in
    range(torch.cuda.device_count())]``, ``("CPU")`` → ``[torch.device("cpu")]``: as many devices, in
    the same order, so its length and truthiness (what programs test) are TensorFlow's; the elements
    are torch devices (an idiom-replaced finding says so). Another device type is refused."""
    kind = m.bound.values.get("device_type")
    lit = literal_value(kind, NOT_LITERAL) if kind is not None else NOT_LITERAL
    dev = ctx.spell_text("torch.device")
    if lit == "GPU":
        text = f'[{dev}("cuda", i) for i in range({ctx.spell_text("torch.cuda.device_count")}())]'
    elif lit == "CPU":
        text = f'[{dev}("cpu")]'
    else:
        shown = m.written("device_type") or "no device type"
        m.fail(ctx, "unsupported-argument", f"device_type={shown}: only the literal 'GPU' (→ the CUDA devices) and "
               "'CPU' (→ [torch.device('cpu')]) are translated")
        return None
    name = ctx.imports.resolve(m.call.func) or m.rule.names[0]
    kind = "LogicalDevice" if "logical" in name else "PhysicalDevice"
    ctx.report("info", "idiom-replaced", f"{name}: a list of torch.device in place of TensorFlow's "
               f"{kind} objects (the same number of devices: len() and truth tests agree; the elements print "
               "differently and have no .device_type)", m.node, m.rule)
    return cst.parse_expression(text)


#: tf.compat.v1.logging.log_every_n / log_first_n: the same count, another test of it
_LOG_COUNTED = '''
def {name}(level, msg, n, *args):
    """{doc}"""
    import sys
    here = sys._getframe(1)  # TensorFlow's key: the first frame outside the calling file
    outside = here.f_back
    while outside is not None and outside.f_code.co_filename == here.f_code.co_filename:
        outside = outside.f_back
    key = ("<unknown>", 0) if outside is None else (outside.f_code.co_filename, outside.f_lineno)
    logger = tf_logger()
    counts = logger.__dict__.setdefault("tf_log_counts", dict())  # one count per key in the process, as TensorFlow's
    counts[key] = counts.get(key, -1) + 1
    if {test}:
        logger.log(level, msg, *args)
'''
_helpers.HELPERS["tf_log_every_n"] = _LOG_COUNTED.format(
    name="tf_log_every_n", test="not counts[key] % n",
    doc="tf.compat.v1.logging.log_every_n: log the 1st, (n+1)st, (2n+1)st... call to TensorFlow's logger,\n"
        "    counted as TensorFlow counts: per place (file, line) of the first caller outside the calling file.")
DATA_DEPS["tf_log_every_n"] = DATA_DEPS["tf_log_first_n"] = ("tf_logger",)
_helpers.HELPERS["tf_log_first_n"] = _LOG_COUNTED.format(
    name="tf_log_first_n", test="counts[key] < n",
    doc="tf.compat.v1.logging.log_first_n: log the first n calls to TensorFlow's logger, counted as\n"
        "    TensorFlow counts: per place (file, line) of the first caller outside the calling file.")


@call_transform("test-main")
def test_main(m, ctx):
    """``tf.test.main()`` → ``unittest.main()``; in a file that imports absl (its flags are parsed by
    tf.test.main, which runs absl's app) → ``absltest.main()``, which parses them the same way."""
    if not any(q == "absl" or q.startswith("absl.") for q in ctx.imports.aliases.values()):
        return build_call(m, ctx, target="unittest.main")
    ctx.needed_imports.add("from absl.testing import absltest")
    out = build_call(m, ctx, target="__fwport_main__")
    return None if out is None else out.with_changes(func=cst.Attribute(cst.Name("absltest"), cst.Name("main")))


@call_transform("summary-writer")
def summary_writer(m, ctx):
    """``tf.summary.create_file_writer(logdir, ...)`` → ``SummaryWriter(logdir, ...)`` from
    torch.utils.tensorboard (a submodule ``import torch`` does not load: imported by name);
    ``flush_millis`` → ``flush_secs`` (seconds). Both write TensorBoard event files into the folder."""
    millis = m.kwargs.pop("flush_millis", None)
    if millis is not None:
        lit = literal_value(millis, NOT_LITERAL)
        m.kwargs["flush_secs"] = (cst.parse_expression(repr(lit / 1000)) if isinstance(lit, (int, float))
                                  and not isinstance(lit, bool) else cst.parse_expression(
                                      f"({cst.Module([]).code_for_node(millis)}) / 1000"))
    ctx.needed_imports.add("from torch.utils.tensorboard import SummaryWriter")
    return build_call(m, ctx, target="SummaryWriter")


#: tf.print(output_stream=...) values that are Python's own streams
_STREAMS = ("sys.stderr", "sys.stdout")


@call_transform("tf-print")
def tf_print(m, ctx):
    """``tf.print(*inputs, sep=, end=, output_stream=)`` → ``print(*inputs, sep=, end=, file=)``: TensorFlow
    prints to standard error unless ``output_stream`` says otherwise, so ``file=sys.stderr`` is written
    then; a tensor prints as torch formats it (``tensor([...])``, not NumPy's ``[...]``). ``summarize``
    (how many elements per axis) has no print counterpart and is dropped; a log function or a
    ``file://`` path as the stream is refused."""
    stream = m.kwargs.pop("output_stream", None)
    summarize = m.kwargs.pop("summarize", None)
    m.kwargs.pop("name", None)
    unknown = sorted(set(m.kwargs) - {"sep", "end"})
    if unknown:
        m.fail(ctx, "unsupported-argument", f"tf.print got {', '.join(unknown)}, which print has no counterpart of")
        return None
    if stream is None:
        stream = cst.parse_expression(ctx.spell_text("sys.stderr"))
    elif ctx.imports.resolve(stream) not in _STREAMS:
        m.fail(ctx, "unsupported-argument", f"output_stream={code(stream)}: only sys.stderr "
               "and sys.stdout have a print counterpart (file=); log with the logging call itself, or open the "
               "file and print(..., file=f)")
        return None
    if summarize is not None:
        ctx.report("info", "dropped-argument", "summarize dropped: print shows a torch tensor whole up to 1000 "
                   "elements (torch.set_printoptions(threshold=...) sets it)", m.node, m.rule)
    m.kwargs["file"] = stream
    return cst.Call(cst.Name("print"), [cst.Arg(v) for v in m.bound.varargs]
                    + [cst.Arg(v, keyword=cst.Name(k), equal=cst.AssignEqual(
                        cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))) for k, v in m.kwargs.items()])


#: names Keras gives its own objects (to_snake_case of their classes) that the file's text need not spell
_KERAS_AUTO_NAMES = {"functional", "sequential", "input_layer", "input", "model", "variable", "seed_generator",
                     "operation", "layer", "lambda", "tf_op_lambda", "tf_op_layer", "keras_tensor", "node"}


def _snake_case(name: str) -> str:
    """Keras's to_snake_case (keras/src/utils/naming.py): how it names an object of class ``name``."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


class _Names(cst.CSTVisitor):
    def __init__(self):
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def _identifiers(ctx) -> set[str]:
    """Every identifier the source file spells (names, attributes, parameters, classes), once per file."""
    if "get_uid_names" not in ctx.analyses:
        visitor = _Names()
        tree = (ctx.analyses.get("parsed") or (None, ""))[0]
        if tree is not None:
            scan(tree, visitor)
        ctx.analyses["get_uid_names"] = visitor.names
    return ctx.analyses["get_uid_names"]


@call_transform("get-uid")
def get_uid(m, ctx):
    """``keras.backend.get_uid(prefix)``: Keras's counter per prefix (1, 2, 3 ... for the calls with one prefix)
    → ``get_uid(prefix)``, a helper written into the file that counts the same way. Keras shares the counter with
    the names it gives its own objects (a Dense built without a name advances "dense") and clear_session resets
    it: exact where the prefix is a string literal that no object of the file can be named by (no identifier of
    the file is spelled so, nor is it its snake_case, nor one of Keras's own object names) and the file resets
    nothing; else an error."""
    prefix = m.kwargs.get("prefix")
    lit = "" if prefix is None else literal_value(prefix, NOT_LITERAL)
    if not isinstance(lit, str):
        m.fail(ctx, "unsupported-argument", f"prefix={m.written('prefix')}: Keras also counts the names it gives its "
               "own objects under a prefix; fwport counts only a string literal that none of them can take")
        return None
    words = _identifiers(ctx)
    if words & {"clear_session", "reset_uids"}:
        m.fail(ctx, "unsupported-argument", "the file resets Keras's counters (clear_session / reset_uids): the "
               "helper would go on counting")
        return None
    if lit and (lit in _KERAS_AUTO_NAMES or lit in words or lit in {_snake_case(w) for w in words if w[:1].isupper()}):
        m.fail(ctx, "unsupported-argument", f"prefix {lit!r}: Keras also advances this counter when it names an "
               f"object {lit!r} (a layer, model or op of that class built without a name): the counts can differ")
        return None
    return cst.parse_expression(f"{_helpers.use(ctx, 'get_uid')}({'' if prefix is None else code(prefix)})")
