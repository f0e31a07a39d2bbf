"""Directions: what the core asks of a translation pack (tf2torch, torch2jax, ...).

The core knows no framework. Everything that does — which imports make a file a source file, the
canonical spelling of source names, the planners (structural passes), the output spellings and
their imports, the finding codes and version facts of the source — comes from a
:class:`Direction` that a pack defines in ``fwport/packs/<name>/__init__.py`` as ``DIRECTION``, and
registers by name in ``fwport/packs/__init__.py`` (``PACKS``). Its data rules live in
``rules/<name>/``. The core loads a direction by name, never by importing a pack module itself.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from fwport.core.names import SourceNames
from fwport.core.transform import Transforms

#: The module that lists the packs (name → module holding ``DIRECTION``); outside the core.
PACK_REGISTRY = "fwport.packs"


def _syntax(pattern: str, start: int = 0):
    """(index, character, group depth before it) of each character of ``pattern`` from ``start`` that is regex
    syntax: not escaped, not inside a character class (a `]` first in a class is a member)."""
    depth, i, in_class = 0, start, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "^":
                i += 1
            if pattern[i + 1:i + 2] == "]":
                i += 1
        else:
            yield i, c, depth
            depth += (c == "(") - (c == ")")
        i += 1


def _alternatives(pattern: str) -> list[str]:
    """``pattern`` split at its top-level ``|`` (not inside a group or a character class, not escaped)."""
    parts, start = [], 0
    for i, c, depth in _syntax(pattern):
        if c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
    parts.append(pattern[start:])
    return parts


def _group_end(pattern: str, open_at: int) -> int:
    """The index of the ``)`` closing the group opened at ``open_at`` (-1 if none)."""
    for i, c, depth in _syntax(pattern, open_at):
        if c == ")" and depth == 1:
            return i
    return -1


_WORD = re.compile(r"[A-Za-z0-9_]+")
_FLAGS = re.compile(r"\A\(\?[aiLmsux]+\)")


def _fast_alternative(alt: str) -> str:
    """One alternative that starts with ``\\b`` and a word, spelled with the word first:
    ``\\bdef\\s+x`` → ``def(?<=\\bdef)\\s+x`` (the same matches, the same spans: the look-behind asks
    for the boundary before the word the match has just read); ``\\b(?:A|B)x`` → ``(?:A(?<=\\bA)|B(?<=\\bB))x``.
    Anything else as it is."""
    if not alt.startswith("\\b"):
        return alt
    rest = alt[2:]
    m = _WORD.match(rest)
    if m is not None:
        word = m.group(0)
        if rest[len(word):len(word) + 1] in ("*", "+", "?", "{"):  # the last character is quantified
            word = word[:-1]
        return f"{word}(?<=\\b{word}){rest[len(word):]}" if word else alt
    if rest.startswith("(?:"):
        end = _group_end(rest, 0)
        after = rest[end + 1:] if end > 0 else ""
        if end > 0 and after[:1] not in ("*", "+", "?", "{"):  # `\\b(?:A|B)`: `(?:\\bA|\\bB)`
            inner = [_fast_alternative("\\b" + a) for a in _alternatives(rest[3:end])]
            if not any(a.startswith("\\b") for a in inner):  # (else one `\\b` test per alternative: slower)
                return "(?:" + "|".join(inner) + ")" + after
    return alt


def fast_pattern(pattern: str) -> str:
    """``pattern`` spelled so that Python's ``re`` searches it quickly, with the same matches (spans and
    groups): each top-level alternative that starts with ``\\b`` and a word starts with the word
    (:func:`_fast_alternative`), and one that starts with a group of words is one alternative per word
    (:func:`_spread`). ``re`` scans for a pattern's literal first characters in C; a pattern that starts
    with ``\\b``, or an alternation of which one alternative does (or starts with a group), is tried at every
    position of the text instead, ~10–50 times slower on a large file (tests/test_triggers.py checks
    every trigger against its written spelling)."""
    flags = _FLAGS.match(pattern)
    head = flags.group(0) if flags else ""
    return head + "|".join(_spread(_fast_alternative(a)) for a in _alternatives(pattern[len(head):]))


def _spread(alt: str) -> str:
    """``(?:A|B)x`` (what _fast_alternative makes of ``\\b(?:A|B)x``) as ``Ax|Bx``, each starting with its word: ``re``
    scans for the first characters of an alternation in C only where every alternative starts with a literal
    character, not a group. The same matches, tried in the same order at each position; only where neither the
    group nor ``x`` captures (the copies of a capturing group would be numbered anew)."""
    if not alt.startswith("(?:"):
        return alt
    end = _group_end(alt, 0)
    if end < 0 or alt[end + 1:end + 2] in ("*", "+", "?", "{"):
        return alt
    inner, after = _alternatives(alt[3:end]), alt[end + 1:]
    if len(inner) < 2 or not all(_WORD.match(a) for a in inner):
        return alt
    try:
        if re.compile(alt).groups:
            return alt
    except re.error:  # (a reference to a group outside it)
        return alt
    return "|".join(a + after for a in inner)


#: fast pattern → the pattern as written (for tests: each answers as its written spelling)
WRITTEN: dict[re.Pattern, str] = {}


def fast(pattern: str, flags: int = 0) -> re.Pattern:
    """``re.compile`` of :func:`fast_pattern`: a planner's trigger searched in the whole source text."""
    compiled = re.compile(fast_pattern(pattern), flags)
    WRITTEN[compiled] = pattern
    return compiled


