"""Helpers written into a translated file for TFRecord files and tf.train.Example records (see datahelpers.py).

A PyTorch program without TensorFlow reads and writes TFRecord files with a few lines of plain Python: a
TFRecord file is a sequence of records, each the data's length (uint64, little-endian), the masked CRC-32C
of those 8 bytes (uint32), the data, and the data's masked CRC-32C; a tf.train.Example is a small protocol
buffer (Example.features = Features; Features.feature = map<string, Feature>; Feature = oneof bytes_list,
float_list, int64_list, each a repeated field, packed for floats and ints). These helpers write exactly that
(checked against TensorFlow 2.21 both ways in tests/test_tfrecord.py) and parse it with TensorFlow's rules for
tf.io.parse_single_example's FixedLenFeature / VarLenFeature. They import what they use in their bodies.
"""
from __future__ import annotations

_CRC32C = '''

def masked_crc32c(data, _table=[]):
    """The CRC-32C (Castagnoli) of data, masked as TFRecord files store it (rotated right by 15 bits, plus
    0xa282ead8, modulo 2 ** 32). Plain Python, table-driven: about 1 MB of data a second, which bounds the
    speed of writing and reading (TensorFlow checks every record's CRC, and so does tfrecord_dataset)."""
    if not _table:
        for n in range(256):
            for _ in range(8):
                n = (n >> 1) ^ 0x82F63B78 if n & 1 else n >> 1
            _table.append(n)
    table, crc = _table, 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
'''

_WRITER = '''

class TFRecordWriter:
    """tf.io.TFRecordWriter: writes records (bytes, e.g. Example(...).SerializeToString()) to a TFRecord file
    that TensorFlow's tf.data.TFRecordDataset reads; options "GZIP" or "ZLIB" compress the file as TensorFlow
    does ("" or None: uncompressed). A context manager, or call close()."""

    def __init__(self, path, options=None):
        import gzip
        import zlib

        if options not in (None, "", "GZIP", "ZLIB"):
            raise NotImplementedError(f"TFRecordWriter options {options!r}: only None, '', 'GZIP' and 'ZLIB' are written here")
        self.file = gzip.open(path, "wb") if options == "GZIP" else open(path, "wb")
        self.zlib = zlib.compressobj() if options == "ZLIB" else None

    def write(self, record):
        import struct

        record = bytes(record)
        header = struct.pack("<Q", len(record))
        data = header + struct.pack("<I", masked_crc32c(header)) + record + struct.pack("<I", masked_crc32c(record))
        self.file.write(self.zlib.compress(data) if self.zlib is not None else data)

    def flush(self):
        self.file.flush()

    def close(self):
        if self.zlib is not None:
            self.file.write(self.zlib.flush())
            self.zlib = None
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
'''

_DATASET = '''

def tfrecord_dataset(filenames, compression_type=None, num_parallel_reads=None):
    """tf.data.TFRecordDataset: a DataPipeline of the files' records (Python bytes), read lazily each pass and
    checked as TensorFlow checks them (the length's and the data's CRC-32C). compression_type "GZIP" / "ZLIB"
    reads compressed files. With num_parallel_reads > 1 the files are interleaved as TensorFlow does: that
    many open at a time, one record from each in turn (-1, AUTOTUNE: as many as the machine has schedulable cores)."""
    import gzip
    import io
    import os
    import struct
    import zlib

    if isinstance(filenames, (str, bytes, os.PathLike)):
        filenames = [filenames]
    if compression_type not in (None, "", "GZIP", "ZLIB"):
        raise ValueError(f"compression_type {compression_type!r}: TensorFlow reads '', 'GZIP' or 'ZLIB'")

    def read(path):
        path = path.decode() if isinstance(path, bytes) else str(path)
        with (gzip.open(path, "rb") if compression_type == "GZIP" else open(path, "rb")) as f:
            if compression_type == "ZLIB":
                f = io.BytesIO(zlib.decompress(f.read()))
            at = 0
            while True:
                header = f.read(12)
                if not header:
                    return
                if len(header) < 12 or struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
                    raise ValueError(f"corrupted record at offset {at} of {path}")
                (n,) = struct.unpack("<Q", header[:8])
                record = f.read(n + 4)
                if len(record) < n + 4 or struct.unpack("<I", record[n:])[0] != masked_crc32c(record[:n]):
                    raise ValueError(f"corrupted record at offset {at} of {path}")
                at += 16 + n
                yield record[:n]

    files = DataPipeline(lambda: iter(list(filenames)))  # interleaved as tf.data reads them (AUTOTUNE: None)
    return files.interleave(read, cycle_length=None if num_parallel_reads == -1 else max(num_parallel_reads or 1, 1))
'''

