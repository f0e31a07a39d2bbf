"""Per-file translation state shared by the passes and the rule engine."""
from __future__ import annotations

from dataclasses import dataclass, field
from keyword import iskeyword
from typing import Any

import libcst as cst

from fwport.finding import Finding, Severity
from fwport.names import ImportTable
from fwport.rule import Pack, Rule

# How a target module path is spelled in the output, and the import that spelling needs.
# Longest prefix first.
_SPELLINGS: tuple[tuple[str, str, str], ...] = (
    ("torch.nn.functional.", "F.", "import torch.nn.functional as F"),
    ("torch.nn.", "nn.", "from torch import nn"),
    ("torch.", "torch.", "import torch"),
    ("math.", "math.", "import math"),
)
IMPORT_ORDER = ("import math", "import torch", "from torch import nn", "import torch.nn.functional as F")


@dataclass
class LayerRecord:
    """How one source layer became one target module: what the verifier and `fwport weights` use.

    ``source`` and ``target`` are attribute paths relative to the model (``fc1``, ``layers[2]``,
    ``0``, ``block.conv``) within ``scope`` (the class or variable that owns the model).
    """

    scope: str
    source: str
    target: str
    rule: str
    variant: str | None = None
    symbols: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # records are plain data (they cross process boundaries and land in JSON): sizes known
        # from a module constant (dims.Named) are stored as the ints they are
        self.symbols = {k: int(v) if isinstance(v, int) and not isinstance(v, bool) else v
                        for k, v in self.symbols.items()}

    def to_dict(self) -> dict:
        return {"scope": self.scope, "source": self.source, "target": self.target, "rule": self.rule,
                "variant": self.variant, "symbols": dict(self.symbols)}


@dataclass
class ModelInfo:
    """A model the translation produced, as the verifier needs to drive it.

    ``scope`` is the class name, the builder function's name or the module-level variable.
    ``layout`` is "same" when the translated model takes inputs laid out as the source's, or
    "nchw" when channels-last inputs must be permuted to channels-first (and ``output_layout``
    likewise for the outputs).
    """

    scope: str
    kind: str  # "sequential" | "subclass"
    input_shape: tuple | None = None  # source layout, without the batch axis
    layout: str = "same"
    output_layout: str = "same"

    def __post_init__(self) -> None:
        if self.input_shape is not None:  # plain ints (see LayerRecord), None where symbolic
            self.input_shape = tuple(int(d) if isinstance(d, int) and not isinstance(d, bool) else d
                                     for d in self.input_shape)

    def to_dict(self) -> dict:
        return {"scope": self.scope, "kind": self.kind, "input_shape": list(self.input_shape) if self.input_shape else None,
                "layout": self.layout, "output_layout": self.output_layout}


@dataclass
class PendingFinding:
    finding: Finding
    node: cst.CSTNode | None
    comment: bool  # also leave a `# fwport:` comment in the output at its line


@dataclass
class FileContext:
    path: str
    pack: Pack
    imports: ImportTable
    keras_version: int = 3
    options: dict[str, Any] = field(default_factory=dict)
    pending: list[PendingFinding] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)  # located findings of finished passes
    needed_imports: set[str] = field(default_factory=set)
    layers: list[LayerRecord] = field(default_factory=list)
    models: dict[str, ModelInfo] = field(default_factory=dict)
    # ids of source nodes a structural pass left as they were after reporting why: later passes
    # must not translate them out of context (a Dense refused in a channels-first chain would
    # otherwise come back as a context-free nn.LazyLinear)
    settled: set[int] = field(default_factory=set)
    # id(original source call) -> fn(updated Subscript) -> expression: lets a call transform rewrite
    # `call(...)[i]` as a whole (tf.shape(x)[0] -> x.shape[0]); consumed by RuleTransformer
    subscript_hooks: dict[int, Any] = field(default_factory=dict)
    # per-file analyses that several passes share and that the passes do not change (e.g.
    # dims.module_scope: the module's constants), computed once by whoever needs them first
    analyses: dict[str, Any] = field(default_factory=dict)

    # --- findings -------------------------------------------------------------------------------
    def report(self, severity: Severity | str, code: str, message: str, node: cst.CSTNode | None = None,
               rule: Rule | str | None = None, comment: bool | None = None) -> None:
        sev = Severity(severity)
        rid = rule.id if isinstance(rule, Rule) else (rule or "")
        f = Finding(sev, code, message, self.path, 0, 0, rid)
        self.pending.append(PendingFinding(f, node, sev is Severity.ERROR if comment is None else comment))

    # --- emitted names ----------------------------------------------------------------------------
    def spell(self, target: str) -> cst.BaseExpression:
        """The output expression for a target name (``torch.nn.Linear`` → ``nn.Linear``), noting its import."""
        text = self.spell_text(target)
        parts = text.split(".")
        if all(p.isidentifier() and not iskeyword(p) for p in parts):  # a dotted name: built, not parsed
            node: cst.BaseExpression = cst.Name(parts[0])
            for p in parts[1:]:
                node = cst.Attribute(node, cst.Name(p))
            return node
        return cst.parse_expression(text)

    def spell_text(self, target: str) -> str:
        for prefix, short, imp in _SPELLINGS:
            if target.startswith(prefix):
                self.needed_imports.add(imp)
                return short + target[len(prefix):]
        if "." in target:
            self.needed_imports.add(f"import {target.split('.')[0]}")
        return target
