"""Results are data: what translating one file produced. The library never prints."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from fwport.core.finding import Finding, Severity


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
    # a model whose number of layers is known only when it is built (a loop over a run-time value): its
    # layers in the order they are called, as segments ({"loop": bool, "layers": [class names per layer]});
    # its records name them calls[s][j] / calls[s][*][j] (fwport verify matches them to the built model)
    calls: list | None = None
    # a model called with a dict of inputs (Keras's functional `inputs={"a": ...}`): its keys, in the order
    # of the inputs the verifier is given; None: the inputs are passed positionally
    input_keys: tuple | None = None

    def __post_init__(self) -> None:
        if self.input_shape is not None:  # plain ints (see LayerRecord), None where symbolic
            self.input_shape = tuple(int(d) if isinstance(d, int) and not isinstance(d, bool) else d
                                     for d in self.input_shape)

    def to_dict(self) -> dict:
        d = {"scope": self.scope, "kind": self.kind, "input_shape": list(self.input_shape) if self.input_shape else None,
             "layout": self.layout, "output_layout": self.output_layout}
        if self.calls is not None:
            d["calls"] = self.calls
        if self.input_keys is not None:
            d["input_keys"] = list(self.input_keys)
        return d


class Status(str, Enum):
    CONVERTED = "converted"  # the output differs from the input
    UNCHANGED = "unchanged"  # nothing to translate; output is byte-identical to the input
    SKIPPED = "skipped"  # excluded by configuration
    FAILED = "failed"  # the input could not be translated at all (parse error, unreadable, crash)


@dataclass
class FileResult:
    path: str
    status: Status
    source: str = ""
    output: str = ""
    findings: list[Finding] = field(default_factory=list)
    layers: list[LayerRecord] = field(default_factory=list)
    version: int | None = None  # the source generation the text was written for (Keras 2 or 3)
    version_name: str = "version"  # its key in reports (the direction's: keras_version)
    models: list[ModelInfo] = field(default_factory=list)

    @property
    def needs_attention(self) -> bool:
        return any(f.severity is Severity.ERROR for f in self.findings)

    @property
    def changed(self) -> bool:
        return self.status is Status.CONVERTED

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    def to_dict(self, with_text: bool = False) -> dict:
        d = {
            "path": self.path,
            "status": self.status.value,
            "needs_attention": self.needs_attention,
            "findings": [f.to_dict() for f in self.findings],
            "layers": [r.to_dict() for r in self.layers],
            "models": [m.to_dict() for m in self.models],
        }
        if self.version is not None:  # the source generation it was translated as (keras_version: 3)
            d[self.version_name] = self.version
        if with_text:
            d["output"] = self.output
        return d
