"""Saving and checkpoints: tf.train.Checkpoint / CheckpointManager / latest_checkpoint as helpers written
into the output (torch.save of the objects' state_dicts, one file per checkpoint), and the call transform
``refuse`` for what has no exact PyTorch counterpart (tf.saved_model: an error saying what to write).

Keras's model methods (``model.save_weights`` / ``load_weights`` / ``save``) are translated by the
model_api pass (passes/model_api.py), ``keras.models.load_model`` / ``save_model`` by their rules.

The helpers keep TensorFlow's file naming and bookkeeping, so code that prints, compares or passes the
paths around keeps working: ``save(prefix)`` writes ``prefix-N`` (N: the checkpoint's save counter,
saved with it), a manager writes ``<directory>/ckpt-N`` and keeps the last ``max_to_keep``, and both
record the latest path in the folder's ``checkpoint`` file (TensorFlow's text format), which
``latest_checkpoint(directory)`` reads. Each checkpoint is one file (``torch.save`` of a dict), not
TensorFlow's ``.index`` + ``.data`` pair; ``torch.load`` reads it with its default ``weights_only=True``
(state_dicts are tensors, numbers and containers). Restoring is immediate, not deferred as in TensorFlow:
the objects must exist (and a lazy module be built) when ``restore`` is called.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import build_call
from fwport.core.names import find_all
from fwport.core.position import render
from fwport.packs.tf2torch.registry import call_transform

_CHECKPOINT = '''

class Checkpoint:
    """tf.train.Checkpoint over torch: the objects given by name (modules, optimizers, schedulers: their
    state_dict(); tensors: their values; lists and dicts of those), saved together in one file with
    torch.save. save(prefix) writes prefix-1, prefix-2, ... (the save counter, saved too) and records the
    latest in the folder's "checkpoint" file (latest_checkpoint reads it); restore(path) puts every saved
    value back in place (load_state_dict, tensor.copy_) and returns a status with TensorFlow's checks."""

    def __init__(self, **objects):
        self.__dict__["_objects"] = dict(objects)
        self.__dict__["save_counter"] = 0

    def __getattr__(self, name):
        try:
            return self.__dict__["_objects"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        if name == "save_counter":
            self.__dict__[name] = int(value)
        else:
            self._objects[name] = value  # tracked, as TensorFlow tracks an attribute set on a checkpoint

    @staticmethod
    def _state(obj, name):
        if isinstance(obj, {torch}Tensor):
            return obj.detach().clone()
        if isinstance(obj, (list, tuple)):
            return [Checkpoint._state(o, f"{name}[{i}]") for i, o in enumerate(obj)]
        if isinstance(obj, dict):
            return {k: Checkpoint._state(o, f"{name}[{k!r}]") for k, o in obj.items()}
        if hasattr(obj, "state_dict"):
            return obj.state_dict()
        raise TypeError(f"Checkpoint cannot save {name}: a {type(obj).__name__} has no state_dict()")

    @staticmethod
    def _load(obj, state):
        if isinstance(obj, {torch}Tensor):
            with {torch}no_grad():
                obj.copy_(state)
        elif isinstance(obj, (list, tuple)):
            for o, s in zip(obj, state, strict=True):
                Checkpoint._load(o, s)
        elif isinstance(obj, dict):
            for k, o in obj.items():
                Checkpoint._load(o, state[k])
        else:
            obj.load_state_dict(state)

    def write(self, file_path):
        """Save every object to file_path (no counter, no record in the folder)."""
        file_path = {os}fspath(file_path)
        {os}makedirs({os}path.dirname(file_path) or ".", exist_ok=True)
        state = {name: self._state(obj, name) for name, obj in self._objects.items()}
        {torch}save({"save_counter": self.save_counter, "objects": state}, file_path)
        return file_path

    def save(self, file_prefix):
        """Save to file_prefix-N (N: the save counter after adding one) and record it as the latest."""
        self.save_counter += 1
        path = self.write(f"{{os}fspath(file_prefix)}-{self.save_counter}")
        directory = {os}path.dirname(path) or "."
        _, paths = Checkpoint._read_record(directory)
        Checkpoint._write_record(directory, [p for p in paths if p != path] + [path])
        return path

    def restore(self, save_path):
        """Put the saved values back into the objects; None (no checkpoint yet) restores nothing."""
        if save_path is None:
            return CheckpointLoadStatus(None, set(), set(self._objects))
        saved = {torch}load({os}fspath(save_path))
        self.save_counter = saved["save_counter"]
        objects = saved["objects"]
        for name, obj in self._objects.items():
            if name in objects:
                self._load(obj, objects[name])
        return CheckpointLoadStatus(save_path, set(objects) - set(self._objects), set(self._objects) - set(objects))

    read = restore

    @staticmethod
    def _read_record(directory):
        """(latest path, every recorded path) of the folder's "checkpoint" file ((None, []) without one)."""
        record = {os}path.join(directory, "checkpoint")
        if not {os}path.exists(record):
            return None, []
        latest, paths = None, []
        with open(record) as f:
            for line in f:
                key, _, value = line.partition(":")
                value = value.strip().strip('"')
                value = value if {os}path.isabs(value) else {os}path.join(directory, value)
                if key.strip() == "model_checkpoint_path":
                    latest = value
                elif key.strip() == "all_model_checkpoint_paths":
                    paths.append(value)
        return latest, paths

    @staticmethod
    def _write_record(directory, paths):
        """Record paths (the last one the latest) in the folder's "checkpoint" file, relative to it."""
        names = [{os}path.relpath(p, directory) for p in paths]
        with open({os}path.join(directory, "checkpoint"), "w") as f:
            f.write(f'model_checkpoint_path: "{names[-1]}"\\n')
            f.writelines(f'all_model_checkpoint_paths: "{n}"\\n' for n in names)


class CheckpointLoadStatus:
    """What Checkpoint.restore returns: TensorFlow's checks on what was restored."""

    def __init__(self, path, unused, missing):
        self.path, self.unused, self.missing = path, unused, missing

    def assert_consumed(self):
        """Every saved value went to an object, and every object got one."""
        if self.path is None:
            raise AssertionError("no checkpoint was restored (the path was None)")
        if self.unused or self.missing:
            raise AssertionError(f"checkpoint {self.path}: saved but not restored {sorted(self.unused)}, "
                                 f"objects not in it {sorted(self.missing)}")
        return self

    def assert_existing_objects_matched(self):
        """Every object got a saved value."""
        if self.path is not None and self.missing:
            raise AssertionError(f"checkpoint {self.path} has no value for {sorted(self.missing)}")
        return self

    def assert_nontrivial_match(self):
        if self.path is None:
            raise AssertionError("no checkpoint was restored (the path was None)")
        return self

    def expect_partial(self):
        return self
'''

_MANAGER = '''

class CheckpointManager:
    """tf.train.CheckpointManager over the Checkpoint helper: save() writes <directory>/<checkpoint_name>-N
    (N: checkpoint_number, else the checkpoint's save counter after adding one), keeps the last max_to_keep
    (None: all) and deletes older ones, and records them in the folder's "checkpoint" file; checkpoints and
    latest_checkpoint start from what that file records (a run that continues an earlier one)."""

    def __init__(self, checkpoint, directory, max_to_keep, checkpoint_name="ckpt"):
        self._checkpoint = checkpoint
        self._directory = {os}fspath(directory)
        self._max_to_keep = max_to_keep
        self._prefix = {os}path.join(self._directory, checkpoint_name)
        _, paths = Checkpoint._read_record(self._directory)
        self._paths = [p for p in paths if {os}path.exists(p)]

    @property
    def directory(self):
        return self._directory

    @property
    def checkpoints(self):
        return list(self._paths)

    @property
    def latest_checkpoint(self):
        return self._paths[-1] if self._paths else None

    def save(self, checkpoint_number=None):
        self._checkpoint.save_counter += 1
        number = self._checkpoint.save_counter if checkpoint_number is None else int(checkpoint_number)
        path = self._checkpoint.write(f"{self._prefix}-{number}")
        self._paths = [p for p in self._paths if p != path] + [path]
        while self._max_to_keep is not None and len(self._paths) > self._max_to_keep:
            old = self._paths.pop(0)
            if {os}path.exists(old):
                {os}remove(old)
        Checkpoint._write_record(self._directory, self._paths)
        return path

    def restore_or_initialize(self):
        """Restore the latest checkpoint and return its path, or None when there is none."""
        if self.latest_checkpoint is None:
            return None
        self._checkpoint.restore(self.latest_checkpoint)
        return self.latest_checkpoint
'''

_LATEST = '''

def latest_checkpoint(checkpoint_dir):
    """tf.train.latest_checkpoint: the path the folder's "checkpoint" file records as the latest (written
    by Checkpoint.save / CheckpointManager.save), or None when there is none or its file is gone."""
    record = {os}path.join(checkpoint_dir, "checkpoint")
    if not {os}path.exists(record):
        return None
    with open(record) as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model_checkpoint_path":
                value = value.strip().strip('"')
                path = value if {os}path.isabs(value) else {os}path.join(checkpoint_dir, value)
                return path if {os}path.exists(path) else None
    return None
'''

_LOAD_CHECKPOINTED = '''

def load_checkpointed(model, filepath):
    """keras.models.load_model of the file a ModelCheckpoint of `model` wrote: the written ModelCheckpoint saves
    the model's state_dict, so the model comes back as a copy of the one it checkpointed (its class and layers)
    holding the file's weights; load_state_dict refuses a file of another architecture."""
    loaded = {copy}deepcopy(model)
    loaded.load_state_dict({torch}load(filepath))
    return loaded
'''

#: helper name → its text ({torch} / {os}: spelled by helpers.py, the imports recorded)
SAVING_HELPERS = {"Checkpoint": _CHECKPOINT, "CheckpointManager": _MANAGER, "latest_checkpoint": _LATEST,
                  "load_checkpointed": _LOAD_CHECKPOINTED}
#: helpers that use another one
SAVING_DEPS = {"CheckpointManager": ("Checkpoint",)}


@call_transform("refuse")
def refuse(m, ctx):
    """An API with no exact PyTorch counterpart: an error whose message (``emit.options.message``) says
    what to write instead; the call stays as written."""
    m.fail(ctx, "unsupported-construct", m.rule.emit.get("options", {})["message"])
    return None


@call_transform("load-model")
def load_model(m, ctx):
    """keras.models.load_model(path) → ``torch.load(path, weights_only=False)``: the whole module that
    ``model.save(path)`` / ``save_model`` pickled (torch.save of the module). ``weights_only=False``
    because the file holds a module, not only tensors: pickle runs code, so load only files you trust."""
    paired = _checkpointed(m, ctx)
    if paired is not None:
        model, filepath = paired
        if model is None:
            m.fail(ctx, "unsupported-construct",
                   f"{m.rule.names[0]}({render(filepath)}) of the file a keras.callbacks.ModelCheckpoint writes: the "
                   "written ModelCheckpoint saves the model's state_dict (its weights), not a model, and fwport does "
                   "not know which model it checkpoints here: build that model again and load the file into it, "
                   "model.load_state_dict(torch.load(path))")
            return None
        from fwport.packs.tf2torch import helpers
        ctx.report("info", "idiom-replaced", f"{m.rule.names[0]}({render(filepath)}) of the file "
                   f"ModelCheckpoint writes for {model}.fit: load_checkpointed({model}, path), a copy of {model} "
                   "holding the state_dict the checkpoint saved", m.node, m.rule)
        return cst.Call(cst.Name(helpers.use(ctx, "load_checkpointed")),
                        [cst.Arg(cst.Name(model), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                         cst.Arg(filepath)])
    out = build_call(m, ctx, target=m.rule.emit["target"])
    if out is None:
        return None
    ctx.report("info", "idiom-replaced", f"{m.rule.names[0]}(path) → torch.load(path, weights_only=False): the "
               "module torch.save(model, path) pickled (what model.save(path) becomes); the class it was made "
               "from must be defined or importable here, and unpickling runs code, so load only files you trust. A "
               "file written by Keras is not readable: rebuild the model in code and convert its weights with "
               "`fwport weights`", m.node, m.rule)
    return out.with_changes(args=[*out.args[:-1], out.args[-1].with_changes(comma=cst.Comma(
        whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(cst.Name("False"), keyword=cst.Name("weights_only"),
                                                              equal=cst.AssignEqual(cst.SimpleWhitespace(""),
                                                                                    cst.SimpleWhitespace("")))])


def _path_key(node) -> str | None:
    """A checkpoint's or load_model's path as fwport can compare it: a string literal's value, a name's text."""
    if isinstance(node, cst.SimpleString):
        return "str:" + node.evaluated_value if isinstance(node.evaluated_value, str) else None
    if isinstance(node, cst.Name):
        return "name:" + node.value
    return None


def _argument(call: cst.Call, name: str, position: int):
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return positional[position].value if len(positional) > position else None


def _checkpointed(m, ctx):
    """:func:`checkpointed` of the rule's call: (the model name or None, path node), None where no checkpoint writes
    its path."""
    found = checkpointed(m.node, ctx)
    return None if found is None else found[:2]


def checkpointed(node: cst.Call, ctx, module: cst.Module | None = None):
    """keras.models.load_model(path) where a keras.callbacks.ModelCheckpoint of the file writes ``path`` (the same
    string literal or name) with its default save_weights_only=False (Keras then saves the whole model, the
    translation the state_dict): None where none does; else (the model name, path node): the model is the receiver
    of the last fit call before the load, in load_model's function (or the module), whose callbacks hold the last such
    checkpoint before the load there (the call in its list, or a name bound to it or to a list of it after it and not
    bound again since), None where fwport cannot tell; a third element, that fit call (None with the model).
    ``module``: the tree ``node`` belongs to (the parsed one by default; the training pass gives its own)."""
    from fwport.core.bind import NOT_LITERAL, literal_value
    parsed = ctx.analyses.get("parsed")
    filepath = _argument(node, "filepath", 0)
    if filepath is None:
        filepath = _argument(node, "path", 0)
    key = _path_key(filepath) if filepath is not None else None
    if module is None and parsed is not None:
        module = parsed[0]
    if module is None or key is None:
        return None
    # Keras's, or the class fwport wrote for it (a translation translated again: the same answer)
    written = any(isinstance(c, cst.ClassDef) and c.name.value == "ModelCheckpoint" for c in module.body)
    checkpoints = [c for c in find_all(module, cst.Call) if ctx.imports.resolve(c.func) ==
                   "keras.callbacks.ModelCheckpoint" or (written and isinstance(c.func, cst.Name)
                                                         and c.func.value == "ModelCheckpoint")]
    ours = []
    for c in checkpoints:
        path = _argument(c, "filepath", 0)
        weights_only = _argument(c, "save_weights_only", 4)
        if path is None or _path_key(path) != key:
            continue
        if weights_only is not None and literal_value(weights_only, NOT_LITERAL) is not False:
            continue  # a weights file (or one fwport cannot tell): Keras's load_model would not read it either
        ours.append(c)
    if not ours:
        return None
    scope = _enclosing(module, node)
    body = scope if scope is not None else module
    # source order: each call's index among the module's calls (an assignment's: the first call in its value)
    order = {id(c): i for i, c in enumerate(find_all(module, cst.Call))}
    at = order.get(id(node))
    before = [c for c in ours if at is not None and order[id(c)] < at and _enclosing(module, c) is scope]
    if not before:
        return None, filepath, None
    checkpoint = before[-1]  # the checkpoint that wrote the file last before the load
    start = order[id(checkpoint)]
    # the names bound to it (or to a list holding it) in the scope, and where each is bound again after it
    holders: set[str] = set()
    rebound: dict[str, list[int]] = {}
    for a in find_all(body, cst.Assign):
        if len(a.targets) != 1 or not isinstance(a.targets[0].target, cst.Name):
            continue
        name = a.targets[0].target.value
        if any(n is checkpoint for n in _elements(a.value)):
            holders.add(name)
        else:
            first = next((order[id(c)] for c in find_all(a.value, cst.Call) if id(c) in order), None)
            if first is not None:
                rebound.setdefault(name, []).append(first)
    model = fit = None
    for call in find_all(body, cst.Call):
        where = order.get(id(call), -1)
        if not (where < at and isinstance(call.func, cst.Attribute) and call.func.attr.value == "fit"
                and _enclosing(module, call) is scope):
            continue
        given = _argument(call, "callbacks", 99)
        if given is None:
            continue
        held = [n for n in _elements(given) if isinstance(n, cst.Name) and n.value in holders and start < where
                and not any(start < r < where for r in rebound.get(n.value, ()))]
        if any(n is checkpoint for n in _elements(given)) or held:  # (a checkpoint in the fit's list: inside it)
            model, fit = call.func.value, call  # the last fit with it before the load
    if isinstance(model, cst.Name):
        return model.value, filepath, fit
    return None, filepath, None


def _elements(node) -> list:
    """A value and, for a list / tuple literal, its elements."""
    if isinstance(node, (cst.List, cst.Tuple)):
        return [node, *(e.value for e in node.elements)]
    return [node]


def _enclosing(module: cst.Module, node: cst.CSTNode):
    """The innermost function definition of ``module`` holding ``node`` (by identity), None at module level."""
    found = None
    for fn in find_all(module, cst.FunctionDef):
        if any(n is node for n in find_all(fn, type(node))):
            found = fn  # find_all meets outer functions first: the last holding it is the innermost
    return found
