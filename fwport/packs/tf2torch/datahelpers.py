"""Helpers written into a translated file for Keras's data utilities and tf.data (see helpers.py).

Each keeps the semantics of the Keras / TensorFlow function it replaces (shapes, dtypes, argument
meanings), in plain numpy / torch / torchvision / PIL code. Placeholders: ``{torch}``, ``{np}``,
``{os}``, ``{torchvision}``, ``{Image}`` (helpers.py spells them and records the imports).
"""
from __future__ import annotations

from fwport.packs.tf2torch.imagegen import IMAGEGEN_DEPS, IMAGEGEN_HELPERS
from fwport.packs.tf2torch.recordhelpers import RECORD_DEPS, RECORD_HELPERS
from fwport.packs.tf2torch.texthelpers import TEXT_DEPS, TEXT_HELPERS

_GET_FILE = '''

def get_file(fname=None, origin=None, untar=False, extract=False, cache_dir=None, cache_subdir="datasets",
             archive_format="auto", force_download=False, keras2=False):
    """keras.utils.get_file: download `origin` once into ~/.keras/<cache_subdir> (torch.hub's downloader),
    extract it when asked, and return the path. Keras 3 extracts into its own folder and returns that
    folder; Keras 2 (keras2=True) extracts next to the archive and returns the archive's path."""
    base = {os}path.expanduser(cache_dir or {os}path.join("~", ".keras"))
    if not {os}access(base, {os}W_OK):  # as Keras does: a cache folder that is not writable (or absent)
        base = {os}path.join("/tmp" if {os}path.isdir("/tmp") else tempfile.gettempdir(), ".keras")
    datadir = {os}path.join(base, cache_subdir)
    {os}makedirs(datadir, exist_ok=True)
    given = fname
    if not fname:
        fname = {os}path.basename(origin.split("?")[0].split("#")[0])
    extraction_dir = None
    if keras2:
        if untar and fname.endswith(".tar.gz"):
            fname = fname[: -len(".tar.gz")]
        target = {os}path.join(datadir, fname + (".tar.gz" if untar else ""))
        if untar or extract:
            extraction_dir = datadir
    elif untar or extract:
        if given and "." in fname:
            target = {os}path.join(datadir, fname)
            extraction_dir = {os}path.join(datadir, fname[: fname.find(".")] + "_extracted")
        else:
            target = {os}path.join(datadir, fname + "_archive")
            extraction_dir = {os}path.join(datadir, fname)
    else:
        target = {os}path.join(datadir, fname)
    if force_download or not {os}path.exists(target):
        {torch}hub.download_url_to_file(origin, target)
    if keras2 and untar and {os}path.exists({os}path.join(datadir, fname)):
        return {os}path.join(datadir, fname)  # Keras 2 extracts a tar only once
    if extraction_dir is not None:
        kinds = {"tar": ["tar"], "zip": ["zip"], "auto": ["tar", "zip"]}[archive_format if not untar else "tar"]
        for kind in kinds:
            if kind == "tar" and tarfile.is_tarfile(target):
                with tarfile.open(target) as archive:
                    archive.extractall(extraction_dir)
                break
            if kind == "zip" and zipfile.is_zipfile(target):
                with zipfile.ZipFile(target) as archive:
                    archive.extractall(extraction_dir)
                break
        if keras2:
            return {os}path.join(datadir, fname) if untar else target
        return extraction_dir
    return target
'''

# torchvision's copies of Keras's image datasets: the same images in the same order
_TORCHVISION = '''

def load_{name}({params}root="~/.cache/torchvision"):
    """keras.datasets.{name}.load_data(): (x_train, y_train), (x_test, y_test), numpy arrays with Keras's
    shapes and dtypes, read from torchvision's copy (downloaded once into root):
    {shapes}."""
    splits = []
    for train in (True, False):
        source = torchvision.datasets.{cls}(os.path.expanduser(root), train=train, download=True)
        x = {np}asarray(source.data, dtype={np}uint8)
        y = {np}asarray(source.targets, dtype={np}uint8){y_shape}
        splits.append((x, y))
    return splits[0], splits[1]
'''

_TV = {
    "mnist": ("MNIST", "", "", "x uint8 (N, 28, 28), y uint8 (N,)"),
    "fashion_mnist": ("FashionMNIST", "", "", "x uint8 (N, 28, 28), y uint8 (N,)"),
    "cifar10": ("CIFAR10", "", ".reshape(-1, 1)", "x uint8 (N, 32, 32, 3), y uint8 (N, 1)"),
    "cifar100": ("CIFAR100", 'label_mode="fine", ', ".reshape(-1, 1)",
                 "x uint8 (N, 32, 32, 3), y uint8 (N, 1); torchvision has the fine labels only"),
}

_KERAS_NPZ = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"

_WORD_SEQUENCES = '''

def {fn}(path="{name}.npz", num_words=None, skip_top=0, maxlen=None, {extra}seed=113, start_char=1, oov_char=2,
         index_from=3):
    """keras.datasets.{name}.load_data: Keras's own file of word-index sequences (downloaded once), with
    Keras's arguments: shuffled with RandomState(seed), start_char first, words shifted by index_from,
    sequences of maxlen words or more dropped, words outside [skip_top, num_words) replaced by oov_char
    (or removed when it is None). Sequences are an object array of lists, labels int64."""
    with {np}load(get_file(path, origin="{url}{name}.npz"), allow_pickle=True) as f:
        {load}
    rng = {np}random.RandomState(seed)
    {split}
    def marked(sequences):
        head = [] if start_char is None else [start_char]
        return [head + [w + index_from for w in s] for s in sequences]

    x_train, x_test = marked(x_train), marked(x_test)
    if maxlen:
        keep = [i for i, s in enumerate(x_train) if len(s) < maxlen]
        x_train, y_train = [x_train[i] for i in keep], y_train[keep]
        keep = [i for i, s in enumerate(x_test) if len(s) < maxlen]
        x_test, y_test = [x_test[i] for i in keep], y_test[keep]
        if not x_train or not x_test:
            raise ValueError(f"no sequence is shorter than maxlen={{maxlen}}")
    sequences = x_train + x_test
    if not num_words:
        num_words = max(max(s) for s in sequences)
    if oov_char is None:
        sequences = [[w for w in s if skip_top <= w < num_words] for s in sequences]
    else:
        sequences = [[w if skip_top <= w < num_words else oov_char for w in s] for s in sequences]
    n = len(x_train)
    return ({np}array(sequences[:n], dtype="object"), y_train), ({np}array(sequences[n:], dtype="object"), y_test)
'''

_IMDB_LOAD = 'x_train, y_train, x_test, y_test = f["x_train"], f["y_train"], f["x_test"], f["y_test"]'
_IMDB_SPLIT = '''order = rng.permutation(len(x_train))
    x_train, y_train = x_train[order], y_train[order]
    order = rng.permutation(len(x_test))
    x_test, y_test = x_test[order], y_test[order]
'''
_BOSTON = '''

def load_boston_housing(path="boston_housing.npz", test_split=0.2, seed=113):
    """keras.datasets.boston_housing.load_data: Keras's own file (downloaded once), shuffled with
    RandomState(seed) and split as Keras splits it: float64 x (N, 13), y (N,)."""
    with {np}load(get_file(path, origin="%sboston_housing.npz"), allow_pickle=True) as f:
        x, y = f["x"], f["y"]
    order = {np}random.RandomState(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_train = int(len(x) * (1 - test_split))
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])
''' % _KERAS_NPZ

_PAD_SEQUENCES = '''

def pad_sequences(sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre", value=0.0):
    """keras.utils.pad_sequences: a numpy array (len(sequences), maxlen, ...) of `dtype`; longer sequences
    lose their start (truncating="pre") or end ("post"), shorter ones are filled with `value` before
    ("pre") or after ("post"); maxlen defaults to the longest sequence."""
    lengths = [len(s) for s in sequences]
    item_shape = next(({np}asarray(s).shape[1:] for s in sequences if len(s)), ())
    if maxlen is None:
        maxlen = max(lengths) if lengths else 0
    out = {np}full((len(sequences), maxlen) + tuple(item_shape), value, dtype=dtype)
    for i, s in enumerate(sequences):
        if not len(s) or not maxlen:
            continue
        kept = {np}asarray(s[-maxlen:] if truncating == "pre" else s[:maxlen], dtype=dtype)
        if padding == "post":
            out[i, : len(kept)] = kept
        else:
            out[i, -len(kept):] = kept
    return out
'''

