"""keras.layers.TextVectorization / StringLookup / IntegerLookup → the vocabulary classes written into the
output (fwport/packs/tf2torch/texthelpers.py): the translated program, run without TensorFlow, learns the same
vocabulary (same order: ties in counts, max_tokens) and gives the same ids, shapes and dtypes as Keras 3 (run
once in its own process for all the cases) on texts with punctuation, unicode, ASCII and other whitespace,
out-of-vocabulary words, and output_sequence_length shorter and longer than the texts."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

TEXTS = ["The cat sat.", "the dog, the cat!", "b a b a", "Héllo WÖRLD ¿qué? ‘quote’ a-b", "z y x",
         "tabs\tand\nnew  lines", "no\u00a0break space", "", "don't (stop) [me] {now} ~ok~ 3.5%", "ÀÉ Åbc", "naïve-café x-y"]
QUERIES = ["the cat sat on the unknown mat", "b a", "", "WÖRLD héllo a-b don't zz yy xx ww vv uu tt ss rr qq pp"]
TOKENS = ["b", "a", "b", "c", "é", "z", "z", "a", "", "Q"]
TOKEN_QUERIES = ["a", "b", "q", "", "é", "Q"]
INTS = [5, 3, 5, 7, 9, 9, 1, 5]
INT_QUERIES = [5, 3, 8, 0, 9]

HEAD = '''
import numpy as np
from tensorflow.keras import layers


def norm(x):
    x = np.asarray(x)
    if x.dtype.kind in "OSU":
        return [v.decode() if isinstance(v, bytes) else str(v) for v in x.ravel()], list(x.shape)
    return x.tolist(), str(x.dtype)


def vocab(layer):
    return [v.item() if hasattr(v, "item") else v for v in layer.get_vocabulary()]

'''
TEXT_CASE = '''
layer = layers.TextVectorization({args})
{adapt}
out = {{"vocab": vocab(layer), "size": layer.vocabulary_size(), "batch": norm(layer(queries)),
       "one": norm(layer(queries[0]))}}
'''
LOOKUP_CASE = '''
layer = layers.{cls}({args})
{adapt}
out = {{"vocab": vocab(layer), "size": layer.vocabulary_size(), "batch": norm(layer({queries}))}}
'''
CASES = {
    "defaults": TEXT_CASE.format(adapt="layer.adapt(texts)", args=""),
    "max-tokens-and-short-length": TEXT_CASE.format(adapt="layer.adapt(texts)", args="max_tokens=6, output_sequence_length=3"),
    "long-length": TEXT_CASE.format(adapt="layer.adapt(texts)", args="output_sequence_length=12"),
    "bigrams": TEXT_CASE.format(adapt="layer.adapt(texts)", args="ngrams=2"),
    "ngram-widths": TEXT_CASE.format(adapt="layer.adapt(texts)", args="ngrams=(1, 3), max_tokens=12, output_sequence_length=5"),
    "lower-only": TEXT_CASE.format(adapt="layer.adapt(texts)", args="standardize='lower'"),
    "punctuation-only": TEXT_CASE.format(adapt="layer.adapt(texts)", args="standardize='strip_punctuation'"),
    "characters": TEXT_CASE.format(adapt="layer.adapt(texts)", args="standardize=None, split='character', output_sequence_length=10"),
    "given-vocabulary": TEXT_CASE.format(adapt="", args="vocabulary=['the', 'cat', 'dog'], output_sequence_length=4"),
    "multi-hot": TEXT_CASE.format(adapt="layer.adapt(texts)", args="output_mode='multi_hot', max_tokens=7"),
    "count": TEXT_CASE.format(adapt="layer.adapt(texts)", args="output_mode='count'"),
    "tf-idf": TEXT_CASE.format(adapt="layer.adapt(texts)", args="output_mode='tf_idf', max_tokens=8"),
    "tf-idf-padded": TEXT_CASE.format(adapt="layer.adapt(texts)", args="output_mode='tf_idf', max_tokens=40, pad_to_max_tokens=True"),
    "string-lookup": LOOKUP_CASE.format(cls="StringLookup", args="", adapt="layer.adapt(tokens)",
                                        queries="token_queries"),
    "string-lookup-mask": LOOKUP_CASE.format(cls="StringLookup", args="mask_token='', max_tokens=4",
                                             adapt="layer.adapt(tokens)", queries="token_queries"),
    "string-lookup-vocabulary-with-reserved": LOOKUP_CASE.format(
        cls="StringLookup", args="vocabulary=['', '[UNK]', 'a', 'b'], mask_token=''", adapt="",
        queries="token_queries"),
    "string-lookup-invert": LOOKUP_CASE.format(cls="StringLookup", args="vocabulary=['a', 'b'], invert=True",
                                               adapt="", queries="[0, 1, 2, 3, 7]"),
    "string-lookup-one-hot": LOOKUP_CASE.format(cls="StringLookup", args="output_mode='one_hot', mask_token=''",
                                                adapt="layer.adapt(tokens)", queries="token_queries"),
    "string-lookup-multi-hot": LOOKUP_CASE.format(cls="StringLookup", args="output_mode='multi_hot'",
                                                  adapt="layer.adapt(tokens)", queries="[['a', 'q'], ['b', 'b']]"),
    "string-lookup-count": LOOKUP_CASE.format(cls="StringLookup", args="output_mode='count', vocabulary=['a', 'b']",
                                              adapt="", queries="[['a', 'q', 'a'], ['b', 'b', 'z']]"),
    "integer-lookup": LOOKUP_CASE.format(cls="IntegerLookup", args="", adapt="layer.adapt(ints)",
                                         queries="int_queries"),
    "integer-lookup-mask": LOOKUP_CASE.format(cls="IntegerLookup", args="mask_token=0, max_tokens=4",
                                              adapt="layer.adapt(ints)", queries="int_queries"),
    "integer-lookup-invert": LOOKUP_CASE.format(cls="IntegerLookup", args="vocabulary=[5, 3], invert=True",
                                                adapt="", queries="[0, 1, 2, 9]"),
}
STANDARDIZE = '''
import re
import string

import tensorflow as tf

strip_chars = string.punctuation + "¿"
strip_chars = strip_chars.replace("[", "").replace("]", "")


def custom_standardization(input_string):
    lowercase = tf.strings.lower(input_string)
    return tf.strings.regex_replace(lowercase, f"[{re.escape(strip_chars)}]", "")


def swap_around_dashes(input_string):
    return tf.strings.regex_replace(input_string, r"(\\w+)-(\\w+)", r"\\2 \\0 \\1 \\\\")

'''
CASES["custom-standardize"] = STANDARDIZE + TEXT_CASE.format(
    adapt="layer.adapt(texts)", args="standardize=custom_standardization, max_tokens=30, output_sequence_length=6")
CASES["regex-groups"] = STANDARDIZE + TEXT_CASE.format(
    adapt="layer.adapt(texts)", args="standardize=swap_around_dashes")
DATASET = '''
import tensorflow as tf

labelled = tf.data.Dataset.from_tensor_slices((texts, list(range(len(texts)))))
layer = layers.TextVectorization(output_sequence_length=5)
layer.adapt(labelled.map(lambda text, label: text))
batched = layers.TextVectorization(max_tokens=9)
batched.adapt(tf.data.Dataset.from_tensor_slices(texts).batch(3))
out = {"vocab": vocab(layer) + vocab(batched), "size": layer.vocabulary_size(),
       "batch": norm(layer([[q] for q in queries])), "one": norm(batched(queries))}
'''
CASES["dataset-adapt"] = DATASET  # adapt on a (translated) tf.data pipeline of texts, unbatched and batched
DATA = {"texts": TEXTS, "queries": QUERIES, "tokens": TOKENS, "token_queries": TOKEN_QUERIES, "ints": INTS,
        "int_queries": INT_QUERIES}


@pytest.fixture(scope="module")
def keras_results() -> dict:
    """Every case run by Keras 3 in one process (TensorFlow starts once)."""
    driver = "import json, sys\nglobals().update(json.loads(sys.argv[1]))\n" + HEAD + "\nresults = {}\n"
    for name, case in CASES.items():
        driver += case + f"\nresults[{name!r}] = out\n"
    driver += "print('RESULT ' + json.dumps(results))\n"
    p = subprocess.run([sys.executable, "-c", driver, json.dumps(DATA)], capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, p.stderr[-3000:]
    return json.loads(line[-1][7:])


def _translated(case: str) -> dict:
    r = translate_source(textwrap.dedent(HEAD + case), "m.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "tensorflow" not in r.output and "= layers." not in r.output and "import keras" not in r.output, r.output
    ns: dict = json.loads(json.dumps(DATA))
    exec(compile(r.output, "m.py", "exec"), ns)
    return json.loads(json.dumps(ns["out"]))


@pytest.mark.parametrize("name", list(CASES))
def test_the_vocabulary_and_ids_are_keras(name, keras_results):
    want, got = keras_results[name], _translated(CASES[name])
    assert got["vocab"] == want["vocab"] and got["size"] == want["size"], name
    for key in ("batch", "one"):
        if key not in want:
            continue
        (gv, gd), (wv, wd) = got[key], want[key]
        assert gd == wd, (name, key, gd, wd)  # the dtype (or a string array's shape)
        if _strings(wv):
            assert gv == wv, (name, key)
        else:
            np.testing.assert_allclose(np.asarray(gv, float), np.asarray(wv, float), rtol=1e-6, err_msg=f"{name} {key}")


def _strings(values) -> bool:
    return bool(np.size(values)) and isinstance(np.ravel(np.asarray(values, dtype=object))[0], str)
