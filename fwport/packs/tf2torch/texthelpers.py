"""Helpers written into a translated file for Keras's vocabulary layers (see datahelpers.py, helpers.py).

TextVectorization, StringLookup and IntegerLookup are data preprocessing: a PyTorch engineer writes them
as a small plain-Python vocabulary object (a list of tokens and a dict from token to index) used in the
input pipeline. These classes keep Keras 3's numbering exactly (checked against Keras 3.15 in
tests/test_text_vectorization.py): the order adapt() learns (decreasing count, ties by decreasing token),
the reserved indices (the mask token "" at 0, the OOV token "[UNK]" at 1), max_tokens, TensorFlow's
ASCII-only lower-casing and ASCII punctuation, whitespace splitting on ASCII whitespace, ngrams, padding
and truncation to output_sequence_length, and the multi_hot / count / tf_idf / one_hot encodings.
They import numpy and torch in the methods that use them (written above their first use, like Tokenizer).
"""
from __future__ import annotations

_STRING_LOOKUP = '''

class StringLookup:
    """keras.layers.StringLookup in plain Python: the vocabulary is a list, its index a dict. Numbering as
    Keras's: mask_token (if any, "int" output only) is 0, then the OOV token (num_oov_indices=1; with 0 an
    unknown token is an error), then the vocabulary. adapt() learns it by decreasing count, ties by
    decreasing token, at most max_tokens entries in all. Calling it maps tokens (a str, a list, a numpy
    array) to a torch.int64 tensor of their indices of the same shape; output_mode "one_hot" adds an axis,
    "multi_hot" / "count" / "tf_idf" encode the last axis (int64; tf_idf float32); invert=True maps
    indices back to tokens."""

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token="[UNK]", vocabulary=None,
                 idf_weights=None, invert=False, output_mode="int", pad_to_max_tokens=False):
        output_mode = "tf_idf" if output_mode == "tf-idf" else output_mode
        if num_oov_indices not in (0, 1):
            raise NotImplementedError("num_oov_indices > 1: Keras spreads unknown tokens over the OOV indices "
                                      "with TensorFlow's string fingerprint, which is not written here")
        self.max_tokens, self.num_oov_indices = max_tokens, num_oov_indices
        self.mask_token, self.oov_token = mask_token, oov_token
        self.invert, self.output_mode, self.pad_to_max_tokens = invert, output_mode, pad_to_max_tokens
        self.tokens, self.index, self.idf_weights = [], {}, None
        self.static = vocabulary is not None  # (Keras refuses to adapt it then)
        if vocabulary is not None:
            self.set_vocabulary(vocabulary, idf_weights)

    def _token(self, value):
        if isinstance(value, bytes):
            return value.decode("utf-8")
        return str(value)

    def _special(self):
        mask = [self.mask_token] if self.mask_token is not None and self.output_mode == "int" else []
        return mask + [self.oov_token] * self.num_oov_indices

    def get_vocabulary(self, include_special_tokens=True):
        return (self._special() if include_special_tokens else []) + list(self.tokens)

    def vocabulary_size(self):
        return len(self._special()) + len(self.tokens)

    def set_vocabulary(self, vocabulary, idf_weights=None):
        import numpy as np

        if isinstance(vocabulary, str):  # a file of one token per line
            with open(vocabulary, encoding="utf-8") as f:
                vocabulary = f.read().splitlines()
        tokens = [self._token(t) for t in np.asarray(vocabulary, dtype=object).ravel()]
        special = self._special()
        if tokens[: len(special)] == special:  # a vocabulary written with its reserved tokens in front
            tokens = tokens[len(special):]
        self.tokens = tokens
        self.index = {t: i for i, t in enumerate(tokens, start=len(special))}
        if idf_weights is not None:
            idf = np.asarray(idf_weights, dtype=np.float32).ravel()
            if len(idf) == len(tokens):  # Keras gives the OOV slot the mean weight
                idf = np.concatenate([np.full(self.num_oov_indices, idf.mean(), np.float32), idf])
            self.idf_weights = idf

    def _documents(self, data):
        """The documents (lists of tokens) of `data`: each row of its last axis (each element of a 1-D array)."""
        import numpy as np

        if isinstance(data, (str, bytes, list, tuple, np.ndarray)) or hasattr(data, "numpy"):
            array = np.asarray(data.detach().numpy() if hasattr(data, "numpy") else data, dtype=object)
            rows = array.reshape(-1, 1) if array.ndim <= 1 else array.reshape(-1, array.shape[-1])
            return [[self._token(t) for t in row] for row in rows]
        return [doc for batch in data for doc in self._documents(batch)]  # a dataset: its batches

    def adapt(self, data, batch_size=None, steps=None):
        self._learn(self._documents(data))

    def _learn(self, documents):
        import numpy as np

        if self.static:
            raise ValueError("cannot adapt a layer given its vocabulary (as Keras)")
        counts, document_counts = {}, {}
        n = 0
        for doc in documents:
            n += 1
            for t in doc:
                counts[t] = counts.get(t, 0) + 1
            for t in set(doc):
                document_counts[t] = document_counts.get(t, 0) + 1
        for t in (self.mask_token, self.oov_token):
            counts.pop(t, None)
        ranked = sorted(counts, key=lambda t: (counts[t], t), reverse=True)  # Keras: by count, then token
        if self.max_tokens:
            ranked = ranked[: self.max_tokens - len(self._special())]
        self.tokens = ranked
        self.index = {t: i for i, t in enumerate(ranked, start=len(self._special()))}
        if self.output_mode == "tf_idf":
            df = np.array([document_counts[t] for t in ranked], dtype=np.float64)
            idf = np.log(1 + n / (1 + df)).astype(np.float32)
            oov = np.full(self.num_oov_indices, idf.mean() if len(idf) else 0, np.float32)
            self.idf_weights = np.concatenate([oov, idf])

    def _lookup(self, token):
        """The index of `token` (None for the mask token outside "int" output)."""
        if self.mask_token is not None and token == self.mask_token:
            return 0 if self.output_mode == "int" else None
        i = self.index.get(token)
        if i is None:
            if not self.num_oov_indices:
                raise KeyError(f"{token!r} is not in the vocabulary and num_oov_indices is 0")
            i = len(self._special()) - 1
        return i

    def _depth(self):
        return self.max_tokens if self.pad_to_max_tokens and self.max_tokens else self.vocabulary_size()

    def _encode(self, docs):
        """multi_hot / count / tf_idf rows of lists of tokens: a (len(docs), depth) numpy array."""
        import numpy as np

        out = np.zeros((len(docs), self._depth()), dtype=np.float32 if self.output_mode == "tf_idf" else np.int64)
        for row, doc in enumerate(docs):
            for t in doc:
                i = self._lookup(t)
                if i is None:
                    continue
                if self.output_mode == "multi_hot":
                    out[row, i] = 1
                else:
                    out[row, i] += 1
        if self.output_mode == "tf_idf":
            idf = np.zeros(out.shape[1], np.float32)
            idf[: len(self.idf_weights)] = self.idf_weights[: out.shape[1]]
            out = out * idf
        return out

    def __call__(self, inputs):
        import numpy as np
        import torch

        array = np.asarray(inputs.detach().numpy() if hasattr(inputs, "numpy") else inputs, dtype=object)
        if self.invert:
            vocab = self.get_vocabulary()
            fallback = self.oov_token
            out = np.array([vocab[int(i)] if 0 <= int(i) < len(vocab) else fallback for i in array.ravel()],
                           dtype=object).reshape(array.shape)
            return self._inverted(out)
        if self.output_mode == "int":
            ids = [self._lookup(self._token(t)) for t in array.ravel()]
            return torch.tensor(np.array(ids, dtype=np.int64).reshape(array.shape))
        if self.output_mode == "one_hot":
            flat = array.reshape(-1)
            out = np.zeros((len(flat), self._depth()), dtype=np.int64)
            for row, t in enumerate(flat):
                i = self._lookup(self._token(t))
                if i is not None:
                    out[row, i] = 1
            return torch.from_numpy(out.reshape(array.shape + (-1,) if array.ndim else (1, -1)))
        if array.ndim == 0:
            array = array.reshape(1)
        rows = array.reshape(-1, array.shape[-1])
        out = self._encode([[self._token(t) for t in row] for row in rows])
        return torch.from_numpy(out.reshape(array.shape[:-1] + (-1,)))

    def _inverted(self, tokens):
        return tokens
'''