_TOKENIZER = '''

class Tokenizer:
    \"\"\"keras.preprocessing.text.Tokenizer in plain Python: fit_on_texts counts the words of the texts
    (lower-cased, `filters` characters turned into `split`, split on it); words are numbered from 1 by
    decreasing count (ties in the order first seen), after `oov_token` (1) if one is given;
    texts_to_sequences keeps the words numbered below num_words (others become oov_token's number, or
    are left out); texts_to_matrix / sequences_to_matrix give numpy rows ("binary", "count", "freq",
    "tfidf").\"\"\"

    def __init__(self, num_words=None, filters='!"#$%&()*+,-./:;<=>?@[\\\\]^_`{|}~\\t\\n', lower=True, split=" ",
                 char_level=False, oov_token=None, analyzer=None, document_count=0):
        self.num_words, self.filters, self.lower, self.split = num_words, filters, lower, split
        self.char_level, self.oov_token, self.analyzer = char_level, oov_token, analyzer
        self.document_count = document_count
        self.word_counts, self.word_docs, self.index_docs = {}, {}, {}
        self.word_index, self.index_word = {}, {}

    def _words(self, text):
        if self.char_level or isinstance(text, list):
            if self.lower:
                text = [t.lower() for t in text] if isinstance(text, list) else text.lower()
            return text
        if self.analyzer is not None:
            return self.analyzer(text)
        if self.lower:
            text = text.lower()
        text = text.translate(str.maketrans({c: self.split for c in self.filters}))
        return [w for w in text.split(self.split) if w]

    def fit_on_texts(self, texts):
        for text in texts:
            self.document_count += 1
            words = self._words(text)
            for w in words:
                self.word_counts[w] = self.word_counts.get(w, 0) + 1
            for w in set(words):
                self.word_docs[w] = self.word_docs.get(w, 0) + 1
        ranked = sorted(self.word_counts.items(), key=lambda wc: wc[1], reverse=True)  # stable: ties as first seen
        vocabulary = ([] if self.oov_token is None else [self.oov_token]) + [w for w, _ in ranked]
        self.word_index = {w: i for i, w in enumerate(vocabulary, start=1)}
        self.index_word = {i: w for w, i in self.word_index.items()}
        self.index_docs = {self.word_index[w]: c for w, c in self.word_docs.items()}

    def texts_to_sequences(self, texts):
        oov = self.word_index.get(self.oov_token)
        out = []
        for text in texts:
            seq = []
            for w in self._words(text):
                i = self.word_index.get(w)
                if i is not None and not (self.num_words and i >= self.num_words):
                    seq.append(i)
                elif oov is not None and (i is not None or self.oov_token is not None):
                    seq.append(oov)
            out.append(seq)
        return out

    def sequences_to_texts(self, sequences):
        oov = self.word_index.get(self.oov_token)
        out = []
        for seq in sequences:
            words = []
            for i in seq:
                w = self.index_word.get(i)
                if w is not None and not (self.num_words and i >= self.num_words):
                    words.append(w)
                elif oov is not None and (w is not None or self.oov_token is not None):
                    words.append(self.index_word[oov])
            out.append(" ".join(words))
        return out

    def texts_to_matrix(self, texts, mode="binary"):
        return self.sequences_to_matrix(self.texts_to_sequences(texts), mode=mode)

    def sequences_to_matrix(self, sequences, mode="binary"):
        import math

        import numpy as np

        size = self.num_words or (len(self.word_index) + 1 if self.word_index else None)
        if size is None:
            raise ValueError("fit the tokenizer on texts first, or give it num_words")
        if mode == "tfidf" and not self.document_count:
            raise ValueError("tfidf needs the tokenizer fitted on texts first")
        if mode not in ("binary", "count", "freq", "tfidf"):
            raise ValueError(f"unknown mode: {mode}")
        x = np.zeros((len(sequences), size))
        for row, seq in enumerate(sequences):
            counts = {}
            for i in seq:
                if i < size:
                    counts[i] = counts.get(i, 0) + 1
            for i, c in counts.items():
                if mode == "binary":
                    x[row, i] = 1
                elif mode == "count":
                    x[row, i] = c
                elif mode == "freq":
                    x[row, i] = c / len(seq)
                else:
                    x[row, i] = (1 + math.log(c)) * math.log(1 + self.document_count / (1 + self.index_docs.get(i, 0)))
        return x
'''

_SET_RANDOM_SEED = '''

def set_random_seed(seed):
    """keras.utils.set_random_seed: seeds Python's random, NumPy's global generator and torch (CPU and CUDA), the
    three Keras seeds. The streams differ from TensorFlow's: a seeded run is reproducible, not equal to Keras's."""
    random.seed(seed)
    {np}random.seed(seed)
    {torch}manual_seed(seed)
'''

_TO_CATEGORICAL = '''

def to_categorical(y, num_classes=None, dtype=None):
    """keras.utils.to_categorical: one-hot rows along a new last axis (a trailing axis of size 1 is
    replaced); num_classes defaults to max(y) + 1. Tensors give a float32 tensor; arrays a numpy array
    of `dtype` (Keras 3: float64; Keras 2 passes float32)."""
    if isinstance(y, {torch}Tensor):
        if y.dim() > 1 and y.shape[-1] == 1:
            y = y.squeeze(-1)
        return {torch}nn.functional.one_hot(y.long(), num_classes or int(y.max()) + 1).to(dtype or {torch}float32)
    y = {np}asarray(y, dtype="int64")
    shape = y.shape[:-1] if y.ndim > 1 and y.shape[-1] == 1 else y.shape
    y = y.reshape(-1)
    num_classes = num_classes or int(y.max()) + 1
    out = {np}zeros((len(y), num_classes), dtype=dtype or "float64")
    out[{np}arange(len(y)), y] = 1
    return out.reshape(tuple(shape) + (num_classes,))
'''

_RESIZE_IMAGES = '''

def resize_images(images, size, method="bilinear", antialias=False):
    """tf.image.resize on channels-last images, (height, width, channels) or (batch, height, width,
    channels): bilinear samples at half-pixel centres (torch's align_corners=False) and gives float32,
    whatever the input's dtype; "nearest" rounds half-pixel centres (torch's nearest-exact) and keeps
    the input's dtype."""
    x = {torch}as_tensor(images)
    one = x.dim() == 3
    y = (x[None] if one else x).permute(0, 3, 1, 2)
    size = tuple(int(s) for s in size)
    if method == "nearest":
        y = {torch}nn.functional.interpolate(y if y.is_floating_point() else y.float(), size=size,
                                            mode="nearest-exact").to(x.dtype)
    else:
        y = {torch}nn.functional.interpolate(y.float(), size=size, mode="bilinear", align_corners=False,
                                            antialias=antialias)
    y = y.permute(0, 2, 3, 1)
    return y[0] if one else y
'''

_RESIZE_WITH_PAD = '''

def resize_with_pad(image, target_height, target_width, method="bilinear", antialias=False):
    """tf.image.resize_with_pad on channels-last images: resized (resize_images) to fit inside the target
    with the aspect ratio kept, then padded with zeros to it, centred (the odd row or column goes after).
    The sizes are computed in float32, as TensorFlow does."""
    x = {torch}as_tensor(image)
    height, width = x.shape[-3], x.shape[-2]
    ratio = max({np}float32(width) / {np}float32(target_width), {np}float32(height) / {np}float32(target_height))
    rh, rw = {np}float32(height) / ratio, {np}float32(width) / ratio
    y = resize_images(x, (int({np}floor(rh)), int({np}floor(rw))), method, antialias)
    top = max(0, int({np}floor(({np}float32(target_height) - rh) / {np}float32(2))))
    left = max(0, int({np}floor(({np}float32(target_width) - rw) / {np}float32(2))))
    pads = (0, 0, left, target_width - y.shape[-2] - left, top, target_height - y.shape[-3] - top)
    return {torch}nn.functional.pad(y, pads)
'''