_TEXT_LINES = '''

def text_line_dataset(filenames, compression_type=None, num_parallel_reads=None):
    \"\"\"tf.data.TextLineDataset: a DataPipeline of the files' lines as Python str (UTF-8), read lazily each pass.
    As TensorFlow reads them: a line ends at "\\n", every "\\r" is dropped (so "\\r\\n" ends a line too), an
    empty line is kept but nothing after the last "\\n" unless it holds a character other than "\\r".
    compression_type "GZIP" / "ZLIB" reads compressed files; num_parallel_reads > 1 interleaves the files
    (that many open at a time, one line from each in turn; -1, AUTOTUNE: as many as the schedulable cores).\"\"\"
    import gzip
    import io
    import os
    import zlib

    if isinstance(filenames, (str, bytes, os.PathLike)):
        filenames = [filenames]
    if compression_type not in (None, "", "GZIP", "ZLIB"):
        raise ValueError(f"compression_type {compression_type!r}: TensorFlow reads '', 'GZIP' or 'ZLIB'")

    def read(path):
        path = path.decode() if isinstance(path, bytes) else str(path)
        with (gzip.open(path, "rb") if compression_type == "GZIP" else open(path, "rb")) as f:
            if compression_type == "ZLIB":
                f = io.BytesIO(zlib.decompress(f.read()))
            for line in f:
                ended = line.endswith(b"\\n")
                line = (line[:-1] if ended else line).replace(b"\\r", b"")
                if ended or line:
                    yield line.decode("utf-8")

    files = DataPipeline(lambda: iter(list(filenames)))  # interleaved as tf.data reads them (AUTOTUNE: None)
    return files.interleave(read, cycle_length=None if num_parallel_reads == -1 else max(num_parallel_reads or 1, 1))
'''

_LIST_FILES = '''

def list_files(file_pattern, shuffle=None, seed=None):
    \"\"\"tf.data.Dataset.list_files: a DataPipeline of the paths (Python str) that match the glob pattern(s), in
    sorted order over all patterns (a path two patterns match comes twice; "*" matches dot files too from Python
    3.11), and shuffled when shuffle is None or True (TensorFlow's default): a full shuffle, a new order each
    pass, seeded by seed. No match raises, as TensorFlow does when the dataset is made.\"\"\"
    import glob
    import os

    patterns = [file_pattern] if isinstance(file_pattern, (str, bytes, os.PathLike)) else list(file_pattern)
    patterns = [p.decode() if isinstance(p, bytes) else str(p) for p in patterns]
    try:
        paths = sorted(path for p in patterns for path in glob.glob(p, include_hidden=True))
    except TypeError:  # Python < 3.11: its glob skips dot files, which TensorFlow matches
        paths = sorted(path for p in patterns for path in glob.glob(p))
    if not paths:
        raise ValueError(f"No files matched pattern: {', '.join(patterns)}")
    files = DataPipeline.from_tensor_slices(paths)
    return files.shuffle(len(paths), seed=seed) if shuffle is None or shuffle else files
'''