_INTEGER_LOOKUP = '''

class IntegerLookup(StringLookup):
    """keras.layers.IntegerLookup: StringLookup's numbering over integer tokens (mask_token None, oov_token -1
    by default); invert=True gives a torch.int64 tensor of tokens."""

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token=-1, vocabulary=None,
                 vocabulary_dtype="int64", idf_weights=None, invert=False, output_mode="int", pad_to_max_tokens=False):
        super().__init__(max_tokens=max_tokens, num_oov_indices=num_oov_indices, mask_token=mask_token,
                         oov_token=oov_token, vocabulary=vocabulary, idf_weights=idf_weights, invert=invert,
                         output_mode=output_mode, pad_to_max_tokens=pad_to_max_tokens)

    def _token(self, value):
        return int(value)

    def _inverted(self, tokens):
        import numpy as np
        import torch

        return torch.tensor(tokens.astype(np.int64))
'''

_TEXT_VECTORIZATION = '''

class TextVectorization:
    """keras.layers.TextVectorization in plain Python: each text is standardized (TensorFlow lower-cases ASCII
    letters only, and strips the ASCII punctuation), split (on runs of ASCII whitespace, or into characters),
    optionally turned into ngrams (all the widths given: ngrams=2 means 1- and 2-grams, in that order), and
    looked up in a StringLookup vocabulary ("" is 0, "[UNK]" 1 in "int" output). Calling it on a batch of
    texts gives a torch.int64 tensor (batch, output_sequence_length) padded or cut at the end with 0 (or to
    the longest text), or (batch, vocabulary size) for multi_hot / count (int64) and tf_idf (float32); one
    text gives one row."""

    _PUNCTUATION = r'[!"#$%&()\\*\\+,-\\./:;<=>?@\\[\\\\\\]^_`{|}~\\']'
    _ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

    def __init__(self, max_tokens=None, standardize="lower_and_strip_punctuation", split="whitespace", ngrams=None,
                 output_mode="int", output_sequence_length=None, pad_to_max_tokens=False, vocabulary=None,
                 idf_weights=None):
        if split not in ("whitespace", "character"):
            raise NotImplementedError(f"split={split!r}: only 'whitespace' and 'character' are written here")
        self.standardize, self.split = standardize, split
        self.ngrams = tuple(range(1, ngrams + 1)) if isinstance(ngrams, int) else (tuple(ngrams) if ngrams else None)
        self.output_mode = "tf_idf" if output_mode == "tf-idf" else output_mode
        self.output_sequence_length = output_sequence_length
        self.lookup = StringLookup(max_tokens=max_tokens, mask_token="", vocabulary=vocabulary,
                                   idf_weights=idf_weights, output_mode=output_mode, pad_to_max_tokens=pad_to_max_tokens)

    def get_vocabulary(self, include_special_tokens=True):
        return self.lookup.get_vocabulary(include_special_tokens)

    def vocabulary_size(self):
        return self.lookup.vocabulary_size()

    def set_vocabulary(self, vocabulary, idf_weights=None):
        self.lookup.set_vocabulary(vocabulary, idf_weights)

    def _tokens(self, text):
        import re

        text = self.lookup._token(text)
        if self.standardize in ("lower", "lower_and_strip_punctuation"):
            text = text.translate(self._ASCII_LOWER)
        if self.standardize in ("strip_punctuation", "lower_and_strip_punctuation"):
            text = re.sub(self._PUNCTUATION, "", text)
        if callable(self.standardize):
            text = self.lookup._token(self.standardize(text))
        if self.split == "whitespace":
            tokens = [t for t in re.split(r"[ \\t\\n\\v\\f\\r]+", text) if t]
        else:
            tokens = list(text)
        if self.ngrams:
            tokens = [" ".join(tokens[i : i + n]) for n in self.ngrams for i in range(len(tokens) - n + 1)]
        return tokens

    def _texts(self, data):
        import numpy as np

        if isinstance(data, (str, bytes, list, tuple, np.ndarray)) or hasattr(data, "numpy"):
            return list(np.asarray(data.detach().numpy() if hasattr(data, "numpy") else data, dtype=object).ravel())
        return [text for batch in data for text in self._texts(batch)]  # a dataset: its batches

    def adapt(self, data, batch_size=None, steps=None):
        self.lookup._learn([self._tokens(t) for t in self._texts(data)])

    def __call__(self, inputs):
        import numpy as np
        import torch

        array = np.asarray(inputs.detach().numpy() if hasattr(inputs, "numpy") else inputs, dtype=object)
        one = array.ndim == 0
        texts = list(array.reshape(-1))  # (batch,) or (batch, 1)
        docs = [self._tokens(t) for t in texts]
        if self.output_mode != "int":
            out = self.lookup._encode(docs)
            return torch.from_numpy(out[0] if one else out)
        ids = [[self.lookup._lookup(t) for t in doc] for doc in docs]
        length = self.output_sequence_length
        if length is None:
            length = max((len(row) for row in ids), default=0)
        out = np.zeros((len(ids), length), dtype=np.int64)
        for row, seq in enumerate(ids):
            seq = seq[:length]
            out[row, : len(seq)] = seq
        return torch.from_numpy(out[0] if one else out)
'''