_LOAD_IMG = '''

def load_img(path, color_mode="rgb", target_size=None, interpolation="nearest", keep_aspect_ratio=False):
    """keras.utils.load_img: a PIL image in "L" (grayscale; 16/32-bit grayscale kept), "RGB" or "RGBA"
    mode, resized to target_size=(height, width) with PIL's `interpolation` filter (after a centred crop
    to the target's aspect ratio with keep_aspect_ratio)."""
    img = {Image}open(path)
    img.load()
    if color_mode == "grayscale":
        if img.mode not in ("L", "I;16", "I"):
            img = img.convert("L")
    elif color_mode in ("rgb", "rgba"):
        if img.mode != color_mode.upper():
            img = img.convert(color_mode.upper())
    else:
        raise ValueError('color_mode must be "grayscale", "rgb", or "rgba"')
    if target_size is not None and img.size != (target_size[1], target_size[0]):
        filters = {{"nearest": {Image}NEAREST, "bilinear": {Image}BILINEAR, "bicubic": {Image}BICUBIC,
                   "hamming": {Image}HAMMING, "box": {Image}BOX, "lanczos": {Image}LANCZOS}}
        box = None
        if keep_aspect_ratio:
            width, height = img.size
            crop_h = min(height, (width * target_size[0]) // target_size[1])
            crop_w = min(width, (height * target_size[1]) // target_size[0])
            left, top = (width - crop_w) // 2, (height - crop_h) // 2
            box = (left, top, left + crop_w, top + crop_h)
        img = img.resize((target_size[1], target_size[0]), resample=filters[interpolation], box=box)
    return img
'''

_IMG_TO_ARRAY = '''

def img_to_array(img, data_format=None, dtype=None):
    """keras.utils.img_to_array: a PIL image as a (height, width, channels) array of `dtype`
    (grayscale gets a channel axis; channels_first puts it first)."""
    x = {np}asarray(img, dtype=dtype or "float32")
    if x.ndim == 2:
        x = x[:, :, None]
    elif x.ndim != 3:
        raise ValueError(f"unsupported image shape: {{x.shape}}")
    return x.transpose(2, 0, 1) if data_format == "channels_first" else x
'''

_ARRAY_TO_IMG = '''

def array_to_img(x, data_format=None, scale=True, dtype=None):
    """keras.utils.array_to_img: a (height, width, channels) array (channels 1, 3 or 4) as a PIL image;
    with scale, shifted and scaled to [0, 255] first (x - min, then * 255 / max)."""
    x = {np}asarray(x, dtype=dtype or "float32")
    if x.ndim != 3:
        raise ValueError(f"expected an image array of rank 3, got shape {{x.shape}}")
    if data_format == "channels_first":
        x = x.transpose(1, 2, 0)
    if scale:
        x = x - {np}min(x)
        top = {np}max(x)
        if top != 0:
            x = x / top
        x = x * 255
    channels = x.shape[2]
    if channels == 4:
        return {Image}fromarray(x.astype("uint8"), "RGBA")
    if channels == 3:
        return {Image}fromarray(x.astype("uint8"), "RGB")
    if channels == 1:
        if {np}max(x) > 255:
            return {Image}fromarray(x[:, :, 0].astype("int32"), "I")
        return {Image}fromarray(x[:, :, 0].astype("uint8"), "L")
    raise ValueError(f"unsupported number of channels: {{channels}}")
'''

_SAVE_IMG = '''

def save_img(path, x, data_format=None, file_format=None, scale=True, **kwargs):
    """keras.utils.save_img: the array as array_to_img makes it a PIL image, saved to path (a file name or a file
    object); the format from the file name's extension where none is given ("jpg" read as "jpeg"), an RGBA image
    converted to RGB for JPEG; other keyword arguments go to PIL's Image.save."""
    if file_format is None and isinstance(path, (str, pathlib.Path)):
        file_format = pathlib.Path(path).suffix[1:].lower()
    if file_format and file_format.lower() == "jpg":
        file_format = "jpeg"
    img = array_to_img(x, data_format=data_format, scale=scale)
    if img.mode == "RGBA" and file_format == "jpeg":
        img = img.convert("RGB")
    img.save(path, format=file_format, **kwargs)
'''

_PY_FUNCTION = '''

def py_function(func, inp, Tout):
    """TensorFlow's py_function: func called on the tensors of inp, in eager PyTorch a plain call; each result made a tensor
    of the dtype Tout gives it (a list or tuple of dtypes: a list of tensors, even of one; a single dtype: one)."""
    out = func(*inp)
    if isinstance(Tout, (list, tuple)):
        out = [out] if len(Tout) == 1 and not isinstance(out, (list, tuple)) else out
        return [torch.as_tensor(v, dtype=d) for v, d in zip(out, Tout)]
    return torch.as_tensor(out, dtype=Tout)
'''

_NUMPY_FUNCTION = '''

def numpy_function(func, inp, Tout):
    """TensorFlow's numpy_function: func called on the values of inp as numpy arrays (a tensor's .numpy(),
    sharing its memory as TensorFlow's does), in eager PyTorch a plain call; each result made a tensor of the
    dtype Tout gives it (a list or tuple of dtypes: a list of tensors, even of one; a single dtype: one)."""
    args = [v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else {np}asarray(v) for v in inp]
    out = func(*args)
    if isinstance(Tout, (list, tuple)):
        out = [out] if len(Tout) == 1 and not isinstance(out, (list, tuple)) else out
        return [torch.as_tensor(v, dtype=d) for v, d in zip(out, Tout)]
    return torch.as_tensor(out, dtype=Tout)
'''

_SEEDED_GENERATOR = '''

def seeded_generator(seed, op, _generators={}):
    """TensorFlow's op-level seed (random.normal(..., seed=s)): one torch.Generator per (operation, seed),
    seeded once and drawn from by every call, as TensorFlow's eager kernels keep one stream per operation and
    seed: a second call with the same seed gives new values, a new run of the program the same ones again.
    The values differ from TensorFlow's (another generator); torch.manual_seed does not change them."""
    key = (op, int(seed))
    if key not in _generators:
        _generators[key] = torch.Generator().manual_seed(int(seed))
    return _generators[key]
'''

_MAP_FN = '''

def map_fn(fn, elems, dtype=None):
    """TensorFlow's map_fn over one tensor: fn applied to each slice of elems along axis 0, the results (one
    tensor each) stacked, cast to dtype where given (TensorFlow's dtype / fn_output_signature). A tuple of
    tensors, or results that are tuples, are TensorFlow's nested form: refused here, not guessed."""
    if not isinstance(elems, torch.Tensor):
        raise TypeError("map_fn: elems must be one tensor (a nested structure of tensors is not translated)")
    out = []
    for e in elems.unbind(0):
        y = fn(e)
        if isinstance(y, (tuple, list, dict)):
            raise TypeError("map_fn: fn must return one tensor (nested results are not translated)")
        out.append(torch.as_tensor(y))
    stacked = torch.stack(out)
    return stacked if dtype is None else stacked.to(dtype)
'''

_DECODE_IMAGE = '''

def decode_image(contents, channels=0, float32=False, expand_animations=True):
    """tf.io.decode_image / decode_jpeg / decode_png (TensorFlow's image decoders): the image file in `contents`
    (bytes) as a (height, width, channels) uint8 tensor, as TensorFlow's decoders give it: channels as in
    the file (0; a palette image as RGB, or RGBA when it has transparency) or converted to 1 (grayscale),
    3 (RGB) or 4 (RGBA); an animated GIF's frames as (frames, height, width, 3) with expand_animations
    (its first frame without); float32 scales to [0, 1] (TensorFlow's convert_image_dtype). Decoded by PIL."""
    img = {Image}open(io.BytesIO(bytes(contents)))
    frames = [img]
    if img.format == "GIF":
        frames = [frame.convert("RGB") for frame in PIL.ImageSequence.Iterator(img)]
        if not expand_animations:
            frames = frames[:1]
        channels = channels or 3
    # a PNG of fewer than 8 bits per pixel given an alpha channel it does not have: TensorFlow fills it with
    # the largest value of that bit depth (1 for 1 bit, 15 for 4 bits), not 255
    depth = contents[24] if bytes(contents[:8]) == b"\\x89PNG\\r\\n\\x1a\\n" else 8
    arrays = []
    for frame in frames:
        mode = "L" if frame.mode == "1" else frame.mode
        if mode == "P":
            mode = "RGBA" if "transparency" in frame.info else "RGB"
        if mode not in ("L", "LA", "RGB", "RGBA"):
            raise ValueError(f"image mode {{mode}} (16-bit, CMYK...): decode it with PIL and convert it yourself")
        wanted = {{0: mode, 1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}}[channels]
        if frame.mode != wanted:
            frame = frame.convert(wanted)
        x = {np}array(frame, dtype="uint8")
        if depth < 8 and wanted in ("LA", "RGBA") and mode in ("L", "RGB"):
            x[..., -1] = (1 << depth) - 1
        arrays.append(x[:, :, None] if x.ndim == 2 else x)
    x = {torch}from_numpy({np}stack(arrays) if img.format == "GIF" and expand_animations else arrays[0])
    return x.float() * (1 / 255) if float32 else x  # convert_image_dtype multiplies by 1 / 255 in float32
'''

