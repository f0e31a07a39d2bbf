"""Rule files: parsing and validating ``rules/<pack>/<id>.toml`` as data.

A rule is never evaluated: the loader reads TOML, checks every key against the schema below and
turns it into a frozen :class:`Rule`. Anything malformed raises :class:`RuleError`, whose message
names the file, the key, what is wrong and how to fix it. See ``docs/writing-rules.md``.
"""
from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

KINDS = ("layer", "function", "constant")
VERBS = ("rename", "transform", "drop", "unsupported", "approximate")
WEIGHT_OPS = ("copy", "transpose", "permute", "reorder-blocks", "reshape", "take", "zeros")

_TOP_KEYS = {"summary", "kind", "match", "emit", "args", "defaults", "weights", "examples",
             "unchanged", "xfail", "notes"}
# A rule matches code of every Keras generation; [defaults] keras2 and the transforms tell them apart.
_MATCH_KEYS = {"names", "signature"}
_EMIT_KEYS = {"target", "method", "self_arg", "positional", "transform", "lazy", "in_arg", "shape",
              "layout", "options", "kwargs"}
_ARG_KEYS = {"rename", "transform", "drop", "unsupported", "approximate", "to", "aliases",
             "unsupported_values", "supported_values", "positional_only"}
_DEFAULT_KEYS = {"source", "target", "pin", "keras2"}
_WEIGHT_KEYS = {"source", "target", "ops", "when"}
_EXAMPLE_KEYS = {"name", "before", "after", "findings", "keras", "reason", "source"}


class RuleError(ValueError):
    """A rule file is malformed. The message names the file, the key and the fix."""

    def __init__(self, path: Path | str, key: str, problem: str, fix: str):
        self.path, self.key, self.problem, self.fix = str(path), key, problem, fix
        super().__init__(f"{path}: key '{key}': {problem}. Fix: {fix}")


@dataclass(frozen=True)
class Param:
    name: str
    default: str | None  # source text of the default, None when required
    kind: str  # "positional" | "keyword" | "var_positional" | "var_keyword"


@dataclass(frozen=True)
class ArgSpec:
    name: str
    verb: str
    value: str  # new name for rename, transform name, or the reason for drop/unsupported/approximate
    to: str | None = None  # target keyword for transform / approximate
    aliases: tuple[str, ...] = ()
    unsupported_values: tuple[Any, ...] = ()
    supported_values: tuple[Any, ...] = ()


@dataclass(frozen=True)
class DefaultSpec:
    name: str
    source: str  # source framework default (Python literal text)
    target: str  # target framework default when omitted (text, "" when the target has no such parameter)
    pin: bool
    keras2: str | None = None  # Keras 2 default where it differs from Keras 3


@dataclass(frozen=True)
class WeightOp:
    op: str
    params: tuple[str, ...]  # integers or symbols (e.g. "H") as written

    def render(self) -> str:
        return self.op if not self.params else f"{self.op}({', '.join(self.params)})"


@dataclass(frozen=True)
class WeightMap:
    source: str
    target: str
    ops: tuple[WeightOp, ...]
    when: str | None = None


@dataclass(frozen=True)
class Example:
    name: str
    before: str
    after: str
    findings: tuple[str, ...] = ()
    keras: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class Rule:
    id: str
    pack: str
    path: str
    summary: str
    kind: str
    names: tuple[str, ...]
    params: tuple[Param, ...]
    emit: dict[str, Any]
    args: dict[str, ArgSpec]
    defaults: dict[str, DefaultSpec]
    weights: tuple[WeightMap, ...]
    examples: tuple[Example, ...]
    unchanged: tuple[Example, ...]
    xfail: tuple[Example, ...]
    notes: str = ""

    @property
    def target(self) -> str | None:
        return self.emit.get("target")

    def arg_for_keyword(self, keyword: str) -> ArgSpec | None:
        if keyword in self.args:
            return self.args[keyword]
        for spec in self.args.values():
            if keyword in spec.aliases:
                return spec
        return None

    def weights_for(self, variant: str | None) -> tuple[WeightMap, ...]:
        """The weight maps for one variant: entries with that ``when`` replace the plain ones that write
        the same target parameter (the source variable may differ: Keras 2's ``depthwise_kernel`` is
        Keras 3's ``kernel``)."""
        chosen = {w.target: w for w in self.weights if w.when is None}
        if variant:
            chosen.update({w.target: w for w in self.weights if w.when == variant})
        return tuple(chosen.values())


