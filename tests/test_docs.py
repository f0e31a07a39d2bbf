"""The docs are generated from, or checked against, the code they describe: they cannot drift."""
from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from fwport.core import docgen, rule
from fwport.core.cli import main
from fwport.core.config import KEYS
from fwport.core.finding import CODES

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("path,text", list(docgen.documents().items()), ids=lambda v: getattr(v, "name", ""))
def test_generated_docs_are_up_to_date(path, text):
    assert path.exists() and path.read_text(encoding="utf-8") == text, (
        f"{path.name} is out of date: run `python -m fwport.core.docgen` and commit the result")


def test_every_finding_code_has_advice():
    from fwport.core.direction import get_direction, registered
    from fwport.core.finding import CODE_PACKS

    directions = [get_direction(name) for name in registered()]  # loading a pack adds its codes
    core = {c for c in CODES if c not in CODE_PACKS}
    assert set(docgen.ADVICE) == core
    for d in directions:
        assert set(d.code_advice) == set(d.codes) and set(d.codes) <= set(CODES)
        assert not set(d.codes) & core  # a pack adds codes, it does not redefine the core's
    advice = [*docgen.ADVICE.values(), *(a for d in directions for a in d.code_advice.values())]
    assert all(sev in ("info", "warning", "error") for sev, _ in advice)


def test_rule_reference_has_every_rule_and_example():
    text = (DOCS / "rules" / "tf2torch.md").read_text(encoding="utf-8")
    pack = rule.load_pack("tf2torch")
    for r in pack.rules.values():
        assert f"## `{r.id}`" in text
        for ex in r.examples:
            assert f"`{ex.name}`" in text


def _commands():
    ctx = click.Context(main)
    for name in ("tf2torch", "residue", "rules"):
        yield name, main.get_command(ctx, name)


def test_usage_documents_every_command_and_option():
    text = (DOCS / "usage.md").read_text(encoding="utf-8")
    for name, cmd in _commands():
        assert f"fwport {name}" in text, name
        for p in cmd.params:
            for opt in getattr(p, "opts", []):
                if opt.startswith("-"):
                    assert re.search(rf"`[^`]*{re.escape(opt)}\b", text), f"{name} {opt} is not in docs/usage.md"
    for key in KEYS:
        assert f"{key} =" in text, f"[tool.fwport] key {key} is not in docs/usage.md"
    for code in ("0", "1", "2"):
        assert f"| {code} |" in text


def test_writing_rules_documents_the_whole_schema():
    text = (DOCS / "writing-rules.md").read_text(encoding="utf-8")
    keys = (rule._TOP_KEYS | rule._MATCH_KEYS | rule._EMIT_KEYS | rule._ARG_KEYS | rule._DEFAULT_KEYS
            | rule._WEIGHT_KEYS | rule._EXAMPLE_KEYS)
    missing = sorted(k for k in keys if not any(form in text for form in (f"`{k}`", f"{k} =", f"[{k}]", f"[[{k}]]",
                                                                          f"[{k}.")))
    assert not missing, f"rule keys not documented in docs/writing-rules.md: {missing}"
    for word in (*rule.VERBS, *rule.WEIGHT_OPS, *rule.KINDS):
        assert word in text