_TIMESERIES = '''

def timeseries_dataset_from_array(data, targets, sequence_length, sequence_stride=1, sampling_rate=1,
                                  batch_size=128, shuffle=False, seed=None, start_index=None, end_index=None):
    """keras.utils.timeseries_dataset_from_array: the windows data[s : s + sequence_length * sampling_rate :
    sampling_rate] of data[start_index:end_index], s every sequence_stride steps, each with targets[s] when
    targets are given, batched by batch_size, as a DataPipeline. With shuffle the window starts are shuffled
    by numpy with seed as Keras does, then within a buffer of batch_size * 8 windows (torch's generator, not
    TensorFlow's: the same windows, another order)."""
    start_index = 0 if start_index is None else start_index
    end_index = len(data) if end_index is None else end_index
    num_seqs = end_index - start_index - (sequence_length - 1) * sampling_rate
    if targets is not None:
        num_seqs = min(num_seqs, len(targets))
    starts = {np}arange(0, max(num_seqs, 0), sequence_stride)
    if shuffle:
        {np}random.RandomState({np}random.randint(1e6) if seed is None else seed).shuffle(starts)
    values = DataPipeline._tensors(data)[start_index:end_index]
    labels = None if targets is None else DataPipeline._tensors(targets)[start_index:end_index]

    def windows():
        for s in starts:
            window = values[s:s + sequence_length * sampling_rate:sampling_rate]
            yield window if labels is None else (window, labels[s])
    pipeline = DataPipeline(windows, len(starts))
    if shuffle:
        pipeline = pipeline.shuffle(1024 if batch_size is None else batch_size * 8, seed=seed)
    return pipeline if batch_size is None else pipeline.batch(batch_size)
'''

_DATASET_OPTIONS = '''

class DatasetOptions:
    """tf.data.Options: the settings TensorFlow runs a pipeline with (threads, fusions, autotuning, whether the
    order may vary, sharding over workers), kept as set; TensorFlow's names only (another raises AttributeError,
    as TensorFlow does). None changes a DataPipeline's elements: its with_options returns it as it is."""

    _GROUPS = {
        "autotune": ("autotune_algorithm", "cpu_budget", "enabled", "initial_parallelism", "min_parallelism",
                     "ram_budget"),
        "experimental_distribute": ("auto_shard_policy", "num_devices"),
        "experimental_optimization": (
            "apply_default_optimizations", "filter_fusion", "filter_parallelization", "inject_prefetch",
            "map_and_batch_fusion", "map_and_filter_fusion", "map_fusion", "map_parallelization",
            "noop_elimination", "parallel_batch", "seq_interleave_prefetch", "shuffle_and_repeat_fusion"),
        "experimental_service": ("pinned",),
        "experimental_threading": ("max_intra_op_parallelism", "private_threadpool_size"),
        "threading": ("max_intra_op_parallelism", "private_threadpool_size"),
    }
    _VALUES = ("dataset_name", "deterministic", "experimental_deterministic", "experimental_external_state_policy",
               "experimental_slack", "experimental_symbolic_checkpoint", "experimental_warm_start", "framework_type")

    class _Group:
        def __init__(self, kind, names):
            object.__setattr__(self, "_kind", kind)
            for name in names:
                object.__setattr__(self, name, None)

        def __setattr__(self, name, value):
            if not hasattr(self, name) or name.startswith("_"):
                raise AttributeError(f"Cannot set the property {name} on {self._kind}.")
            object.__setattr__(self, name, value)

    def __init__(self):
        for group, names in self._GROUPS.items():
            object.__setattr__(self, group, self._Group(group, names))
        for name in self._VALUES:
            object.__setattr__(self, name, None)

    def __setattr__(self, name, value):
        if name not in self._VALUES:
            raise AttributeError(f"Cannot set the property {name} on Options.")
        object.__setattr__(self, name, value)
'''

