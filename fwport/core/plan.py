"""Plans: what a read-only planner decided must change, applied by the one rewrite (the rule pass).

A planner (``Planner.run``) that only analyses returns the module it was given and records, per
node of that module, an edit: ``ctx.plans.add(node, apply, descend=...)``. The rule pass
(:class:`fwport.core.engine.RuleTransformer`), walking the same tree, applies each edit when it
leaves that node, ``apply(original_node, updated_node)``:

- ``descend=True``: the rule pass first translates inside the node as usual (``updated_node`` has
  its children translated), then the edit decides what the node becomes. On a call, the edit takes
  the place of the call's rule.
- ``descend=False``: the node is the planner's alone; the rule pass does not look inside (no rule,
  no residue) and the edit gets ``updated_node is original_node``.

Edits are keyed by node identity (the node is held, so its id stays unique). Every edit must be
applied: one whose node is no longer in the tree the rule pass walks (a rewriting pass ran after
the planner and rebuilt it) is a bug, raised by :meth:`Plans.check_applied`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import libcst as cst

from fwport.core.names import children

Apply = Callable[[cst.CSTNode, cst.CSTNode], cst.CSTNode]


@dataclass
class Edit:
    node: cst.CSTNode
    apply: Apply
    descend: bool
    by: str  # the planner, for the error if the edit is never applied
    applied: bool = False


class Plans:
    """The edits of every planner of one translation, by node."""

    def __init__(self) -> None:
        self._edits: dict[int, Edit] = {}

    def add(self, node: cst.CSTNode, apply: Apply, *, descend: bool = True, by: str = "") -> None:
        if id(node) in self._edits and self._edits[id(node)].node is node:
            raise ValueError(f"two plans for one {type(node).__name__} ({self._edits[id(node)].by} and {by})")
        self._edits[id(node)] = Edit(node, apply, descend, by)

    def get(self, node: cst.CSTNode) -> Edit | None:
        edit = self._edits.get(id(node))
        return edit if edit is not None and edit.node is node else None

    def withdraw(self, node: cst.CSTNode) -> None:
        """The edit planned on ``node`` is dropped: a later planner removes the statement holding it on purpose
        (what it computed is written another way), so it is no longer expected to be applied."""
        if self.get(node) is not None:
            del self._edits[id(node)]

    def ids(self) -> set[int]:
        return set(self._edits)

    def __bool__(self) -> bool:
        return bool(self._edits)

    def __len__(self) -> int:
        return len(self._edits)

    def sealed(self) -> set[int]:
        """The ids of the nodes inside the edits made with ``descend=False`` (the rule pass does not walk them, so
        an edit planned there would never be applied): a later planner plans nothing among them."""
        out: set[int] = set()
        stack = [e.node for e in self._edits.values() if not e.descend]
        while stack:
            node = stack.pop()
            if id(node) not in out:
                out.add(id(node))
                stack.extend(children(node))  # (libcst's node.children rebuilds the node to collect them)
        return out

    def check_applied(self) -> None:
        lost = [e for e in self._edits.values() if not e.applied]
        if lost:
            raise RuntimeError(f"{len(lost)} planned edit(s) never applied (their nodes left the tree): "
                               + ", ".join(sorted({f'{e.by or "?"}: {type(e.node).__name__}' for e in lost})))