_OP_RE = re.compile(r"^\s*([a-z-]+)\s*(?:\(([^()]*)\))?\s*$")
_OP_PARAM_RE = re.compile(r"^-?\d+$|^[A-Za-z_][A-Za-z_0-9]*$")


def parse_weight_op(text: str, path: Path | str, key: str) -> WeightOp:
    m = _OP_RE.match(text)
    if not m or m.group(1) not in WEIGHT_OPS:
        raise RuleError(path, key, f"weight op {text!r} is not in the closed vocabulary",
                        f"write one of {', '.join(WEIGHT_OPS)}, e.g. 'transpose(1, 0)'")
    params = tuple(p.strip() for p in (m.group(2) or "").split(",") if p.strip())
    for p in params:
        if not _OP_PARAM_RE.match(p):
            raise RuleError(path, key, f"weight op parameter {p!r} is neither an integer nor a symbol",
                            "use integers or symbol names such as H, W, C, O")
    return WeightOp(m.group(1), params)


def parse_signature(text: str, path: Path | str) -> tuple[Param, ...]:
    try:
        fn = ast.parse(f"def _({text}): pass").body[0]
    except SyntaxError as e:
        raise RuleError(path, "match.signature", f"not a Python parameter list ({e.msg})",
                        "write it as in a def, e.g. \"units, activation=None, **kwargs\"") from None
    a = fn.args  # type: ignore[attr-defined]
    params: list[Param] = []
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, d in zip(positional, defaults):
        params.append(Param(arg.arg, None if d is None else ast.unparse(d), "positional"))
    if a.vararg:
        params.append(Param(a.vararg.arg, None, "var_positional"))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append(Param(arg.arg, None if d is None else ast.unparse(d), "keyword"))
    if a.kwarg:
        params.append(Param(a.kwarg.arg, None, "var_keyword"))
    return tuple(params)


def _check_keys(table: Any, allowed: set[str], path: Path | str, prefix: str) -> dict:
    if not isinstance(table, dict):
        raise RuleError(path, prefix, f"expected a table, found {type(table).__name__}",
                        f"write [{prefix}] as a TOML table")
    for k in table:
        if k not in allowed:
            raise RuleError(path, f"{prefix}.{k}" if prefix else k, "unknown key",
                            f"use one of: {', '.join(sorted(allowed))}")
    return table


def _require(table: dict, key: str, typ: type | tuple, path: Path | str, prefix: str, fix: str) -> Any:
    full = f"{prefix}.{key}" if prefix else key
    if key not in table:
        raise RuleError(path, full, "missing", fix)
    if not isinstance(table[key], typ):
        raise RuleError(path, full, f"expected {getattr(typ, '__name__', typ)}, found "
                        f"{type(table[key]).__name__}", fix)
    return table[key]


def _parse_examples(items: Any, path: Path | str, key: str, need_after: bool) -> tuple[Example, ...]:
    if items is None:
        return ()
    if not isinstance(items, list):
        raise RuleError(path, key, "expected an array of tables", f"write each entry as [[{key}]]")
    out = []
    seen = set()
    for i, ex in enumerate(items):
        k = f"{key}[{i}]"
        _check_keys(ex, _EXAMPLE_KEYS, path, k)
        name = _require(ex, "name", str, path, k, "give every example a short kebab-case name")
        if name in seen:
            raise RuleError(path, f"{k}.name", f"duplicate example name {name!r}", "names must be unique")
        seen.add(name)
        before = ex.get("before", ex.get("source"))
        if not isinstance(before, str):
            raise RuleError(path, f"{k}.before", "missing", "write the input program as before = '''...'''")
        after = ex.get("after", before if not need_after else None)
        if not isinstance(after, str):
            raise RuleError(path, f"{k}.after", "missing", "write the expected output as after = '''...'''")
        findings = ex.get("findings", [])
        if not isinstance(findings, list) or not all(isinstance(f, str) for f in findings):
            raise RuleError(path, f"{k}.findings", "expected a list of finding codes",
                            "e.g. findings = [\"default-differs\"]")
        out.append(Example(name, before, after, tuple(findings), ex.get("keras"), ex.get("reason", "")))
    return tuple(out)