_STRINGS_LOWER = '''

def strings_lower(input, encoding=""):
    """tf.strings.lower on Python strings (a str, bytes, or a list / numpy array of them): TensorFlow lower-cases
    the ASCII letters only (encoding ""), so "ÀB" becomes "Àb"."""
    import numpy as np

    def lower(text):
        text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
        return text.translate(str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"))

    if isinstance(input, (str, bytes)):
        return lower(input)
    return np.vectorize(lower, otypes=[object])(np.asarray(input, dtype=object))
'''

_REGEX_REPLACE = '''

def regex_replace(input, pattern, rewrite, replace_global=True):
    """tf.strings.regex_replace on Python strings (a str, bytes, or a list / numpy array of them) with Python's re.
    The rewrite is read as RE2 reads it (a backslash and a digit: that group, 0 the whole match; two backslashes:
    one); the escapes w, d, s and b match ASCII only, as in RE2 (re.ASCII); the RE2 syntax Python's re reads
    otherwise or not at all (POSIX classes such as [[:alpha:]], the escapes p, P, z, C and Q) is refused."""
    import re

    import numpy as np

    if re.search(r"\\[:|\\\\[pPzCQ]", pattern):
        raise NotImplementedError(f"regex_replace: {pattern!r} uses RE2 syntax that Python's re reads otherwise")
    compiled = re.compile(pattern, re.ASCII)  # RE2's \\w, \\d, \\s and \\b are ASCII classes

    def substitute(match):
        return re.sub(r"\\\\(\\d|\\\\)", lambda r: "\\\\" if r.group(1) == "\\\\" else (match.group(int(r.group(1))) or ""),
                      rewrite)

    def replace(text):
        text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
        return compiled.sub(substitute, text, count=0 if replace_global else 1)

    if isinstance(input, (str, bytes)):
        return replace(input)
    return np.vectorize(replace, otypes=[object])(np.asarray(input, dtype=object))
'''