_CSV_DATASET = '''

def make_csv_dataset(file_pattern, batch_size, column_names=None, column_defaults=None, label_name=None,
                     select_columns=None, field_delim=",", use_quote_delim=True, na_value="", header=True,
                     num_epochs=None, shuffle=True, shuffle_buffer_size=10000, shuffle_seed=None,
                     num_parallel_reads=None, num_rows_for_inference=100, compression_type=None,
                     ignore_errors=False, encoding="utf-8"):
    \"\"\"tf.data.experimental.make_csv_dataset: a DataPipeline of batches of CSV records, each an OrderedDict of
    column name → batch_size values (label_name's column popped out as (features, label)), as TensorFlow 2.21
    makes them. The files are the sorted matches of file_pattern; header skips (and, without column_names,
    names) each file's first line. column_defaults: per column a default (Python int → torch.int32, or int64
    past its range; float → float32; str → Python str) or a torch dtype (the column is then required);
    None infers each column's type from the first num_rows_for_inference records (the narrowest of int32,
    int64, float32, float64, str that reads every value; default 0 or ""). An empty field, or one equal to
    na_value, takes its column's default. A record with the wrong number of fields, a bad quote or a value its
    type cannot read raises ValueError, or is skipped with ignore_errors. shuffle shuffles the files and the
    records (a buffer of shuffle_buffer_size), a new order each pass (TensorFlow's order itself cannot be
    reproduced); num_epochs=None repeats forever and drops a last short batch. Strings are Python str.\"\"\"
    import collections
    import csv
    import glob
    import gzip
    import io
    import os
    import re
    import zlib

    import numpy as np
    import torch

    patterns = [file_pattern] if isinstance(file_pattern, (str, bytes, os.PathLike)) else list(file_pattern)
    patterns = [p.decode() if isinstance(p, bytes) else str(p) for p in patterns]
    files = sorted(path for p in patterns for path in glob.glob(p))
    if not files:
        raise ValueError(f"No files match `file_pattern` {file_pattern}.")
    if compression_type not in (None, "", "GZIP", "ZLIB"):
        raise ValueError(f"compression_type {compression_type!r}: TensorFlow reads '', 'GZIP' or 'ZLIB'")
    quoting = csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE

    def records(path):  # each record's fields (a list of str), or None for one csv cannot read
        with open(path, "rb") as f:
            data = f.read()
        data = gzip.decompress(data) if compression_type == "GZIP" else (
            zlib.decompress(data) if compression_type == "ZLIB" else data)
        reader = csv.reader(io.StringIO(data.decode(encoding), newline=""), delimiter=field_delim,
                            quoting=quoting, strict=True)
        while True:
            try:
                yield next(reader)
            except StopIteration:
                return
            except csv.Error:
                yield None

    if column_names is None:
        if not header:
            raise ValueError("Expected `column_names` or `header` arguments. Neither is provided.")
        heads = [next(records(path), None) for path in files]
        if any(head is None for head in heads):
            raise ValueError("Failed when reading the header line of a file. Is it an empty file?")
        if any(head != heads[0] for head in heads):
            raise ValueError("All input CSV files should have the same column names in the header row.")
        column_names = heads[0]
    column_names = list(column_names)
    if len(set(column_names)) != len(column_names):
        raise ValueError(f"`column_names` or the CSV header row holds duplicate column names: {column_names}")
    selected = list(range(len(column_names)))
    if select_columns is not None:
        index = {name: i for i, name in enumerate(column_names)}
        picked = [v if isinstance(v, int) else index.get(v) for v in select_columns]
        if any(i is None or not 0 <= i < len(column_names) for i in picked):
            raise ValueError(f"`select_columns` {select_columns} must name or index columns of {column_names}")
        if len(set(picked)) != len(picked):
            raise ValueError(f"The `select_columns` argument contains duplicate columns: {select_columns}")
        selected = sorted(picked)
    required = object()
    kinds = {torch.int32: torch.int32, torch.int64: torch.int64, torch.float32: torch.float32,
             torch.float64: torch.float64, str: str, bytes: str}

    def default_of(value):  # (the column's type: a torch dtype or str, its default or required)
        if isinstance(value, torch.dtype) or value in (str, bytes):
            if value not in kinds:
                raise ValueError(f"column_defaults: {value} is not a CSV type (int32, int64, float32, float64, str)")
            return kinds[value], required
        if isinstance(value, (list, tuple, np.ndarray, torch.Tensor)) and not isinstance(value, np.generic):
            flat = list(np.asarray(value.tolist() if isinstance(value, torch.Tensor) else value,
                                   dtype=object).reshape(-1))
            if len(flat) != 1:
                raise ValueError(f"column_defaults: {value!r} must hold one default (an empty one needs its dtype)")
            kind = {"int32": torch.int32, "int64": torch.int64, "float32": torch.float32, "float64": torch.float64,
                    }.get(str(getattr(value, "dtype", "")).replace("torch.", ""))
            return (kind, flat[0]) if kind is not None else default_of(flat[0])
        if isinstance(value, np.generic):
            kind = {"int32": torch.int32, "int64": torch.int64, "float32": torch.float32, "float64": torch.float64,
                    }.get(value.dtype.name)
            if kind is None:
                raise ValueError(f"column_defaults: {value!r} is not an int32, int64, float32 or float64 default")
            return kind, value.item()
        if isinstance(value, (str, bytes)):
            return str, value.decode() if isinstance(value, bytes) else value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"column_defaults: {value!r} is not an int, float or str default")
        if isinstance(value, float):
            return torch.float32, value
        return (torch.int32 if -2 ** 31 <= value < 2 ** 31 else torch.int64), value

    if column_defaults is not None:
        columns = [default_of(value) for value in column_defaults]
        if len(columns) != len(selected):
            raise ValueError(f"column_defaults has {len(columns)} entries for {len(selected)} columns")
    else:  # TensorFlow's inference: the narrowest type that reads every value so far
        if compression_type == "ZLIB":
            raise ValueError("`compression_type` ZLIB is not supported for probing columns.")

        def fits(text, kind):
            try:
                if kind == "int32":
                    return np.int32(text) == np.int64(text)
                if kind == "int64":
                    return np.int64(text) is not None
                if kind in ("float32", "float64"):
                    return getattr(np, kind)(text) < np.inf
                return True
            except (ValueError, OverflowError):
                return False

        order = ["int32", "int64", "float32", "float64", "str"]
        inferred = [None] * len(selected)
        seen = 0
        for path in files:
            rows = records(path)
            if header:
                next(rows, None)
            for row in rows:
                if num_rows_for_inference is not None and seen >= num_rows_for_inference:
                    break
                if row is None or len(row) != len(column_names):
                    raise ValueError(f"Problem inferring types: a record of {path} has "
                                     f"{'unreadable' if row is None else len(row)} fields. Expected: "
                                     f"{len(column_names)}.")
                seen += 1
                for j, i in enumerate(selected):
                    if row[i] in ("", na_value):
                        continue
                    start = 0 if inferred[j] is None else order.index(inferred[j])
                    inferred[j] = next(kind for kind in order[start:] if fits(row[i], kind))
        columns = [(str, "") if kind in (None, "str") else (getattr(torch, kind), 0) for kind in inferred]
    names = [column_names[i] for i in selected]
    if label_name is not None and label_name not in names:
        raise ValueError(f"`label_name` provided must be one of the columns: {names}. Received: {label_name}.")

    def parse(text, kind):
        if kind is str:
            return text
        text = text.strip()
        if kind in (torch.int32, torch.int64):
            info = np.iinfo(np.int32 if kind == torch.int32 else np.int64)
            if not re.fullmatch("[+-]?[0-9]+", text) or not info.min <= int(text) <= info.max:
                raise ValueError(f"is not a valid {str(kind)[6:]}: {text}")
            return torch.tensor(int(text), dtype=kind)
        try:
            if "_" in text:
                raise ValueError
            value = float(text)
        except ValueError:
            try:
                value = float.fromhex(text)
            except ValueError:
                raise ValueError(f"is not a valid {str(kind)[6:]}: {text}") from None
        return torch.tensor(value, dtype=kind)

    def element(path, row):  # the record's selected values, or None (skipped) with ignore_errors
        try:
            if row is None:
                raise ValueError("a quote out of place")
            if len(row) != len(column_names):
                raise ValueError(f"Expect {len(column_names)} fields but have {len(row)}")
            values = []
            for i, (kind, default) in zip(selected, columns):
                if row[i] in ("", na_value):
                    if default is required:
                        raise ValueError(f"Field {i} is required but missing")
                    values.append(default if kind is str else torch.tensor(default, dtype=kind))
                else:
                    try:
                        values.append(parse(row[i], kind))
                    except ValueError as error:
                        raise ValueError(f"Field {i} in record {error}") from None
            return tuple(values)
        except ValueError as error:
            if ignore_errors:
                return None
            raise ValueError(f"{error} in record {row!r} of {path}") from None

    def read(path):
        rows = records(path)
        if header:
            next(rows, None)
        for row in rows:
            value = element(path, row)
            if value is not None:
                yield value

    generator = torch.Generator()
    generator.manual_seed(shuffle_seed if shuffle_seed is not None else int(torch.randint(2 ** 62, ())))

    def paths():  # in a new order each pass when shuffled
        return iter([files[i] for i in torch.randperm(len(files), generator=generator)] if shuffle else files)

    def organize(*values):
        features = collections.OrderedDict(zip(names, values))
        return features if label_name is None else (features, features.pop(label_name))

    rows = DataPipeline(paths).interleave(  # as tf.data interleaves the files (AUTOTUNE: None)
        read, cycle_length=None if num_parallel_reads == -1 else max(num_parallel_reads or 1, 1))
    if shuffle:
        rows = rows.shuffle(shuffle_buffer_size, seed=shuffle_seed)
    if num_epochs != 1:
        rows = rows.repeat(num_epochs)
    return rows.batch(batch_size, drop_remainder=num_epochs is None).map(organize)
'''

