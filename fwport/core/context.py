"""Per-file translation state shared by the passes and the rule engine."""
from __future__ import annotations

from dataclasses import dataclass, field
from keyword import iskeyword
from typing import Any

import libcst as cst

from fwport.core.direction import Direction
from fwport.core.finding import UNTRANSLATED_CODES, Finding, Severity
from fwport.core.names import ImportTable
from fwport.core.plan import Plans
from fwport.core.result import LayerRecord, ModelInfo  # noqa: F401  (the records the passes fill)
from fwport.core.rule import Pack, Rule

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
    direction: Direction
    version: int | None = None  # the source generation the text was written for (Keras 2 or 3)
    options: dict[str, Any] = field(default_factory=dict)
    pending: list[PendingFinding] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)  # located findings of finished passes
    needed_imports: set[str] = field(default_factory=set)
    layers: list[LayerRecord] = field(default_factory=list)
    models: dict[str, ModelInfo] = field(default_factory=dict)
    # source nodes a structural pass left as they were after reporting why: later passes must not
    # translate them out of context (a Dense refused in a channels-first chain would otherwise come
    # back as a context-free nn.LazyLinear). Keyed by id, the node kept as the value: a node a pass
    # dropped stays alive, so its id is never reused by a node made later (which would then be
    # skipped at random). Use settle() and is_settled().
    settled: dict[int, cst.CSTNode] = field(default_factory=dict)
    # id(original source call) -> fn(updated Subscript) -> expression: lets a call transform rewrite
    # `call(...)[i]` as a whole (tf.shape(x)[0] -> x.shape[0]); consumed by RuleTransformer
    subscript_hooks: dict[int, Any] = field(default_factory=dict)
    # id(translated node) -> (that node, fn(target parameter name) -> expression or None): lets a call
    # transform's result take another form where it lands in a given parameter of an enclosing call
    # (tf.shape(x), an int tensor, is x.shape as torch.zeros' size); consumed by map_call. Use
    # argument_hook() and as_argument().
    argument_hooks: dict[int, tuple] = field(default_factory=dict)
    # per-file analyses that several passes share and that the passes do not change (e.g.
    # dims.module_scope: the module's constants), computed once by whoever needs them first
    analyses: dict[str, Any] = field(default_factory=dict)
    # what read-only planners decided, by node: applied by the rule pass (fwport/core/plan.py)
    plans: Plans = field(default_factory=Plans)

    # --- settled nodes ---------------------------------------------------------------------------
    def settle(self, *nodes: cst.CSTNode) -> None:
        """Mark ``nodes`` as left as they are: later passes do not translate them."""
        for n in nodes:
            self.settled[id(n)] = n

    def is_settled(self, node: cst.CSTNode) -> bool:
        return self.settled.get(id(node)) is node

    # --- argument hooks --------------------------------------------------------------------------
    def argument_hook(self, node: cst.CSTNode, fn) -> None:
        """Where ``node`` becomes an argument of a translated call, ``fn(target parameter name)`` may give
        the expression to pass instead (None: ``node`` as it is)."""
        self.argument_hooks[id(node)] = (node, fn)

    def as_argument(self, value: cst.BaseExpression, target: str) -> cst.BaseExpression:
        """``value`` as the argument ``target`` of a translated call (see argument_hook)."""
        hook = self.argument_hooks.get(id(value))
        if hook is None or hook[0] is not value:
            return value
        return hook[1](target) or value

    # --- findings -------------------------------------------------------------------------------
    def report(self, severity: Severity | str, code: str, message: str, node: cst.CSTNode | None = None,
               rule: Rule | str | None = None, comment: bool | None = None, api: str | None = None) -> None:
        sev = Severity(severity)
        rid = rule.id if isinstance(rule, Rule) else (rule or "")
        if api is None:  # what a refused call was: its rule's source name
            api = rule.names[0] if isinstance(rule, Rule) and code in UNTRANSLATED_CODES and rule.names else ""
        f = Finding(sev, code, message, self.path, 0, 0, rid, api=api)
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
        for sp in self.direction.spellings:
            if target.startswith(sp.prefix):
                self.needed_imports.add(sp.import_line)
                return sp.short + target[len(sp.prefix):]
        if "." in target:
            self.needed_imports.add(f"import {target.split('.')[0]}")
        return target