_REDUCE_JOIN = '''

def reduce_join(inputs, axis=None, keepdims=False, separator=""):
    \"\"\"tf.strings.reduce_join on Python strings (a str, bytes, or a list / numpy array of them): the strings joined
    with separator along axis (an int or a list of ints, the first listed varying fastest; None: every axis, in
    row-major order), the reduced axes kept as size 1 with keepdims. A whole reduction gives a str (what
    TensorFlow's .numpy().decode("utf-8") gives), a partial one a numpy array of str.\"\"\"
    import numpy as np

    def text(value):
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)

    array = np.asarray(inputs, dtype=object)
    array = np.vectorize(text, otypes=[object])(array) if array.size else array
    rank = array.ndim
    axes = list(range(rank))[::-1] if axis is None else [int(a) for a in np.ravel(np.asarray(axis, dtype=object))]
    axes = [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise IndexError(f"reduce_join: axis {axis} is out of range or repeated for a rank {rank} input")
    kept = [a for a in range(rank) if a not in axes]
    size = int(np.prod([array.shape[a] for a in axes]))
    moved = array.transpose(kept + axes[::-1]).reshape([array.shape[a] for a in kept] + [size])
    joined = np.empty(moved.shape[:-1], dtype=object)
    for index in np.ndindex(joined.shape):
        joined[index] = text(separator).join(moved[index])
    if keepdims:
        joined = joined.reshape([1 if a in axes else array.shape[a] for a in range(rank)])
    return joined.item() if joined.ndim == 0 else joined
'''