_WIRE = '''

def protobuf_fields(data):
    """The fields of a protocol buffer message: (field number, wire type, value) in order; a varint is an int,
    a length-delimited field bytes, a fixed32 / fixed64 field its 4 / 8 bytes."""
    at, data = 0, bytes(data)

    def varint():
        nonlocal at
        value = shift = 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while at < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            value = varint()
        elif wire == 2:
            n = varint()
            value, at = data[at: at + n], at + n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            value, at = data[at: at + n], at + n
        else:
            raise ValueError(f"protocol buffer wire type {wire} is not read here")
        yield number, wire, value


def protobuf_varints(data):
    """The ints of a packed repeated varint field (int64: two's complement)."""
    out, value, shift = [], 0, 0
    for byte in bytes(data):
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            out.append(value - 2 ** 64 if value >= 2 ** 63 else value)
            value = shift = 0
    return out


def protobuf_varint(value):
    """value (an int; a negative one as its 64-bit two's complement) as a protocol buffer varint."""
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
'''

_INT64_LIST = '''

class Int64List:
    \"\"\"tf.train.Int64List: value, a list of 64-bit ints (numpy / torch integers taken as ints; floats are refused,
    as protobuf refuses them). SerializeToString / FromString: the protocol buffer (a packed repeated field).\"\"\"

    def __init__(self, value=()):
        import operator

        self.value = [operator.index(v) for v in value]
        for v in self.value:
            if not -2 ** 63 <= v < 2 ** 63:
                raise ValueError(f"Int64List: {v} is out of the int64 range")

    def SerializeToString(self):
        packed = b"".join(protobuf_varint(v) for v in self.value)
        return b"\\x0a" + protobuf_varint(len(packed)) + packed if packed else b""

    @classmethod
    def FromString(cls, data):
        out = cls()
        for number, wire, value in protobuf_fields(data):
            if number == 1:
                out.value.extend(protobuf_varints(value) if wire == 2 else [value - 2 ** 64 if value >= 2 ** 63 else value])
        return out
'''