_DATA_PIPELINE = '''

class DataPipeline({torch}utils.data.IterableDataset):
    """tf.data.Dataset over torch: the same chainable methods (map, shuffle, batch, repeat, take, ...),
    run lazily each time the pipeline is iterated. An element is a tensor, or a tuple / dict of them
    (strings stay Python strings); batch() stacks elements along a new first axis. Iterate it, pass it
    to fit(), or wrap it in torch.utils.data.DataLoader(pipeline, batch_size=None)."""

    def __init__(self, make_iterator, length=None):
        super().__init__()
        self.make_iterator, self.length = make_iterator, length

    def __iter__(self):
        return iter(self.make_iterator())

    def __len__(self):
        if self.length is None or self.length == float("inf"):
            raise TypeError("the length of this dataset is unknown or infinite")
        return self.length

    @staticmethod
    def _tensors(value):
        """Arrays and lists as tensors (Python ints → int32 and floats → float32, as TensorFlow converts them)."""
        if isinstance(value, tuple):
            return tuple(DataPipeline._tensors(v) for v in value)
        if isinstance(value, dict):
            return {{k: DataPipeline._tensors(v) for k, v in value.items()}}
        if isinstance(value, list) and value and all(isinstance(v, (str, bytes)) for v in value):
            return list(value)
        if isinstance(value, {torch}Tensor):
            return value
        array = {np}asarray(value)
        leaf = value
        while isinstance(leaf, list) and leaf:
            leaf = leaf[0]
        if isinstance(leaf, (int, float)) and not isinstance(leaf, (bool, {np}generic)):  # Python numbers
            array = array.astype({{"int64": "int32", "float64": "float32"}}.get(array.dtype.name, array.dtype))
        return {torch}as_tensor(array)

    @staticmethod
    def _item(value, i):
        if isinstance(value, tuple):
            return tuple(DataPipeline._item(v, i) for v in value)
        if isinstance(value, dict):
            return {{k: DataPipeline._item(v, i) for k, v in value.items()}}
        return value[i]

    @staticmethod
    def _stack(items):
        first = items[0]
        if isinstance(first, tuple):
            return tuple(DataPipeline._stack(list(parts)) for parts in zip(*items))
        if isinstance(first, dict):
            return {{k: DataPipeline._stack([item[k] for item in items]) for k in first}}
        if isinstance(first, (str, bytes)):
            return list(items)
        return {torch}stack([{torch}as_tensor(item) for item in items])

    @staticmethod
    def from_tensor_slices(tensors, name=None):
        data = DataPipeline._tensors(tensors)
        first = data
        while isinstance(first, (tuple, dict)):
            first = next(iter(first.values())) if isinstance(first, dict) else first[0]
        n = len(first)
        return DataPipeline(lambda: (DataPipeline._item(data, i) for i in range(n)), n)

    @staticmethod
    def from_generator(generator, output_types=None, output_shapes=None, args=None, name=None):
        """Each pass calls generator(*args); its elements become tensors of output_types (torch dtypes,
        in the element's structure), as TensorFlow converts them."""
        def convert(value, dtype):
            if isinstance(dtype, (tuple, list)):
                return tuple(convert(v, d) for v, d in zip(value, dtype))
            if isinstance(dtype, dict):
                return {{k: convert(value[k], d) for k, d in dtype.items()}}
            if dtype is None or isinstance(value, (str, bytes)):
                return DataPipeline._tensors(value)
            return {torch}as_tensor({np}asarray(value)).to(dtype)

        def run():
            for element in generator(*(args or ())):
                yield convert(element, output_types)
        return DataPipeline(run)

    @staticmethod
    def from_tensors(tensors, name=None):
        data = DataPipeline._tensors(tensors)
        return DataPipeline(lambda: iter([data]), 1)

    @staticmethod
    def range(*args, dtype=None, name=None):
        values = range(*args)
        return DataPipeline(lambda: ({torch}tensor(v, dtype=dtype or {torch}int64) for v in values), len(values))

    @staticmethod
    def zip(*args, **kwargs):
        """zip((a, b)), zip(a, b) or zip(datasets=(a, b)): tuples of their elements, as long as the shortest."""
        parts = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else (
            args or tuple(kwargs["datasets"]))
        lengths = [p.length for p in parts]
        length = None if None in lengths else min(lengths)
        return DataPipeline(lambda: zip(*parts), length)

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        def run():
            for element in self:
                yield map_func(*element) if isinstance(element, tuple) else map_func(element)
        return DataPipeline(run, self.length)

    def filter(self, predicate, name=None):
        def run():
            for element in self:
                if bool(predicate(*element) if isinstance(element, tuple) else predicate(element)):
                    yield element
        return DataPipeline(run)

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None):
        def run():
            items = []
            for element in self:
                items.append(element)
                if len(items) == batch_size:
                    yield DataPipeline._stack(items)
                    items = []
            if items and not drop_remainder:
                yield DataPipeline._stack(items)
        n = self.length
        if n is not None and n != float("inf"):
            n = n // batch_size if drop_remainder else -(-n // batch_size)
        return DataPipeline(run, n)

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False, name=None):
        """batch() with each tensor padded at the end of every axis, as tf.data pads: to padded_shapes' size on
        that axis (a larger element raises), or where it is -1 / None (or no padded_shapes) to the largest in the
        batch; with padding_values (0 by default; one value, or one per component of the element)."""
        def part(spec, key):
            return spec[key] if isinstance(spec, (tuple, dict)) else spec

        def pad(items, shape, value):
            first = items[0]
            if isinstance(first, tuple):
                return tuple(pad([item[k] for item in items], part(shape, k), part(value, k))
                             for k in range(len(first)))
            if isinstance(first, dict):
                return {k: pad([item[k] for item in items], part(shape, k), part(value, k)) for k in first}
            if isinstance(first, (str, bytes)):
                return list(items)
            tensors = [torch.as_tensor(item) for item in items]
            sizes = [max(t.shape[d] for t in tensors) for d in range(tensors[0].dim())]
            for d, size in enumerate(list(shape) if shape is not None else []):
                if size is not None and int(size) != -1:
                    if sizes[d] > int(size):
                        raise ValueError(f"padded_batch: an element of size {sizes[d]} on axis {d} is larger "
                                         f"than the padded shape's {int(size)}")
                    sizes[d] = int(size)
            out = torch.full([len(tensors)] + sizes, 0 if value is None else value, dtype=tensors[0].dtype)
            for i, t in enumerate(tensors):
                out[(i,) + tuple(slice(0, n) for n in t.shape)] = t
            return out

        def run():
            items = []
            for element in self:
                items.append(element)
                if len(items) == batch_size:
                    yield pad(items, padded_shapes, padding_values)
                    items = []
            if items and not drop_remainder:
                yield pad(items, padded_shapes, padding_values)
        n = self.length
        if n is not None and n != float("inf"):
            n = n // batch_size if drop_remainder else -(-n // batch_size)
        return DataPipeline(run, n)

    def unbatch(self, name=None):
        def run():
            for element in self:
                first = element
                while isinstance(first, (tuple, dict)):
                    first = next(iter(first.values())) if isinstance(first, dict) else first[0]
                for i in range(len(first)):
                    yield DataPipeline._item(element, i)
        return DataPipeline(run)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True, name=None):
        """TensorFlow's shuffle: a buffer of buffer_size elements, each output drawn uniformly from it
        and replaced by the next input (a full shuffle when the buffer holds the whole dataset)."""
        fixed = None if reshuffle_each_iteration else (
            seed if seed is not None else int({torch}randint(2 ** 62, ())))
        def run():
            generator = {torch}Generator()
            generator.manual_seed(fixed if fixed is not None else (
                seed if seed is not None and not reshuffle_each_iteration else int({torch}randint(2 ** 62, ()))))
            buffer = []
            for element in self:
                buffer.append(element)
                if len(buffer) >= buffer_size:
                    i = int({torch}randint(len(buffer), (), generator=generator))
                    buffer[i], buffer[-1] = buffer[-1], buffer[i]
                    yield buffer.pop()
            while buffer:
                i = int({torch}randint(len(buffer), (), generator=generator))
                buffer[i], buffer[-1] = buffer[-1], buffer[i]
                yield buffer.pop()
        return DataPipeline(run, self.length)

    def repeat(self, count=None, name=None):
        def run():
            done = 0
            while count is None or count < 0 or done < count:
                yield from self
                done += 1
        n = self.length
        if count is None or count < 0:
            n = float("inf") if n != 0 else 0
        elif n is not None:
            n = n * count
        return DataPipeline(run, n)

    def take(self, count, name=None):
        def run():
            for i, element in enumerate(self):
                if 0 <= count <= i:
                    return
                yield element
        n = self.length if count < 0 or self.length is None else min(self.length, count)
        return DataPipeline(run, n)

    def skip(self, count, name=None):
        def run():
            for i, element in enumerate(self):
                if i >= count:
                    yield element
        n = None if self.length is None else max(self.length - count, 0)
        return DataPipeline(run, n)

    def shard(self, num_shards, index, name=None):
        """The elements whose position modulo num_shards is index, as tf.data shards."""
        if not 0 <= index < num_shards:
            raise ValueError(f"shard: index {index} is not in [0, num_shards={num_shards})")
        def run():
            for i, element in enumerate(self):
                if i % num_shards == index:
                    yield element
        n = None if self.length is None or self.length == float("inf") else -(-(self.length - index) // num_shards)
        return DataPipeline(run, self.length if n is None else max(n, 0))

    def apply(self, transformation_func):
        return transformation_func(self)

    def flat_map(self, map_func, name=None):
        """The elements of the dataset map_func gives for each element, one dataset after the other."""
        def run():
            for element in self:
                yield from (map_func(*element) if isinstance(element, tuple) else map_func(element))
        return DataPipeline(run)

    def interleave(self, map_func, cycle_length=None, block_length=None, num_parallel_calls=None,
                   deterministic=None, name=None):
        """tf.data's interleave: cycle_length datasets open at once (map_func of the next elements), block_length
        elements (1 by default) taken from each in turn; one that ends leaves its place to the next element's
        dataset. cycle_length None (or AUTOTUNE, -1): the number of CPUs, as TensorFlow sets it. The order is
        TensorFlow's deterministic one, whatever num_parallel_calls."""
        import os
        cycle = cycle_length if cycle_length is not None and cycle_length > 0 else (
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
        block = block_length if block_length is not None and block_length > 0 else 1
        def run():
            source = iter(self)
            slots, ended, index = [None] * cycle, False, 0
            while not ended or any(s is not None for s in slots):
                if slots[index] is None and not ended:
                    element = next(source, DataPipeline)
                    if element is DataPipeline:
                        ended = True
                        continue
                    slots[index] = iter(map_func(*element) if isinstance(element, tuple) else map_func(element))
                if slots[index] is not None:
                    for _ in range(block):
                        value = next(slots[index], DataPipeline)
                        if value is DataPipeline:
                            slots[index] = None
                            break
                        yield value
                index = (index + 1) % cycle
        return DataPipeline(run)

    def reduce(self, initial_state, reduce_func, name=None):
        """reduce_func(state, element) over the elements from initial_state (as tensors: a Python int int32, as
        TensorFlow converts it); the element is one argument (a tuple element is not unpacked, as in tf.data)."""
        state = DataPipeline._tensors(initial_state)
        for element in self:
            state = reduce_func(state, element)
        return state

    def get_single_element(self, name=None):
        """The pipeline's one element; none or more than one raise ValueError (tf.data's InvalidArgumentError)."""
        elements = iter(self)
        first = next(elements, DataPipeline)
        if first is DataPipeline or next(elements, DataPipeline) is not DataPipeline:
            raise ValueError("get_single_element: the dataset does not have exactly one element")
        return first

    def window(self, size, shift=None, stride=1, drop_remainder=False, name=None):
        """Windows of size elements (every stride-th), one starting every shift (size by default) elements, each
        a dataset of its elements (a tuple or dict of datasets for a tuple or dict element, as tf.data gives
        them: flat_map(lambda w: w.batch(size)) makes each a batch); the last ones shorter, or dropped with
        drop_remainder."""
        shift = size if shift is None else shift
        span = (size - 1) * stride + 1

        def part(items):
            first = items[0]
            if isinstance(first, tuple):
                return tuple(part([item[k] for item in items]) for k in range(len(first)))
            if isinstance(first, dict):
                return {{k: part([item[k] for item in items]) for k in first}}
            return DataPipeline(lambda: iter(items), len(items))

        def run():
            buffer, first, start, seen = [], 0, 0, 0  # buffer: the elements from position first on
            for element in self:
                buffer.append(element)
                seen += 1
                while start + span <= seen:
                    yield part(buffer[start - first:start - first + span:stride])
                    start += shift
                    drop = min(start, seen) - first
                    del buffer[:drop]
                    first += drop
                drop = min(start, seen) - first
                del buffer[:drop]
                first += drop
            while not drop_remainder and start < seen:
                yield part(buffer[start - first::stride])
                start += shift
        n = self.length
        if n is not None and n != float("inf"):
            n = (max(0, (n - span) // shift + 1) if n >= span else 0) if drop_remainder else -(-n // shift)
        return DataPipeline(run, n)

    def enumerate(self, start=0, name=None):
        def run():
            for i, element in enumerate(self, start):
                yield {torch}tensor(i), element
        return DataPipeline(run, self.length)

    def concatenate(self, dataset, name=None):
        def run():
            yield from self
            yield from dataset
        n = None if self.length is None or dataset.length is None else self.length + dataset.length
        return DataPipeline(run, n)

    def cache(self, filename="", name=None):
        """Elements kept in memory from the first complete pass; later passes replay them."""
        kept = []
        def run():
            if kept:
                yield from kept[0]
                return
            seen = []
            for element in self:
                seen.append(element)
                yield element
            kept.append(seen)
        return DataPipeline(run, self.length)

    def prefetch(self, buffer_size, name=None):
        return self

    def with_options(self, options, name=None):
        """tf.data.Options set how TensorFlow runs a pipeline (threads, fusions, autotuning, whether the order
        may vary), not its elements: this pipeline, run in order in one thread, gives the same elements as is."""
        return self

    def as_numpy_iterator(self):
        def numpy(value):
            if isinstance(value, tuple):
                return tuple(numpy(v) for v in value)
            if isinstance(value, dict):
                return {{k: numpy(v) for k, v in value.items()}}
            if isinstance(value, list):
                return {np}array([v.encode() if isinstance(v, str) else v for v in value], dtype=object)
            if isinstance(value, str):
                return value.encode()
            return value.detach().numpy()
        return (numpy(element) for element in self)

    def cardinality(self):
        return -1 if self.length == float("inf") else (-2 if self.length is None else self.length)
'''

