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
            m = t.pattern.search(text)
            expected = m is not None and (t.also is None or t.also.search(text) is not None)
            hits += expected
            got = t.search(text)
            assert (got is not None) == expected, (t, text[:200])
            if expected and t.also is None:  # the same first match (the Keras-2 hint quotes it)
                assert got.span() == m.span(), (t, text[:200])
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


def _all_triggers():
    from fwport.core.direction import Trigger
    from fwport.packs.tf2torch import _KERAS2_HINTS, tf1
    from fwport.packs.torch2jax import keys

    return [pl.trigger for d in ("tf2torch", "torch2jax") for pl in get_direction(d).planners] + \
        [tf1.TRIGGER, _KERAS2_HINTS, keys.TRIGGER] + [Trigger(r"\bVariable\b", "Variable")]


def test_fast_patterns_match_as_written():
    """Every planner trigger compiled by direction.fast (the torch2jax ones, model_api's, layer_weights') finds the
    same first match as the pattern as written, on the fixtures, the rules' examples and texts made from each word."""
    from fwport.core.direction import WRITTEN

    pats = [t for t in _all_triggers() if isinstance(t, re.Pattern)]
    assert len(pats) >= 15 and all(p in WRITTEN for p in pats)  # every plain trigger is a fast one
    texts = _trigger_texts() + ["layer = getattr(nn, name)(3)\n", "nn.Sequential(*block(3))\n", "class T(nn.Transformer):\n",
                                "for p in m.parameters(): p.data.mul_(2)\n", "x[0] += 1\n", "y = self.training\n",
                                "opt = SGD([{'params': a}])\n"]
    for p in pats:  # each word of the pattern (its escapes, \\b \\s ..., left out) alone and as a method call
        words = re.findall(r"\w+", re.sub(r"\\.", " ", WRITTEN[p]))
        texts += [f"{w}\n" for w in words] + [f"x.{w}(y)\n" for w in words]
    for p in pats:
        written, hits = re.compile(WRITTEN[p], p.flags), 0
        assert p.pattern != WRITTEN[p] or "\\b" not in WRITTEN[p][:2], p.pattern  # rewritten where it starts with \b
        for text in texts:
            m, got = written.search(text), p.search(text)
            hits += m is not None
            assert (m and m.span()) == (got and got.span()), (WRITTEN[p], text[:200])
        assert hits, f"{WRITTEN[p]}: no text matches, the comparison proves nothing"


@pytest.mark.parametrize("pattern, fast", [
    (r"\bdef\s+call\s*\(", r"def(?<=\bdef)\s+call\s*\("),
    # a group of words: each alternative starts with its word (re scans for first characters in C only where every
    # alternative starts with one, not with a group)
    (r"\b(?:Sequence|PyDataset)\b", r"Sequence(?<=\bSequence)\b|PyDataset(?<=\bPyDataset)\b"),
    (r"x\(|(?:Pool|Crop)\w*\(", r"x\(|Pool\w*\(|Crop\w*\("),
    (r"\b(?:Pool|Crop)(\w*)\(", r"(?:Pool(?<=\bPool)|Crop(?<=\bCrop))(\w*)\("),  # a capturing group: kept
    (r"(?m)\bModule\b|^\s*class\b", r"(?m)Module(?<=\bModule)\b|^\s*class\b"),
    (r"\brand(?:n|int)?\b", r"rand(?<=\brand)(?:n|int)?\b"),
    (r"\bx*y|\bab?c", r"\bx*y|a(?<=\ba)b?c"),  # a quantified first character stays where it is
    (r"\b(?:a|b)*c|[|(]\bd", r"\b(?:a|b)*c|[|(]\bd"),  # a quantified group; a | and a ( in a class
    (r"\b(?:Adam|\w*Loss)\b", r"\b(?:Adam|\w*Loss)\b"),  # one alternative not a word: one \b test, kept
    (r"@|\bimport\b[^\n]*\bfunction\b", r"@|import(?<=\bimport)\b[^\n]*\bfunction\b"),
])
def test_fast_pattern_spelling(pattern, fast):
    from fwport.core.direction import fast_pattern

    assert fast_pattern(pattern) == fast
    texts = ["def  call(x)", "undef call(", "Sequence PyDatasets xSequence", "Module\n  class A", "randn rand_",
             "xxy ac abc zabc", "ababc |d (d", "Adam MSELoss xAdam", "@x import a.function b", "MaxPool2D( x( Crop(",
             "xPooling( Cropping2D (", ""]
    for text in texts:  # the same matches, spans included
        assert [m.span() for m in re.finditer(pattern, text)] == [m.span() for m in re.finditer(fast, text)], text


def test_functional_and_training_triggers_answer_as_their_earlier_spellings():
    """The functional trigger's two searches (pattern, also) answer as the one anchored look-ahead pattern it
    replaced, and the training trigger's `Crossentropy\\b` as `\\b\\w*Crossentropy\\b`."""
    planners = {pl.name: pl.trigger for pl in get_direction("tf2torch").planners}
    earlier = {
        "functional": re.compile(r"\A(?=[\s\S]*\bInput\s*\()(?=[\s\S]*(?:Model\s*\(|\bModel\s+as\b))"),
        "training": re.compile(r"GradientTape|training\s*=|optimizers|losses|callbacks|\.\s*trainable\s*=|"
                               r"\.\s*(?:compile|fit|evaluate|predict)\s*\(|\b(?:Adam|AdamW|SGD|RMSprop|Adagrad|"
                               r"\w*Crossentropy|MeanSquaredError|MeanAbsoluteError|Huber)\b"),
    }
    texts = _trigger_texts() + ["x = Input(3)\n", "from keras import Model as M\nInput (3)\n", "y = Model(a)\n",
                                "l = BinaryCrossentropy()\n", "l = Crossentropy_x\n", "xCrossentropy", "i = Input\nModel(x)\n"]
    for name, reference in earlier.items():
        hits = 0
        for text in texts:
            expected = reference.search(text) is not None
            hits += expected
            assert (planners[name].search(text) is not None) == expected, (name, text[:200])
        assert 0 < hits < len(texts), name
