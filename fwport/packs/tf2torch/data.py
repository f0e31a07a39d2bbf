"""Call transforms for Keras's data utilities and tf.data (keras.datasets, pad_sequences, get_file,
to_categorical, image loading, tf.data.Dataset): each becomes a call of a helper written into the
output file (datahelpers.py), which keeps the Keras / TensorFlow semantics in numpy / torch code."""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, bind_call, literal_value
from fwport.core.engine import build_call, code
from fwport.core.names import ValueVisitor, dotted, scan
from fwport.packs.tf2torch import helpers
from fwport.packs.tf2torch.registry import call_transform
from fwport.packs.tf2torch.values import torch_dtype


def _options(m) -> dict:
    return m.rule.emit.get("options", {})


@call_transform("helper")
def helper(m, ctx):
    """``<helper>(arguments...)``: a helper of datahelpers.py named by the rule's target, written into
    the file. Options: ``keras2_kwargs``, keywords (Python text) added for Keras 2 code when the call
    does not give them (a Keras 2 default the helper does not have); ``method``, the helper's static
    method to call (``DataPipeline.from_tensor_slices``)."""
    opts = _options(m)
    name = helpers.use(ctx, m.rule.emit["target"])
    if ctx.version == 2:
        for k, v in opts.get("keras2_kwargs", {}).items():
            m.kwargs.setdefault(k, cst.parse_expression(v))
    out = build_call(m, ctx, target=name)
    if out is not None and opts.get("method"):  # a static method of the helper class (no import to add)
        out = out.with_changes(func=cst.Attribute(cst.Name(name), cst.Name(opts["method"])))
    return out


@call_transform("from-generator")
def from_generator(m, ctx):
    """tf.data.Dataset.from_generator → ``DataPipeline.from_generator`` (the helper); an output_signature of
    tf.TensorSpec objects, which the tensor_specs planner (specs.py) made the structure of their dtypes, is given as
    output_types (the elements converted to them, as TensorFlow converts them); any other signature is refused."""
    from fwport.packs.tf2torch.specs import approved
    sig = m.kwargs.pop("output_signature", None)
    if sig is not None:
        if "output_types" in m.kwargs or not approved(sig, ctx):
            m.fail(ctx, "unsupported-argument", f"output_signature={m.written('output_signature')}: only "
                   "tf.TensorSpec objects (or a tuple / list / dict of them) written in the call, or bound to a name "
                   "read only as output_signature, are translated (to their dtypes): give the element dtypes as "
                   "output_types=(tf.float32, tf.int64)")
            return None
        m.kwargs["output_types"] = sig
    return helper(m, ctx)


@call_transform("numpy-function")
def numpy_function(m, ctx):
    """tf.numpy_function → the ``numpy_function`` helper. A Tout list (or tuple) of ONE dtype gives one tensor
    when TensorFlow runs the call eagerly but a list of one inside a tf.function or a tf.data map: which one a
    call is fwport cannot tell, so that form is refused (a single dtype, or two or more, mean one thing)."""
    tout = m.kwargs.get("Tout")
    if isinstance(tout, (cst.List, cst.Tuple)) and len(tout.elements) == 1:
        m.fail(ctx, "unsupported-argument",
               f"Tout={m.written('Tout')}: a list of one dtype gives one tensor when TensorFlow runs the call eagerly "
               "but a list of one tensor inside a tf.function or a tf.data map, and fwport cannot tell which this "
               "call is: write Tout as the single dtype (one tensor) and wrap the result in a list where the code "
               "needs one")
        return None
    return helper(m, ctx)


@call_transform("map-fn")
def map_fn(m, ctx):
    """tf.map_fn(fn, elems, dtype= / fn_output_signature=) → ``map_fn(fn, elems[, dtype=])`` (the helper); an
    output signature other than a dtype (a tf.TensorSpec, a structure) is refused."""
    for name in ("elems", "dtype"):
        if isinstance(m.kwargs.get(name), (cst.Tuple, cst.List, cst.Dict)):
            m.fail(ctx, "unsupported-argument", f"{name}={m.written(name)}: TensorFlow's nested form of map_fn (a "
                   "structure of tensors sliced together, or results that are one) is not translated: loop over "
                   "the first axis by hand (torch.stack of the results of each slice)")
            return None
    sig = m.kwargs.pop("fn_output_signature", None)
    if sig is not None:
        if "dtype" in m.kwargs or not code(sig).startswith("torch."):
            m.fail(ctx, "unsupported-argument", f"fn_output_signature={m.written('fn_output_signature')}: only a "
                   "dtype (and not together with dtype=) is translated; nested or TensorSpec signatures are not")
            return None
        m.kwargs["dtype"] = sig
    return helper(m, ctx)