# the end both *_dataset_from_directory helpers share: labels, the pipeline of one split, validation_split
_FROM_DIRECTORY_TAIL = '''    def label(value):
        if label_mode == "categorical":
            return torch.nn.functional.one_hot(torch.tensor(int(value)), len(class_names)).float()
        if label_mode == "binary":
            return torch.tensor([float(value)])
        return torch.tensor(int(value), dtype=torch.int32)

    def pipeline(part_paths, part_labels, shuffled):
        n = len(part_paths)
        if part_labels is None:
            ds = DataPipeline(lambda: (load(p) for p in part_paths), n)
        else:
            ds = DataPipeline(lambda: ((load(p), label(v)) for p, v in zip(part_paths, part_labels)), n)
        if shuffled:
            ds = ds.shuffle(batch_size * 8 if batch_size is not None else 1024, seed=seed)
        if batch_size is not None:
            ds = ds.batch(batch_size)
        ds.class_names = class_names
        return ds

    n_val = int(validation_split * len(paths)) if validation_split else 0
    splits = {{"training": (paths[: len(paths) - n_val], None if labels is None else labels[: len(paths) - n_val]),
              "validation": (paths[len(paths) - n_val:], None if labels is None else labels[len(paths) - n_val:])}}
    if not validation_split:
        return pipeline(paths, labels, shuffle)
    if subset == "both":
        return [pipeline(*splits["training"], shuffle), pipeline(*splits["validation"], False)]
    return pipeline(*splits[subset], shuffle)
'''

_IMAGE_DATASET = '''

def image_dataset_from_directory(directory, labels="inferred", label_mode="int", class_names=None, color_mode="rgb",
                                 batch_size=32, image_size=(256, 256), shuffle=True, seed=None, validation_split=None,
                                 subset=None, interpolation="bilinear", follow_links=False, data_format=None,
                                 verbose=True):
    """keras.utils.image_dataset_from_directory as a DataPipeline: the files of each class folder (sorted;
    classes in alphabetical order) shuffled with RandomState(seed), split off by validation_split, then
    each image decoded with PIL (color_mode), resized to image_size (height, width) as tf.image.resize
    does (bilinear without antialiasing: float32; nearest: uint8), channels-last (or channels-first), with
    int32 labels (categorical: float32 one-hot; binary: float32 (1,)); shuffled each pass in a buffer of
    8 batches and batched like Keras."""
    if seed is None:
        seed = int(np.random.randint(1e6))
    if isinstance(image_size, int):
        image_size = (image_size, image_size)
    channels = {{"grayscale": 1, "rgb": 3, "rgba": 4}}[color_mode]
    formats = (".bmp", ".gif", ".jpeg", ".jpg", ".png")
    if labels is None or label_mode is None:  # images only: every image under the folder
        labels, label_mode = None, None
    if labels == "inferred":
        folders = sorted(d for d in os.listdir(directory)
                         if os.path.isdir(os.path.join(directory, d)) and not d.startswith("."))
        class_names = list(class_names) if class_names is not None else folders
    else:
        class_names = [""]
    paths, found = [], []
    for index, folder in enumerate(class_names):
        root = os.path.join(directory, folder)
        for here, _, files in sorted(os.walk(root, followlinks=follow_links), key=lambda w: w[0]):
            for name in sorted(files):
                if name.lower().endswith(formats):
                    paths.append(os.path.join(root, os.path.relpath(os.path.join(here, name), root)))
                    found.append(index)
    if labels == "inferred":
        labels = np.asarray(found, dtype="int32")
    elif labels is not None:
        class_names = [str(c) for c in sorted(set(labels))]
        labels = np.asarray(labels)
    if labels is None:
        class_names = None
    if shuffle:
        np.random.RandomState(seed).shuffle(paths)
        if labels is not None:
            np.random.RandomState(seed).shuffle(labels)
    if verbose:
        print(f"Found {{len(paths)}} files" + (f" belonging to {{len(class_names)}} classes." if labels is not None else "."))

    def load(path):
        img = PIL.Image.open(path)
        img = img.convert({{1: "L", 3: "RGB", 4: "RGBA"}}[channels])
        x = torch.from_numpy(np.asarray(img, dtype="float32").reshape(img.size[1], img.size[0], channels))
        if tuple(x.shape[:2]) != tuple(image_size):
            mode = {{"bilinear": "bilinear", "nearest": "nearest-exact"}}[interpolation]
            options = {{"align_corners": False, "antialias": False}} if mode == "bilinear" else {{}}
            x = torch.nn.functional.interpolate(x.permute(2, 0, 1)[None], size=tuple(image_size), mode=mode,
                                                **options)[0].permute(1, 2, 0)
        if interpolation == "nearest":  # tf.image.resize keeps the decoded uint8 for nearest
            x = x.to(torch.uint8)
        return x.permute(2, 0, 1).contiguous() if data_format == "channels_first" else x

''' + _FROM_DIRECTORY_TAIL