def parse_rule(path: Path, pack: str, data: dict | None = None) -> Rule:
    """Parse and validate one rule file."""
    from fwport.core.direction import get_direction

    registry = get_direction(pack).transforms  # the named transforms the rule may refer to

    if data is None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise RuleError(path, "<file>", f"not valid TOML ({e})", "fix the TOML syntax") from None
    _check_keys(data, _TOP_KEYS, path, "")
    summary = _require(data, "summary", str, path, "", "add summary = \"one line on what it does\"")
    kind = _require(data, "kind", str, path, "", f"add kind = one of {', '.join(KINDS)}")
    if kind not in KINDS:
        raise RuleError(path, "kind", f"unknown kind {kind!r}", f"use one of {', '.join(KINDS)}")

    match = _check_keys(_require(data, "match", dict, path, "", "add a [match] table"), _MATCH_KEYS, path, "match")
    names = _require(match, "names", list, path, "match", "list the canonical source names, e.g. [\"keras.layers.Dense\"]")
    if not names or not all(isinstance(n, str) and "." in n for n in names):
        raise RuleError(path, "match.names", "expected a non-empty list of dotted names",
                        "e.g. names = [\"keras.layers.Dense\"]")
    sig_text = match.get("signature", "" if kind == "constant" else None)
    if sig_text is None:
        raise RuleError(path, "match.signature", "missing", "copy the source signature, e.g. \"units, activation=None, **kwargs\"")
    params = parse_signature(sig_text, path) if sig_text else ()

    emit = _check_keys(_require(data, "emit", dict, path, "", "add an [emit] table with target = \"torch.nn.X\""),
                       _EMIT_KEYS, path, "emit")
    if "target" not in emit and "method" not in emit and "transform" not in emit:
        raise RuleError(path, "emit", "needs a target, a method or a transform",
                        "add target = \"torch.sum\" (or method = \"to\" with self_arg)")
    if "method" in emit and "self_arg" not in emit:
        raise RuleError(path, "emit.self_arg", "missing for a method emit", "name the source parameter the method is called on")
    if "transform" in emit and emit["transform"] not in registry.calls:
        raise RuleError(path, "emit.transform", f"no call transform named {emit['transform']!r}",
                        f"use one of {', '.join(sorted(registry.calls))} or register one in the pack (fwport/packs/{pack}/)")
    if "shape" in emit and emit["shape"] not in registry.shapes:
        raise RuleError(path, "emit.shape", f"no shape function named {emit['shape']!r}",
                        f"use one of {', '.join(sorted(registry.shapes))} or register one in the pack (fwport/packs/{pack}/)")

    param_names = {p.name for p in params}
    args_table = data.get("args", {})
    _check_keys(args_table, param_names | set(), path, "args") if args_table else None
    args: dict[str, ArgSpec] = {}
    for pname, spec in args_table.items():
        key = f"args.{pname}"
        _check_keys(spec, _ARG_KEYS, path, key)
        verbs = [v for v in VERBS if v in spec]
        if len(verbs) != 1:
            raise RuleError(path, key, f"needs exactly one verb, found {verbs or 'none'}",
                            f"use one of {', '.join(VERBS)}")
        verb = verbs[0]
        value = spec[verb]
        if not isinstance(value, str) or not value:
            raise RuleError(path, f"{key}.{verb}", "expected a non-empty string",
                            "rename takes the target name; transform a transform name; the others a reason")
        if verb == "transform" and value not in registry.values:
            raise RuleError(path, f"{key}.transform", f"no value transform named {value!r}",
                            f"use one of {', '.join(sorted(registry.values))} or register one in the pack (fwport/packs/{pack}/)")
        aliases = spec.get("aliases", [])
        if not isinstance(aliases, list):
            raise RuleError(path, f"{key}.aliases", "expected a list of strings", "e.g. aliases = [\"lr\"]")
        args[pname] = ArgSpec(pname, verb, value, spec.get("to"), tuple(aliases),
                              tuple(spec.get("unsupported_values", [])), tuple(spec.get("supported_values", [])))
    for p in params:
        if p.kind in ("var_positional", "var_keyword"):
            continue
        if p.name not in args:
            raise RuleError(path, f"args.{p.name}", "source parameter not accounted for",
                            f"add {p.name} = {{ rename = \"...\" }} or one of the verbs drop/unsupported/approximate/transform with a reason")

    defaults: dict[str, DefaultSpec] = {}
    for pname, spec in data.get("defaults", {}).items():
        key = f"defaults.{pname}"
        _check_keys(spec, _DEFAULT_KEYS, path, key)
        if pname not in param_names:
            raise RuleError(path, key, "not a parameter of the signature", "name a parameter of match.signature")
        src = _require(spec, "source", str, path, key, "write the source default as text, e.g. source = \"0.001\"")
        defaults[pname] = DefaultSpec(pname, src, str(spec.get("target", "")), bool(spec.get("pin", False)),
                                      spec.get("keras2"))

    weights: list[WeightMap] = []
    for i, w in enumerate(data.get("weights", [])):
        key = f"weights[{i}]"
        _check_keys(w, _WEIGHT_KEYS, path, key)
        src = _require(w, "source", str, path, key, "name the source variable, e.g. source = \"kernel\"")
        tgt = _require(w, "target", str, path, key, "name the target parameter, e.g. target = \"weight\"")
        ops = _require(w, "ops", list, path, key, "list the array operations, e.g. ops = [\"transpose(1, 0)\"]")
        weights.append(WeightMap(src, tgt, tuple(parse_weight_op(o, path, f"{key}.ops") for o in ops), w.get("when")))

    return Rule(
        id=path.stem, pack=pack, path=str(path), summary=summary, kind=kind, names=tuple(names),
        params=params, emit=dict(emit), args=args, defaults=defaults, weights=tuple(weights),
        examples=_parse_examples(data.get("examples"), path, "examples", True),
        unchanged=_parse_examples(data.get("unchanged"), path, "unchanged", False),
        xfail=_parse_examples(data.get("xfail"), path, "xfail", True),
        notes=data.get("notes", ""),
    )


