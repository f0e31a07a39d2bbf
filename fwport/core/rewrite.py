"""``rewrite(node, transformer)``: ``node.visit(transformer)`` for a libcst ``CSTTransformer``, at a
fraction of the cost.

libcst's traversal rebuilds every node it passes through, whether or not anything under it
changed, and visits every piece of trivia (whitespace, comments, commas, parentheses) on the way.
``rewrite`` calls the same hooks (``on_visit``/``visit_<Type>``, ``on_visit_attribute``,
``on_leave_attribute``, ``on_leave``/``leave_<Type>``), children in the same lexical order, with the
same answers to ``RemovalSentinel``/``FlattenSentinel``/``MaybeSentinel``, but:

- trivia is not descended into (``names.scan`` skips the same fields): no pass here has a hook on
  whitespace, comments or punctuation;
- a node none of whose children changed is handed to its leave hook as the *input node itself*
  (``updated_node is original_node``), and comes back as it is unless the hook replaces it. Node
  identity is what the rest of the pipeline keys its caches on (``position.Layout`` renders a
  statement once per identity), so an untouched subtree stays the very same object.

Only the path from the root to each change is rebuilt, like a persistent data structure.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.names import _CHILD_FIELDS, _IS_NODE, _child_fields, _is_node

_REMOVE = cst.RemovalSentinel.REMOVE


def rewrite(node: cst.CSTNode, transformer: cst.CSTTransformer):
    """``node.visit(transformer)`` (see the module docstring for what differs)."""
    if transformer.on_visit(node):
        changes = None
        for name in _CHILD_FIELDS.get(type(node)) or _child_fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, (tuple, list)):
                transformer.on_visit_attribute(node, name)
                items = None
                for i, child in enumerate(value):
                    new = rewrite(child, transformer)
                    if new is not child and items is None:
                        items = list(value[:i])
                    if items is not None:
                        if isinstance(new, cst.FlattenSentinel):
                            items.extend(new.nodes)
                        elif new is not _REMOVE:
                            items.append(new)
                transformer.on_leave_attribute(node, name)
                if items is not None:
                    (changes := changes if changes is not None else {})[name] = tuple(items)
            elif _IS_NODE.get(value.__class__) or (value.__class__ not in _IS_NODE and _is_node(value)):
                transformer.on_visit_attribute(node, name)
                new = rewrite(value, transformer)
                transformer.on_leave_attribute(node, name)
                if new is not value:
                    if new is _REMOVE:
                        new = _removed(node, name)
                    (changes := changes if changes is not None else {})[name] = new
        updated = node.with_changes(**changes) if changes else node
    else:
        updated = node
    return transformer.on_leave(node, updated)


def _removed(parent: cst.CSTNode, name: str):
    """What a removed child becomes: the field's empty value (None or MaybeSentinel.DEFAULT), as
    libcst's ``visit_optional`` / ``visit_sentinel`` answer; a required child cannot be removed."""
    default = next((f.default for f in parent.__dataclass_fields__.values() if f.name == name), None)
    if default is None or isinstance(default, cst.MaybeSentinel):
        return default
    raise TypeError(f"a transformer removed the required child {name!r} of {type(parent).__name__}")