_TEXT_DATASET = '''

def text_dataset_from_directory(directory, labels="inferred", label_mode="int", class_names=None, batch_size=32,
                                max_length=None, shuffle=True, seed=None, validation_split=None, subset=None,
                                follow_links=False, verbose=True):
    """keras.utils.text_dataset_from_directory as a DataPipeline: the .txt files of each class folder
    (sorted; classes in alphabetical order) shuffled with RandomState(seed), split off by
    validation_split, each read as text (its first max_length bytes), with int32 labels (categorical:
    float32 one-hot; binary: float32 (1,)); shuffled each pass in a buffer of 8 batches and batched like
    Keras. A batch of texts is a list of Python strings (TensorFlow gives a tensor of bytes)."""
    if seed is None:
        seed = int(np.random.randint(1e6))
    if labels is None or label_mode is None:  # texts only: every file under the folder
        labels, label_mode = None, None
    if labels == "inferred":
        folders = sorted(d for d in os.listdir(directory)
                         if os.path.isdir(os.path.join(directory, d)) and not d.startswith("."))
        class_names = list(class_names) if class_names is not None else folders
    else:
        class_names = [""]
    paths, found = [], []
    for index, folder in enumerate(class_names):
        root = os.path.join(directory, folder)
        for here, _, files in sorted(os.walk(root, followlinks=follow_links), key=lambda w: w[0]):
            for name in sorted(files):
                if name.lower().endswith(".txt"):
                    paths.append(os.path.join(root, os.path.relpath(os.path.join(here, name), root)))
                    found.append(index)
    if labels == "inferred":
        labels = np.asarray(found, dtype="int32")
    elif labels is not None:
        class_names = [str(c) for c in sorted(set(labels))]
        labels = np.asarray(labels)
    if labels is None:
        class_names = None
    if shuffle:
        np.random.RandomState(seed).shuffle(paths)
        if labels is not None:
            np.random.RandomState(seed).shuffle(labels)
    if verbose:
        print(f"Found {{len(paths)}} files" + (f" belonging to {{len(class_names)}} classes." if labels is not None else "."))

    def load(path):
        with open(path, "rb") as f:
            data = f.read()
        return (data if max_length is None else data[:max_length]).decode("utf-8", errors="replace")

''' + _FROM_DIRECTORY_TAIL

_DECODE_WAV = '''

def decode_wav(contents, desired_channels=-1, desired_samples=-1):
    """tf.audio.decode_wav: a 16-bit PCM WAV file's bytes as (audio, sample_rate), audio a float32 (samples,
    channels) tensor of the samples / 32768 (in [-1, 1)), sample_rate an int32 scalar, as TensorFlow gives them;
    desired_channels > 0 gives that many channels (the first ones; the last one repeated), desired_samples > 0
    cuts the samples or pads them with zeros (-1: as in the file)."""
    with wave.open(io.BytesIO(bytes(contents)), "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"decode_wav reads 16-bit PCM WAV files, not {{8 * w.getsampwidth()}}-bit ones")
        channels, rate = w.getnchannels(), w.getframerate()
        frames = w.readframes(w.getnframes())
    audio = {np}frombuffer(frames, dtype="<i2").reshape(-1, channels).astype({np}float32) / 32768.0
    if desired_channels is not None and desired_channels > 0:  # channel c is the file's min(c, last channel)
        audio = audio[:, {np}minimum({np}arange(desired_channels), channels - 1)]
    if desired_samples is not None and desired_samples > 0:
        audio = audio[:desired_samples]
        if len(audio) < desired_samples:
            audio = {np}concatenate([audio, {np}zeros((desired_samples - len(audio), audio.shape[1]), {np}float32)])
    return {torch}from_numpy({np}ascontiguousarray(audio)), {torch}tensor(rate, dtype={torch}int32)
'''

_IMAGENET_PREPROCESS = '''

def imagenet_preprocess(x, mode, data_format=None):
    """keras.applications' preprocess_input on a batch of images (or one image) with pixels in [0, 255]. mode
    "tf": x / 127.5 - 1 (pixels in [-1, 1]); "torch": x / 255, then each channel less ImageNet's mean and divided
    by its std; "caffe": the channels reversed (RGB to BGR), then each less ImageNet's mean in BGR order, not
    scaled. The channels are the last axis (data_format "channels_last" or None, Keras's default), or the first
    of an image, the second of a batch ("channels_first"). As in Keras, a NumPy array is worked on in place (a
    float array given is changed and returned; another dtype is copied to float32 first), and a tensor gives a
    new tensor of its dtype."""
    first = data_format == "channels_first"
    if isinstance(x, {np}ndarray):
        if not {np}issubdtype(x.dtype, {np}floating):
            x = x.astype({np}float32)
        if mode == "tf":
            x /= 127.5
            x -= 1.0
            return x
        if mode == "torch":
            x /= 255.0
            mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
        else:
            x = (x[::-1] if x.ndim == 3 else x[:, ::-1]) if first else x[..., ::-1]
            mean, std = (103.939, 116.779, 123.68), None
        for c in range(3):
            channel = (x[c] if x.ndim == 3 else x[:, c]) if first else x[..., c]
            channel -= mean[c]
            if std is not None:
                channel /= std[c]
        return x
    if mode == "tf":
        return x / 127.5 - 1.0
    axis = (0 if x.dim() == 3 else 1) if first else x.dim() - 1
    shape = [3 if d == axis else 1 for d in range(x.dim())]
    if mode == "torch":
        x = x / 255.0
        mean = {torch}tensor((0.485, 0.456, 0.406), dtype=x.dtype, device=x.device).reshape(shape)
        std = {torch}tensor((0.229, 0.224, 0.225), dtype=x.dtype, device=x.device).reshape(shape)
        return (x - mean) / std
    x = x.index_select(axis, {torch}tensor((2, 1, 0), device=x.device))
    return x - {torch}tensor((103.939, 116.779, 123.68), dtype=x.dtype, device=x.device).reshape(shape)
'''

_PROJECTIVE = '''

def projective_transform(images, transforms, interpolation="nearest", fill_mode="constant", fill_value=0.0):
    """TensorFlow's ImageProjectiveTransformV3 (tfa.image.transform): output pixel (x, y) of image i reads the
    input at ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), k = c0 x + c1 y + 1, from transforms[i] = [a0, a1,
    a2, b0, b1, b2, c0, c1] (one row for every image, or (8,)); images (batch, height, width, channels), or
    without the batch or channel axis. "nearest" rounds half away from zero, "bilinear" weighs the four
    neighbours; a neighbour outside the image reads fill_value ("constant"), or the coordinate is clamped to the
    image first ("nearest"). Computed in float32, cast back to the images' dtype."""
    images = {torch}as_tensor(images)
    x = images.reshape(images.shape + (1,) * (3 - images.dim())) if images.dim() < 3 else images
    x = x if images.dim() == 4 else x[None]
    n, h, w, c = x.shape
    t = {torch}as_tensor(transforms, dtype={torch}float32, device=x.device).reshape(-1, 8).expand(n, 8)
    a0, a1, a2, b0, b1, b2, c0, c1 = (v.reshape(n, 1, 1) for v in t.unbind(1))
    ys, xs = {torch}meshgrid({torch}arange(h, dtype={torch}float32, device=x.device),
                             {torch}arange(w, dtype={torch}float32, device=x.device), indexing="ij")
    k = c0 * xs + c1 * ys + 1.0
    src_x, src_y = (a0 * xs + a1 * ys + a2) / k, (b0 * xs + b1 * ys + b2) / k
    if fill_mode == "nearest":
        src_x, src_y = src_x.clamp(0, w - 1), src_y.clamp(0, h - 1)
    flat = x.reshape(n, h * w, c).float()
    batch = {torch}arange(n, device=x.device).reshape(n, 1, 1)
    fill = {torch}tensor(fill_value, device=x.device).to(images.dtype).float()  # TensorFlow casts it to the dtype

    def read(py, px):  # the pixels at integer coordinates, fill_value outside the image
        inside = (py >= 0) & (py <= h - 1) & (px >= 0) & (px <= w - 1)
        index = (py.clamp(0, h - 1) * w + px.clamp(0, w - 1)).long()
        values = flat[batch, index]
        return {torch}where(inside[..., None], values, fill)

    if interpolation == "nearest":
        def away(v):
            return {torch}where(v >= 0, {torch}floor(v + 0.5), {torch}ceil(v - 0.5))
        out = read(away(src_y), away(src_x))
    else:
        x0, y0 = {torch}floor(src_x), {torch}floor(src_y)
        x1, y1 = x0 + 1, y0 + 1
        top = (x1 - src_x)[..., None] * read(y0, x0) + (src_x - x0)[..., None] * read(y0, x1)
        bottom = (x1 - src_x)[..., None] * read(y1, x0) + (src_x - x0)[..., None] * read(y1, x1)
        out = (y1 - src_y)[..., None] * top + (src_y - y0)[..., None] * bottom
    out = {torch}where((k == 0)[..., None], fill, out).to(images.dtype)
    return out.reshape(images.shape) if images.dim() != 4 else out
'''