@call_transform("get-file")
def get_file(m, ctx):
    """keras.utils.get_file → the ``get_file`` helper (torch.hub's downloader); Keras 2 extracts next to
    the archive and returns the archive's path, Keras 3 returns the folder it extracted into, so a Keras 2
    call that extracts passes ``keras2=True``."""
    if ctx.version == 2 and any(literal_value(m.kwargs[k], NOT_LITERAL) is not False
                                for k in ("untar", "extract") if k in m.kwargs):
        m.kwargs["keras2"] = cst.Name("True")
    return helper(m, ctx)


@call_transform("image-dataset")
def image_dataset(m, ctx):
    """image_dataset_from_directory → its helper; a warning states that JPEG files decode a few levels
    apart from TensorFlow's decoder (PNG, BMP and GIF give the same pixels)."""
    ctx.report("warning", "approximate", "images decode with PIL: JPEG files up to a few levels apart from "
               "TensorFlow's decoder (4 of 255 measured), color images read as grayscale up to 1 level apart (a "
               "rounded luma formula); PNG, BMP and GIF in their own mode decode to the same pixels, and the "
               "bilinear resize agrees within 5e-4", m.node, m.rule)
    return helper(m, ctx)


@call_transform("imagenet-preprocess")
def imagenet_preprocess(m, ctx):
    """keras.applications.<model>.preprocess_input(x) → ``imagenet_preprocess(x, "<mode>")`` (the helper), the
    model's mode the rule's ``mode`` option; imagenet_utils.preprocess_input's own ``mode=`` a literal "caffe",
    "tf" or "torch" (a value is refused). Mode ``none`` (EfficientNet, ConvNeXt, MobileNetV3: Keras returns its
    input, the models rescale inside) → the argument itself, with an info finding."""
    mode = _options(m).get("mode")
    x = m.kwargs.pop("x", None)
    if x is None:
        m.fail(ctx, "unsupported-construct", f"{m.rule.names[0]}: x is required")
        return None
    if mode == "none":
        ctx.report("info", "idiom-replaced", f"{m.rule.names[0]}(x) returns x unchanged (the model scales its "
                   "inputs itself): the translation is x", m.node, m.rule)
        return x
    if mode is None:
        mode = literal_value(m.kwargs.pop("mode"), NOT_LITERAL) if "mode" in m.kwargs else "caffe"
        if mode not in ("caffe", "tf", "torch"):
            m.fail(ctx, "unsupported-argument", f"mode={m.written('mode')}: only a literal \"caffe\", \"tf\" or "
                   "\"torch\" is translated")
            return None
    m.kwargs = {"x": x, "mode": cst.SimpleString(f'"{mode}"'), **m.kwargs}
    return helper(m, ctx)


@call_transform("tfa-image-transform")
def tfa_image_transform(m, ctx):
    """tfa.image.transform / rotate / translate → the projective_transform / rotate_images / translate_images
    helpers (TensorFlow's ImageProjectiveTransformV3 computed with torch). interpolation must be a literal
    "nearest" or "bilinear" (any case, as tfa's upper() allows), fill_mode a literal "constant" or "nearest": the
    helper's sampler is TensorFlow's for those; "reflect" and "wrap" are refused."""
    for name, allowed, default in (("interpolation", ("nearest", "bilinear"), "nearest"),
                                   ("fill_mode", ("constant", "nearest"), "constant")):
        value = literal_value(m.kwargs[name], NOT_LITERAL) if name in m.kwargs else default
        if not isinstance(value, str) or value.lower() not in allowed:
            m.fail(ctx, "unsupported-argument", f"{name}={m.written(name)}: only a literal "
                   + " or ".join(f'"{a}"' for a in allowed) + " is translated (the helper samples as TensorFlow "
                   "does for those)")
            return None
        if name in m.kwargs:
            m.kwargs[name] = cst.SimpleString(f'"{value.lower()}"')
    if literal_value(m.kwargs.get("output_shape", cst.Name("None")), NOT_LITERAL) is not None:
        m.fail(ctx, "unsupported-argument", f"output_shape={m.written('output_shape')}: an output of another size "
               "than the input is not translated")
        return None
    m.kwargs.pop("output_shape", None)
    return helper(m, ctx)