_UNICODE_SPLIT = '''

def unicode_split(input, input_encoding, errors="replace", replacement_char=65533):
    \"\"\"tf.strings.unicode_split on Python strings: a str (TensorFlow's UTF-8 bytes) or bytes gives the list of its
    characters (code points) as str; a list / numpy array of them, a list of such lists (TensorFlow's ragged rows).
    The bytes are decoded with input_encoding ("UTF-8", "UTF-16-BE" or "UTF-32-BE"); an invalid sequence is
    replaced by chr(replacement_char) (errors="replace"), dropped ("ignore") or raises ("strict").\"\"\"
    import codecs

    import numpy as np

    codec = {"UTF-8": "utf-8", "UTF-16-BE": "utf-16-be", "UTF-32-BE": "utf-32-be"}.get(input_encoding)
    if codec is None or errors not in ("replace", "ignore", "strict"):
        raise ValueError(f"unicode_split: input_encoding {input_encoding!r} / errors {errors!r}: TensorFlow takes "
                         "UTF-8, UTF-16-BE or UTF-32-BE and replace, ignore or strict")
    handler = errors
    if errors == "replace" and replacement_char != 65533:
        handler = f"unicode_split_{replacement_char}"
        codecs.register_error(handler, lambda error: (chr(replacement_char), error.end))

    def split(text):
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return list(data.decode(codec, handler))

    if isinstance(input, (str, bytes)):
        return split(input)
    return [unicode_split(item, input_encoding, errors, replacement_char) if not isinstance(item, (str, bytes))
            else split(item) for item in (input.tolist() if isinstance(input, np.ndarray) else input)]
'''

_STRINGS_SPLIT = '''

def strings_split(input, sep=None, maxsplit=-1):
    \"\"\"tf.strings.split on Python strings: a str or bytes gives the list of its pieces (str) split at sep (empty
    pieces kept), or with sep None or "" at runs of ASCII whitespace (space, tab, newline, carriage return, vertical
    tab, form feed: TensorFlow's set; no empty pieces, except TensorFlow's last one when maxsplit pieces come
    before the end); at most maxsplit splits (-1: all). A list / numpy array of strings gives a list of such lists
    (TensorFlow's ragged rows).\"\"\"
    import numpy as np

    def split(text):
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        cut = None if sep is None or sep in ("", b"") else (sep.encode("utf-8") if isinstance(sep, str) else sep)
        if cut is not None or maxsplit < 0:
            return [piece.decode("utf-8") for piece in data.split(cut, maxsplit)]  # (bytes: ASCII whitespace only)
        if maxsplit == 0:
            return [data.decode("utf-8")]
        pieces, rest = [], data.lstrip()  # TensorFlow's whitespace split with a maxsplit: once that many pieces
        while rest:  # are taken, the rest after the whitespace is one more piece, even an empty one
            head = rest.split(None, 1)
            pieces.append(head[0])
            rest = head[1] if len(head) > 1 else b""
            if len(pieces) == maxsplit:
                pieces.append(rest)
                break
        return [piece.decode("utf-8") for piece in pieces]

    if isinstance(input, (str, bytes)):
        return split(input)
    return [strings_split(item, sep, maxsplit) if not isinstance(item, (str, bytes)) else split(item)
            for item in (input.tolist() if isinstance(input, np.ndarray) else input)]
'''