_FLOAT_LIST = '''

class FloatList:
    \"\"\"tf.train.FloatList: value, a list of floats kept as float32 (rounded to nearest, as protobuf stores them).
    SerializeToString / FromString: the protocol buffer (a packed repeated field).\"\"\"

    def __init__(self, value=()):
        import struct

        values = [float(v) for v in value]
        self.value = list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))

    def SerializeToString(self):
        import struct

        packed = struct.pack(f"<{len(self.value)}f", *self.value)
        return b"\\x0a" + protobuf_varint(len(packed)) + packed if packed else b""

    @classmethod
    def FromString(cls, data):
        import struct

        out = cls()
        for number, wire, value in protobuf_fields(data):
            if number == 1:
                out.value.extend(struct.unpack(f"<{len(value) // 4}f", value))
        return out
'''

_BYTES_LIST = '''

class BytesList:
    \"\"\"tf.train.BytesList: value, a list of bytes (a str is refused, as protobuf refuses it; encode it).
    SerializeToString / FromString: the protocol buffer.\"\"\"

    def __init__(self, value=()):
        self.value = list(value)
        for v in self.value:
            if not isinstance(v, bytes):
                raise TypeError(f"BytesList: expected bytes, {type(v).__name__} found")

    def SerializeToString(self):
        return b"".join(b"\\x0a" + protobuf_varint(len(v)) + v for v in self.value)

    @classmethod
    def FromString(cls, data):
        return cls([value for number, _, value in protobuf_fields(data) if number == 1])
'''