class Trigger:
    """A planner's trigger pattern, searched only in a text that holds one of ``needles``: plain
    substrings of which every match of the pattern contains one (a substring test is many times
    faster than a regex scan that starts with ``\\b`` or an alternation, and most files hold none).
    Answers ``search(text)`` as the pattern does (searching its :func:`fast_pattern` spelling).
    ``also``: a second pattern the text must match too (a match of ``pattern`` is the answer): two
    searches, where one pattern would need a look-ahead over the whole text per condition."""

    __slots__ = ("pattern", "needles", "also", "_fast", "_also")

    def __init__(self, pattern: str | re.Pattern, *needles: str, also: str | None = None):
        self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        self.needles = needles
        self.also = re.compile(also) if also is not None else None
        self._fast = re.compile(fast_pattern(self.pattern.pattern), self.pattern.flags)
        self._also = re.compile(fast_pattern(also)) if also is not None else None

    def search(self, text: str) -> re.Match | None:
        for needle in self.needles:
            if needle in text:
                m = self._fast.search(text)
                if m is not None and self._also is not None and self._also.search(text) is None:
                    return None
                return m
        return None

    def __repr__(self) -> str:
        also = f", also={self.also.pattern!r}" if self.also is not None else ""
        return f"Trigger({self.pattern.pattern!r}, {', '.join(map(repr, self.needles))}{also})"


@dataclass(frozen=True)
class Planner:
    """A structural pass: ``run(module, ctx) -> module``, run only when ``trigger`` matches the text.

    A pass keeps the line structure of the code it rewrites (its findings are located on its input).
    """

    name: str
    trigger: re.Pattern | Trigger
    run: Callable[[Any, Any], Any]


@dataclass(frozen=True)
class Spelling:
    """How a target module path is written in the output and the import that spelling needs:
    ``Spelling("torch.nn.", "nn.", "from torch import nn")``."""

    prefix: str
    short: str
    import_line: str


@dataclass(frozen=True)
class Requirements:
    """How the dependency files of a translated tree change (fwport/core/deps.py)."""

    source: frozenset[str]  # the source framework's distributions, replaced
    target: str  # what replaces them (first, before what the translated code imports besides)
    conda: dict[str, str] = field(default_factory=dict)  # pip name → conda name (torch → pytorch)
    label: str = "the source framework"  # in messages: "replace TensorFlow/Keras with torch by hand"


