"""The rule loader: rules are data, and a malformed rule is an error that names the file, the key
and the fix (never a traceback, never a silently ignored key)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.rule import RuleError, load_pack, parse_rule

GOOD = '''
summary = "Sum over axes"
kind = "function"

[match]
names = ["tensorflow.reduce_sum"]
signature = "input_tensor, axis=None, keepdims=False, name=None"

[emit]
target = "torch.sum"

[args]
input_tensor = { rename = "input" }
axis = { transform = "dim" }
keepdims = { rename = "keepdim" }
name = { drop = "op names do not exist in eager PyTorch" }

[[examples]]
name = "plain"
before = "import tensorflow as tf\\ny = tf.reduce_sum(x)\\n"
after = "import torch\\ny = torch.sum(x)\\n"
'''


def _write(tmp_path, text: str, name: str = "reduce-sum"):
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_valid_rule_loads(tmp_path):
    rule = parse_rule(_write(tmp_path, GOOD), "tf2torch")
    assert rule.id == "reduce-sum"
    assert [p.name for p in rule.params] == ["input_tensor", "axis", "keepdims", "name"]
    assert rule.args["keepdims"].verb == "rename" and rule.args["keepdims"].value == "keepdim"


@pytest.mark.parametrize("change,key,words", [
    pytest.param(("[emit]", "[emit]\nrender = 1"), "emit.render", "unknown key", id="unknown-key"),
    pytest.param(('keepdims = { rename = "keepdim" }\n', ""), "args.keepdims", "not accounted for",
                 id="parameter-not-accounted-for"),
    pytest.param(('{ rename = "keepdim" }', '{ renam = "keepdim" }'), "args.keepdims.renam", "unknown key",
                 id="misspelt-verb"),
    pytest.param(('{ transform = "dim" }', '{ transform = "no-such-transform" }'), "args.axis.transform",
                 "no value transform", id="unknown-transform"),
    pytest.param(('signature = "input_tensor', 'signature = "input_tensor)('), "match.signature",
                 "not a Python parameter list", id="bad-signature"),
    pytest.param(('kind = "function"', 'kind = "macro"'), "kind", "unknown kind", id="unknown-kind"),
    pytest.param(('summary = "Sum over axes"\n', ""), "summary", "missing", id="missing-summary"),
    pytest.param(('[emit]\ntarget = "torch.sum"', '[emit]\ntarget = "torch.sum"\n\n[[weights]]\nsource = "kernel"\n'
                  'target = "weight"\nops = ["rotate(1)"]'), "weights[0].ops", "closed vocabulary",
                 id="weight-op-outside-the-vocabulary"),
    pytest.param(('name = "plain"', 'nam = "plain"'), "examples[0].nam", "unknown key", id="example-key"),
    # a rule cannot be limited to one Keras generation (nothing would read it): [defaults] keras2 says the difference
    pytest.param(('names = ["tensorflow.reduce_sum"]', 'names = ["tensorflow.reduce_sum"]\nkeras = 2'), "match.keras",
                 "unknown key", id="match-keras-generation"),
    pytest.param(('names = ["tensorflow.reduce_sum"]', 'names = "tensorflow.reduce_sum"'), "match.names",
                 "expected list", id="names-not-a-list"),
])
def test_malformed_rules_name_file_key_and_fix(tmp_path, change, key, words):
    old, new = change
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(RuleError) as err:
        parse_rule(path, "tf2torch")
    message = str(err.value)
    assert str(path) in message and f"key '{key}'" in message and words in message
    assert "Fix:" in message and err.value.fix


def test_invalid_toml_is_a_rule_error(tmp_path):
    path = _write(tmp_path, GOOD + "\n[[examples]\n")
    with pytest.raises(RuleError, match="not valid TOML"):
        parse_rule(path, "tf2torch")


def test_extra_rule_folders_and_disabled_rules(tmp_path):
    extra = tmp_path / "tf2torch"
    extra.mkdir()
    _write(extra, GOOD.replace("tensorflow.reduce_sum", "mylib.reduce_sum"), "my-reduce")
    pack = load_pack("tf2torch", extra_dirs=(str(tmp_path),), disabled=("reduce-sum",))
    assert "my-reduce" in pack.rules and "reduce-sum" not in pack.rules
    assert pack.by_name["mylib.reduce_sum"].id == "my-reduce"


def test_two_rules_may_not_match_one_name(tmp_path):
    extra = tmp_path / "tf2torch"
    extra.mkdir()
    _write(extra, GOOD, "my-reduce")  # matches tensorflow.reduce_sum, as the built-in rule does
    with pytest.raises(RuleError, match="already matched by rule"):
        load_pack("tf2torch", extra_dirs=(str(tmp_path),))