_FEATURE = '''

class Feature:
    \"\"\"tf.train.Feature: one of bytes_list (BytesList), float_list (FloatList) or int64_list (Int64List).
    SerializeToString / FromString: the protocol buffer.\"\"\"

    def __init__(self, bytes_list=None, float_list=None, int64_list=None):
        given = [v for v in (bytes_list, float_list, int64_list) if v is not None]
        if len(given) > 1:
            raise ValueError("Feature: give one of bytes_list, float_list and int64_list")
        self.bytes_list, self.float_list, self.int64_list = bytes_list, float_list, int64_list

    def WhichOneof(self, name="kind"):
        for kind in ("bytes_list", "float_list", "int64_list"):
            if getattr(self, kind) is not None:
                return kind
        return None

    def SerializeToString(self):
        kind = self.WhichOneof()
        if kind is None:
            return b""
        data = getattr(self, kind).SerializeToString()
        tag = {"bytes_list": b"\\x0a", "float_list": b"\\x12", "int64_list": b"\\x1a"}[kind]
        return tag + protobuf_varint(len(data)) + data

    @classmethod
    def FromString(cls, data):
        out = cls()
        for number, _, value in protobuf_fields(data):
            out.bytes_list = out.float_list = out.int64_list = None  # a oneof: the last one read
            if number == 1:
                out.bytes_list = BytesList.FromString(value)
            elif number == 2:
                out.float_list = FloatList.FromString(value)
            elif number == 3:
                out.int64_list = Int64List.FromString(value)
        return out
'''

_FEATURES = '''

class Features:
    \"\"\"tf.train.Features: feature, a dict from names to Feature. SerializeToString / FromString: the protocol
    buffer (a map, its entries in the dict's order).\"\"\"

    def __init__(self, feature=None):
        self.feature = dict(feature or {})

    def SerializeToString(self):
        out = []
        for key, feature in self.feature.items():
            key = key.encode("utf-8") if isinstance(key, str) else bytes(key)
            value = feature.SerializeToString()
            entry = b"\\x0a" + protobuf_varint(len(key)) + key + b"\\x12" + protobuf_varint(len(value)) + value
            out.append(b"\\x0a" + protobuf_varint(len(entry)) + entry)
        return b"".join(out)

    @classmethod
    def FromString(cls, data):
        out = cls()
        for number, _, entry in protobuf_fields(data):
            if number == 1:
                key, value = "", b""
                for field, _, part in protobuf_fields(entry):
                    if field == 1:
                        key = part.decode("utf-8")
                    elif field == 2:
                        value = part
                out.feature[key] = Feature.FromString(value)
        return out
'''