_ROTATE = '''

def rotate_images(images, angles, interpolation="nearest", fill_mode="constant", fill_value=0.0):
    """tfa.image.rotate: each image turned counter-clockwise by its angle (radians; one for all, or one per
    image) about its centre, as tfa builds the projective transform."""
    images = {torch}as_tensor(images)
    h, w = (images.shape[0], images.shape[1]) if images.dim() < 4 else (images.shape[1], images.shape[2])
    angles = {torch}as_tensor(angles, dtype={torch}float32, device=images.device).reshape(-1)
    cos, sin = {torch}cos(angles), {torch}sin(angles)
    x_offset = ((w - 1) - (cos * (w - 1) - sin * (h - 1))) / 2.0
    y_offset = ((h - 1) - (sin * (w - 1) + cos * (h - 1))) / 2.0
    zeros = {torch}zeros_like(cos)
    transforms = {torch}stack([cos, -sin, x_offset, sin, cos, y_offset, zeros, zeros], 1)
    return projective_transform(images, transforms, interpolation, fill_mode, fill_value)
'''

_TRANSLATE = '''

def translate_images(images, translations, interpolation="nearest", fill_mode="constant", fill_value=0.0):
    """tfa.image.translate: each image moved by its [dx, dy] (pixels; one pair for all, or one per image)."""
    images = {torch}as_tensor(images)
    d = {torch}as_tensor(translations, dtype={torch}float32, device=images.device).reshape(-1, 2)
    ones, zeros = {torch}ones_like(d[:, 0]), {torch}zeros_like(d[:, 0])
    transforms = {torch}stack([ones, zeros, -d[:, 0], zeros, ones, -d[:, 1], zeros, zeros], 1)
    return projective_transform(images, transforms, interpolation, fill_mode, fill_value)
'''

DATA_HELPERS: dict[str, str] = {
    "text_dataset_from_directory": _TEXT_DATASET,
    "image_dataset_from_directory": _IMAGE_DATASET,
    "get_file": _GET_FILE,
    "imagenet_preprocess": _IMAGENET_PREPROCESS,
    "projective_transform": _PROJECTIVE,
    "rotate_images": _ROTATE,
    "translate_images": _TRANSLATE,
    "pad_sequences": _PAD_SEQUENCES,
    "Tokenizer": _TOKENIZER,
    "to_categorical": _TO_CATEGORICAL,
    "set_random_seed": _SET_RANDOM_SEED,
    "resize_images": _RESIZE_IMAGES,
    "resize_with_pad": _RESIZE_WITH_PAD,
    "load_img": _LOAD_IMG,
    "img_to_array": _IMG_TO_ARRAY,
    "array_to_img": _ARRAY_TO_IMG,
    "save_img": _SAVE_IMG,
    "py_function": _PY_FUNCTION,
    "numpy_function": _NUMPY_FUNCTION,
    "seeded_generator": _SEEDED_GENERATOR,
    "map_fn": _MAP_FN,
    "DataPipeline": _DATA_PIPELINE,
    "DatasetOptions": _DATASET_OPTIONS,
    "decode_image": _DECODE_IMAGE,
    "decode_wav": _DECODE_WAV,
    "timeseries_dataset_from_array": _TIMESERIES,
    "load_boston_housing": _BOSTON,
    "load_imdb": _WORD_SEQUENCES.format(fn="load_imdb", name="imdb", extra="", url=_KERAS_NPZ, load=_IMDB_LOAD,
                                        split=_IMDB_SPLIT, np="{np}"),
}
for _name, (_cls, _params, _y_shape, _shapes) in _TV.items():
    DATA_HELPERS[f"load_{_name}"] = (_TORCHVISION.replace("{name}", _name).replace("{cls}", _cls)
                                     .replace("{params}", _params).replace("{y_shape}", _y_shape)
                                     .replace("{shapes}", _shapes))

_IMPORTS = {
    "get_file": ("os", "tarfile", "tempfile", "zipfile", "torch"),
    "imagenet_preprocess": ("numpy as np", "torch"),
    "projective_transform": ("torch",), "rotate_images": ("torch",), "translate_images": ("torch",),
    "pad_sequences": ("numpy as np",), "to_categorical": ("numpy as np", "torch"), "resize_images": ("torch",),
    "set_random_seed": ("random", "numpy as np", "torch"),
    "resize_with_pad": ("numpy as np", "torch"),
    "load_img": ("PIL.Image",), "img_to_array": ("numpy as np",), "array_to_img": ("numpy as np", "PIL.Image"),
    "save_img": ("pathlib",), "py_function": ("torch",),
    "numpy_function": ("numpy as np", "torch"), "seeded_generator": ("torch",),
    "map_fn": ("torch",),
    "decode_image": ("io", "numpy as np", "PIL.Image", "PIL.ImageSequence", "torch"),
    "decode_wav": ("io", "wave", "numpy as np", "torch"),
    "timeseries_dataset_from_array": ("numpy as np",),
    "load_boston_housing": ("numpy as np",), "load_imdb": ("numpy as np",),
    "image_dataset_from_directory": ("os", "numpy as np", "PIL.Image", "torch"),
    "text_dataset_from_directory": ("os", "numpy as np", "torch"),
    **{f"load_{name}": ("os", "numpy as np", "torchvision") for name in _TV},
}


def _with_local_imports(text: str, modules: tuple[str, ...]) -> str:
    """A function helper imports what it uses in its body: it can be defined anywhere in the file
    (above the first statement that calls it, in a notebook) and needs nothing imported before."""
    text = (text.replace("{np}", "np.").replace("{os}", "os.").replace("{torch}", "torch.")
            .replace("{Image}", "PIL.Image.").replace("{torchvision}", "torchvision."))
    end = text.index('"""', text.index('"""') + 3)
    end = text.index("\n", end) + 1
    lines = "".join(f"    import {m}\n" for m in modules) + "\n"
    return text[:end] + lines + text[end:]


for _name, _modules in _IMPORTS.items():
    DATA_HELPERS[_name] = _with_local_imports(DATA_HELPERS[_name], _modules)

#: the helpers that are functions importing what they use (written above their first use)
DATA_HELPERS.update(TEXT_HELPERS)
DATA_HELPERS.update(RECORD_HELPERS)
DATA_HELPERS.update(IMAGEGEN_HELPERS)

#: the helpers that are functions importing what they use (written above their first use)
LOCAL_HELPERS = (frozenset(_IMPORTS) | {"Tokenizer"} | frozenset(TEXT_HELPERS) | frozenset(RECORD_HELPERS)
                 | frozenset(IMAGEGEN_HELPERS))  # (classes whose methods import)

#: helpers that call other helpers
DATA_DEPS: dict[str, tuple[str, ...]] = {
    "load_imdb": ("get_file",), "resize_with_pad": ("resize_images",), "save_img": ("array_to_img",),
    "image_dataset_from_directory": ("DataPipeline",),
    "rotate_images": ("projective_transform",), "translate_images": ("projective_transform",),
    "timeseries_dataset_from_array": ("DataPipeline",),
    "text_dataset_from_directory": ("DataPipeline",), "load_boston_housing": ("get_file",),
}
DATA_DEPS.update(TEXT_DEPS)
DATA_DEPS.update(RECORD_DEPS)
DATA_DEPS.update(IMAGEGEN_DEPS)