@dataclass(frozen=True)
class CliOption:
    """A command-line flag of one direction's command, setting a translate option: ``--keras 2``
    sets ``options["keras"] = 2`` (else the ``[tool.fwport]`` key ``config_key``, if any)."""

    flag: str
    key: str
    help: str
    choices: tuple[str, ...] = ()  # none: an on/off flag (or a value, with a metavar)
    convert: Callable[[Any], Any] = lambda v: v
    config_key: str | None = None
    metavar: str = ""  # a flag that takes a value (``--model EXPR``)
    multiple: bool = False  # a value flag given several times: a tuple of the values


class PrepareError(Exception):
    """What a direction's ``prepare`` step refuses (a missing option, a framework it needs absent): the
    command says it and exits 2."""


@dataclass(frozen=True)
class Direction:
    name: str  # the command (`fwport tf2torch`) and the rules folder (rules/tf2torch)
    summary: str
    source: SourceNames
    #: a cheap text test: can the file concern the source framework at all? (else: unchanged, unparsed)
    mentions: re.Pattern
    #: how people name the source framework in messages (`fwport residue`): "TensorFlow/Keras"
    source_title: str = ""
    #: the names the source framework is conventionally imported as (``tf`` → ``tensorflow``): in a
    #: file that imports the source, such a name read as ``tf.x`` but bound nowhere (a notebook
    #: fragment whose import is in another cell) is taken as that import, with a warning
    conventional_aliases: dict[str, str] = field(default_factory=dict)
    #: files the direction does not translate at all: ``fn(module, imports, source, path)`` → the one
    #: error finding that says why and what to do (the file is left as written), or None
    out_of_scope: Callable[[Any, Any, str, str], Any] | None = None
    #: the structural passes, in order, run before the rule pass
    planners: tuple[Planner, ...] = ()
    #: steps that remove lines, run once every finding is located: ``fn(module, ctx) -> module``
    finish: tuple[Callable[[Any, Any], Any], ...] = ()
    #: output spellings, longest prefix first
    spellings: tuple[Spelling, ...] = ()
    #: the order target imports are added in (others follow, sorted)
    import_order: tuple[str, ...] = ()
    #: the source generation a text was written for: ``fn(text, forced) -> (version, why)``
    detect_version: Callable[[str, int | None], tuple[int, str]] | None = None
    #: how a version is named in reports (``keras_version``), the option that forces it
    #: (``keras``: ``--keras``, ``[tool.fwport] keras``) and the info finding that says it
    version_name: str = "version"
    version_option: str = "version"
    version_code: str = "source-version"
    version_label: Callable[[int | None], str] = lambda v: f"version {v}"
    #: who defines a source name's defaults, for messages: ``fn(name, version)`` → ``Keras 3``
    source_label: Callable[[str, int | None], str] = lambda name, v: name.split(".")[0]
    #: source APIs with no faithful translation: canonical name → what to write instead; a call or
    #: reference of one is the no-rule / residue error with this guidance in its message
    guidance: dict[str, str] = field(default_factory=dict)
    #: finding codes of this pack (code → meaning), added to the core's closed set
    codes: dict[str, str] = field(default_factory=dict)
    #: code → (usual severity, what to do), for docs/findings.md
    code_advice: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: keyword arguments every source layer accepts, and what the engine does with each
    #: ("shape": feeds shape propagation then dropped; "drop"; "trainable"; "unsupported")
    layer_base_kwargs: dict[str, str] = field(default_factory=dict)
    #: the pack's named transforms (value transforms, call transforms, shape functions)
    transforms: Transforms = field(default_factory=lambda: Transforms("?"))
    #: the long help of `fwport <name>` and the direction's own flags
    command_help: str = ""
    cli_options: tuple[CliOption, ...] = ()
    #: a step the command runs once before translating: ``fn(paths, options) -> options`` (tf2torch's
    #: ``--trace`` runs the source model in a subprocess and adds the shapes it saw); raises PrepareError
    prepare: Callable[[tuple[str, ...], dict], dict] | None = None
    #: the input shape a layer is translated with, given what the passes found (the LayerContext: its
    #: in_shape None where unknown) and the shape observed by running the source there (translate option
    #: ``observed_shapes``: (line, column, shape) of the calls that create layers):
    #: ``fn(lctx, observed, call, rule)`` → the shape to use
    observed_shape: Callable[[Any, Any, Any, Any], Any] | None = None
    #: a layer built frozen (``trainable=False`` written in its call, the layer base keyword "trainable"):
    #: ``fn(mapped, emission, ctx)`` → the emission with its module frozen, or a failed one (the reason reported on
    #: ``mapped``); None: such a layer is an error
    frozen_layer: Callable[[Any, Any, Any], Any] | None = None
    #: how a tree's dependency files change (None: they are copied as they are)
    requirements: Requirements | None = None
    #: a chained direction: the directions it runs one after the other (fwport/core/chain.py); empty for a pack
    stages: tuple[str, ...] = ()

    def guidance_for(self, q: str) -> str | None:
        """What to write instead of a source API the direction does not translate (``guidance``), by its
        name or the name of a class or module it belongs to (tf.train.Feature's BytesList)."""
        if not self.guidance:
            return None
        name = self.source.canonical(q)
        while name:
            if name in self.guidance:
                return self.guidance[name]
            name = name.rpartition(".")[0]
        return None


