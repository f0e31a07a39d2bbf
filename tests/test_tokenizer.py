"""keras.preprocessing.text.Tokenizer → the Tokenizer class written into the output (fwport/packs/tf2torch/
datahelpers.py): word_index, index_docs, texts_to_sequences, sequences_to_texts and texts_to_matrix in its four
modes equal Keras 2's (tf_keras, run in its own process) on the same texts, with and without num_words,
oov_token, lower, char_level and custom filters."""
from __future__ import annotations

import importlib.util
import json
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python

TEXTS = ["I love my dog!", "I love my cat.", "You love my dog, do you?", "Do you think my dog is amazing??",
         "the cat; the DOG; the bird", "", "tabs\tand\nnewlines here", "repeat repeat repeat word"]
PROGRAM = '''
from tensorflow.keras.preprocessing.text import Tokenizer

tokenizer = Tokenizer({args})
tokenizer.fit_on_texts(texts)
out = {{
    "word_index": tokenizer.word_index,
    "index_docs": {{str(k): v for k, v in tokenizer.index_docs.items()}},
    "word_counts": dict(tokenizer.word_counts),
    "seqs": tokenizer.texts_to_sequences(texts + ["unseen words my dog"]),
    "texts": tokenizer.sequences_to_texts(tokenizer.texts_to_sequences(texts)),
    "matrices": {{m: tokenizer.texts_to_matrix(texts, mode=m).tolist() for m in ("binary", "count", "freq", "tfidf")}},
    "document_count": tokenizer.document_count,
}}
'''
CASES = ["", "num_words=6", "num_words=6, oov_token='<OOV>'", "oov_token='<OOV>'", "lower=False",
         "char_level=True, num_words=10", "filters='!?', split=' '"]


def _keras2(program: str) -> dict:
    driver = program.replace("from tensorflow.keras.preprocessing.text import Tokenizer",
                             "from tf_keras.preprocessing.text import Tokenizer")
    driver = f"import json, sys\ntexts = json.loads(sys.argv[1])\n{driver}\nprint('RESULT ' + json.dumps(out))\n"
    p = python("-c", driver, json.dumps(TEXTS), side="keras", timeout=600, env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, p.stderr[-3000:]
    return json.loads(line[-1][7:])


def test_the_tokenizer_is_written_out_without_keras():
    r = translate_source(textwrap.dedent(PROGRAM.format(args="num_words=6")), "m.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "keras" not in r.output.replace("keras.preprocessing.text.Tokenizer in plain", "")
    assert "\nclass Tokenizer:\n" in r.output and "tokenizer = Tokenizer(num_words=6)" in r.output


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="needs tf_keras (Keras 2)")
@pytest.mark.parametrize("args", CASES)
def test_the_tokenizer_numbers_words_as_keras_does(args):
    program = PROGRAM.format(args=args)
    want = _keras2(program)
    out = translate_source(textwrap.dedent(program), "m.py").output
    ns: dict = {"texts": list(TEXTS)}
    exec(compile(out, "m.py", "exec"), ns)
    got = json.loads(json.dumps(ns["out"]))  # (the same JSON round trip as Keras's side)
    for key in ("word_index", "index_docs", "word_counts", "seqs", "texts", "document_count"):
        assert got[key] == want[key], (args, key)
    assert list(got["word_index"]) == list(want["word_index"])  # the same order too
    for mode in ("binary", "count", "freq", "tfidf"):
        np.testing.assert_allclose(got["matrices"][mode], want["matrices"][mode], rtol=1e-12, err_msg=f"{args} {mode}")
