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

``rewrite(node, transformer, fresh=True)`` keeps libcst's other promise: every node the walk enters
comes back as a new object (a shallow copy where nothing changed), so that the result can stand
beside its input in one tree (a helper's body copied into a class, once per call site) and what is
keyed by identity (positions, plans, a pass's maps by ``id``) tells the copy from the original.
Trivia is shared with the input, as above; a node whose visit hook answers False is kept as it is
(libcst's visit keeps it too).
"""
from __future__ import annotations

from dataclasses import fields as dataclass_fields

import libcst as cst

from fwport.core.hooks import attribute_hooks, table
from fwport.core.names import (_CHILD_FIELDS, _IS_NODE, IS_SKIPPABLE, SKIP, STATEMENT_LEVEL, ScopedResolver,
                                _child_fields, _is_node)

_REMOVE = cst.RemovalSentinel.REMOVE
_FLATTEN = cst.FlattenSentinel  # (an ABC with no subclass: tested by its class)
_NO_HOOKS = (None, None)
#: attribute hooks that do nothing (a transformer with these is not asked about each field)
_NO_ATTRIBUTE_HOOKS = (ScopedResolver.on_visit_attribute, ScopedResolver.on_leave_attribute)


def rewrite(node: cst.CSTNode, transformer: cst.CSTTransformer, fresh: bool = False):
    """``node.visit(transformer)`` (see the module docstring for what differs; ``fresh``: a copy)."""
    # fresh: the ids of the copies made so far (a parent all of whose changed children are copies is
    # itself copied, without the validation with_changes runs: its fields are valid as they are)
    mode = _mode(type(transformer), fresh) + ({} if fresh else None,)
    by_type = mode[0]
    entry = by_type.get(node.__class__)
    if entry is None:
        entry = _entry(by_type, node.__class__)
    return node if entry is SKIP else _rewrite(node, transformer, mode, entry)


def _mode(cls: type, fresh: bool = False) -> tuple:
    """How to call a transformer class's hooks: (its hooks by node type, see :func:`_entry`; whether
    its on_visit is libcst's, whether its on_leave is libcst's, whether on_visit_attribute / on_leave_attribute must be
    called). libcst's own on_visit / on_leave are answered from ``hooks`` (each hook looked up once
    per node type), and its attribute hooks are not called for a class without any."""
    T = cst.CSTTransformer
    visit_attr, leave_attr = cls.on_visit_attribute, cls.on_leave_attribute
    if visit_attr in _NO_ATTRIBUTE_HOOKS and leave_attr in _NO_ATTRIBUTE_HOOKS:
        attrs = False
    elif visit_attr is T.on_visit_attribute and leave_attr is T.on_leave_attribute:
        attrs = attribute_hooks(cls)
    else:
        attrs = True
    libcst_visit, libcst_leave = cls.on_visit is T.on_visit, cls.on_leave is T.on_leave
    key = "_fwport_fresh" if fresh else "_fwport_rewrite"
    by_type = cls.__dict__.get(key)
    if by_type is None:  # node type → its entry (see _entry), built as node types come
        tab = table(cls)
        # a transformer whose hooks are all on statement-level nodes (`with`, `def`, imports, ...)
        # has nothing to do inside an expression, which holds none: it need not be walked (unless
        # the walk must copy every node it enters)
        skip = not fresh and libcst_visit and libcst_leave and not attrs and all(n in STATEMENT_LEVEL for n in tab)
        # a node type with no hook and no child fields comes back as it is (unless the walk copies):
        # SKIP too, and the parent does not call _rewrite for it
        leaves = not fresh and libcst_visit and libcst_leave
        by_type = {None: (tab, skip, leaves)}
        setattr(cls, key, by_type)
    return by_type, libcst_visit, libcst_leave, attrs


def _rewrite(node: cst.CSTNode, transformer: cst.CSTTransformer, mode: tuple, entry: tuple):
    # entry: the node type's (visit hook, leave hook, child fields), looked up by the caller (not SKIP)
    by_type, libcst_visit, libcst_leave, attrs, copies = mode
    visit, leave, fields = entry
    if libcst_visit:
        descend = visit is None or visit(transformer, node) is not False
    else:
        descend = transformer.on_visit(node)
    if descend:
        changes = None
        copied = copies is not None  # every change so far a fresh copy
        for name in fields:
            value = getattr(node, name)
            c = value.__class__
            if c is tuple or c is list:
                if attrs:
                    transformer.on_visit_attribute(node, name)
                items = None
                for i, child in enumerate(value):
                    e = by_type.get(child.__class__)
                    if e is None:
                        e = _entry(by_type, child.__class__)
                    if e is SKIP:
                        if items is not None:
                            items.append(child)
                        continue
                    new = _rewrite(child, transformer, mode, e)
                    if new is not child and items is None:
                        items = list(value[:i])
                    if copied and new is not child and copies.get(id(new)) is not new:
                        copied = False
                    if items is not None:
                        if new.__class__ is _FLATTEN:
                            items.extend(new.nodes)
                        elif new is not _REMOVE:
                            items.append(new)
                if attrs:
                    transformer.on_leave_attribute(node, name)
                if items is not None:
                    (changes := changes if changes is not None else {})[name] = tuple(items)
            elif _IS_NODE.get(c) or (c not in _IS_NODE and _is_node(value)):
                if attrs:
                    transformer.on_visit_attribute(node, name)
                e = by_type.get(c)
                if e is None:
                    e = _entry(by_type, c)
                new = value if e is SKIP else _rewrite(value, transformer, mode, e)
                if attrs:
                    transformer.on_leave_attribute(node, name)
                if new is not value:
                    if copied and copies.get(id(new)) is not new:
                        copied = False
                    if new is _REMOVE:
                        new = _removed(node, name)
                    (changes := changes if changes is not None else {})[name] = new
        if copied:
            updated = _copy(node, changes)
            copies[id(updated)] = updated  # (held: an id is not reused while the walk runs)
        elif changes:  # node.with_changes(**changes), without dataclasses.replace's cost: the same checks
            updated = _copy(node, changes)
            updated._validate()
        else:
            updated = node
    else:
        updated = node
    if libcst_leave:
        return updated if leave is None else leave(transformer, node, updated)
    return transformer.on_leave(node, updated)


def _entry(by_type: dict, t: type) -> tuple:
    """(visit_<Type>, leave_<Type>, child fields) of a transformer class for node type ``t``: one look-up
    per node (``by_type``: the class's, from :func:`_mode`); SKIP for an expression (an argument, an
    element) where the class has no hook on any node an expression can hold."""
    tab, skip, leaves = by_type[None]
    if skip and IS_SKIPPABLE[t]:  # (a dict look-up: issubclass against the ABCs runs in Python)
        entry = by_type[t] = SKIP
    else:
        entry = tab.get(t.__name__, _NO_HOOKS) + (_CHILD_FIELDS.get(t) or _child_fields(t),)
        entry = by_type[t] = SKIP if leaves and entry == (None, None, ()) else entry
    return entry




_SLOTS: dict[type, tuple[str, ...]] = {}


def _copy(node: cst.CSTNode, changes: dict | None = None) -> cst.CSTNode:
    """A shallow copy of ``node`` (a new identity), with ``changes`` (fresh copies of its children):
    the fields hold what they held, so that the validation a constructor runs is not needed."""
    cls = node.__class__
    names = _SLOTS.get(cls)
    if names is None:
        names = _SLOTS[cls] = tuple(f.name for f in dataclass_fields(cls))
    new = object.__new__(cls)
    for name in names:
        _set(new, name, getattr(node, name))
    if changes:
        for name, value in changes.items():
            _set(new, name, value)
    return new


_set = object.__setattr__


def fresh_copy(node: cst.CSTNode) -> cst.CSTNode:
    """A copy of ``node`` in which every node but trivia is a new object (what parsing its text
    again gives, without the parse): for a template parsed once and inserted in many places."""
    cls = node.__class__
    names = _SLOTS.get(cls)
    if names is None:
        names = _SLOTS[cls] = tuple(f.name for f in dataclass_fields(cls))
    children = _CHILD_FIELDS.get(cls) or _child_fields(cls)
    new = object.__new__(cls)
    for name in names:
        value = getattr(node, name)
        if name in children:
            if isinstance(value, (tuple, list)):
                value = value.__class__([fresh_copy(c) for c in value])
            elif _IS_NODE.get(value.__class__) or (value.__class__ not in _IS_NODE and _is_node(value)):
                value = fresh_copy(value)
        _set(new, name, value)
    return new


def _removed(parent: cst.CSTNode, name: str):
    """What a removed child becomes: the field's empty value (None or MaybeSentinel.DEFAULT), as
    libcst's ``visit_optional`` / ``visit_sentinel`` answer; a required child cannot be removed."""
    default = next((f.default for f in parent.__dataclass_fields__.values() if f.name == name), None)
    if default is None or isinstance(default, cst.MaybeSentinel):
        return default
    raise TypeError(f"a transformer removed the required child {name!r} of {type(parent).__name__}")