def registered() -> dict[str, str]:
    """Pack name → the module that defines its ``DIRECTION``."""
    return dict(importlib.import_module(PACK_REGISTRY).PACKS)


def default_direction() -> str:
    """The direction used when none is named (the registry's ``DEFAULT``)."""
    return importlib.import_module(PACK_REGISTRY).DEFAULT


def chains() -> dict[str, tuple[str, ...]]:
    """Chained direction name → the directions it runs in order (the registry's ``CHAINS``)."""
    return dict(getattr(importlib.import_module(PACK_REGISTRY), "CHAINS", {}))


@lru_cache(maxsize=None)
def get_direction(name: str) -> Direction:
    """The direction called ``name``; importing its pack registers its transforms and codes. A chained
    direction is composed from its stages (:func:`chained`)."""
    packs = registered()
    chained_names = chains()
    if name in chained_names:
        return chained(name, tuple(get_direction(s) for s in chained_names[name]))
    if name not in packs:
        raise KeyError(f"no translation direction {name!r}; the directions are: "
                       f"{', '.join(sorted([*packs, *chained_names]))}")
    direction = importlib.import_module(packs[name]).DIRECTION
    from fwport.core.finding import register_codes

    register_codes(direction.codes, name)
    return direction


def chained(name: str, stages: tuple[Direction, ...]) -> Direction:
    """The direction of a chain: the first stage's source (what makes a file a source file, its version
    facts), the last stage's target (spellings, imports), dependency files from the first source to the
    last target, every stage's command-line flags. Translating runs the stages (fwport/core/chain.py)."""
    first, last = stages[0], stages[-1]
    options = {o.key: o for s in stages for o in s.cli_options}
    requirements = None
    if first.requirements and last.requirements:
        requirements = Requirements(first.requirements.source, last.requirements.target, dict(last.requirements.conda),
                                    first.requirements.label)
    return Direction(
        name=name, summary=f"{first.summary.split(' → ')[0]} → {last.summary.split(' → ')[-1]}, through "
                           + ", ".join(s.summary.split(" → ")[-1] for s in stages[:-1]),
        source=first.source, mentions=first.mentions, source_title=first.source_title,
        spellings=last.spellings, import_order=last.import_order,
        detect_version=first.detect_version, version_name=first.version_name, version_option=first.version_option,
        version_code=first.version_code, version_label=first.version_label, source_label=first.source_label,
        command_help=f"Translate {first.source_title or first.name} source in {len(stages)} steps: "
                     + ", then ".join(s.name for s in stages) + " (each step's findings located in the original file).",
        cli_options=tuple(options.values()), requirements=requirements, stages=tuple(s.name for s in stages),
        prepare=first.prepare)