_EXAMPLE = '''

class Example:
    \"\"\"tf.train.Example: features (Features). SerializeToString gives the record TensorFlow writes;
    FromString / ParseFromString read one.\"\"\"

    def __init__(self, features=None):
        self.features = features if features is not None else Features()

    def SerializeToString(self):
        data = self.features.SerializeToString()
        return b"\\x0a" + protobuf_varint(len(data)) + data

    def ParseFromString(self, data):
        self.features = Features()
        for number, _, value in protobuf_fields(data):
            if number == 1:
                self.features.feature.update(Features.FromString(value).feature)
        return len(data)

    @classmethod
    def FromString(cls, data):
        out = cls()
        out.ParseFromString(bytes(data))
        return out
'''

_FIXED_LEN = '''

class FixedLenFeature:
    \"\"\"tf.io.FixedLenFeature: a feature of shape values of dtype (torch.int64, torch.float32, or bytes for
    tf.string), default_value when an Example lacks it (None: it is required).\"\"\"

    def __init__(self, shape, dtype, default_value=None):
        self.shape, self.dtype, self.default_value = list(shape), dtype, default_value
'''

_VAR_LEN = '''

class VarLenFeature:
    \"\"\"tf.io.VarLenFeature: a feature of any number of values of dtype (torch.int64, torch.float32, or bytes
    for tf.string), parsed as a 1-D sparse tensor (a list of bytes for strings).\"\"\"

    def __init__(self, dtype):
        self.dtype = dtype
'''

_PARSE_SINGLE = '''

def parse_single_example(serialized, features):
    \"\"\"tf.io.parse_single_example: the serialized tf.train.Example (bytes) as a dict of the features named in
    features (FixedLenFeature / VarLenFeature), with TensorFlow's rules: a FixedLenFeature gives a tensor of
    its shape and dtype (int64, float32; bytes, or nested lists of bytes, for strings), its default_value when
    the Example lacks it (an error when it has none), an error when the kind or the number of values differs;
    a VarLenFeature gives a 1-D sparse COO tensor of its values (a list of bytes for strings).\"\"\"
    import numpy as np
    import torch

    example = Example.FromString(bytes(serialized))
    kinds = {torch.int64: "int64_list", torch.float32: "float_list", bytes: "bytes_list"}
    out = {}
    for name, spec in features.items():
        if spec.dtype not in kinds:
            raise ValueError(f"feature {name}: dtype {spec.dtype} is not int64, float32 or bytes (tf.string)")
        feature = example.features.feature.get(name)
        values = None
        if feature is not None and feature.WhichOneof() is not None:
            if feature.WhichOneof() != kinds[spec.dtype]:
                raise ValueError(f"feature {name}: data types do not match ({feature.WhichOneof()}, not {kinds[spec.dtype]})")
            values = getattr(feature, feature.WhichOneof()).value
        if getattr(spec, "shape", None) is None:  # VarLenFeature
            values = values or []
            if spec.dtype is bytes:
                out[name] = list(values)
            else:
                out[name] = torch.sparse_coo_tensor(torch.arange(len(values)).reshape(1, -1),
                                                    torch.tensor(values, dtype=spec.dtype), (len(values),),
                                                    check_invariants=True)
            continue
        size = int(np.prod(spec.shape, dtype=np.int64))
        if values is None:
            if spec.default_value is None:
                raise ValueError(f"feature {name} is required but could not be found")
            if spec.dtype is bytes:
                default = np.asarray(spec.default_value, dtype=object)
                value = np.asarray([v.encode() if isinstance(v, str) else v for v in default.ravel()], dtype=object)
                out[name] = value.reshape(spec.shape).tolist()
            else:
                out[name] = torch.as_tensor(np.asarray(spec.default_value)).to(spec.dtype).reshape(spec.shape)
            continue
        if len(values) != size:
            raise ValueError(f"feature {name}: {len(values)} values, the shape {spec.shape} takes {size}")
        if spec.dtype is bytes:
            out[name] = np.asarray(list(values) + [None], dtype=object)[:-1].reshape(spec.shape).tolist()
        else:
            out[name] = torch.tensor(values, dtype=spec.dtype).reshape(spec.shape)
    return out
'''

