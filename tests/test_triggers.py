"""A structural pass runs only when its trigger (a cheap text pattern) matches the file: the trigger
must never skip a pass that had something to do. Proof on every fixture: the translation with every
pass forced to run equals the translation with the triggers."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from fwport.core import pipeline
from fwport.core.direction import get_direction
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

ROOT = Path(__file__).resolve().parent.parent
ALWAYS = re.compile("")


def sources(direction: str) -> list[Path]:
    return sorted((ROOT / "fixtures" / direction).glob("*/model.py"))


@pytest.mark.parametrize("direction", ["tf2torch", "torch2jax"])
def test_triggers_skip_only_passes_with_nothing_to_do(direction, monkeypatch):
    pack = load_pack(direction)
    d = get_direction(direction)
    files = sources(direction)
    assert files
    with_triggers = {p: translate_source(p.read_text(), str(p), pack) for p in files}
    skipped = {p: [pl.name for pl in d.planners if not pl.trigger.search(p.read_text())] for p in files}
    if direction == "tf2torch":
        assert any(skipped.values()), "no fixture skips a pass: the comparison proves nothing"
    forced = dataclasses.replace(d, planners=tuple(dataclasses.replace(pl, trigger=ALWAYS) for pl in d.planners))
    monkeypatch.setattr(pipeline, "get_direction", lambda name: forced if name == direction else get_direction(name))
    for p in files:
        r = translate_source(p.read_text(), str(p), pack)
        w = with_triggers[p]
        assert r.output == w.output, f"{p.parent.name}: a skipped pass ({skipped[p]}) had work to do"
        assert [(f.code, f.line, f.message) for f in r.findings] == \
            [(f.code, f.line, f.message) for f in w.findings], p.parent.name


def test_functional_trigger_needs_a_model_call():
    t = next(pl.trigger for pl in get_direction("tf2torch").planners if pl.name == "functional")
    assert t.search("x = keras.Input(shape=(3,))\nm = keras.Model(x, y)\n")
    assert t.search("from keras import Model as KModel\ni = Input((3,))\n")
    assert not t.search("m = keras.Sequential([keras.Input(shape=(3,)), layers.Dense(2)])\n")
    assert not t.search("class M(keras.Model):\n    def call(self, x):\n        return keras.Input(x)\n")


def _trigger_texts() -> list[str]:
    """Fixture sources of both directions, the rules' examples, and texts made to hold one needle."""
    texts = [p.read_text() for d in ("tf2torch", "torch2jax") for p in sources(d)]
    for d in ("tf2torch", "torch2jax"):
        texts += [ex.before for r in load_pack(d).rules.values() for ex in r.examples]
    return texts


def test_trigger_needles_are_in_every_match():
    """A Trigger searches its pattern only where one of its needles occurs: on every text, it answers
    as the bare pattern does (a needle missing from some match would skip a pass with work to do)."""
    from fwport.core.direction import Trigger
    from fwport.packs.tf2torch import _KERAS2_HINTS, tf1

    triggers = [pl.trigger for d in ("tf2torch", "torch2jax") for pl in get_direction(d).planners
                if isinstance(pl.trigger, Trigger)] + [tf1.TRIGGER, _KERAS2_HINTS]
    assert len(triggers) >= 10
    texts = _trigger_texts()
    for t in triggers:  # each needle alone, in a line the pattern may match
        texts += [f"x = {n}\n" for n in t.needles] + [f"{n}(x)\n" for n in t.needles]
    for t in triggers:
        hits = 0
        for text in texts:
            expected = t.pattern.search(text) is not None
            hits += expected
            assert (t.search(text) is not None) == expected, (t, text[:200])
        assert hits, f"{t}: no text matches, the comparison proves nothing"
    skip = Trigger(r"\bVariable\b", "Variable")
    assert skip.search("v = tf.Variable(1.0)\n") and not skip.search("v = tf.constant(1.0)\n")


def _rebindable_reference(aliases: set[str], source: str) -> set[str]:
    """names._rebindable as it was written before its prefilters: one regex of five alternatives over the whole
    text, and the global/nonlocal scan always."""
    if not aliases:
        return set()
    a = "(?P<n{}>" + "|".join(map(re.escape, sorted(aliases, key=len, reverse=True))) + r")\b"
    pattern = re.compile("|".join([
        r"(?<![.\w])" + a.format(0) + r"\s*(?:[,):=]|[-+*/%&|^@]=|//=|\*\*=|>>=|<<=)",
        r"\bas\s+" + a.format(1), r"\*\s*" + a.format(2), r"\bfor\s+" + a.format(3),
        r"\blambda\s+" + a.format(4),
    ]))
    found = {next(v for v in m.groupdict().values() if v) for m in pattern.finditer(source)}
    for m in re.finditer(r"\b(?:global|nonlocal)\b([^\n]*)", source):
        found |= {n for n in re.findall(r"\w+", m.group(1)) if n in aliases}
    return found & aliases


def test_rebindable_answers_as_the_plain_regex_scan():
    """names._rebindable (which aliases a file may rebind) with its lookahead and its global/nonlocal guard gives
    what the plain scan gave, on every fixture, rule example and a few made texts, for the file's aliases and for
    aliases that look like the keywords around them (as_, f, lambda_)."""
    from fwport.core.names import _rebindable

    texts = _trigger_texts() + [
        "tf = 1\nfor keras in x: pass\nlambda np: np\nf(*layers)\nimport a as as_\nglobal tf, f\n",
        "def g():\n    nonlocal L\n    L += 1\n    tf_keras, tf = 1, 2\n    x.tf = 3\n    (f) = 4\n",
        "as_ = 1\nformat = 2\nlambda_ **= 3\ny = {tf: 1}\nprint(tf)\n",
    ]
    alias_sets = [{"tf", "keras", "layers", "np"}, {"tf", "tf_keras", "L", "f"}, {"as_", "format", "lambda_", "y"},
                  {"torch", "nn", "F"}]
    hits = 0
    for text in texts:
        for aliases in alias_sets:
            expected = _rebindable_reference(aliases, text)
            hits += bool(expected)
            assert _rebindable(set(aliases), text) == expected, (aliases, text[:200])
    assert hits > 50  # texts where some alias is rebindable: the comparison is not all empty sets
