"""torchvision's data code without torchvision (which imports PyTorch): the datasets stored on disk in a
documented format, the image transforms whose values can be reproduced exactly, and ``save_image``, each
a helper written into the output (the way data.py writes NumpyLoader; data.finish writes them).

What is translated and why (docs/rules/torch2jax.md has each rule):
- ``datasets.MNIST`` / ``FashionMNIST`` → ``NumpyMNIST`` / ``NumpyFashionMNIST``: the IDX files torchvision
  downloads, read from the same ``root/<Name>/raw`` (unpacked or ``.gz``); ``datasets.CIFAR10`` / ``CIFAR100``
  → ``NumpyCIFAR10`` / ``NumpyCIFAR100``: the python pickles under ``root/cifar-10-batches-py`` /
  ``root/cifar-100-python``. Existing torchvision downloads are reused; the output has no downloader, so
  ``download=True`` (or a value not known to be False) is a ``no-download`` warning saying how to get the
  files. Any other dataset (ImageFolder, ...) is a ``no-rule`` error at its line (torchvision is a source
  package of this direction): keeping torchvision would keep PyTorch in the output.
- Images are numpy arrays where torchvision hands PIL images to the transforms: (H, W) uint8 for MNIST,
  (H, W, 3) uint8 for CIFAR, the same pixels. A uint8 array is an image (H, W[, C]); any other dtype is
  what ToTensor gives, (C, H, W), as torchvision's transforms tell a PIL image from a tensor.
- ``ToTensor`` (HWC uint8 → CHW float32 divided by 255 in float32, as torchvision divides), ``Normalize``
  (per channel, in the array's dtype), ``Compose``, ``Lambda``, ``Pad``, ``CenterCrop``; ``Resize`` only where it keeps
  the image (torchvision returns an image of the asked size unchanged; PIL's resampling filters are not
  reproduced, so any other size raises at run time, and the translation warns); the random transforms
  (``RandomCrop``, ``RandomHorizontalFlip``) draw from a numpy Generator of their own, seeded with an
  explicit ``seed=`` the translation writes (1, 2, ... in the file's order; NumpyLoader's default is 0):
  data augmentation runs on the host in numpy, where a JAX key would need a device round trip per example,
  and the seed makes the draws reproducible. Any other transform is a ``no-rule`` error.
- ``torchvision.utils.save_image`` → ``save_image_png``: make_grid's layout and normalisation, rounded to
  8 bits as torchvision rounds, written as an RGB PNG with the standard library (zlib), so the output needs
  neither torchvision nor PIL; a path not ending in .png (and no format="png") raises.
- ``RandomResizedCrop`` → ``NumpyRandomResizedCrop``: torchvision's box sampling (its distribution, from the
  helper's own seeded Generator) and bilinear antialiased resize, PIL's 8-bit fixed point for uint8 images, floating
  point for ToTensor arrays (torch's interpolate with antialias, to its rounding).
- ``torchvision.utils.make_grid`` → ``make_grid_np``: the same layout and normalisation, the grid a numpy array of
  the images' dtype (one image: itself, as torchvision returns it).
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import NOT_LITERAL, literal_value
from fwport.core.finding import Severity
from fwport.packs.torch2jax.registry import call_transform, value_transform

_READ_IDX = '''
def read_idx_file(path):
    """An IDX file (MNIST's format) as a uint8 numpy array: two zero bytes, the type byte 8 (unsigned bytes),
    the number of dimensions, each size as a big-endian int32, then the values. Reads `path`, else `path`.gz."""
    import gzip
    import os

    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path = path + ".gz"
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{{path}} not found: this translation reads the files torchvision downloads and has no downloader; "
            "download them once (torchvision's download=True, or the dataset's site) into that folder")
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 8:
        raise ValueError(f"{{path}} is not an IDX file of unsigned bytes")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * k:8 + 4 * k], "big") for k in range(ndim))
    return {np}frombuffer(data, dtype={np}uint8, offset=4 + 4 * ndim).reshape(shape)
'''

_MNIST = '''
class NumpyMNIST:
    """torchvision.datasets.MNIST read without torchvision from the files it downloads:
    root/MNIST/raw/{{train,t10k}}-images-idx3-ubyte and -labels-idx1-ubyte (or .gz). Example i is
    (transform(image), target_transform(label)): the image a (28, 28) uint8 array (torchvision's PIL image,
    same pixels), the label an int. Nothing is downloaded."""

    folder = "MNIST"

    def __init__(self, root, train=True, transform=None, target_transform=None):
        import os

        raw = os.path.join(os.path.expanduser(root), self.folder, "raw")
        split = "train" if train else "t10k"
        self.train, self.transform, self.target_transform = train, transform, target_transform
        self.data = read_idx_file(os.path.join(raw, split + "-images-idx3-ubyte"))
        self.targets = read_idx_file(os.path.join(raw, split + "-labels-idx1-ubyte")).astype({np}int64)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        image, label = self.data[i], int(self.targets[i])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label
'''

_FASHION_MNIST = '''
class NumpyFashionMNIST(NumpyMNIST):
    """torchvision.datasets.FashionMNIST: NumpyMNIST reading root/FashionMNIST/raw."""

    folder = "FashionMNIST"
'''

_CIFAR10 = '''
class NumpyCIFAR10:
    """torchvision.datasets.CIFAR10 read without torchvision from the python pickles it downloads
    (root/cifar-10-batches-py: data_batch_1..5, test_batch). Example i is (transform(image),
    target_transform(label)): the image a (32, 32, 3) uint8 array (torchvision's PIL image, same pixels),
    the label an int. Nothing is downloaded and the files' checksums are not checked."""

    folder, train_files, test_files, meta = "cifar-10-batches-py", [f"data_batch_{{k}}" for k in range(1, 6)], \\
        ["test_batch"], ("batches.meta", "label_names")

    def __init__(self, root, train=True, transform=None, target_transform=None):
        import os
        import pickle

        base = os.path.join(os.path.expanduser(root), self.folder)
        if not os.path.isdir(base):
            raise FileNotFoundError(
                f"{{base}} not found: this translation reads the files torchvision downloads and has no downloader; "
                "download them once (torchvision's download=True, or the dataset's site) and unpack them there")
        self.train, self.transform, self.target_transform = train, transform, target_transform
        data, self.targets = [], []
        for name in self.train_files if train else self.test_files:
            with open(os.path.join(base, name), "rb") as f:
                entry = pickle.load(f, encoding="latin1")
            data.append(entry["data"])
            self.targets.extend(entry["labels"] if "labels" in entry else entry["fine_labels"])
        self.data = {np}vstack(data).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        self.classes = None
        if os.path.exists(os.path.join(base, self.meta[0])):
            with open(os.path.join(base, self.meta[0]), "rb") as f:
                self.classes = pickle.load(f, encoding="latin1")[self.meta[1]]

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        image, label = self.data[i], int(self.targets[i])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label
'''

_CIFAR100 = '''
class NumpyCIFAR100(NumpyCIFAR10):
    """torchvision.datasets.CIFAR100: NumpyCIFAR10 reading root/cifar-100-python (train, test; fine labels)."""

    folder, train_files, test_files, meta = "cifar-100-python", ["train"], ["test"], ("meta", "fine_label_names")
'''

_COMPOSE = '''
class NumpyCompose:
    """torchvision's Compose: each transform in turn."""

    def __init__(self, steps):
        self.steps = steps

    def __call__(self, x):
        for t in self.steps:
            x = t(x)
        return x
'''

_TO_TENSOR = '''
class NumpyToTensor:
    """torchvision's ToTensor on a numpy image: (H, W) or (H, W, C) → (C, H, W); uint8 values become float32
    divided by 255 (in float32, as torchvision divides), other dtypes are kept."""

    def __call__(self, image):
        a = {np}asarray(image)
        if a.ndim == 2:
            a = a[:, :, None]
        if a.ndim != 3:
            raise ValueError(f"ToTensor takes an (H, W) or (H, W, C) image, not shape {{a.shape}}")
        a = {np}ascontiguousarray(a.transpose(2, 0, 1))
        return a.astype({np}float32) / {np}float32(255) if a.dtype == {np}uint8 else a
'''

_NORMALIZE = '''
class NumpyNormalize:
    """torchvision's Normalize: (x - mean) / std per channel of a (C, H, W) float array (what ToTensor gives),
    in the array's dtype."""

    def __init__(self, mean, std, inplace=False):
        self.mean, self.std = {np}asarray(mean), {np}asarray(std)
        if (self.std == 0).any():
            raise ValueError("std evaluated to zero, leading to division by zero")

    def __call__(self, x):
        x = {np}asarray(x)
        if not {np}issubdtype(x.dtype, {np}floating):
            raise TypeError("Normalize takes the float (C, H, W) array ToTensor gives, not an image")
        mean = self.mean.astype(x.dtype).reshape(-1, 1, 1) if self.mean.ndim == 1 else self.mean.astype(x.dtype)
        std = self.std.astype(x.dtype).reshape(-1, 1, 1) if self.std.ndim == 1 else self.std.astype(x.dtype)
        return (x - mean) / std
'''

# (images: uint8 (H, W[, C]); arrays from ToTensor: (C, H, W)) the two spatial axes of either
_RESIZE = '''
class NumpyResize:
    """torchvision's Resize where it keeps the image: an image whose size already is the size asked for
    (an int: its shorter side, the other side in proportion) is returned unchanged, as torchvision returns
    it. Resampling (PIL's filters) is not reproduced: any other size raises."""

    def __init__(self, size, max_size=None):
        self.size, self.max_size = size, max_size

    def __call__(self, image):
        a = {np}asarray(image)
        h, w = a.shape[:2] if a.dtype == {np}uint8 else a.shape[-2:]
        size = [self.size] if isinstance(self.size, int) else list(self.size)
        if len(size) == 1:
            short, long = min(h, w), max(h, w)
            new_short, new_long = size[0], int(size[0] * long / short)
            if self.max_size is not None and new_long > self.max_size:
                new_short, new_long = int(self.max_size * new_short / new_long), self.max_size
            size = [new_long, new_short] if w <= h else [new_short, new_long]
        if list(size) != [h, w]:
            raise ValueError(f"Resize of a {{h}}x{{w}} image to {{size[0]}}x{{size[1]}}: resampling is not translated "
                             "(torchvision resamples with PIL's filters); resize the images beforehand")
        return image
'''

_LAMBDA = '''
class NumpyLambda:
    """torchvision's Lambda: the function, called on the image or array."""

    def __init__(self, lambd):
        self.lambd = lambd

    def __call__(self, x):
        return self.lambd(x)
'''

_PAD = '''
class NumpyPad:
    """torchvision's Pad: padding (an int, (left/right, top/bottom) or (left, top, right, bottom)) around the
    two spatial axes of an image (uint8 (H, W[, C])) or of a (C, H, W) array, with a number `fill` or the
    edge / reflect / symmetric modes."""

    def __init__(self, padding, fill=0, padding_mode="constant"):
        p = [padding] if isinstance(padding, int) else list(padding)
        self.left, self.top, self.right, self.bottom = p * 4 if len(p) == 1 else p * 2 if len(p) == 2 else p
        if min(self.left, self.top, self.right, self.bottom) < 0 or not isinstance(fill, (int, float)) \\
                or padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError("Pad: negative padding, a fill per channel and other modes are not translated")
        self.fill, self.padding_mode = fill, padding_mode

    def __call__(self, image):
        a = {np}asarray(image)
        spatial = [(self.top, self.bottom), (self.left, self.right)]
        widths = spatial + [(0, 0)] * (a.ndim - 2) if a.dtype == {np}uint8 else [(0, 0)] * (a.ndim - 2) + spatial
        if self.padding_mode == "constant":
            return {np}pad(a, widths, constant_values=self.fill)
        return {np}pad(a, widths, mode=self.padding_mode)
'''

_RANDOM_CROP = '''
class NumpyRandomCrop:
    """torchvision's RandomCrop: padded first when asked, then a crop of `size` at a random position (none
    drawn where the image has that size), drawn from a numpy Generator seeded with `seed` (torchvision's
    distribution of positions, not its draws)."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant", seed=0):
        s = [size] if isinstance(size, int) else list(size)
        self.size = (s[0], s[0]) if len(s) == 1 else (s[0], s[1])
        self.padding, self.pad_if_needed, self.fill, self.padding_mode = padding, pad_if_needed, fill, padding_mode
        self.rng = {np}random.default_rng(seed)

    def __call__(self, image):
        a = {np}asarray(image)
        if self.padding is not None:
            a = NumpyPad(self.padding, self.fill, self.padding_mode)(a)
        image_axes = a.dtype == {np}uint8
        h, w = a.shape[:2] if image_axes else a.shape[-2:]
        th, tw = self.size
        if self.pad_if_needed and w < tw:
            a = NumpyPad([tw - w, 0], self.fill, self.padding_mode)(a)
        if self.pad_if_needed and h < th:
            a = NumpyPad([0, th - h], self.fill, self.padding_mode)(a)
        h, w = a.shape[:2] if image_axes else a.shape[-2:]
        if h < th or w < tw:
            raise ValueError(f"Required crop size {{(th, tw)}} is larger than input image size {{(h, w)}}")
        i = j = 0
        if (h, w) != (th, tw):
            i = int(self.rng.integers(0, h - th + 1))
            j = int(self.rng.integers(0, w - tw + 1))
        return a[i:i + th, j:j + tw] if image_axes else a[..., i:i + th, j:j + tw]
'''

_CENTER_CROP = '''
class NumpyCenterCrop:
    """torchvision's CenterCrop: a crop of `size` (an int: square) at the centre of the two spatial axes
    (top = round((h - th) / 2), left = round((w - tw) / 2), Python's rounding as torchvision's), an image
    smaller than the crop padded with zeros first (the odd pixel after it, on the bottom / right)."""

    def __init__(self, size):
        s = [size] if isinstance(size, int) else list(size)
        self.size = (s[0], s[0]) if len(s) == 1 else (s[0], s[1])

    def __call__(self, image):
        a = {np}asarray(image)
        image_axes = a.dtype == {np}uint8
        h, w = a.shape[:2] if image_axes else a.shape[-2:]
        th, tw = self.size
        if th > h or tw > w:
            a = NumpyPad([max(tw - w, 0) // 2, max(th - h, 0) // 2, max(tw - w + 1, 0) // 2,
                          max(th - h + 1, 0) // 2])(a)
            h, w = a.shape[:2] if image_axes else a.shape[-2:]
        i, j = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
        return a[i:i + th, j:j + tw] if image_axes else a[..., i:i + th, j:j + tw]
'''

_RANDOM_FLIP = '''
class NumpyRandomHorizontalFlip:
    """torchvision's RandomHorizontalFlip: the image mirrored left-right with probability p, drawn from a
    numpy Generator seeded with `seed` (torchvision's probability, not its draws)."""

    def __init__(self, p=0.5, seed=0):
        self.p = p
        self.rng = {np}random.default_rng(seed)

    def __call__(self, image):
        if self.rng.random() < self.p:
            a = {np}asarray(image)
            return a[:, ::-1] if a.dtype == {np}uint8 else a[..., ::-1]
        return image
'''

_SAVE_IMAGE = '''
def save_image_png(tensor, fp, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False,
                   pad_value=0.0, format=None):
    """torchvision.utils.save_image without torchvision or PIL: images (B, C, H, W), (C, H, W) or (H, W),
    one channel repeated to three, scaled to [0, 1] by their min/max when normalize (or by value_range), laid
    out nrow per row with `padding` pixels of pad_value between them as make_grid lays them out, rounded to
    8 bits as torchvision rounds (x * 255 + 0.5, clipped, truncated) and written as an RGB PNG (only PNG:
    a path ending in .png, or format="png")."""
    import math
    import struct
    import zlib

    a = {np}stack([{np}asarray(t) for t in tensor]) if isinstance(tensor, (list, tuple)) else {np}asarray(tensor)
    a = a.astype({np}float32) if not {np}issubdtype(a.dtype, {np}floating) else a.copy()
    if a.ndim == 2:
        a = a[None]
    if a.ndim == 3:
        a = {np}concatenate([a, a, a], 0)[None] if a.shape[0] == 1 else a[None]
    if a.shape[1] == 1:
        a = {np}concatenate([a, a, a], 1)

    def scaled(t):
        low, high = (float(t.min()), float(t.max())) if value_range is None else value_range
        t = {np}clip(t, a.dtype.type(low), a.dtype.type(high))
        return (t - a.dtype.type(low)) / a.dtype.type(max(high - low, 1e-5))

    if normalize:
        a = {np}stack([scaled(t) for t in a]) if scale_each else scaled(a)
    if a.shape[0] == 1:
        grid = a[0]
    else:
        n, c, h, w = a.shape
        xmaps = min(nrow, n)
        ymaps = int(math.ceil(n / xmaps))
        grid = {np}full((c, (h + padding) * ymaps + padding, (w + padding) * xmaps + padding), pad_value, dtype=a.dtype)
        for k in range(n):
            y, x = divmod(k, xmaps)
            top, left = y * (h + padding) + padding, x * (w + padding) + padding
            grid[:, top:top + h, left:left + w] = a[k]
    if grid.shape[0] != 3:
        raise ValueError(f"save_image_png writes RGB: images of 1 or 3 channels, not {{grid.shape[0]}}")
    pixels = {np}clip(grid * a.dtype.type(255) + a.dtype.type(0.5), 0, 255).astype({np}uint8).transpose(1, 2, 0)
    name = str(fp) if isinstance(fp, (str, bytes)) or hasattr(fp, "__fspath__") else None
    if (format or "").lower() != "png" and not (name is not None and name.lower().endswith(".png")):
        raise ValueError(f"save_image_png writes PNG only: {{fp!r}} (give a .png path or format='png')")

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    height, width = pixels.shape[:2]
    rows = b"".join(b"\\x00" + pixels[r].tobytes() for r in range(height))
    png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) \\
        + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    if name is None:
        fp.write(png)
    else:
        with open(name, "wb") as f:
            f.write(png)
'''

_MAKE_GRID = '''
def make_grid_np(tensor, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False, pad_value=0.0):
    """torchvision.utils.make_grid without torchvision: images (B, C, H, W) or a list of (C, H, W), one image
    (C, H, W) or (H, W); one channel repeated to three; scaled to [0, 1] by their min/max when normalize (or by
    value_range, each image by its own with scale_each), clipped to that range first; laid out nrow per row with
    `padding` pixels of pad_value around them. One image comes back as it is (C, H, W), as torchvision's; the
    grid is a numpy array of the images' dtype."""
    import math

    a = {np}stack([{np}asarray(t) for t in tensor]) if isinstance(tensor, (list, tuple)) else {np}array(tensor)
    if a.ndim == 2:
        a = a[None]
    if a.ndim == 3:
        a = {np}concatenate([a, a, a], 0)[None] if a.shape[0] == 1 else a[None]
    if a.ndim == 4 and a.shape[1] == 1:
        a = {np}concatenate([a, a, a], 1)

    def scaled(t):
        low, high = (float(t.min()), float(t.max())) if value_range is None else value_range
        t = {np}clip(t, a.dtype.type(low), a.dtype.type(high))
        return (t - a.dtype.type(low)) / a.dtype.type(max(high - low, 1e-5))

    if normalize:
        a = {np}stack([scaled(t) for t in a]) if scale_each else scaled(a)
    if a.shape[0] == 1:
        return a[0]
    n, c, h, w = a.shape
    xmaps = min(nrow, n)
    ymaps = int(math.ceil(n / xmaps))
    grid = {np}full((c, (h + padding) * ymaps + padding, (w + padding) * xmaps + padding), pad_value, dtype=a.dtype)
    for k in range(n):
        y, x = divmod(k, xmaps)
        top, left = y * (h + padding) + padding, x * (w + padding) + padding
        grid[:, top:top + h, left:left + w] = a[k]
    return grid
'''


_RANDOM_RESIZED_CROP = '''
class NumpyRandomResizedCrop:
    """torchvision's RandomResizedCrop: a box of a random area (scale, a fraction of the image's) and aspect ratio
    (ratio, drawn log-uniformly), up to 10 tries, else the centre box of the ratio's bounds, as torchvision chooses
    it; drawn from a numpy Generator seeded with `seed` (torchvision's distribution, not its draws). The box is
    resized to `size` bilinearly with antialiasing, as torchvision resizes: a uint8 image (H, W[, C]) with PIL's
    8-bit fixed-point arithmetic, an array from ToTensor (C, H, W) in floating point, as torch's
    interpolate(mode="bilinear", antialias=True) (to its rounding)."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), seed=0):
        s = [size] if isinstance(size, int) else list(size)
        self.size = (s[0], s[0]) if len(s) == 1 else (s[0], s[1])
        self.scale, self.ratio = scale, ratio
        self.rng = {np}random.default_rng(seed)

    def get_params(self, height, width):
        import math

        area = height * width
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target_area = area * float(self.rng.uniform(self.scale[0], self.scale[1]))
            aspect_ratio = math.exp(float(self.rng.uniform(log_ratio[0], log_ratio[1])))
            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))
            if 0 < w <= width and 0 < h <= height:
                i = int(self.rng.integers(0, height - h + 1))
                j = int(self.rng.integers(0, width - w + 1))
                return i, j, h, w
        in_ratio = float(width) / float(height)
        if in_ratio < min(self.ratio):
            w = width
            h = int(round(w / min(self.ratio)))
        elif in_ratio > max(self.ratio):
            h = height
            w = int(round(h * max(self.ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    @staticmethod
    def weights(n_in, n_out):
        """(n_out, n_in) antialiased bilinear weights, PIL's (and torch's antialias) triangle filter widened by
        the downscaling factor, each row normalised."""
        scale = n_in / n_out
        support = max(scale, 1.0)
        out = {np}zeros((n_out, n_in))
        for i in range(n_out):
            center = (i + 0.5) * scale
            lo = max(int(center - support + 0.5), 0)
            hi = min(int(center + support + 0.5), n_in)
            x = ({np}arange(lo, hi) - center + 0.5) / support
            k = {np}clip(1.0 - {np}abs(x), 0.0, None)
            out[i, lo:hi] = k / k.sum()
        return out

    @staticmethod
    def fixed(k):
        """PIL's 8-bit coefficients: 22 fractional bits, rounded half away from zero."""
        return {np}trunc(k * (1 << 22) + {np}where(k < 0, -0.5, 0.5)).astype({np}int64)

    def resize(self, a, image_axes):
        th, tw = self.size
        h, w = a.shape[:2] if image_axes else a.shape[-2:]
        if not image_axes:
            out = {np}einsum("oh,...hw,pw->...op", self.weights(h, th), a.astype(float), self.weights(w, tw))
            return out.astype(a.dtype)
        if a.dtype != {np}uint8:
            raise ValueError("NumpyRandomResizedCrop resizes uint8 images (H, W[, C]) or ToTensor arrays (C, H, W)")
        x = a.astype({np}int64).reshape(h, w, -1)
        if w != tw:  # PIL: horizontal pass first, each clipped to 8 bits
            x = {np}clip(({np}einsum("pw,hwc->hpc", self.fixed(self.weights(w, tw)), x) + (1 << 21)) >> 22, 0, 255)
        if h != th:
            x = {np}clip(({np}einsum("oh,hwc->owc", self.fixed(self.weights(h, th)), x) + (1 << 21)) >> 22, 0, 255)
        return x.astype({np}uint8).reshape((th, tw) + a.shape[2:])

    def crop_resize(self, image, i, j, h, w):
        a = {np}asarray(image)
        image_axes = a.dtype == {np}uint8
        box = a[i:i + h, j:j + w] if image_axes else a[..., i:i + h, j:j + w]
        return self.resize(box, image_axes)

    def __call__(self, image):
        a = {np}asarray(image)
        height, width = a.shape[:2] if a.dtype == {np}uint8 else a.shape[-2:]
        return self.crop_resize(a, *self.get_params(height, width))
'''


#: name → text (written by data.finish, in this order after data.py's own helpers: dependencies first)
TEXTS = {
    "read_idx_file": _READ_IDX, "NumpyMNIST": _MNIST, "NumpyFashionMNIST": _FASHION_MNIST,
    "NumpyCIFAR10": _CIFAR10, "NumpyCIFAR100": _CIFAR100, "NumpyCompose": _COMPOSE, "NumpyToTensor": _TO_TENSOR,
    "NumpyNormalize": _NORMALIZE, "NumpyResize": _RESIZE, "NumpyLambda": _LAMBDA, "NumpyPad": _PAD,
    "NumpyRandomCrop": _RANDOM_CROP, "NumpyCenterCrop": _CENTER_CROP, "NumpyRandomHorizontalFlip": _RANDOM_FLIP, "save_image_png": _SAVE_IMAGE,
    "make_grid_np": _MAKE_GRID, "NumpyRandomResizedCrop": _RANDOM_RESIZED_CROP,
}
DEPS = {
    "NumpyMNIST": ("read_idx_file",), "NumpyFashionMNIST": ("NumpyMNIST", "read_idx_file"),
    "NumpyCIFAR100": ("NumpyCIFAR10",), "NumpyRandomCrop": ("NumpyPad",), "NumpyCenterCrop": ("NumpyPad",),
}

SEEDS = "torch2jax.transform-seeds"  # ctx.analyses: how many random transforms the file has seeded so far


@value_transform("dataset-download")
def dataset_download(value, spec, m, ctx):
    """``download=`` of a torchvision dataset: the output reads files already on disk. ``False`` says
    nothing; anything else is a ``no-download`` warning saying where the files must be and how to get them."""
    if literal_value(value, NOT_LITERAL) is False:
        return
    where = m.rule.emit.get("options", {}).get("files", "")
    cls = m.rule.names[0].rsplit(".", 1)[-1]
    ctx.report(Severity.WARNING, "no-download",
               f"download={m.written(spec.name) or 'True'}: the translation reads the {cls} files already under root "
               f"({where}) and downloads nothing; get them once with torchvision (`torchvision.datasets.{cls}(root, "
               f"download=True)` in a PyTorch environment) or from the dataset's site", m.node, m.rule)


@call_transform("random-transform")
def random_transform(m, ctx):
    """A random torchvision transform → its numpy helper with ``seed=N`` written out: N counts the file's
    random transforms from 1 (NumpyLoader's default seed is 0), so no two of them share a stream."""
    from fwport.packs.torch2jax.ops import data_helper

    n = ctx.analyses.get(SEEDS, 0) + 1
    ctx.analyses[SEEDS] = n
    call = data_helper(m, ctx)
    seed = cst.Arg(cst.Integer(str(n)), keyword=cst.Name("seed"),
                   equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in call.args]
    return call.with_changes(args=[*args, seed])