def builtin_rules_dir() -> Path:
    package = Path(__file__).resolve().parent.parent  # fwport/
    installed = package / "_rules"  # a wheel carries the rules inside the package
    if installed.is_dir():
        return installed
    return package.parent / "rules"  # a source checkout


@dataclass
class Pack:
    name: str
    rules: dict[str, Rule] = field(default_factory=dict)
    by_name: dict[str, Rule] = field(default_factory=dict)

    def add(self, rule: Rule) -> None:
        if rule.id in self.rules:
            raise RuleError(rule.path, "<file>", f"rule id {rule.id!r} is defined twice "
                            f"(also in {self.rules[rule.id].path})", "rename one of the files")
        self.rules[rule.id] = rule
        for n in rule.names:
            if n in self.by_name:
                raise RuleError(rule.path, "match.names", f"{n!r} is already matched by rule "
                                f"{self.by_name[n].id!r}", "a name may be matched by one rule only")
            self.by_name[n] = rule


def load_pack(name: str, extra_dirs: tuple[str, ...] = (), disabled: tuple[str, ...] = ()) -> Pack:
    """Load a rule pack: the built-in rules plus any extra rule folders, minus disabled ids."""
    return _load_pack_cached(name, tuple(extra_dirs), tuple(disabled))


@lru_cache(maxsize=8)
def _load_pack_cached(name: str, extra_dirs: tuple[str, ...], disabled: tuple[str, ...]) -> Pack:
    pack = Pack(name)
    dirs = [builtin_rules_dir() / name] + [Path(d) / name if (Path(d) / name).is_dir() else Path(d) for d in extra_dirs]
    for d in dirs:
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            if path.stem in disabled:
                continue
            pack.add(parse_rule(path, name))
    return pack