_TO_NUMBER = '''

def to_number(input, out_type=None):
    \"\"\"tf.strings.to_number on Python strings (a str, bytes, or a (nested) list / numpy array of them): a torch
    tensor of out_type (torch.float32 by default; float64, int32, int64), each string read as TensorFlow reads it:
    ASCII whitespace around it ignored; an integer type takes decimal digits with a sign only, in range; a float
    type also takes a fraction, an exponent, inf / infinity / nan and hexadecimal (0x10, 0x1p3), past its range
    inf. Anything else (an empty string, 1_0, non-ASCII digits) raises ValueError, as TensorFlow raises.\"\"\"
    import re

    import numpy as np
    import torch

    dtype = torch.float32 if out_type is None else out_type
    if dtype not in (torch.float32, torch.float64, torch.int32, torch.int64):
        raise ValueError(f"to_number: out_type {dtype} is not float32, float64, int32 or int64")

    def number(text):
        raw = text.decode("utf-8") if isinstance(text, bytes) else str(text)
        text = raw.strip(" \\t\\n\\r\\v\\f")
        if dtype in (torch.int32, torch.int64):
            bits = 31 if dtype == torch.int32 else 63
            if re.fullmatch("[+-]?[0-9]+", text) and -2 ** bits <= int(text) < 2 ** bits:
                return int(text)
        elif text.isascii() and "_" not in text:
            try:
                return float(text)
            except ValueError:
                try:
                    return float.fromhex(text)
                except ValueError:
                    pass
        raise ValueError(f"StringToNumberOp could not correctly convert string: {raw}")

    array = np.asarray(input, dtype=object)
    values = np.vectorize(number, otypes=[object])(array) if array.size else array
    return torch.tensor(values.tolist(), dtype=dtype)
'''

_STRINGS_LENGTH = '''

def strings_length(input, unit="BYTE"):
    \"\"\"tf.strings.length on Python strings (a str, bytes, or a (nested) list / numpy array of them): an int32
    torch tensor of their lengths in UTF-8 bytes (unit "BYTE", a str's UTF-8 encoding) or in characters ("UTF8_CHAR":
    the bytes that do not continue a UTF-8 sequence, as TensorFlow counts them, invalid bytes included).\"\"\"
    import numpy as np
    import torch

    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"strings_length: unit {unit!r} is not 'BYTE' or 'UTF8_CHAR'")

    def length(text):
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return len(data) if unit == "BYTE" else sum(1 for byte in data if byte & 0xC0 != 0x80)

    array = np.asarray(input, dtype=object)
    values = np.vectorize(length, otypes=[object])(array) if array.size else array
    return torch.tensor(values.tolist(), dtype=torch.int32)
'''

TEXT_HELPERS: dict[str, str] = {
    "strings_length": _STRINGS_LENGTH,
    "to_number": _TO_NUMBER,
    "strings_split": _STRINGS_SPLIT,
    "unicode_split": _UNICODE_SPLIT,
    "reduce_join": _REDUCE_JOIN,
    "strings_lower": _STRINGS_LOWER,
    "regex_replace": _REGEX_REPLACE,
    "StringLookup": _STRING_LOOKUP,
    "IntegerLookup": _INTEGER_LOOKUP,
    "TextVectorization": _TEXT_VECTORIZATION,
}

TEXT_DEPS: dict[str, tuple[str, ...]] = {
    "IntegerLookup": ("StringLookup",),
    "TextVectorization": ("StringLookup",),
}