_AS_BYTES = '''

def as_bytes(bytes_or_text, encoding="utf-8"):
    """tf.compat.as_bytes: a str encoded (encoding), bytes as they are, a bytearray as bytes; anything else
    is a TypeError, as in TensorFlow."""
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")
'''

_AS_TEXT = '''

def as_text(bytes_or_text, encoding="utf-8"):
    """tf.compat.as_text / as_str: bytes decoded (encoding), a str as it is; anything else is a TypeError,
    as in TensorFlow."""
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text.decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")
'''

_PARSE_BATCH = '''

def parse_example(serialized, features):
    """tf.io.parse_example: a batch of serialized tf.train.Example records (a list of bytes, as a batched
    DataPipeline gives them) parsed with parse_single_example's rules, each feature with the batch first: a
    FixedLenFeature's tensors stacked (a list for strings), a VarLenFeature a 2-D sparse COO tensor of shape
    (batch, longest) whose row b holds record b's values (a list of lists for strings)."""
    import torch

    if isinstance(serialized, (bytes, bytearray)):
        return parse_single_example(serialized, features)
    rows = [parse_single_example(record, features) for record in serialized]
    out = {}
    for name, spec in features.items():
        values = [row[name] for row in rows]
        if getattr(spec, "shape", None) is not None:  # FixedLenFeature
            out[name] = list(values) if spec.dtype is bytes else (
                torch.stack(values) if values else torch.zeros([0, *spec.shape], dtype=spec.dtype))
        elif spec.dtype is bytes:
            out[name] = list(values)
        else:
            dense = [v.coalesce().values() for v in values]
            index = [[b, i] for b, v in enumerate(dense) for i in range(len(v))]
            indices = torch.tensor(index, dtype=torch.int64).reshape(-1, 2).T
            data = torch.cat(dense) if dense else torch.zeros([0], dtype=spec.dtype)
            out[name] = torch.sparse_coo_tensor(indices, data, (len(dense), max([len(v) for v in dense], default=0)),
                                                check_invariants=True)
    return out
'''

RECORD_HELPERS: dict[str, str] = {
    "parse_example": _PARSE_BATCH,
    "as_bytes": _AS_BYTES, "as_text": _AS_TEXT,
    "masked_crc32c": _CRC32C, "TFRecordWriter": _WRITER, "tfrecord_dataset": _DATASET,
    "text_line_dataset": _TEXT_LINES, "list_files": _LIST_FILES, "make_csv_dataset": _CSV_DATASET, "protobuf_fields": _WIRE,
    "Int64List": _INT64_LIST, "FloatList": _FLOAT_LIST, "BytesList": _BYTES_LIST, "Feature": _FEATURE,
    "Features": _FEATURES, "Example": _EXAMPLE, "FixedLenFeature": _FIXED_LEN, "VarLenFeature": _VAR_LEN,
    "parse_single_example": _PARSE_SINGLE,
}

_LISTS = ("protobuf_fields", "BytesList", "FloatList", "Int64List")
#: (flat: finish() adds one level of dependencies)
RECORD_DEPS: dict[str, tuple[str, ...]] = {
    "TFRecordWriter": ("masked_crc32c",), "tfrecord_dataset": ("masked_crc32c", "DataPipeline"),
    "text_line_dataset": ("DataPipeline",), "list_files": ("DataPipeline",),
    "make_csv_dataset": ("DataPipeline",),
    "Int64List": ("protobuf_fields",), "FloatList": ("protobuf_fields",), "BytesList": ("protobuf_fields",),
    "Feature": _LISTS, "Features": ("Feature", *_LISTS), "Example": ("Features", "Feature", *_LISTS),
    "parse_single_example": ("Example", "Features", "Feature", *_LISTS),
    "parse_example": ("parse_single_example", "Example", "Features", "Feature", *_LISTS),
}
