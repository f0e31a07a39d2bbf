"""Every rule's examples are tests: translate `before`, compare with `after`, check the findings,
and check the fixpoint (translating the output again changes nothing). `unchanged` examples must
come back byte-identical; `xfail` examples must still fail (the day one passes, promote it)."""
from __future__ import annotations

from collections import Counter

import pytest

from fwport.core.finding import Severity
from fwport.core.rule import load_pack
from fwport.core.pipeline import translate_source

PACK = load_pack("tf2torch")
RULES = sorted(PACK.rules.values(), key=lambda r: r.id)


def _cases(kind: str):
    for rule in RULES:
        for ex in getattr(rule, kind):
            yield pytest.param(rule, ex, id=f"{rule.id}/{ex.name}")


def _codes(result) -> Counter:
    return Counter(f.code for f in result.findings if f.code != "keras-version")


def _translate(text: str, ex):
    return translate_source(text, "example.py", PACK, {"keras": ex.keras} if ex.keras else None)


@pytest.mark.parametrize("rule,ex", list(_cases("examples")))
def test_example(rule, ex):
    r = _translate(ex.before, ex)
    assert r.output == ex.after, f"{rule.path}: example {ex.name!r}"
    assert _codes(r) == Counter(ex.findings), f"{rule.path}: example {ex.name!r} findings"
    again = _translate(r.output, ex)
    assert again.output == r.output, "translating the output again must change nothing"


@pytest.mark.parametrize("rule,ex", list(_cases("unchanged")))
def test_unchanged(rule, ex):
    r = _translate(ex.before, ex)
    assert r.output == ex.before
    assert not [f for f in r.findings if f.severity is Severity.ERROR and f.code != "no-rule"]


@pytest.mark.parametrize("rule,ex", list(_cases("xfail")))
def test_known_gap_still_open(rule, ex):
    r = _translate(ex.before, ex)
    assert r.output != ex.after, (f"{rule.path}: xfail example {ex.name!r} now passes; "
                                  "move it to [[examples]]")


def test_every_rule_has_an_example():
    missing = [r.id for r in RULES if not r.examples]
    assert not missing, f"rules without examples: {missing}"