@call_transform("clear-session")
def clear_session(m, ctx):
    """keras.backend.clear_session() resets Keras's global state (the graph, layer name counters) and
    frees memory; torch keeps no global model state, so what is left is freeing memory: gc.collect()."""
    ctx.report("info", "idiom-replaced", f"{m.rule.names[0]}() resets Keras's global state; torch has none: "
               "gc.collect() frees the memory of objects no longer referenced", m.node, m.rule)
    return cst.parse_expression(ctx.spell_text("gc.collect") + "()")


class _NameUses(ValueVisitor):
    """How many times each of ``names`` is read (`x.mnist` and `f(mnist=...)` do not read mnist)."""

    def __init__(self, names: set[str]):
        self.names = names
        self.count: dict[str, int] = {}

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.count[node.value] = self.count.get(node.value, 0) + 1


def _alias_target(stmt: cst.CSTNode, ctx) -> str | None:
    """``X`` when ``stmt`` is a module-level ``X = <source module>`` alias (``mnist = tf.keras.datasets.mnist``)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
        return None
    node = stmt.body[0]
    if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
        return None
    name = node.targets[0].target.value
    alias = ctx.imports.aliases.get(name)
    parts = dotted(node.value)
    if alias is None or not parts or not ctx.imports.is_source(alias) or ctx.imports.resolve_parts(parts) != alias:
        return None
    return name


def finish_aliases(module: cst.Module, ctx) -> cst.Module:
    """Module-level aliases of source modules (``mnist = tf.keras.datasets.mnist``, ``L = keras.layers``)
    that nothing uses any more once their uses were translated are removed, like an unused import."""
    found = {id(st): name for st in module.body if (name := _alias_target(st, ctx)) is not None}
    if not found:
        return module
    uses = _NameUses(set(found.values()))
    scan(module, uses)
    body = list(module.body)
    out: list[cst.CSTNode] = []
    carried: list[cst.EmptyLine] = []
    for st in body:
        name = found.get(id(st))
        if name is not None and uses.count.get(name, 0) <= 1:  # only its own target
            carried += [ln for ln in st.leading_lines if ln.comment is not None]
            continue
        if carried:
            st = st.with_changes(leading_lines=[*carried, *st.leading_lines])
            carried = []
        out.append(st)
    return module.with_changes(body=out) if len(out) != len(body) else module


_SEQUENCES = ("keras.utils.Sequence", "keras.utils.PyDataset")


def run_sequences(module: cst.Module, ctx) -> cst.Module:
    """Read-only: a keras.utils.Sequence subclass becomes a torch Dataset by its rule (keras-sequence);
    what torch does not do with it is said here. Keras calls on_epoch_end() after every epoch (to
    reshuffle, typically); a DataLoader never does."""
    for st in module.body:
        if not isinstance(st, cst.ClassDef):
            continue
        bases = [ctx.imports.resolve_parts(parts) for a in st.bases if (parts := dotted(a.value))]
        if not any(b in _SEQUENCES for b in bases):
            continue
        for item in st.body.body:
            if isinstance(item, cst.FunctionDef) and item.name.value == "on_epoch_end":
                ctx.report("warning", "approximate", f"{st.name.value}.on_epoch_end(): Keras calls it after "
                           "every epoch; a torch DataLoader never does: call it at the end of each epoch of the "
                           "training loop, or the batches keep their first order", item)
    return module


@call_transform("read-file")
def read_file(m, ctx):
    """``tf.io.read_file(path)`` → ``pathlib.Path(path).read_bytes()``: the file's bytes, which is what
    TensorFlow's scalar string tensor holds (its decoders, tf.io.decode_* → the decode_image helper,
    take them as they are)."""
    path = m.kwargs.get("filename")
    if path is None:
        return None
    from fwport.core.position import render
    return cst.parse_expression(f"{ctx.spell_text('pathlib.Path')}({render(path)}).read_bytes()")


#: what each decoder's dtype may be: TensorFlow's name → the helper's float32 flag
_DECODE_DTYPES = {None: False, "tensorflow.uint8": False, "tensorflow.float32": True}


@call_transform("decode-image")
def decode_image(m, ctx):
    """``tf.io.decode_jpeg / decode_png / decode_image(contents, channels, ...)`` → the decode_image helper
    (PIL; datahelpers.py): a (height, width, channels) uint8 tensor as TensorFlow's decoders give it.
    ``emit.options.format``: "jpeg" / "png" / "any" (decode_image: the file says). JPEG files decode a few
    levels apart from TensorFlow's libjpeg settings, and a colour image made grayscale (channels=1) may
    be one level apart (the luma formula's rounding): an ``approximate`` warning says so where it
    applies; PNG, BMP and GIF in their own channels decode to the same pixels."""
    fmt = m.rule.emit["options"]["format"]
    kwargs = dict(m.kwargs)
    original = m.node if isinstance(m.node, cst.Call) else m.call  # the call as written (tf.float32, not torch's)
    dtype = bind_call(original, m.rule).values.get("dtype")
    name = None if dtype is None else (ctx.imports.resolve(dtype) or "?")
    if name not in _DECODE_DTYPES:
        m.fail(ctx, "unsupported-argument", f"dtype={m.written('dtype')}: the helper decodes to uint8 (the "
               "default) or float32 scaled to [0, 1]; for 16-bit PNG files decode with PIL yourself")
        return None
    kwargs.pop("dtype", None)
    if _DECODE_DTYPES[name]:
        kwargs["float32"] = cst.Name("True")
    if "channels" in kwargs and literal_value(kwargs["channels"], NOT_LITERAL) is None:
        kwargs.pop("channels")  # decode_image's channels=None: as in the file
    gray = "channels" in kwargs and literal_value(kwargs["channels"], NOT_LITERAL) in (1, NOT_LITERAL)
    if fmt in ("jpeg", "any") or gray:
        what = []
        if fmt in ("jpeg", "any"):
            what.append("JPEG files decode with PIL up to a few levels apart from TensorFlow's decoder (4 of 255 "
                        "measured; PNG, BMP and GIF give the same pixels)")
        if gray:
            what.append("a colour image made grayscale (channels=1) may be 1 level apart (the luma formula's "
                        "rounding)")
        ctx.report("warning", "approximate", "; ".join(what), m.node, m.rule)
    m.kwargs = kwargs
    return build_call(m, ctx, target=helpers.use(ctx, "decode_image"))


@call_transform("timeseries")
def timeseries(m, ctx):
    """keras.utils.timeseries_dataset_from_array → its helper (a DataPipeline of windows); a shuffle other
    than the literal False gets a warning: the window starts are shuffled by numpy as Keras does, but the
    buffer shuffle after it draws from torch's generator, not TensorFlow's."""
    shuffle = m.kwargs.get("shuffle")
    if shuffle is not None and literal_value(shuffle, NOT_LITERAL) is not False:
        ctx.report("warning", "approximate", "shuffle: the same windows in another order (Keras shuffles the "
                   "window starts with numpy, which the helper does with the same seed, then within a buffer with "
                   "TensorFlow's generator, which the helper does with torch's)", m.node, m.rule)
    return helper(m, ctx)


@call_transform("cardinality")
def cardinality(m, ctx):
    """``tf.data.experimental.cardinality(ds)`` → ``torch.tensor(ds.cardinality())``: the DataPipeline's
    number of elements, -1 infinite, -2 unknown, as TensorFlow's int64 scalar tensor (``.numpy()`` and
    arithmetic keep working)."""
    from fwport.packs.tf2torch.optim import _atom_text
    ds = m.kwargs.get("dataset")
    if ds is None:
        return None
    return cst.parse_expression(f"{ctx.spell_text('torch.tensor')}({_atom_text(ds)}.cardinality())")


@call_transform("vocabulary-layer")
def vocabulary_layer(m, ctx):
    """TextVectorization / StringLookup / IntegerLookup → the helper class of the same name (texthelpers.py).
    Option ``values``: for each argument, the values the helper writes; another literal value, or one fwport
    cannot read (a function, a variable), is refused with the argument named."""
    for name, allowed in _options(m).get("values", {}).items():
        if name not in m.kwargs:
            continue
        value = m.literal(name)
        if value is NOT_LITERAL or value not in allowed:
            m.fail(ctx, "unsupported-argument",
                   f"{name}={m.written(name)}: the written {m.rule.emit['target']} takes "
                   f"{' / '.join(repr(v) for v in allowed)} here (a value fwport can read): write the "
                   "vocabulary code by hand for this one")
            return None
    return helper(m, ctx)


@call_transform("record-feature")
def record_feature(m, ctx):
    """tf.io.FixedLenFeature / VarLenFeature → the helper class of the same name (recordhelpers.py); the dtype
    becomes torch.int64 / torch.float32 (translated already), or ``bytes`` for tf.string, whose values stay
    Python bytes."""
    value = m.kwargs.get("dtype")
    if value is not None:
        lit = literal_value(value, NOT_LITERAL)
        q = None if isinstance(lit, str) else ctx.imports.resolve(value)
        if lit == "string" or q in ("tensorflow.string", "tensorflow.dtypes.string"):
            m.kwargs["dtype"] = cst.Name("bytes")
        else:
            out = torch_dtype(value, m, ctx)
            if out is None:
                return None
            m.kwargs["dtype"] = out
    return helper(m, ctx)
