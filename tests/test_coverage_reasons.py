"""bench/coverage.py lists the uncovered APIs with why (issue 8: "list the rest with why"): the pack's guidance
(the no-rule error's advice) or bench/coverage_reasons.toml. Every much-used uncovered name has a reason, and
no reason names an API that a rule or a pass now covers."""
from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from fwport.core.direction import get_direction
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_coverage_reasons", ROOT / "bench" / "coverage.py")
coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(coverage)

MIN_USES = 5  # an uncovered name used this often in the census needs a reason


def _rows(direction: str) -> list[dict]:
    tsv = coverage.REFERENCE / ("api-frequency-torch.tsv" if direction == "torch2jax" else "api-frequency-tf.tsv")
    if not tsv.exists():
        pytest.skip(f"no frequency table at {tsv} (the shared reference folder)")
    with tsv.open(encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.mark.parametrize("scope", sorted(coverage.SCOPES))
def test_every_much_used_uncovered_api_has_a_reason(scope):
    rows = coverage.scope_rows(_rows("tf2torch"), scope)
    exclude = coverage.TRAINING_IO if scope == "models" else ()
    _, _, missing = coverage.measure(rows, "tf2torch", coverage.SCOPES[scope], exclude)
    direction, reasons = get_direction("tf2torch"), coverage.load_reasons("tf2torch")
    assert missing, "nothing uncovered: the census or the scope changed"
    silent = [(n, name) for n, name in missing if n >= MIN_USES and not coverage.reason_for(name, direction, reasons)]
    assert not silent, f"add a line to bench/coverage_reasons.toml (or a rule) for: {silent}"


def test_no_reason_is_kept_for_a_covered_api_or_one_with_guidance():
    direction, pack = get_direction("tf2torch"), load_pack("tf2torch")
    covered = set(pack.by_name) | coverage._tf2torch_structural()
    reasons = coverage.load_reasons("tf2torch")
    assert len(reasons) >= 20
    stale = [k for k in reasons if k in covered]
    assert not stale, f"covered now: remove their reasons from bench/coverage_reasons.toml: {stale}"
    twice = [k for k in reasons if direction.guidance_for(k)]
    assert not twice, f"the pack's guidance already answers these: {twice}"
    assert all(v and "\n" not in v and len(v) < 300 for v in reasons.values())


def test_a_reason_stands_for_the_names_under_it_and_guidance_comes_first():
    direction, reasons = get_direction("tf2torch"), coverage.load_reasons("tf2torch")
    assert coverage.reason_for("tensorflow.RaggedTensor.from_row_splits", direction, reasons) == \
        reasons["tensorflow.RaggedTensor"]
    assert coverage.reason_for("tensorflow.experimental.numpy.exp", direction, reasons).startswith("not yet")
    assert coverage.reason_for("tensorflow.io.FixedLenSequenceFeature", direction, reasons).startswith("guidance")
    assert coverage.reason_for("tensorflow.no_such_api", direction, reasons) is None


def test_a_method_of_a_translated_constant_counts_as_covered_and_translates():
    rows = [{"name": "tensorflow.__version__.startswith", "total": "13"}, {"name": "tensorflow.linalg.svd", "total": "6"}]
    hit, total, missing = coverage.measure(rows, "tf2torch", ("tensorflow.",))
    assert (hit, total, missing) == (13, 19, [(6, "tensorflow.linalg.svd")])
    assert coverage.measure(rows, "tf2torch", ("tensorflow.",), rules_only=True)[0] == 0
    r = translate_source('import tensorflow as tf\nif tf.__version__.startswith("2"):\n    pass\n', "v.py")
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert "torch.__version__.startswith" in r.output


def test_the_listing_prints_the_reasons(capsys):
    if not (coverage.REFERENCE / "api-frequency-tf.tsv").exists():
        pytest.skip("no frequency table")
    assert coverage.main(["--scope", "ops", "--top", "40"]) == 0
    out = capsys.readouterr().out
    assert "uncovered names with a reason" in out
    listed = [line for line in out.splitlines() if line.startswith("  ")]
    assert len(listed) == 40 and all(" — " in line for line in listed)
    assert not [line for line in listed if line.endswith("no reason recorded")]
