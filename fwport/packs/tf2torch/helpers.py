"""Helper modules a translation writes out into the file that needs them (DESIGN: the output never
depends on fwport).

A shape function asks for one with :func:`use` and emits a call to it; the finishing step
:func:`finish` writes the definition of every helper the output still calls after the imports of
the file (one the file already defines is not written twice: translating again changes nothing).
"""
from __future__ import annotations

import libcst as cst

from fwport.core import written
from fwport.core.context import FileContext
from fwport.core.imports import insert_after_imports, insert_at, insertion_index
from fwport.core.names import scan
from fwport.core.position import render
from fwport.packs.tf2torch.datahelpers import DATA_DEPS, DATA_HELPERS, LOCAL_HELPERS
from fwport.packs.tf2torch.saving import SAVING_DEPS, SAVING_HELPERS

_KEY = "tf2torch-helpers"

# name → (its source text with {nn}/{F} spellings, the torch names it needs spelled)
_SAME_PAD = '''

class SamePad{nd}d({nn}Module):
    """TensorFlow's padding="same" before a window of this kernel, stride and dilation: the padding
    depends on the input size (the odd pixel goes after), so it is computed at each call."""

    def __init__(self, kernel_size, stride, dilation=1):
        super().__init__()
        self.kernel_size, self.stride, self.dilation = (
            tuple(v) if isinstance(v, (tuple, list)) else (v,) * {nd} for v in (kernel_size, stride, dilation))

    def forward(self, x):
        pads = []
        for n, k, s, d in zip(x.shape[:-{nd1}:-1], self.kernel_size[::-1], self.stride[::-1], self.dilation[::-1]):
            total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
            pads += [total // 2, total - total // 2]
        return {F}pad(x, pads)
'''

_MAX_POOL_PAD = '''

class MaxPoolSamePad{nd}d({nn}Module):
    """TensorFlow's padding="same" before a max pooling window of this size and stride, computed at
    each call (the odd pixel goes after); the padding is -inf, so no window ever takes it."""

    def __init__(self, pool_size, stride):
        super().__init__()
        self.pool_size, self.stride = (
            tuple(v) if isinstance(v, (tuple, list)) else (v,) * {nd} for v in (pool_size, stride))

    def forward(self, x):
        pads = []
        for n, k, s in zip(x.shape[:-{nd1}:-1], self.pool_size[::-1], self.stride[::-1]):
            total = max((-(-n // s) - 1) * s + k - n, 0)
            pads += [total // 2, total - total // 2]
        return {F}pad(x, pads, value=float("-inf"))
'''

_CHANNELS_LAST_RESHAPE = '''

class ChannelsLastReshape({nn}Module):
    """keras.layers.Reshape in a model converted to channels-first: a feature map is put back in
    Keras's channels-last order, reshaped as Keras reshapes it (row-major, batch axis kept), and a
    feature map that comes out is made channels-first again."""

    def __init__(self, shape):
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x):
        if x.dim() > 2:
            x = x.movedim(1, -1)
        x = x.reshape(x.shape[0], *self.shape)
        return x.movedim(-1, 1) if x.dim() > 2 else x
'''

_GAUSSIAN_NOISE = '''

class GaussianNoise({nn}Module):
    """keras.layers.GaussianNoise: adds N(0, stddev) noise in training, the identity in eval()."""

    def __init__(self, stddev):
        super().__init__()
        self.stddev = stddev

    def forward(self, x):
        return x + {torch}randn_like(x) * self.stddev if self.training else x
'''

_RANDOM_FLIP = '''

class RandomFlip({nn}Module):
    """keras.layers.RandomFlip: in training, each image of a batch (or a single image) is mirrored with
    probability 1/2 along its width ("horizontal"), its height ("vertical"), or each of them on its own
    ("horizontal_and_vertical"); the identity in eval(), as Keras's at inference. The axes are the
    model's: (-3, -2) for channels-last images, (-2, -1) for channels-first ones."""

    def __init__(self, mode="horizontal_and_vertical", height_dim=-3, width_dim=-2):
        super().__init__()
        self.mode, self.height_dim, self.width_dim = mode, height_dim, width_dim

    def forward(self, x):
        if not self.training:
            return x
        shape = (x.shape[0],) + (1,) * (x.dim() - 1) if x.dim() == 4 else ()
        for dim, on in ((self.width_dim, "horizontal" in self.mode), (self.height_dim, "vertical" in self.mode)):
            if on:
                x = {torch}where({torch}rand(shape, device=x.device) < 0.5, x.flip(dim), x)
        return x
'''

_RESAMPLE = '''

def _keras_resample(images, inverse, fill_mode, interpolation, fill_value, channels_last):
    """Keras's image transforms (RandomRotation, RandomZoom, RandomTranslation): each output pixel of image i reads
    the input at inverse[i] @ (its offset from the image centre), in pixels (a (2, 3) inverse adds its last column),
    sampled as Keras samples (bilinear or nearest; fill_mode "reflect" about the edge, "nearest", "constant" with
    fill_value, or "wrap")."""
    x = images if images.dim() == 4 else images[None]
    x = x.permute(0, 3, 1, 2) if channels_last else x
    n, _, h, w = x.shape
    ys, xs = {torch}meshgrid({torch}arange(h, dtype=x.dtype, device=x.device) - (h - 1) / 2,
                             {torch}arange(w, dtype=x.dtype, device=x.device) - (w - 1) / 2, indexing="ij")
    src = {torch}stack([xs, ys], -1).reshape(1, h * w, 2) @ inverse[..., :2].to(x.dtype).transpose(1, 2)
    if inverse.shape[-1] == 3:
        src = src + inverse[:, None, :, 2].to(x.dtype)
    grid = {torch}stack([(2 * src[..., 0] + w) / w - 1, (2 * src[..., 1] + h) / h - 1], -1).reshape(n, h, w, 2)
    if fill_mode == "wrap":
        grid = (grid + 1) % 2 - 1
    padding = {"reflect": "reflection", "nearest": "border", "constant": "zeros", "wrap": "border"}[fill_mode]
    shift = fill_value if fill_mode == "constant" else 0.0
    out = {F}grid_sample(x - shift, grid, mode="nearest" if interpolation == "nearest" else "bilinear",
                         padding_mode=padding, align_corners=False) + shift
    out = out.permute(0, 2, 3, 1) if channels_last else out
    return out if images.dim() == 4 else out[0]


def _keras_range(factor):
    """A Keras augmentation factor: a number f is the range (-f, f), a pair its (lower, upper)."""
    return (-factor, factor) if isinstance(factor, (int, float)) else tuple(factor)


class KerasRandomTransform({nn}Module):
    """What Keras's RandomRotation, RandomZoom and RandomTranslation share: in training, one transform drawn per
    image (self.inverse(n, device): output pixel offsets to input ones) and sampled by _keras_resample; the
    identity in eval(), as Keras's at inference."""

    def __init__(self, fill_mode, interpolation, fill_value, channels_last):
        super().__init__()
        self.fill_mode, self.interpolation, self.fill_value = fill_mode, interpolation, fill_value
        self.channels_last = channels_last

    def forward(self, x):
        if not self.training:
            return x
        inverse = self.inverse(x.shape[0] if x.dim() == 4 else 1, x.device)
        return _keras_resample(x, inverse, self.fill_mode, self.interpolation, self.fill_value, self.channels_last)
'''

_RANDOM_ROTATION = '''

class RandomRotation(KerasRandomTransform):
    """keras.layers.RandomRotation: each image turned counter-clockwise about its centre by its own angle, drawn
    uniformly from factor's range (fractions of a full turn); the corners filled by fill_mode."""

    def __init__(self, factor, fill_mode="reflect", interpolation="bilinear", fill_value=0.0, channels_last=True):
        super().__init__(fill_mode, interpolation, fill_value, channels_last)
        self.lower, self.upper = _keras_range(factor)

    def inverse(self, n, device):
        angle = (self.lower + (self.upper - self.lower) * {torch}rand(n, device=device)) * 2 * {math}pi
        cos, sin = angle.cos(), angle.sin()
        return {torch}stack([{torch}stack([cos, -sin], -1), {torch}stack([sin, cos], -1)], 1)
'''

_RANDOM_ZOOM = '''

class RandomZoom(KerasRandomTransform):
    """keras.layers.RandomZoom: each image zoomed about its centre by its own factor, drawn uniformly from the
    ranges (positive: zoomed out, negative: zoomed in; the width takes the height's draw when width_factor is
    None); the border filled by fill_mode."""

    def __init__(self, height_factor, width_factor=None, fill_mode="reflect", interpolation="bilinear",
                 fill_value=0.0, channels_last=True):
        super().__init__(fill_mode, interpolation, fill_value, channels_last)
        self.height = _keras_range(height_factor)
        self.width = None if width_factor is None else _keras_range(width_factor)

    def inverse(self, n, device):
        zy = 1 + self.height[0] + (self.height[1] - self.height[0]) * {torch}rand(n, device=device)
        zx = zy if self.width is None else 1 + self.width[0] + (self.width[1] - self.width[0]) * {torch}rand(n, device=device)
        return {torch}diag_embed({torch}stack([zx, zy], -1))
'''

_RANDOM_CONTRAST = '''

class RandomContrast({nn}Module):
    """keras.layers.RandomContrast (Keras 3): in training, each image's pixels moved away from (or towards) its
    per-channel mean by its own factor, drawn uniformly from [1 - lower, 1 + upper] (a number f gives Keras's
    (0, f): only more contrast), the result clipped to value_range; the identity in eval(), as Keras's."""

    def __init__(self, factor, value_range=(0, 255), channels_last=True):
        super().__init__()
        self.lower, self.upper = (0.0, abs(factor)) if isinstance(factor, (int, float)) else sorted(factor)
        self.value_range, self.channels_last = tuple(value_range), channels_last

    def forward(self, x):
        if not self.training:
            return x
        shape = (x.shape[0], 1, 1, 1) if x.dim() == 4 else (1, 1, 1)
        factor = 1 - self.lower + (self.upper + self.lower) * {torch}rand(shape, dtype=x.dtype, device=x.device)
        mean = x.mean(dim=(-3, -2) if self.channels_last else (-2, -1), keepdim=True)
        return ((x - mean) * factor + mean).clamp(*self.value_range)
'''

_RANDOM_BRIGHTNESS = '''

class RandomBrightness({nn}Module):
    """keras.layers.RandomBrightness (Keras 3): in training, each image shifted by its own delta, drawn uniformly
    from the factor's range (a number f: (-f, f)) times the width of value_range, the result clipped to
    value_range; the identity in eval(), as Keras's."""

    def __init__(self, factor, value_range=(0, 255)):
        super().__init__()
        self.lower, self.upper = (-abs(factor), abs(factor)) if isinstance(factor, (int, float)) else sorted(factor)
        self.value_range = tuple(sorted(value_range))

    def forward(self, x):
        if not self.training:
            return x
        shape = (x.shape[0], 1, 1, 1) if x.dim() == 4 else (1, 1, 1)
        delta = self.lower + (self.upper - self.lower) * {torch}rand(shape, dtype=x.dtype, device=x.device)
        return (x + delta * (self.value_range[1] - self.value_range[0])).clamp(*self.value_range)
'''

_RANDOM_CROP = '''

class RandomCrop({nn}Module):
    """keras.layers.RandomCrop (Keras 3): in training, the batch cropped to (height, width) at one offset drawn
    uniformly; an image not larger than that in both sizes is centre-cropped to the target's aspect ratio and
    resized (bilinear) to it instead. The identity in eval(), as Keras's at inference."""

    def __init__(self, height, width, channels_last=True):
        super().__init__()
        self.height, self.width = height, width
        self.dims = (-3, -2) if channels_last else (-2, -1)

    def forward(self, x):
        if not self.training:
            return x
        hd, wd = self.dims
        h, w = x.shape[hd], x.shape[wd]
        if h > self.height and w > self.width:
            top = int({torch}randint(h - self.height + 1, ()))
            left = int({torch}randint(w - self.width + 1, ()))
            return x.narrow(hd, top, self.height).narrow(wd, left, self.width)
        ch = max(min(h, int(w * self.height / self.width)), 1)
        cw = max(min(w, int(h * self.width / self.height)), 1)
        top, left = int((h - ch) / 2), int((w - cw) / 2)  # Keras's offsets; its slice is the target's size
        x = x.narrow(hd, top, min(self.height, h - top)).narrow(wd, left, min(self.width, w - left))
        if (x.shape[hd], x.shape[wd]) == (self.height, self.width):
            return x
        y = x if x.dim() == 4 else x[None]
        y = y.movedim(-1, 1) if hd == -3 else y
        y = {F}interpolate(y, size=(self.height, self.width), mode="bilinear", align_corners=False)
        y = y.movedim(1, -1) if hd == -3 else y
        return y if x.dim() == 4 else y[0]
'''

_KERAS2_RANDOM_CROP = '''

class Keras2RandomCrop({nn}Module):
    """keras.layers.RandomCrop of Keras 2 (tf.keras): in training, the batch cropped to (height, width) at one
    offset drawn uniformly, where the images are at least that large in both sizes; otherwise, and in eval(),
    the largest centred window of the target's aspect ratio resized (bilinear) to (height, width), as Keras 2's
    smart_resize. Floats out, as Keras 2 casts its input."""

    def __init__(self, height, width, channels_last=True):
        super().__init__()
        self.height, self.width = height, width
        self.dims = (-3, -2) if channels_last else (-2, -1)

    def forward(self, x):
        x = x if x.is_floating_point() else x.float()
        hd, wd = self.dims
        h, w = x.shape[hd], x.shape[wd]
        if self.training and h >= self.height and w >= self.width:
            top = int({torch}randint(h - self.height + 1, ()))
            left = int({torch}randint(w - self.width + 1, ()))
            return x.narrow(hd, top, self.height).narrow(wd, left, self.width)
        ch = min(h, int(w * self.height / self.width))
        cw = min(w, int(h * self.width / self.height))
        x = x.narrow(hd, (h - ch) // 2, ch).narrow(wd, (w - cw) // 2, cw)
        y = x if x.dim() == 4 else x[None]
        y = y.movedim(-1, 1) if hd == -3 else y
        y = {F}interpolate(y, size=(self.height, self.width), mode="bilinear", align_corners=False)
        y = y.movedim(1, -1) if hd == -3 else y
        return y if x.dim() == 4 else y[0]
'''

_KERAS2_RANDOM_CONTRAST = '''

class Keras2RandomContrast({nn}Module):
    """keras.layers.RandomContrast of Keras 2 (tf.keras): in training, one contrast factor per call drawn
    uniformly from [1 - lower, 1 + upper] (a number f: lower = upper = f), every image's pixels moved away from
    (or towards) its per-channel mean by it, the result clipped to [0, 255]; the identity in eval(). Floats out,
    as Keras 2 casts its input."""

    def __init__(self, factor, channels_last=True):
        super().__init__()
        self.lower, self.upper = tuple(factor) if isinstance(factor, (tuple, list)) else (factor, factor)
        if self.lower < 0 or self.upper < 0 or self.lower > 1:
            raise ValueError(f"factor cannot have negative values or values greater than 1: {factor}")
        self.channels_last = channels_last

    def forward(self, x):
        x = x if x.is_floating_point() else x.float()
        if not self.training:
            return x
        factor = 1 - self.lower + (self.upper + self.lower) * {torch}rand((), dtype=x.dtype, device=x.device)
        mean = x.mean(dim=(-3, -2) if self.channels_last else (-2, -1), keepdim=True)
        return ((x - mean) * factor + mean).clamp(0, 255)
'''

_SEQUENCE_DROPOUT = '''

class SequenceDropout({nn}Module):
    """dropout= of a Keras recurrent layer: in training, the inputs (batch, steps, features) times one mask of
    the features per sequence, the same at every step, scaled by 1 / (1 - p) (Keras drops only for 0 < p < 1);
    per_step=True: a mask per step (Keras 2's fused LSTM and GRU); the identity in eval()."""

    def __init__(self, p, per_step=False):
        super().__init__()
        self.p, self.per_step = p, per_step

    def forward(self, x):
        if not self.training or not 0 < self.p < 1:
            return x
        steps = x.shape[1] if self.per_step else 1
        keep = {torch}empty(x.shape[0], steps, x.shape[-1], dtype=x.dtype, device=x.device).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)
'''

_REVERSE_STEPS = '''

class ReverseSteps({nn}Module):
    """go_backwards=True of a Keras recurrent layer: the layer after it reads the steps of (batch, steps, features)
    last to first. Keras returns that layer's outputs in the order it computed them (the last input step's
    first), so nothing is flipped back."""

    def forward(self, x):
        return x.flip(1)
'''

_RANDOM_TRANSLATION = '''

class RandomTranslation(KerasRandomTransform):
    """keras.layers.RandomTranslation: each image shifted by its own fractions of its height and width, drawn
    uniformly from the ranges (positive: down and right); the uncovered border filled by fill_mode."""

    def __init__(self, height_factor, width_factor, fill_mode="reflect", interpolation="bilinear", fill_value=0.0,
                 channels_last=True):
        super().__init__(fill_mode, interpolation, fill_value, channels_last)
        self.height, self.width = sorted(_keras_range(height_factor)), sorted(_keras_range(width_factor))

    def forward(self, x):
        self.size = x.shape[-3:-1] if self.channels_last else x.shape[-2:]
        return super().forward(x)

    def inverse(self, n, device):
        dy = (self.height[0] + (self.height[1] - self.height[0]) * {torch}rand(n, device=device)) * self.size[0]
        dx = (self.width[0] + (self.width[1] - self.width[0]) * {torch}rand(n, device=device)) * self.size[1]
        one, zero = {torch}ones_like(dx), {torch}zeros_like(dx)
        return {torch}stack([{torch}stack([one, zero, -dx], -1), {torch}stack([zero, one, -dy], -1)], 1)
'''

_GAUSSIAN_DROPOUT = '''

class GaussianDropout({nn}Module):
    """keras.layers.GaussianDropout: multiplies by N(1, rate / (1 - rate)) noise in training, the
    identity in eval()."""

    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def forward(self, x):
        if not self.training or not 0 < self.rate < 1:
            return x
        return x * (1 + {torch}randn_like(x) * (self.rate / (1 - self.rate)) ** 0.5)
'''

_UNIT_NORMALIZATION = '''

class UnitNormalization({nn}Module):
    """keras.layers.UnitNormalization: x / ||x|| along dim, with Keras's floor of 1e-12 on the squared norm."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x * {torch}rsqrt({torch}clamp(x.square().sum(dim=self.dim, keepdim=True), min=1e-12))
'''

_RANDOM_FOURIER_FEATURES = '''

class RandomFourierFeatures({nn}Module):
    """keras.layers.experimental.RandomFourierFeatures (Keras 2): cos(x @ (unscaled_kernel / kernel_scale) + bias)
    on (batch, input_dim) inputs, computed in float32. unscaled_kernel is drawn once, N(0, 1) for the "gaussian"
    kernel, Cauchy(0, 1) for "laplacian", and bias uniformly in [0, 2 pi): neither is ever trained (buffers).
    kernel_scale starts at scale (None: sqrt(input_dim / 2) for "gaussian", 1 for "laplacian") and is trained
    only with trainable=True; Keras's NonNeg constraint clamps it at 0 after each update, here before the next
    forward, which sees the same value."""

    def __init__(self, input_dim, output_dim, kernel_initializer="gaussian", scale=None, trainable=False):
        super().__init__()
        kind = kernel_initializer.lower()
        if kind == "gaussian":
            kernel = {torch}randn(input_dim, output_dim)
        elif kind == "laplacian":
            probs = {torch}rand(input_dim, output_dim, dtype={torch}float64)
            kernel = {torch}tan({math}pi * (probs - 0.5)).float()
        else:
            raise ValueError(f"kernel_initializer {kernel_initializer!r}: Keras knows 'gaussian' and 'laplacian'")
        if scale is None:
            scale = {math}sqrt(input_dim / 2.0) if kind == "gaussian" else 1.0
        self.register_buffer("unscaled_kernel", kernel)
        self.register_buffer("bias", {torch}rand(output_dim) * (2 * {math}pi))
        self.kernel_scale = {nn}Parameter({torch}full((1,), float(scale)), requires_grad=trainable)

    def forward(self, x):
        with {torch}no_grad():
            self.kernel_scale.clamp_(min=0.0)
        kernel = (1.0 / self.kernel_scale) * self.unscaled_kernel
        return {torch}cos(x.float() @ kernel + self.bias)
'''

_KL_DIVERGENCE = '''

class KLDivergence({nn}Module):
    """Keras's KLDivergence loss called as torch losses are, loss(input, target) for Keras's loss(y_true, y_pred):
    both clipped to [1e-7, 1] (Keras's epsilon), the per-sample loss the sum over the last axis of
    target * log(target / input), then reduced: "mean" (Keras's sum_over_batch_size), "sum" or "none".
    Not nn.KLDivLoss, which takes log-probabilities, clips nothing and averages over every element."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        target = {torch}as_tensor(target, device=input.device).to(input.dtype).clamp(1e-7, 1.0)
        input = input.clamp(1e-7, 1.0)
        loss = (target * {torch}log(target / input)).sum(-1)
        if self.reduction == "none":
            return loss
        return loss.sum() if self.reduction == "sum" else loss.mean()
'''

_COSINE_SIMILARITY_LOSS = '''

class CosineSimilarityLoss({nn}Module):
    """Keras's CosineSimilarity loss called as torch losses are, loss(input, target) for Keras's loss(y_true, y_pred):
    the per-sample loss is minus the cosine similarity along `axis`, each side normalised as Keras 3 does,
    x / max(norm, 1e-7) (F.normalize with eps), then reduced: "mean" (Keras's sum_over_batch_size), "sum" or
    "none". Not nn.CosineEmbeddingLoss, which takes a label per pair and a margin."""

    def __init__(self, axis=-1, reduction="mean", eps=1e-7):
        super().__init__()
        self.axis = axis
        self.reduction = reduction
        self.eps = eps

    def forward(self, input, target):
        target = {torch}as_tensor(target, device=input.device).to(input.dtype)
        loss = -({nn}functional.normalize(target, dim=self.axis, eps=self.eps)
                 * {nn}functional.normalize(input, dim=self.axis, eps=self.eps)).sum(self.axis)
        if self.reduction == "none":
            return loss
        return loss.sum() if self.reduction == "sum" else loss.mean()
'''

_KERAS2_COSINE_SIMILARITY_LOSS = '''

class Keras2CosineSimilarityLoss(CosineSimilarityLoss):
    """Keras 2's CosineSimilarity loss: as CosineSimilarityLoss, each side normalised as tf.math.l2_normalize does,
    x / max(norm, 1e-6)."""

    def __init__(self, axis=-1, reduction="mean", eps=1e-6):
        super().__init__(axis, reduction, eps)
'''

_CLONE_MODEL = '''

def clone_model(model):
    """Keras's clone_model: a model of the same structure with newly initialised weights (and fresh
    BatchNormalization statistics): a deep copy whose every submodule with reset_parameters draws its
    parameters again. A module holding parameters or buffers of its own without reset_parameters cannot be
    re-initialised: an error, not the copied weights."""
    clone = {copy}deepcopy(model)
    for name, module in clone.named_modules():
        reset = getattr(module, "reset_parameters", None)
        if callable(reset):
            reset()
        elif any(True for _ in module.parameters(recurse=False)) or any(True for _ in module.buffers(recurse=False)):
            raise TypeError(f"clone_model: {name or type(module).__name__} ({type(module).__name__}) has weights of "
                            "its own and no reset_parameters(): give it one that draws them again")
    return clone
'''

_PERMUTE = '''

class Permute({nn}Module):
    """keras.layers.Permute: reorders the axes after the batch axis (dims count from 1)."""

    def __init__(self, dims):
        super().__init__()
        self.dims = tuple(dims)

    def forward(self, x):
        return x.permute(0, *self.dims)
'''

_REPEAT_VECTOR = '''

class RepeatVector({nn}Module):
    """keras.layers.RepeatVector: (batch, features) → n copies along a new axis at dim (1 in Keras's
    layout, 2 where the model is channels-first)."""

    def __init__(self, n, dim=1):
        super().__init__()
        self.n, self.dim = n, dim

    def forward(self, x):
        x = x.unsqueeze(self.dim)
        return x.repeat(*(self.n if d == self.dim else 1 for d in range(x.dim())))
'''

_RESCALING = '''

class Rescaling({nn}Module):
    """keras.layers.Rescaling: x * scale + offset (integer images come out as floats)."""

    def __init__(self, scale, offset=0.0):
        super().__init__()
        self.scale, self.offset = scale, offset

    def forward(self, x):
        return x * self.scale + self.offset
'''

_RNN_OUTPUT = '''

class RNNOutput({nn}Module):
    """The output of a torch RNN without its final state: the whole sequence (Keras's
    return_sequences=True), or its last step (return_sequences=False)."""

    def __init__(self, return_sequences=False):
        super().__init__()
        self.return_sequences = return_sequences

    def forward(self, output):
        sequence = output[0]
        return sequence if self.return_sequences else sequence[:, -1]
'''

_BIDIRECTIONAL_OUTPUT = '''

class BidirectionalOutput({nn}Module):
    """The output of a bidirectional torch RNN as keras.layers.Bidirectional gives it: the two directions
    merged (concat, sum, mul or ave), over the whole sequence or at each direction's last step (the
    backward direction ends at the first step)."""

    def __init__(self, return_sequences=False, merge_mode="concat"):
        super().__init__()
        self.return_sequences, self.merge_mode = return_sequences, merge_mode

    def forward(self, output):
        forward, backward = output[0].chunk(2, dim=-1)
        if not self.return_sequences:
            forward, backward = forward[:, -1], backward[:, 0]
        if self.merge_mode == "concat":
            return {torch}cat([forward, backward], dim=-1)
        if self.merge_mode == "sum":
            return forward + backward
        if self.merge_mode == "mul":
            return forward * backward
        return (forward + backward) / 2
'''

_NORMALIZATION = '''

class Normalization({nn}Module):
    """keras.layers.Normalization over the last axis: (x - mean) / max(sqrt(variance), 1e-7). The
    statistics are given, loaded (state_dict), or computed from data by adapt() as Keras does (the
    population variance over every axis but the last)."""

    def __init__(self, num_features=None, mean=None, variance=None):
        super().__init__()
        given = mean is not None
        if given:
            mean, variance = {torch}as_tensor(mean, dtype={torch}float32), {torch}as_tensor(variance, dtype={torch}float32)
        elif num_features is not None:
            mean, variance = {torch}zeros(num_features), {torch}ones(num_features)
        self.register_buffer("mean", mean, persistent=not given)
        self.register_buffer("variance", variance, persistent=not given)
        self.register_buffer("count", None if given else {torch}zeros((), dtype={torch}int64))

    @{torch}no_grad()
    def adapt(self, data):
        data = {torch}as_tensor(data, dtype={torch}float32).reshape(-1, {torch}as_tensor(data).shape[-1])
        self.mean, self.variance = data.mean(dim=0), data.var(dim=0, unbiased=False)
        self.count = {torch}tensor(data.shape[0])

    def forward(self, x):
        return (x - self.mean) / {torch}clamp(self.variance.sqrt(), min=1e-7)
'''

_CHANNELS_FIRST_NORMALIZATION = '''

class ChannelsFirstNormalization(Normalization):
    """keras.layers.Normalization over the channels in a model converted to channels-first: the channels
    are dim 1 of x (Keras's last axis), each channel's mean and variance broadcast as (C, 1, ..., 1).
    adapt(data) takes data in Keras's channels-last layout, as the source's code gives it."""

    def forward(self, x):
        shape = (-1,) + (1,) * (x.dim() - 2)
        return (x - self.mean.reshape(shape)) / {torch}clamp(self.variance.sqrt(), min=1e-7).reshape(shape)
'''

_ACTIVITY_REGULARIZATION = '''

class ActivityRegularization({nn}Module):
    """keras.layers.ActivityRegularization: the identity, which keeps Keras's penalty on its last
    output (l1 * sum|x| + l2 * sum x**2, divided by the batch size) for the loss: add
    regularization_loss() to it as Keras adds model.losses."""

    def __init__(self, l1=0.0, l2=0.0):
        super().__init__()
        self.l1, self.l2 = l1, l2
        self.penalty = None

    def forward(self, x):
        penalty = self.l1 * x.abs().sum() + self.l2 * x.square().sum()
        self.penalty = penalty / x.shape[0] if x.dim() > 0 and x.shape[0] else penalty
        return x

    def regularization_loss(self):
        return self.penalty if self.penalty is not None else 0.0
'''

_EINSUM_DENSE = '''

class EinsumDense({nn}modules.lazy.LazyModuleMixin, {nn}Module):
    """keras.layers.EinsumDense: einsum(equation, x, weight) + bias. The weight's and the bias's shapes are
    read from the equation as Keras reads them: a letter of the weight takes its size from the input
    (input_shape without the batch axis, else the first call) or from output_shape (None: the input's
    size); the bias spans the output axes from the first of bias_axes on, 1 where an axis is not one."""

    def __init__(self, equation, output_shape, bias_axes=None, input_shape=None):
        super().__init__()
        self.equation, self.bias_axes = equation, bias_axes
        self.output_shape = tuple(output_shape) if isinstance(output_shape, (list, tuple)) else (output_shape,)
        self.weight = {nn}UninitializedParameter()
        self.bias = {nn}UninitializedParameter() if bias_axes else None
        if input_shape is not None:
            self._build((None, *input_shape))

    def _shapes(self, shape):
        inputs, rest = self.equation.split(",")
        kernel, outputs = rest.split("->")
        left = inputs.startswith("...")
        inputs, outputs = inputs.replace("...", ""), outputs.replace("...", "")
        elided = len(shape) - len(inputs)
        out = [shape[0], *self.output_shape]
        if elided > 0 and left:
            out[1:1] = shape[1:elided]
        elif elided > 0:
            out += shape[len(shape) - elided:]
        shift_in, shift_out = (elided - len(shape), elided - len(out)) if left else (0, 0)
        size = {c: shape[i + shift_in] for i, c in enumerate(inputs)}
        for i, c in enumerate(outputs):
            if c not in size:
                size[c] = out[i + shift_out]
        weight = tuple(size[c] for c in kernel)
        bias = None
        if self.bias_axes:
            first = min(outputs.index(c) for c in self.bias_axes)
            bias = tuple(size[c] if c in self.bias_axes else 1 for c in outputs[first:])
            if not left:
                bias += (1,) * max(elided, 0)
        fan_in = 1
        for c in kernel:
            fan_in *= size[c] if c in inputs else 1
        return weight, bias, fan_in

    def _build(self, shape):
        weight, bias, fan_in = self._shapes(tuple(shape))
        fan_out = 1
        for n in weight:
            fan_out *= n
        fan_out //= fan_in
        limit = (6.0 / (fan_in + fan_out)) ** 0.5  # Keras's glorot_uniform over the input and output axes
        with {torch}no_grad():
            self.weight = {nn}Parameter({torch}empty(weight).uniform_(-limit, limit))
            if bias is not None:
                self.bias = {nn}Parameter({torch}zeros(bias))

    def initialize_parameters(self, x):
        if self.has_uninitialized_params():
            self._build(x.shape)

    def forward(self, x):
        y = {torch}einsum(self.equation, x, self.weight)
        return y + self.bias if self.bias is not None else y
'''

_CENTER_CROP = '''

class CenterCrop({nn}Module):
    """keras.layers.CenterCrop on channels-first images: the central height x width window (the odd
    pixel of a margin after, as Keras takes it), as floats. Keras resizes an image smaller than the
    window (smart_resize) instead: not translated, an error here."""

    def __init__(self, height, width):
        super().__init__()
        self.height, self.width = height, width

    def forward(self, x):
        h, w = x.shape[-2], x.shape[-1]
        if h < self.height or w < self.width:
            raise ValueError(f"CenterCrop({self.height}, {self.width}) of {h} x {w} images: Keras resizes "
                             "images smaller than the crop (smart_resize), which this translation does not do")
        top, left = (h - self.height) // 2, (w - self.width) // 2
        x = x[..., top:top + self.height, left:left + self.width]
        return x if x.is_floating_point() else x.to({torch}get_default_dtype())
'''

_DOT = '''

class Dot({nn}Module):
    """keras.layers.Dot: called on [x, y], the dot products over axes (one per input; a negative one
    counts from each input's end) per sample, the other axes of x then those of y (a rank-2 pair gives
    (batch, 1)). normalize: each input L2-normalised along its axis first, as Keras 3 does it
    (x * min(rsqrt(sum x**2), 1e7))."""

    def __init__(self, axes, normalize=False):
        super().__init__()
        self.axes = tuple(axes) if isinstance(axes, (list, tuple)) else (axes, axes)
        self.normalize = normalize

    def forward(self, inputs):
        x, y = inputs
        ax, ay = (a % t.dim() for a, t in zip(self.axes, (x, y)))
        if self.normalize:
            x = x * {torch}clamp(x.square().sum(dim=ax, keepdim=True).rsqrt(), max=1e7)
            y = y * {torch}clamp(y.square().sum(dim=ay, keepdim=True).rsqrt(), max=1e7)
        x, y = x.movedim(ax, -1), y.movedim(ay, 1)
        rest_x, rest_y = x.shape[1:-1], y.shape[2:]
        out = {torch}bmm(x.reshape(x.shape[0], -1, x.shape[-1]), y.reshape(y.shape[0], y.shape[1], -1))
        out = out.reshape(x.shape[0], *rest_x, *rest_y)
        return out.unsqueeze(-1) if out.dim() == 1 else out
'''

_TIME_DISTRIBUTED = '''

class TimeDistributed({nn}Module):
    """keras.layers.TimeDistributed: the layer applied to every time step, the time axis folded into the
    batch ((batch, T, ...) → (batch * T, ...)) and back; modules `before` and `after` run inside the fold
    too, and channels_first gives the layer each step's feature map channels-first."""

    def __init__(self, layer, before=(), after=(), channels_first=False):
        super().__init__()
        self.layer, self.channels_first = layer, channels_first
        self.before, self.after = {nn}Sequential(*before), {nn}Sequential(*after)

    def forward(self, x):
        b, t = x.shape[:2]
        y = x.reshape(b * t, *x.shape[2:])
        if self.channels_first:
            y = y.movedim(-1, 1)
        y = self.after(self.layer(self.before(y)))
        if self.channels_first and y.dim() > 2:
            y = y.movedim(1, -1)
        return y.reshape(b, t, *y.shape[1:])
'''

_PACK_STEPS = """
def _packed_steps(x, keep):
    \"\"\"The steps of x where keep is True, as a PackedSequence: Keras's mask, for a recurrent layer that skips
    the masked steps as torch's do a packed sequence's padding. Exact where every sequence keeps its first
    steps and masks the rest (right padding, at least one step kept).\"\"\"
    lengths = keep.sum(dim=1)
    if not bool((keep == ({torch}arange(keep.shape[1], device=keep.device) < lengths[:, None])).all()):
        raise ValueError("a mask with gaps or left padding: Keras skips masked steps anywhere, the translation "
                         "only padding at the end of each sequence")
    if not bool((lengths > 0).all()):
        raise ValueError("a sequence whose steps are all masked: Keras returns the initial state for it, "
                         "a packed sequence cannot hold it")
    return {nn}utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
"""

_MASKED_EMBEDDING = '''

class MaskedEmbedding({nn}Embedding):
    """keras.layers.Embedding(mask_zero=True) before a recurrent layer: the embeddings of the steps before
    the first 0 of each sequence, as a PackedSequence (the recurrent layer skips the rest, as Keras's
    skips the masked steps)."""

    def forward(self, ids):
        return _packed_steps(super().forward(ids), ids != 0)
'''

_MASKING = '''

class Masking({nn}Module):
    """keras.layers.Masking before a recurrent layer: the steps before the first one all of whose features
    equal mask_value, as a PackedSequence (the recurrent layer skips the rest, as Keras's skips them)."""

    def __init__(self, mask_value=0.0):
        super().__init__()
        self.mask_value = mask_value

    def forward(self, x):
        return _packed_steps(x, (x != self.mask_value).any(dim=-1))
'''

_MASKED_RNN_OUTPUT = '''

class MaskedRNNOutput({nn}Module):
    """The output of a torch RNN run on a PackedSequence as Keras's masked layer gives it: still packed
    for a recurrent layer after it (packed=True), the output of each sequence's last kept step, or the
    whole sequence of total_length steps, a masked step repeating the output before it (Keras carries it)."""

    def __init__(self, return_sequences=False, packed=False, total_length=None):
        super().__init__()
        self.return_sequences, self.packed, self.total_length = return_sequences, packed, total_length

    def forward(self, output):
        sequence, state = output
        if self.packed and self.return_sequences:
            return sequence
        if not self.return_sequences:
            return (state[0] if isinstance(state, tuple) else state)[-1]
        padded, lengths = {nn}utils.rnn.pad_packed_sequence(sequence, batch_first=True, total_length=self.total_length)
        steps = {torch}arange(padded.shape[1])
        last = {torch}minimum(steps[None, :], (lengths - 1)[:, None]).to(padded.device)
        return padded.gather(1, last[..., None].expand(-1, -1, padded.shape[-1]))
'''

_MASKED_BIDIRECTIONAL_OUTPUT = '''

class MaskedBidirectionalOutput({nn}Module):
    """The output of a bidirectional torch RNN run on a PackedSequence as Keras's masked Bidirectional gives
    it: the two directions merged (concat, sum, mul or ave), still packed for a recurrent layer after it
    (packed=True), at each direction's last kept step, or over total_length steps with zeros at the
    masked ones (as Keras's Bidirectional returns them)."""

    def __init__(self, return_sequences=False, merge_mode="concat", packed=False, total_length=None):
        super().__init__()
        self.return_sequences, self.merge_mode = return_sequences, merge_mode
        self.packed, self.total_length = packed, total_length

    def _merge(self, forward, backward):
        if self.merge_mode == "concat":
            return {torch}cat([forward, backward], dim=-1)
        if self.merge_mode == "sum":
            return forward + backward
        if self.merge_mode == "mul":
            return forward * backward
        return (forward + backward) / 2

    def forward(self, output):
        sequence, state = output
        if self.packed and self.return_sequences:
            return sequence._replace(data=self._merge(*sequence.data.chunk(2, dim=-1)))
        if not self.return_sequences:
            h = state[0] if isinstance(state, tuple) else state
            return self._merge(h[-2], h[-1])
        padded, _ = {nn}utils.rnn.pad_packed_sequence(sequence, batch_first=True, total_length=self.total_length)
        return self._merge(*padded.chunk(2, dim=-1))
'''

_LAMBDA = '''

class Lambda({nn}Module):
    """keras.layers.Lambda: a module calling a function on its input (the function translated where it
    is written)."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)
'''

_REVERSIBLE_EMBEDDING = '''

class ReversibleEmbedding({nn}Embedding):
    """keras.layers.ReversibleEmbedding: an embedding table, which module(x, reverse=True) uses backwards
    (logits x @ weight.T, or reverse_weight when the weights are not tied), soft-capped as
    tanh(logits / cap) * cap when logit_soft_cap is given."""

    def __init__(self, num_embeddings, embedding_dim, tie_weights=True, logit_soft_cap=None):
        super().__init__(num_embeddings, embedding_dim)
        self.tie_weights, self.logit_soft_cap = tie_weights, logit_soft_cap
        if not tie_weights:  # Keras's default initializer: uniform in [-0.05, 0.05]
            self.reverse_weight = {nn}Parameter({torch}empty(embedding_dim, num_embeddings).uniform_(-0.05, 0.05))

    def forward(self, x, reverse=False):
        if not reverse:
            return super().forward(x)
        logits = x @ (self.weight.t() if self.tie_weights else self.reverse_weight)
        if self.logit_soft_cap is not None:
            logits = {torch}tanh(logits / self.logit_soft_cap) * self.logit_soft_cap
        return logits
'''

_LAZY_RMS_NORM = '''

class LazyRMSNorm({nn}modules.lazy.LazyModuleMixin, {nn}RMSNorm):
    """keras.layers.RMSNormalization over the last axes whose sizes are known only at the first call
    (Keras builds the layer then): an nn.RMSNorm over the last `axes` axes, sized by that call."""

    cls_to_become = {nn}RMSNorm

    def __init__(self, eps=1e-6, axes=1):
        super().__init__(0, eps, elementwise_affine=False)
        self.elementwise_affine, self.axes = True, axes
        self.weight = {nn}UninitializedParameter()

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.normalized_shape != (0,):
            super().reset_parameters()

    def initialize_parameters(self, input):
        self.normalized_shape = tuple(input.shape[-self.axes:])
        if self.has_uninitialized_params():
            with {torch}no_grad():
                self.weight.materialize(self.normalized_shape)
                self.reset_parameters()
'''

_LAST_AXIS_BATCH_NORM = '''

class LastAxisBatchNorm({nn}BatchNorm1d):
    """keras.layers.BatchNormalization(axis=-1) on an input of any rank: Keras normalises the last axis
    with statistics over all the others, which is BatchNorm1d on the rows x.reshape(-1, C)."""

    def forward(self, x):
        return super().forward(x.reshape(-1, x.shape[-1])).reshape(x.shape)


class LazyLastAxisBatchNorm({nn}LazyBatchNorm1d):
    """LastAxisBatchNorm whose channel count (the last axis) is taken from the first call, as Keras
    builds the layer then."""

    cls_to_become = LastAxisBatchNorm

    def initialize_parameters(self, input):
        super().initialize_parameters(input.reshape(-1, input.shape[-1]))

    def forward(self, x):  # (the first call runs it once the module has become a LastAxisBatchNorm)
        return {nn}BatchNorm1d.forward(self, x.reshape(-1, x.shape[-1])).reshape(x.shape)
'''

_CHANNELS_FIRST_BATCH_NORM = '''

class ChannelsFirstBatchNorm({nn}BatchNorm1d):
    """keras.layers.BatchNormalization(axis=-1) in a model converted to channels-first, on an input whose
    rank is known only at run time: Keras's last axis is dim 1 there at any rank (a feature map moved to
    channels-first, or (batch, features)), and torch's batch norm normalises dim 1 at any rank;
    BatchNorm1d itself accepts only 2-D and 3-D inputs."""

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected an input of at least 2 dims (got {input.dim()}D input)")


class LazyChannelsFirstBatchNorm({nn}LazyBatchNorm1d):
    """ChannelsFirstBatchNorm whose channel count (dim 1) is taken from the first call, as Keras builds
    the layer then."""

    cls_to_become = ChannelsFirstBatchNorm

    def _check_input_dim(self, input):
        ChannelsFirstBatchNorm._check_input_dim(self, input)
'''

HELPERS: dict[str, str] = {f"SamePad{nd}d": _SAME_PAD.replace("{nd}", str(nd)).replace("{nd1}", str(nd + 1))
                           for nd in (1, 2, 3)}
HELPERS.update({f"MaxPoolSamePad{nd}d": _MAX_POOL_PAD.replace("{nd}", str(nd)).replace("{nd1}", str(nd + 1))
                for nd in (1, 2, 3)})
HELPERS["Rescaling"] = _RESCALING
# (the written fit / predict functions write the same function, fitloop._conversions: one of them is written)
HELPERS["as_float32"] = '''

def as_float32(a):
    """An array as Keras feeds it: floats in float32."""
    a = {torch}as_tensor(a)
    return a.float() if a.is_floating_point() else a
'''
HELPERS["global_generator"] = '''

_global_generators = []


def global_generator():
    """TensorFlow's tf.random.get_global_generator(): one generator for this file, created the first time it is
    asked for and seeded then from the operating system's randomness (tf.random.set_seed does not seed it)."""
    if not _global_generators:
        _global_generators.append({torch}Generator().manual_seed({secrets}randbits(63)))
    return _global_generators[0]
'''
HELPERS["get_uid"] = '''

_uids = {}


def get_uid(prefix=""):
    """Keras's backend.get_uid: a counter per prefix, 1 at its first call, then 2, 3 ..."""
    _uids[prefix] = _uids.get(prefix, 0) + 1
    return _uids[prefix]
'''
HELPERS["where_v1"] = '''

def where_v1(condition, x, y):
    """TensorFlow 1's where(condition, x, y): x where condition holds, else y, condition of x's shape, or of
    rank 1 selecting whole entries along x's first axis (which torch.where would pair with its last axis)."""
    condition, x = {torch}as_tensor(condition), {torch}as_tensor(x)
    return {torch}where(condition.reshape(condition.shape + (1,) * (x.dim() - condition.dim())), x, y)
'''
HELPERS["Permute"] = _PERMUTE
HELPERS["Progbar"] = '''

class Progbar:
    """keras.utils.Progbar: a progress line on standard output (current/target, a bar, the seconds
    since the start, the values given to update). A value is averaged over the steps it covers, as
    Keras weights it, unless it is named in stateful_metrics (or not in stateless_metrics), or the
    update finalizes the bar: then it is shown as last given."""

    def __init__(self, target, width=20, verbose=1, interval=0.05, stateful_metrics=None,
                 stateless_metrics=None, unit_name="step"):
        if stateful_metrics is not None and stateless_metrics is not None:
            raise ValueError("Only one of `stateful_metrics` or `stateless_metrics` can be provided.")
        self.target, self.width, self.verbose, self.interval = target, width, verbose, interval
        self.unit_name = unit_name
        self.stateful_metrics = None if stateless_metrics is not None else set(stateful_metrics or ())
        self.stateless_metrics = None if stateless_metrics is None else set(stateless_metrics)
        self._values = {}
        self._seen_so_far = 0
        self._start = {time}time()
        self._last_update = 0.0

    def update(self, current, values=None, finalize=None):
        if finalize is None:
            finalize = self.target is not None and current >= self.target
        for k, v in values or []:
            v = float({np}mean(v.detach().cpu().numpy() if isinstance(v, {torch}Tensor) else v))
            stateless = (k not in self.stateful_metrics if self.stateful_metrics is not None
                         else k in self.stateless_metrics)
            if stateless and not finalize:
                step = max(current - self._seen_so_far, 1)
                total, count = self._values.get(k, (0.0, 0))
                self._values[k] = (total + v * step, count + step)
            else:
                self._values[k] = (v, 1)
        self._seen_so_far = current
        now = {time}time()
        if (self.verbose == 0 or self.verbose == 2 and not finalize
                or self.verbose == 1 and not finalize and now - self._last_update < self.interval):
            return
        self._last_update = now
        line = f"{current}/{self.target}" if self.target else f"{current}/Unknown"
        if self.target and self.verbose == 1:
            done = min(int(self.width * current / self.target), self.width)
            line += " [" + "=" * done + "." * (self.width - done) + "]"
        line += f" - {now - self._start:.0f}s"
        for k, (total, count) in self._values.items():
            avg = total / max(1, count)
            line += f" - {k}: {avg:.4f}" if avg > 1e-3 else f" - {k}: {avg:.4e}"
        print(("\\r" if self.verbose == 1 else "") + line, end="\\n" if finalize else "", flush=True)

    def add(self, n, values=None):
        self.update(self._seen_so_far + n, values)
'''
# tf.nest (rules nest-flatten, nest-map-structure): lists, tuples (named ones too) and dicts nest; a
# dict's values go in sorted key order, a namedtuple's in field order; anything else is a leaf
HELPERS["nest_flatten"] = '''

def nest_flatten(structure):
    """tf.nest.flatten: the leaves of nested lists, tuples and dicts, depth first (a dict's values in
    sorted key order); anything else (a tensor, a string, None) is one leaf."""
    if isinstance(structure, dict):
        return [leaf for key in sorted(structure) for leaf in nest_flatten(structure[key])]
    if isinstance(structure, (list, tuple)):
        return [leaf for item in structure for leaf in nest_flatten(item)]
    return [structure]
'''
HELPERS["nest_map_structure"] = '''

def nest_map_structure(func, *structures):
    """tf.nest.map_structure: func of the leaves at the same place in each structure, returned in a
    structure like the first; the structures must nest alike (the same types, lengths and keys)."""
    first = structures[0]
    nests = isinstance(first, (list, tuple, dict))
    for other in structures[1:]:
        differ = f"The two structures don't have the same nested structure: {first!r} and {other!r}"
        if nests != isinstance(other, (list, tuple, dict)):
            raise ValueError(differ)  # a leaf against a nested structure
        if nests and type(other) is not type(first):
            raise TypeError(differ)
        if nests and (len(other) != len(first) or isinstance(first, dict) and set(other) != set(first)):
            raise ValueError(differ)
    if isinstance(first, dict):
        return type(first)((key, nest_map_structure(func, *(s[key] for s in structures))) for key in first)
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(nest_map_structure(func, *items) for items in zip(*structures)))
    if isinstance(first, (list, tuple)):
        return type(first)(nest_map_structure(func, *items) for items in zip(*structures))
    return func(*structures)
'''
HELPERS["convert_to_numpy"] = '''

def convert_to_numpy(x):
    """keras.ops.convert_to_numpy: a tensor's values as a NumPy array (detached, on the CPU), anything
    else through np.asarray."""
    if isinstance(x, {torch}Tensor):
        return x.detach().cpu().numpy()
    return {np}asarray(x)
'''
HELPERS["ctc_decode"] = '''

def ctc_decode(y_pred, input_length):
    """keras.backend.ctc_decode(y_pred, input_length, greedy=True) (Keras 2): for each sequence of class
    probabilities (samples, steps, classes), the most probable class at each of its first input_length steps (of
    log(y_pred + 1e-7)), repeats merged, then the blank (the last class) left out. Returns ([decoded], log_prob):
    decoded an int64 (samples, steps) tensor padded with -1, log_prob (samples, 1) the negative sum of the chosen
    log probabilities, as TensorFlow's greedy decoder gives them."""
    logp = {torch}log({torch}as_tensor(y_pred, dtype={torch}float32) + 1e-7)
    best, labels = logp.max(dim=-1)
    lengths = {torch}as_tensor(input_length).reshape(-1).long()
    blank = logp.shape[-1] - 1
    decoded = {torch}full(labels.shape, -1, dtype={torch}int64)
    log_prob = {torch}zeros(labels.shape[0], 1)
    for i in range(labels.shape[0]):
        seq = labels[i, :int(lengths[i])]
        keep = seq != blank
        keep[1:] &= seq[1:] != seq[:-1]
        decoded[i, :int(keep.sum())] = seq[keep]
        log_prob[i, 0] = -best[i, :int(lengths[i])].sum()
    return [decoded], log_prob
'''
HELPERS["ctc_batch_cost"] = '''

def ctc_batch_cost(y_true, y_pred, input_length, label_length):
    """keras.backend.ctc_batch_cost (Keras 2): the CTC loss of each sequence of softmax outputs y_pred (samples,
    steps, classes; the blank is the last class) against its labels y_true (samples, max_label_length), of which
    the first label_length count, over the first input_length steps. As Keras, log(y_pred + 1e-7) (Keras's epsilon)
    is normalised again by a log-softmax (TensorFlow's ctc_loss takes logits). Returns (samples, 1)."""
    y_pred = {torch}as_tensor(y_pred)
    log_probs = {torch}log_softmax({torch}log(y_pred + 1e-7), dim=-1).transpose(0, 1)
    loss = {F}ctc_loss(log_probs, {torch}as_tensor(y_true).long(), {torch}as_tensor(input_length).reshape(-1).long(),
                         {torch}as_tensor(label_length).reshape(-1).long(), blank=y_pred.shape[-1] - 1,
                         reduction="none")
    return loss.unsqueeze(1)
'''
HELPERS["ctc_loss"] = '''

def ctc_loss(target, output, target_length, output_length, mask_index=0):
    """keras.ops.ctc_loss: the CTC loss of each sequence of logits output (batch, steps, classes; the blank is
    class mask_index) against its labels target (batch, max_label_length), of which the first target_length count,
    over the first output_length steps. Returns (batch,), in output's dtype (computed in float32)."""
    output = {torch}as_tensor(output)
    log_probs = {torch}log_softmax(output.float(), dim=-1).transpose(0, 1)  # computed in float32, as Keras does
    loss = {F}ctc_loss(log_probs, {torch}as_tensor(target).long(), {torch}as_tensor(output_length).reshape(-1).long(),
                         {torch}as_tensor(target_length).reshape(-1).long(), blank=mask_index, reduction="none")
    return loss.to(output.dtype)
'''
HELPERS["stft"] = '''

def stft(signals, frame_length, frame_step, fft_length=None, pad_end=False):
    """tf.signal.stft with its Hann window (periodic at even lengths, as TensorFlow's): frames of frame_length
    samples every frame_step (pad_end: the signal padded with zeros so that a frame starts at every frame_step),
    each times the window, then zero-padded at its end to fft_length (the next power of two when None) for the
    real FFT. Returns the complex [..., frames, fft_length // 2 + 1] TensorFlow gives (torch.stft would centre
    a window shorter than its FFT)."""
    signals = {torch}as_tensor(signals)
    if fft_length is None:
        fft_length = 1 << (int(frame_length) - 1).bit_length()
    if pad_end:
        frames = -(-signals.shape[-1] // frame_step)
        signals = {F}pad(signals, (0, max((frames - 1) * frame_step + frame_length - signals.shape[-1], 0)))
    frames = signals.unfold(-1, frame_length, frame_step)
    window = {torch}hann_window(frame_length, periodic=frame_length % 2 == 0, dtype=frames.dtype,
                               device=frames.device)
    return {torch}fft.rfft(frames * window, n=fft_length)
'''
HELPERS["inverse_stft"] = '''

def inverse_stft(stfts, frame_length, frame_step, fft_length=None):
    """tf.signal.inverse_stft with its Hann window (periodic at even lengths): the inverse real FFT (fft_length, the next power of
    two of frame_length when None) of each frame [..., frames, bins], cut (or zero-padded) to frame_length, times
    the window, then overlap-added every frame_step samples. Like TensorFlow, nothing divides by the windows' sum."""
    if fft_length is None:
        fft_length = 1 << (int(frame_length) - 1).bit_length()
    frames = {torch}fft.irfft({torch}as_tensor(stfts), n=fft_length)[..., :frame_length]
    frames = {F}pad(frames, (0, frame_length - frames.shape[-1]))
    window = {torch}hann_window(frame_length, periodic=frame_length % 2 == 0, dtype=frames.dtype,
                               device=frames.device)
    frames = frames * window  # TensorFlow's periodic Hann window (periodic at even lengths only)
    lead, count = frames.shape[:-2], frames.shape[-2]
    length = (count - 1) * frame_step + frame_length
    columns = frames.reshape(-1, count, frame_length).transpose(1, 2)
    out = {F}fold(columns, (1, length), (1, frame_length), stride=(1, frame_step))
    return out.reshape(*lead, length)
'''
HELPERS["linear_to_mel_weight_matrix"] = '''

def linear_to_mel_weight_matrix(num_mel_bins=20, num_spectrogram_bins=129, sample_rate=8000, lower_edge_hertz=125.0,
                                upper_edge_hertz=3800.0, dtype={torch}float32):
    """tf.signal.linear_to_mel_weight_matrix: the [num_spectrogram_bins, num_mel_bins] matrix of triangular filters
    on the HTK mel scale (1127 * log(1 + f / 700)), spaced evenly in mels between the edges, as TensorFlow makes it:
    the DC bin left at zero, each bin's weight the lower or upper slope, in mels, of its band, whichever is less."""
    def mel(f):
        return 1127.0 * {torch}log(1.0 + f / 700.0)

    linear = {torch}linspace(0.0, sample_rate / 2.0, num_spectrogram_bins, dtype=dtype)[1:]
    bins = mel(linear).unsqueeze(1)
    edges = {torch}linspace(float(mel({torch}tensor(lower_edge_hertz, dtype=dtype))),
                           float(mel({torch}tensor(upper_edge_hertz, dtype=dtype))), num_mel_bins + 2, dtype=dtype)
    lower, center, upper = edges[:-2], edges[1:-1], edges[2:]
    lower_slopes = (bins - lower) / (center - lower)
    upper_slopes = (upper - bins) / (upper - center)
    weights = {torch}clamp({torch}minimum(lower_slopes, upper_slopes), min=0.0)
    return {F}pad(weights, (0, 0, 1, 0))
'''
HELPERS["RepeatVector"] = _REPEAT_VECTOR
HELPERS["without_scale"] = '''

def without_scale(norm):
    """A Keras norm layer with scale=False (and center=True): torch's norms switch the bias off alone but not the
    weight, so the weight becomes a constant of ones, a non-persistent buffer: no gradient, never trained, not in
    parameters() nor in the state_dict, and the output is Keras's (x - mean) / sqrt(var + eps) + beta."""
    ones = {torch}ones_like(norm.weight.detach())
    del norm.weight
    norm.register_buffer("weight", ones, persistent=False)
    return norm
'''
HELPERS["GaussianNoise"] = _GAUSSIAN_NOISE
HELPERS["RandomFlip"] = _RANDOM_FLIP
HELPERS["_keras_resample"] = _RESAMPLE
HELPERS["RandomRotation"] = _RANDOM_ROTATION
HELPERS["RandomZoom"] = _RANDOM_ZOOM
HELPERS["RandomTranslation"] = _RANDOM_TRANSLATION
DATA_DEPS.update({"RandomRotation": ("_keras_resample",), "RandomZoom": ("_keras_resample",),
                  "RandomTranslation": ("_keras_resample",)})
HELPERS["RandomContrast"] = _RANDOM_CONTRAST
HELPERS["RandomBrightness"] = _RANDOM_BRIGHTNESS
HELPERS["RandomCrop"] = _RANDOM_CROP
HELPERS["Keras2RandomCrop"] = _KERAS2_RANDOM_CROP
HELPERS["Keras2RandomContrast"] = _KERAS2_RANDOM_CONTRAST
HELPERS["SequenceDropout"] = _SEQUENCE_DROPOUT
HELPERS["ReverseSteps"] = _REVERSE_STEPS
# keras Model.build(input_shape) on a model subclass (passes/model_api.py)
HELPERS["build_on_zeros"] = '''

def build_on_zeros(model, shape):
    """keras Model.build(input_shape) of a model subclass: one call of the model on zeros of that shape (batch 1
    for Keras's None), which gives its lazy modules their sizes as Keras's build gives its layers theirs. In
    eval mode and without gradients, so no BatchNorm statistics move and no dropout draws; the mode is restored."""
    training = model.training
    model.eval()
    with {torch}no_grad():
        model({torch}zeros(*(1 if d is None else d for d in shape)))
    model.train(training)
'''
# keras Model.get_weights() / set_weights(list) round trips of one model (passes/model_api.py, _weight_lists)
HELPERS["keras_get_weights"] = '''

def keras_get_weights(model):
    """keras Model.get_weights(): a copy of every weight as a NumPy array, the parameters and the buffers (BatchNorm's
    running statistics; not its num_batches_tracked count, which Keras has not), in the module's order and torch's
    layout (a Linear's weight is Keras's kernel transposed): for keras_set_weights(model, weights) of the same model
    after elementwise arithmetic, position by position, as Keras's list is."""
    return [v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()
            if not k.endswith("num_batches_tracked")]
'''
HELPERS["keras_set_weights"] = '''

def keras_set_weights(model, weights):
    """keras Model.set_weights(weights) of a list keras_get_weights(model) gave: each array copied into the parameter
    or buffer at its position (Keras's ValueError for another number or shape)."""
    state = [v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")]
    if len(weights) != len(state):
        raise ValueError(f"expected a list of {len(state)} weights, got {len(weights)}")
    with {torch}no_grad():
        for v, w in zip(state, weights):
            w = {torch}as_tensor(w)
            if tuple(w.shape) != tuple(v.shape):
                raise ValueError(f"a weight of shape {tuple(v.shape)} given one of shape {tuple(w.shape)}")
            v.copy_(w)
'''
# keras Model.count_params() in a file of layers whose weights torch holds one for one (passes/model_api.py)
HELPERS["keras_count_params"] = '''

def keras_count_params(model):
    """keras Model.count_params(): the sizes of every weight, trainable or not: the parameters and the buffers
    (BatchNorm's running statistics, Keras's moving mean and variance; not num_batches_tracked, which Keras has not),
    each shared one once."""
    return sum(p.numel() for p in model.parameters()) + sum(
        b.numel() for n, b in model.named_buffers() if not n.endswith("num_batches_tracked"))
'''
# keras Model.set_weights(other.get_weights()) between two functional models of the same layers (passes/model_api.py)
HELPERS["copy_layer_weights"] = '''

def copy_layer_weights(target, source, pairs):
    """keras target.set_weights(source.get_weights()) for two models of the same layers in the same order, whose
    modules are named differently: for each (target module, source module) path in pairs (one per layer with
    weights, in Keras's order), the target module gets the source module's parameters and buffers, by name."""
    for t, s in pairs:
        target.get_submodule(t).load_state_dict(source.get_submodule(s).state_dict())
'''
HELPERS["GaussianDropout"] = _GAUSSIAN_DROPOUT
HELPERS["UnitNormalization"] = _UNIT_NORMALIZATION
HELPERS["RandomFourierFeatures"] = _RANDOM_FOURIER_FEATURES
HELPERS["KLDivergence"] = _KL_DIVERGENCE
HELPERS["CosineSimilarityLoss"] = _COSINE_SIMILARITY_LOSS
HELPERS["Keras2CosineSimilarityLoss"] = _KERAS2_COSINE_SIMILARITY_LOSS
DATA_DEPS["Keras2CosineSimilarityLoss"] = ("CosineSimilarityLoss",)
HELPERS["clone_model"] = _CLONE_MODEL
HELPERS["ChannelsLastReshape"] = _CHANNELS_LAST_RESHAPE
HELPERS["RNNOutput"] = _RNN_OUTPUT
HELPERS["Normalization"] = _NORMALIZATION
HELPERS["ChannelsFirstNormalization"] = _CHANNELS_FIRST_NORMALIZATION
DATA_DEPS["ChannelsFirstNormalization"] = ("Normalization",)
HELPERS["BidirectionalOutput"] = _BIDIRECTIONAL_OUTPUT
HELPERS["ActivityRegularization"] = _ACTIVITY_REGULARIZATION
HELPERS["EinsumDense"] = _EINSUM_DENSE
HELPERS["CenterCrop"] = _CENTER_CROP
HELPERS["Dot"] = _DOT
HELPERS["TimeDistributed"] = _TIME_DISTRIBUTED
HELPERS["Lambda"] = _LAMBDA
HELPERS["LazyRMSNorm"] = _LAZY_RMS_NORM
HELPERS["LazyLastAxisBatchNorm"] = _LAST_AXIS_BATCH_NORM
HELPERS["LazyChannelsFirstBatchNorm"] = _CHANNELS_FIRST_BATCH_NORM
HELPERS["ReversibleEmbedding"] = _REVERSIBLE_EMBEDDING
HELPERS["MaskedEmbedding"] = _PACK_STEPS + _MASKED_EMBEDDING
HELPERS["Masking"] = _PACK_STEPS + _MASKING
HELPERS["MaskedRNNOutput"] = _MASKED_RNN_OUTPUT
HELPERS["MaskedBidirectionalOutput"] = _MASKED_BIDIRECTIONAL_OUTPUT
# keras.losses.hinge / squared_hinge (rules hinge-fn, squared-hinge-fn): Keras's per-sample formulas
_HINGE = '''

def {name}(y_true, y_pred):
    """keras.losses.{name}: the mean over the last axis of {formula}, labels of
    only 0 and 1 taken as -1 and 1 (as Keras converts them)."""
    y_pred = {torch}as_tensor(y_pred)
    y_true = {torch}as_tensor(y_true).to(y_pred.dtype)
    if ((y_true == 0) | (y_true == 1)).all():
        y_true = 2.0 * y_true - 1.0
    return {value}.mean(-1)
'''
HELPERS["hinge"] = _HINGE.replace("{name}", "hinge").replace("{formula}", "max(1 - y_true * y_pred, 0)").replace(
    "{value}", "(1.0 - y_true * y_pred).clamp_min(0.0)")
HELPERS["squared_hinge"] = _HINGE.replace("{name}", "squared_hinge").replace(
    "{formula}", "max(1 - y_true * y_pred, 0) ** 2").replace("{value}", "(1.0 - y_true * y_pred).clamp_min(0.0).square()")
# keras.losses.cosine_similarity (rule cosine-similarity-fn): Keras's per-sample formula, each side normalised as
# Keras 3 does (x / max(norm, 1e-7)); Keras 2's tf.math.l2_normalize floors the norm at 1e-6
_COSINE_SIMILARITY = '''

def {name}(y_true, y_pred, axis=-1):
    """keras.losses.cosine_similarity: minus the cosine similarity of y_true and y_pred along axis, each
    normalised as Keras {version} does, x / max(norm, {eps}); one value per sample (the axis summed away)."""
    y_pred = {torch}as_tensor(y_pred)
    y_true = {torch}as_tensor(y_true).to(y_pred.dtype)
    return -({nn}functional.normalize(y_true, dim=axis, eps={eps})
             * {nn}functional.normalize(y_pred, dim=axis, eps={eps})).sum(axis)
'''
HELPERS["cosine_similarity"] = _COSINE_SIMILARITY.replace("{name}", "cosine_similarity").replace(
    "{version}", "3").replace("{eps}", "1e-7")
HELPERS["keras2_cosine_similarity"] = _COSINE_SIMILARITY.replace("{name}", "keras2_cosine_similarity").replace(
    "{version}", "2").replace("{eps}", "1e-6")
# optimizer.exclude_from_weight_decay(var_names=[...]) (passes/training.py): the matched parameters in a group of
# their own with weight_decay 0, matched as Keras matches them, by the Keras name of each variable
HELPERS["exclude_from_weight_decay"] = '''

def exclude_from_weight_decay(optimizer, model, var_names):
    """Keras's optimizer.exclude_from_weight_decay(var_names=...): each parameter of the model whose Keras variable
    name matches one of var_names (Keras searches them, as regular expressions, in Variable.name) goes to a
    parameter group of its own with weight_decay 0. A parameter's Keras name is its module's: a Linear / Conv
    weight is "kernel", a norm's weight / bias "gamma" / "beta", an Embedding's weight "embeddings", a bias "bias";
    a parameter of another module is an error (its Keras name is not known here). Call it before the first step,
    as Keras requires."""
    if not var_names:
        return
    pattern = {re}compile("|".join(set(var_names)))
    kernels = ({nn}Linear, {nn}Conv1d, {nn}Conv2d, {nn}Conv3d, {nn}ConvTranspose1d, {nn}ConvTranspose2d, {nn}ConvTranspose3d)
    norms = ({nn}LayerNorm, {nn}BatchNorm1d, {nn}BatchNorm2d, {nn}BatchNorm3d, {nn}GroupNorm)
    excluded = set()
    for path, module in model.named_modules():
        for name, param in module.named_parameters(recurse=False):
            if isinstance(module, kernels) and name in ("weight", "bias"):
                keras_name = "kernel" if name == "weight" else "bias"
                # a grouped conv may be a DepthwiseConv2D (depthwise_kernel) or a SeparableConv's first half, a 1x1
                # conv a SeparableConv's pointwise_kernel: where those names would match otherwise, it is not known
                groups, size = getattr(module, "groups", 1), getattr(module, "kernel_size", (0,))
                alias = "depthwise_kernel" if groups > 1 else "pointwise_kernel"
                ambiguous = groups > 1 or all(k == 1 for k in size)
                if name == "weight" and ambiguous and bool(pattern.search(alias)) != bool(pattern.search(keras_name)):
                    raise ValueError(f"exclude_from_weight_decay: {path}.{name} of {type(module).__name__} is Keras's "
                                     f"kernel or {alias}, which var_names match differently: put the parameters in "
                                     "the optimizer's groups by hand")
            elif isinstance(module, norms) and name in ("weight", "bias"):
                keras_name = "gamma" if name == "weight" else "beta"
            elif isinstance(module, {nn}Embedding) and name == "weight":
                keras_name = "embeddings"
            else:
                raise ValueError(f"exclude_from_weight_decay: {path}.{name} of {type(module).__name__} has no Keras "
                                 "variable name known here: put the parameters in the optimizer's groups by hand")
            if pattern.search(keras_name):
                excluded.add(id(param))
    groups = []
    for group in optimizer.param_groups:
        kept = [p for p in group["params"] if id(p) not in excluded]
        dropped = [p for p in group["params"] if id(p) in excluded]
        groups += [dict(group, params=kept)] if kept else []
        groups += [dict(group, params=dropped, weight_decay=0.0)] if dropped else []
    optimizer.param_groups[:] = groups
'''
# Keras 2's (tf_keras's) binary cross-entropy of probabilities (rules binary-crossentropy, binary-crossentropy-fn)
HELPERS["keras2_binary_crossentropy"] = '''

def keras2_binary_crossentropy(input, target, graph=False):
    """Binary cross-entropy of probabilities as Keras 2 (tf_keras) computes it, elementwise: the probabilities
    clipped to [1e-7, 1 - 1e-7], then 1e-7 added inside each log (Keras 3 and F.binary_cross_entropy add nothing
    there: a clipped probability's loss differs by up to log 2). graph=True: as in a tf.function (Keras's fit and
    evaluate), whose graph optimizer computes 1 - p + 1e-7 as (1 + 1e-7) - p, a float32 1.0000001 (up to 0.09 more
    or less loss where p is within 1e-6 of 1)."""
    p = input.clamp(1e-7, 1 - 1e-7)
    one_minus = (1 + 1e-7) - p if graph else 1 - p + 1e-7
    return -(target * {torch}log(p + 1e-7) + (1 - target) * {torch}log(one_minus))
'''
HELPERS["Keras2BCELoss"] = '''

class Keras2BCELoss({nn}Module):
    """nn.BCELoss as Keras 2 (tf_keras) computes its BinaryCrossentropy of probabilities (keras2_binary_crossentropy),
    called as torch losses are, loss(input, target); reduction "mean", "sum" or "none" as nn.BCELoss's; graph=True:
    as Keras's fit and evaluate compute it (keras2_binary_crossentropy)."""

    def __init__(self, reduction="mean", graph=False):
        super().__init__()
        self.reduction, self.graph = reduction, graph

    def forward(self, input, target):
        loss = keras2_binary_crossentropy(input, target, self.graph)
        if self.reduction == "none":
            return loss
        return loss.sum() if self.reduction == "sum" else loss.mean()
'''
DATA_DEPS["Keras2BCELoss"] = ("keras2_binary_crossentropy",)
# Keras's categorical cross-entropy of probabilities (rules categorical-crossentropy, categorical-crossentropy-fn)
HELPERS["categorical_crossentropy"] = '''

def categorical_crossentropy(input, target, label_smoothing=0.0):
    """Each sample's categorical cross-entropy of probabilities as Keras (3 and 2) computes it, the class axis 1
    (torch's): the predictions divided by their sum over the classes, then clipped to [1e-7, 1 - 1e-7], then
    -sum(target * log p) over the classes (no renormalisation after the clip, which F.cross_entropy of the log
    would add); label_smoothing as Keras's, target * (1 - ls) + ls / classes."""
    target = target.to(input.dtype)
    if label_smoothing:
        target = target * (1.0 - label_smoothing) + label_smoothing / input.shape[1]
    p = (input / input.sum(1, keepdim=True)).clamp(1e-7, 1 - 1e-7)
    return -(target * {torch}log(p)).sum(1)
'''
HELPERS["CategoricalCrossentropyLoss"] = '''

class CategoricalCrossentropyLoss({nn}Module):
    """nn.CrossEntropyLoss of probability targets as Keras computes its CategoricalCrossentropy of probabilities
    (categorical_crossentropy), called as torch losses are, loss(input, target), the class axis 1; reduction "mean",
    "sum" or "none" as nn.CrossEntropyLoss's."""

    def __init__(self, label_smoothing=0.0, reduction="mean"):
        super().__init__()
        self.label_smoothing, self.reduction = label_smoothing, reduction

    def forward(self, input, target):
        loss = categorical_crossentropy(input, target, self.label_smoothing)
        if self.reduction == "none":
            return loss
        return loss.sum() if self.reduction == "sum" else loss.mean()
'''
DATA_DEPS["CategoricalCrossentropyLoss"] = ("categorical_crossentropy",)
# (the data helpers are written with str.format's escapes: {{ }} are braces of the code)
HELPERS.update({k: v.replace("{{", "{").replace("}}", "}") for k, v in DATA_HELPERS.items()})
# tf.train.Checkpoint / CheckpointManager / latest_checkpoint (saving.py)
HELPERS.update(SAVING_HELPERS)
DATA_DEPS.update(SAVING_DEPS)


def use(ctx: FileContext, name: str) -> str:
    """Ask for helper ``name`` in this file; returns the name to call (its own, or another where the file binds
    that name: fwport/core/written.py)."""
    ctx.analyses.setdefault(_KEY, set()).add(name)
    return written.name(ctx, name)


class _Refs(cst.CSTVisitor):
    def __init__(self, names: set[str]):
        self.names = names
        self.called: set[str] = set()
        self.defined: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            func = func.value  # DataPipeline.from_tensor_slices(...)
        if isinstance(func, cst.Name) and func.value in self.names:
            self.called.add(func.value)

    # a helper function used as a value (``self.loss_fn = ctc_batch_cost``, {"sum": unsorted_segment_sum}, passed,
    # returned) is used too: any name read, but attribute names, keywords, parameters and imports
    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.called.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        if node.default is not None:
            node.default.visit(self)
        return False

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value in self.names:
            self.defined.add(node.name.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if node.name.value in self.names:
            self.defined.add(node.name.value)
        for base in node.bases:  # a helper class derived from (KerasLoss) is used too
            if isinstance(base.value, cst.Name) and base.value.value in self.names:
                self.called.add(base.value.value)
        for b in node.bases:  # a helper used as a base class (LazyBuild)
            if isinstance(b.value, cst.Name) and b.value.value in self.names:
                self.called.add(b.value.value)


def _spelled(template: str, ctx: FileContext) -> str:
    """The helper's text with the file's spellings of torch.nn / torch.nn.functional (imports recorded)."""
    if "{nn}" in template:
        template = template.replace("{nn}", ctx.spell_text("torch.nn.Module")[: -len("Module")])
    if "{torch}" in template:
        template = template.replace("{torch}", ctx.spell_text("torch.cat")[: -len("cat")])
    if "{F}" in template:
        template = template.replace("{F}", ctx.spell_text("torch.nn.functional.pad")[: -len("pad")])
    for key, (prefix, line) in _MODULES.items():
        if "{" + key + "}" in template:
            template = template.replace("{" + key + "}", prefix)
            ctx.needed_imports.add(line)
    return template


#: other modules a helper uses: placeholder → (its spelling, the import line)
_MODULES = {"np": ("np.", "import numpy as np"), "os": ("os.", "import os"), "math": ("math.", "import math"),
            "copy": ("copy.", "import copy"), "time": ("time.", "import time"), "re": ("re.", "import re"),
            "secrets": ("secrets.", "import secrets"),
            "torchvision": ("torchvision.", "import torchvision"), "Image": ("Image.", "from PIL import Image")}


def _without_source_imports_of(module: cst.Module, names: set[str], ctx: FileContext) -> cst.Module:
    """``from tensorflow.keras.preprocessing.image import load_img``: the helper written out has the
    name of the source function its calls replaced, so the import (which would rebind the name to the
    source function) goes."""
    body = list(module.body)
    changed = False
    for i, st in enumerate(body):
        if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1 or not isinstance(st.body[0], cst.ImportFrom):
            continue
        imp = st.body[0]
        if imp.relative or isinstance(imp.names, cst.ImportStar) or imp.module is None:
            continue
        mod = render(imp.module)
        if not ctx.imports.is_source(mod):
            continue
        keep = [a for a in imp.names if (a.asname.name.value if a.asname else render(a.name))
                not in names]
        if len(keep) == len(imp.names):
            continue
        changed = True
        if keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            body[i] = st.with_changes(body=[imp.with_changes(names=keep)])
        else:
            body[i] = None
    if not changed:
        return module
    out = []
    carried = []
    for st, orig in zip(body, module.body):
        if st is None:
            carried += [ln for ln in orig.leading_lines if ln.comment is not None]
            continue
        if carried:
            st = st.with_changes(leading_lines=[*carried, *st.leading_lines])
            carried = []
        out.append(st)
    return module.with_changes(body=out)


def _dependencies_first(names: list[str]) -> list[str]:
    """``names`` in order, each helper's dependencies (DATA_DEPS) before it: a base class (KerasRandomTransform,
    in _keras_resample) must be defined above the classes derived from it."""
    out: list[str] = []

    def put(name: str) -> None:
        if name in out or name not in names:
            return
        for dep in DATA_DEPS.get(name, ()):
            put(dep)
        out.append(name)

    for name in names:
        put(name)
    return out


def _data_helpers_first(module: cst.Module, todo: list[str], ctx: FileContext) -> tuple[cst.Module, list[str]]:
    """The data helpers among ``todo`` (datahelpers.py): a source import of the same name goes, and the
    functions that import what they use are written above the first top-level statement that calls one
    (a notebook may call load_img in a cell above its first TensorFlow import); the other helpers to
    write after the imports."""
    module = _without_source_imports_of(module, set(todo), ctx)
    local = [n for n in todo if n in LOCAL_HELPERS]
    if local:
        at = insertion_index(module, ctx)
        refs = _Refs({written.name(ctx, n) for n in local})
        for i, st in enumerate(module.body[:at]):
            scan(st, refs)
            if refs.called:
                at = i
                break
        module = insert_at(module, [_spelled(HELPERS[n], ctx) for n in local], at, ctx)
    return module, [n for n in todo if n not in LOCAL_HELPERS]


def finish(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Write out the helpers the output calls, after the file's imports."""
    wanted = ctx.analyses.get(_KEY)
    if not wanted:
        return module
    as_written = {n: written.name(ctx, n) for n in wanted}  # (a helper the file's names leave free: its own)
    refs = _Refs(set(as_written.values()))
    scan(module, refs)
    called = {n for n, w in as_written.items() if w in refs.called}
    defined = {n for n, w in as_written.items() if w in refs.defined}
    todo = called - defined
    grown = todo
    while grown:  # the dependencies of dependencies too (random_hue → adjust_hue → convert_image_dtype)
        grown = {dep for name in grown for dep in DATA_DEPS.get(name, ())
                 if dep not in todo and written.name(ctx, dep) not in refs.defined}
        todo |= grown
    todo = _dependencies_first(sorted(todo))
    if not todo:
        return module
    module, todo = _data_helpers_first(module, todo, ctx)
    if not todo:
        return module
    return insert_after_imports(module, [_spelled(HELPERS[n], ctx) for n in todo], ctx)


# --- recurrent layers and cells that take and return what Keras's do, sized on their first call ------
# (a subclass of the torch module keeps its parameter names, so the rules' weight maps hold)

_LAZY_RNN = '''

class Lazy{kind}({nn}modules.lazy.LazyModuleMixin, {nn}{kind}):
    """keras.layers.{keras} as an {nn}{kind} (batch_first): called as Keras calls it (initial_state= one
    (batch, units) tensor per state), it returns what Keras returns: the whole sequence or its last step
    (return_sequences), then the final state{states} (return_state). Without input_size, the input weights
    are made on the first call from the input's last size, as Keras builds the layer then. With
    bidirectional=True, the two directions merged as keras.layers.Bidirectional does (merge_mode; the
    backward direction's last step is its first)."""

    def __init__(self, hidden_size, input_size=None, return_sequences=False, return_state=False,
                 merge_mode="concat", **kwargs):
        super().__init__(input_size or 1, hidden_size, batch_first=True, **kwargs)
        self.return_sequences, self.return_state, self.merge_mode = return_sequences, return_state, merge_mode
        if input_size is None:
            self.input_size = 0
            for name in self._flat_weights_names:
                if name.startswith("weight_ih_l0"):
                    setattr(self, name, {nn}UninitializedParameter())

    def initialize_parameters(self, x, *args, **kwargs):
        if self.has_uninitialized_params():
            with {torch}no_grad():
                for name in self._flat_weights_names:
                    if name.startswith("weight_ih_l0"):
                        getattr(self, name).materialize((self.weight_hh_l0.shape[0], x.shape[-1]))
                self.reset_parameters()
        self.input_size = self.weight_ih_l0.shape[1]

    def forward(self, x, initial_state=None):
        state = initial_state
        if state is not None:
{to_torch}
        output, state = super().forward(x, state)
        if self.bidirectional:
            return self.merged(output)
        y = output if self.return_sequences else output[:, -1]
        if not self.return_state:
            return y
{from_torch}

    def merged(self, output):
        forward, backward = output.chunk(2, dim=-1)
        if not self.return_sequences:
            forward, backward = forward[:, -1], backward[:, 0]
        if self.merge_mode == "concat":
            return {torch}cat([forward, backward], dim=-1)
        if self.merge_mode == "sum":
            return forward + backward
        if self.merge_mode == "mul":
            return forward * backward
        return (forward + backward) / 2
'''

_LAZY_CELL = '''

class Lazy{kind}Cell({nn}modules.lazy.LazyModuleMixin, {nn}{kind}Cell):
    """keras.layers.{keras}Cell as an {nn}{kind}Cell: called as Keras calls it, cell(x, states) with
    states {states_doc}, it returns (output, new states) as Keras does. Without input_size, the input
    weights are made on the first call from the input's last size, as Keras builds the cell then."""

    def __init__(self, hidden_size, input_size=None, **kwargs):
        super().__init__(input_size or 1, hidden_size, **kwargs)
        if input_size is None:
            self.input_size = 0
            self.weight_ih = {nn}UninitializedParameter()

    def initialize_parameters(self, x, *args, **kwargs):
        if self.has_uninitialized_params():
            with {torch}no_grad():
                self.weight_ih.materialize((self.weight_hh.shape[0], x.shape[-1]))
                self.reset_parameters()
        self.input_size = self.weight_ih.shape[1]

    def forward(self, x, states=None):
{cell_body}
'''

_RNN_KINDS = {  # torch kind → (Keras name, states in the docstring, Keras states → torch's, torch's → Keras's)
    "GRU": ("GRU", "", "            state = (state[0] if isinstance(state, (list, tuple)) else state).unsqueeze(0)",
            "        return y, state[0]"),
    "RNN": ("SimpleRNN", "", "            state = (state[0] if isinstance(state, (list, tuple)) else state).unsqueeze(0)",
            "        return y, state[0]"),
    "LSTM": ("LSTM", "s h and c", "            state = tuple(s.unsqueeze(0) for s in state)",
             "        return y, state[0][0], state[1][0]"),
}
_ONE_STATE_CELL = '''        nested = isinstance(states, (list, tuple))
        h = super().forward(x, states[0] if nested else states)
        return h, [h] if nested else h'''
_CELL_KINDS = {  # torch kind → (Keras name, states, the body of forward)
    "GRU": ("GRU", "[h] (or h)", _ONE_STATE_CELL),
    "RNN": ("SimpleRNN", "[h] (or h)", _ONE_STATE_CELL),
    "LSTM": ("LSTM", "[h, c]", '''        h, c = super().forward(x, None if states is None else (states[0], states[1]))
        return h, [h, c]'''),
}
for _kind, (_keras, _states, _to, _from) in _RNN_KINDS.items():
    HELPERS[f"Lazy{_kind}"] = (_LAZY_RNN.replace("{kind}", _kind).replace("{keras}", _keras)
                               .replace("{states}", _states).replace("{to_torch}", _to).replace("{from_torch}", _from))

# keras.layers.LSTM / GRU / SimpleRNN(stateful=True) (layer.py's _stateful_rnn), and model.reset_states()
# (passes/model_api.py; self.model.reset_states() in a callback: passes/training.py)
_STATEFUL_RNN = '''

class Stateful{kind}(Lazy{kind}):
    """keras.layers.{keras}(stateful=True) as a Lazy{kind}: each call starts from the state{s} the previous
    call ended with (zeros at the first; initial_state= where given), as Keras's stateful layer does. {they}
    held detached, as Keras does not backpropagate into an earlier batch, in buffers that are not saved with the
    weights; reset_states() sets {them} back to zeros. The batch size stays the first call's: an input of another
    batch size is a ValueError, as in Keras."""

    stateful = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
{register}

    @property
    def states(self):
        return None if self.state_h is None else [{names}]

    def reset_states(self):
        if self.state_h is not None:
{zeros}

    reset_state = reset_states

    def forward(self, x, initial_state=None):
        if self.state_h is not None and x.shape[0] != self.state_h.shape[0]:
            raise ValueError(f"a stateful {keras} keeps states of batch size {self.state_h.shape[0]}: this input "
                             f"has batch size {x.shape[0]}")
        state = self.states if initial_state is None else initial_state
        if state is not None:
{to_torch}
        output, state = {nn}{kind}.forward(self, x, state)
{keep}
        y = output if self.return_sequences else output[:, -1]
        if not self.return_state:
            return y
{from_torch}
'''
_ONE_STATE = ("        self.register_buffer(\"state_h\", None, persistent=False)", "self.state_h",
              "            self.state_h = {torch}zeros_like(self.state_h)", "        self.state_h = state[0].detach()")
_STATEFUL_KINDS = {  # torch kind → (its buffers, the states' list, reset_states's body, the states kept after a call)
    "GRU": _ONE_STATE,
    "RNN": _ONE_STATE,
    "LSTM": ("        self.register_buffer(\"state_h\", None, persistent=False)\n"
             "        self.register_buffer(\"state_c\", None, persistent=False)", "self.state_h, self.state_c",
             "            self.state_h, self.state_c = {torch}zeros_like(self.state_h), {torch}zeros_like(self.state_c)",
             "        self.state_h, self.state_c = state[0][0].detach(), state[1][0].detach()"),
}
for _kind, (_register, _names, _zeros, _keep) in _STATEFUL_KINDS.items():
    _keras, _, _to, _from = _RNN_KINDS[_kind]
    _two = _kind == "LSTM"
    HELPERS[f"Stateful{_kind}"] = (_STATEFUL_RNN.replace("{register}", _register).replace("{names}", _names)
                                   .replace("{zeros}", _zeros).replace("{keep}", _keep)
                                   .replace("{to_torch}", _to).replace("{from_torch}", _from)
                                   .replace("{s}", "s h and c" if _two else "").replace("{they}", "They are" if _two else "It is")
                                   .replace("{them}", "them" if _two else "it").replace("{kind}", _kind)
                                   .replace("{keras}", _keras))
    DATA_DEPS[f"Stateful{_kind}"] = (f"Lazy{_kind}",)
HELPERS["reset_rnn_states"] = '''

def reset_rnn_states(model):
    """keras Model.reset_states(): every stateful recurrent layer of the model (StatefulLSTM, StatefulGRU,
    StatefulRNN) starts its next call from zeros."""
    for module in model.modules():
        if getattr(module, "stateful", False):
            module.reset_states()
'''

_BIDIRECTIONAL_DROPOUT = '''

class Bidirectional{kind}Dropout({nn}{kind}):
    """keras.layers.Bidirectional({keras}(dropout=p)) as a bidirectional {nn}{kind}: in training each direction
    reads the inputs times its own mask of the features per sequence (the same at every step, scaled by
    1 / (1 - p)), as Keras's forward and backward layers draw theirs, so the module runs once per direction
    and each keeps its half; in eval() (or p outside (0, 1), where Keras drops nothing) one run. per_step=True:
    a mask of each step's features (Keras 2's fused LSTM and GRU draw one over the whole input)."""

    def __init__(self, *args, input_dropout=0.0, per_step=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_dropout, self.per_step = input_dropout, per_step

    def forward(self, x, hx=None):
        p = self.input_dropout
        if not self.training or not 0 < p < 1:
            return super().forward(x, hx)
        steps = x.shape[1] if self.per_step else 1
        keep = {torch}empty(2, x.shape[0], steps, x.shape[-1], dtype=x.dtype, device=x.device).bernoulli_(1 - p)
        out_f, state_f = super().forward(x * keep[0] / (1 - p), hx)
        out_b, state_b = super().forward(x * keep[1] / (1 - p), hx)
        half = out_f.shape[-1] // 2
        output = {torch}cat([out_f[..., :half], out_b[..., half:]], dim=-1)
        pick = lambda f, b: {torch}stack([f[0], b[1]])
        return output, tuple(map(pick, state_f, state_b)) if isinstance(state_f, tuple) else pick(state_f, state_b)
'''

_LAZY_BIDIRECTIONAL_DROPOUT = '''

class LazyBidirectional{kind}Dropout(Lazy{kind}):
    """Lazy{kind} (bidirectional=True) of a keras.layers.Bidirectional({keras}(dropout=p)): in training each
    direction reads the inputs times its own mask of the features per sequence (the same at every step, scaled
    by 1 / (1 - p)), as Keras's forward and backward layers draw theirs, so the module runs once per direction
    and each keeps its half before the merge; in eval() (or p outside (0, 1)) one run. per_step=True: a mask of
    each step's features (Keras 2's fused LSTM and GRU draw one over the whole input)."""

    def __init__(self, *args, input_dropout=0.0, per_step=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_dropout, self.per_step = input_dropout, per_step

    def forward(self, x):
        p = self.input_dropout
        if not self.training or not 0 < p < 1:
            return super().forward(x)
        steps = x.shape[1] if self.per_step else 1
        keep = {torch}empty(2, x.shape[0], steps, x.shape[-1], dtype=x.dtype, device=x.device).bernoulli_(1 - p)
        out_f = {nn}{kind}.forward(self, x * keep[0] / (1 - p))[0]
        out_b = {nn}{kind}.forward(self, x * keep[1] / (1 - p))[0]
        half = out_f.shape[-1] // 2
        return self.merged({torch}cat([out_f[..., :half], out_b[..., half:]], dim=-1))
'''
for _kind, (_keras, *_) in _RNN_KINDS.items():
    HELPERS[f"Bidirectional{_kind}Dropout"] = _BIDIRECTIONAL_DROPOUT.replace("{kind}", _kind).replace("{keras}", _keras)
    HELPERS[f"LazyBidirectional{_kind}Dropout"] = (_LAZY_BIDIRECTIONAL_DROPOUT.replace("{kind}", _kind)
                                                   .replace("{keras}", _keras))
    DATA_DEPS[f"LazyBidirectional{_kind}Dropout"] = (f"Lazy{_kind}",)
_RECURRENT_DROPOUT = '''

class RecurrentDropout{kind}({nn}{kind}):
    """keras.layers.{keras}(recurrent_dropout=q, dropout=p) as an {nn}{kind} (the same parameters): in eval() torch's
    recurrence (Keras's inference); in train() the cell's own loop, as Keras runs it with recurrent_dropout (its
    implementation=1): the step's inputs (p) and the previous output (q) times one mask per gate each, drawn once
    per sequence (the same at every step) and scaled by 1 / (1 - rate); a rate outside (0, 1) drops nothing."""

    def __init__(self, *args, input_dropout=0.0, recurrent_dropout=0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_dropout, self.recurrent_dropout = input_dropout, recurrent_dropout

    def masks(self, like, rate, gates):
        if not 0 < rate < 1:
            return [1.0] * gates
        keep = {torch}empty(gates, *like.shape, dtype=like.dtype, device=like.device).bernoulli_(1 - rate)
        return keep / (1 - rate)

    def forward(self, x, hx=None):
        if not self.training:
            return super().forward(x, hx)
        gates = self.weight_ih_l0.shape[0] // self.hidden_size
        w_ih, w_hh = self.weight_ih_l0.chunk(gates), self.weight_hh_l0.chunk(gates)
        b_ih = self.bias_ih_l0.chunk(gates) if self.bias else [None] * gates
        b_hh = self.bias_hh_l0.chunk(gates) if self.bias else [None] * gates
{init}
        mx, mh = self.masks(x[:, 0], self.input_dropout, gates), self.masks(h, self.recurrent_dropout, gates)
        outputs = []
        for t in range(x.shape[1]):
            xs = [{F}linear(x[:, t] * mx[k], w_ih[k], b_ih[k]) for k in range(gates)]
            hs = [{F}linear(h * mh[k], w_hh[k], b_hh[k]) for k in range(gates)]
{step}
            outputs.append(h)
        return {torch}stack(outputs, 1), {final}
'''
_ONE_STATE_INIT = "        h = x.new_zeros(x.shape[0], self.hidden_size) if hx is None else hx[0]"
_RECURRENT_DROPOUT_KINDS = {  # torch kind → (the initial state, one step in torch's gate order, the final state)
    "LSTM": ("        h, c = (x.new_zeros(x.shape[0], self.hidden_size),) * 2 if hx is None else (hx[0][0], hx[1][0])",
             '''            i, f, g, o = (a + b for a, b in zip(xs, hs))
            c = {torch}sigmoid(f) * c + {torch}sigmoid(i) * {torch}tanh(g)
            h = {torch}sigmoid(o) * {torch}tanh(c)''', "(h.unsqueeze(0), c.unsqueeze(0))"),
    "GRU": (_ONE_STATE_INIT, '''            r, z = {torch}sigmoid(xs[0] + hs[0]), {torch}sigmoid(xs[1] + hs[1])
            h = z * h + (1 - z) * {torch}tanh(xs[2] + r * hs[2])''', "h.unsqueeze(0)"),
    "RNN": (_ONE_STATE_INIT, '''            a = xs[0] + hs[0]
            h = {torch}tanh(a) if self.nonlinearity == "tanh" else {torch}relu(a)''', "h.unsqueeze(0)"),
}
_LAZY_RECURRENT_DROPOUT = '''

class LazyRecurrentDropout{kind}(Lazy{kind}, RecurrentDropout{kind}):
    """Lazy{kind} (called and returning as Keras's {keras}, its input size read on the first call) whose
    recurrence is RecurrentDropout{kind}'s: Keras's recurrent_dropout and dropout masks in train()."""
'''
for _kind, (_init, _step, _final) in _RECURRENT_DROPOUT_KINDS.items():
    _keras = _RNN_KINDS[_kind][0]
    HELPERS[f"RecurrentDropout{_kind}"] = (_RECURRENT_DROPOUT.replace("{init}", _init).replace("{step}", _step)
                                           .replace("{final}", _final).replace("{kind}", _kind)
                                           .replace("{keras}", _keras))
    HELPERS[f"LazyRecurrentDropout{_kind}"] = _LAZY_RECURRENT_DROPOUT.replace("{kind}", _kind).replace("{keras}", _keras)
    DATA_DEPS[f"LazyRecurrentDropout{_kind}"] = (f"Lazy{_kind}", f"RecurrentDropout{_kind}")
for _kind, (_keras, _states, _body) in _CELL_KINDS.items():
    HELPERS[f"Lazy{_kind}Cell"] = (_LAZY_CELL.replace("{kind}", _kind).replace("{keras}", _keras)
                                   .replace("{states_doc}", _states).replace("{cell_body}", _body))


# --- custom layers built on their first call, and Keras's initializers by name ----------------------------

_LAZY_BUILD = '''

class LazyBuild({nn}modules.lazy.LazyModuleMixin):
    """Keras's deferred build for a custom layer (torch's lazy modules): build(input_shape) runs on the
    first call with the input's shape (a list of shapes for a list of inputs), as Keras calls it. The
    weights that __init__ declares as {nn}UninitializedParameter are filled in place by what build()
    creates, so an optimizer created before the first call holds them; weights loaded before it
    (load_state_dict) are kept; one that build() does not make (an add_weight under an if) is removed."""

    def initialize_parameters(self, inputs, *args, **kwargs):
        shape = [tuple(t.shape) for t in inputs] if isinstance(inputs, (list, tuple)) else tuple(inputs.shape)
        declared = dict(self._parameters)
        self.build(shape)
        with {torch}no_grad():
            for name, old in declared.items():
                new = self._parameters.get(name)
                if new is old and isinstance(old, {nn}UninitializedParameter):
                    del self._parameters[name]  # build() did not make it (add_weight under an if): no such weight
                    continue
                if new is old or old is None or new is None:
                    continue
                if isinstance(old, {nn}UninitializedParameter):
                    old.materialize(new.shape, dtype=new.dtype)
                    old.copy_(new)
                elif old.shape != new.shape:
                    raise ValueError(f"{name}: loaded with shape {tuple(old.shape)}, built as {tuple(new.shape)}")
                old.requires_grad_(new.requires_grad)
                self._parameters[name] = old
'''

_KERAS_INITIALIZER = '''

class KerasInitializer:
    """A Keras initializer given by name ("he_normal", "HeNormal") and its parameters (mean, stddev, minval,
    maxval, value, gain, as Keras's classes take them), by {"class_name": ..., "config": ...} or as an object
    that already is one (returned as it is): called with a shape, it draws a tensor from the distribution
    Keras draws from (variance scaling with Keras's fans, truncated normals cut at two standard deviations).
    get_config() gives {"class_name": ..., "config": ...}, which it reads back."""

    _VARIANCE = {"glorot_uniform": ("uniform", 1.0, "fan_avg"), "glorot_normal": ("truncated_normal", 1.0, "fan_avg"),
                 "he_normal": ("truncated_normal", 2.0, "fan_in"), "he_uniform": ("uniform", 2.0, "fan_in"),
                 "lecun_normal": ("truncated_normal", 1.0, "fan_in"), "lecun_uniform": ("uniform", 1.0, "fan_in")}
    _DEFAULTS = {"zeros": {}, "ones": {}, "constant": {"value": 0.0}, "random_normal": {"mean": 0.0, "stddev": 0.05},
                 "random_uniform": {"minval": -0.05, "maxval": 0.05}, "truncated_normal": {"mean": 0.0, "stddev": 0.05},
                 "orthogonal": {"gain": 1.0}, "identity": {"gain": 1.0}}

    def __new__(cls, identifier, **config):
        if identifier is None or callable(identifier):
            return identifier
        return super().__new__(cls)

    def __init__(self, identifier, **config):
        if identifier is self:  # __new__ returned it as it was
            return
        if isinstance(identifier, dict):
            identifier, config = identifier["class_name"], {**identifier.get("config", {}), **config}
        name = "".join("_" + c.lower() if c.isupper() else c for c in identifier).lstrip("_")
        if name not in self._VARIANCE and name not in self._DEFAULTS:
            raise ValueError(f"unknown Keras initializer: {identifier!r}")
        config.pop("seed", None)  # torch draws from its global generator (torch.manual_seed)
        unknown = set(config) - set(self._DEFAULTS.get(name, {}))
        if unknown:
            raise TypeError(f"{identifier} takes no {sorted(unknown)}")
        self.name, self.config = name, {**self._DEFAULTS.get(name, {}), **config}

    def get_config(self):
        return {"class_name": "".join(w.capitalize() for w in self.name.split("_")), "config": dict(self.config)}

    @staticmethod
    def fans(shape):
        if len(shape) == 0:
            return 1, 1
        if len(shape) == 1:
            return shape[0], shape[0]
        if len(shape) == 2:
            return shape[0], shape[1]
        receptive = 1
        for d in shape[:-2]:
            receptive *= d
        return shape[-2] * receptive, shape[-1] * receptive

    @{torch}no_grad()
    def __call__(self, shape, dtype=None):
        shape = tuple(int(d) for d in shape)
        if isinstance(dtype, str):  # Keras takes "float32" too
            dtype = {"float16": {torch}float16, "bfloat16": {torch}bfloat16, "float32": {torch}float32,
                     "float64": {torch}float64}[dtype]
        t = {torch}empty(shape, dtype=dtype or {torch}float32)
        c = self.config
        if self.name == "zeros":
            return t.zero_()
        if self.name == "ones":
            return t.fill_(1.0)
        if self.name == "constant":
            return t.fill_(c["value"])
        if self.name == "random_normal":
            return {nn}init.normal_(t, c["mean"], c["stddev"])
        if self.name == "random_uniform":
            return {nn}init.uniform_(t, c["minval"], c["maxval"])
        if self.name == "truncated_normal":
            return {nn}init.trunc_normal_(t, c["mean"], c["stddev"], a=c["mean"] - 2.0 * c["stddev"],
                                          b=c["mean"] + 2.0 * c["stddev"])
        if self.name == "orthogonal":
            return {nn}init.orthogonal_(t, gain=c["gain"])
        if self.name == "identity":
            return {nn}init.eye_(t).mul_(c["gain"])
        distribution, scale, mode = self._VARIANCE[self.name]
        fan_in, fan_out = self.fans(shape)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        variance = scale / max(1.0, fan)
        if distribution == "uniform":
            limit = (3.0 * variance) ** 0.5
            return {nn}init.uniform_(t, -limit, limit)
        std = variance ** 0.5 / 0.87962566103423978  # the std of a standard normal cut at two std
        return {nn}init.trunc_normal_(t, std=std, a=-2.0 * std, b=2.0 * std)
'''


_KERAS_REGULARIZER = '''

class KerasRegularizer:
    """A Keras weight regularizer given by name ("l2", "L1", "L1L2"; Keras 2 also "l1_l2"), by its factors
    (KerasRegularizer("L2", l2=1e-4)), by {"class_name": ..., "config": ...} or as an object that already is one
    (returned as it is; None stays None, as keras.regularizers.get does). Called with a weight it gives Keras's
    penalty, l1 * sum(|w|) + l2 * sum(w ** 2) (no 1/2), which the module's regularization_loss() adds to the
    loss as Keras adds model.losses. get_config() gives {"class_name": ..., "config": ...}, which it reads back;
    serialize(r) is that config, or None for None."""

    _CLASSES = {"l1": "L1", "L1": "L1", "l2": "L2", "L2": "L2", "L1L2": "L1L2", "l1_l2": "L1L2"}
    _DEFAULTS = {"L1": {"l1": 0.01}, "L2": {"l2": 0.01}, "L1L2": {"l1": 0.0, "l2": 0.0}}

    def __new__(cls, identifier, keras2=False, **config):
        if identifier is None or callable(identifier):
            return identifier
        return super().__new__(cls)

    def __init__(self, identifier, keras2=False, **config):
        if identifier is self:  # __new__ returned it as it was
            return
        if isinstance(identifier, dict):
            identifier, config = identifier["class_name"], {**identifier.get("config", {}), **config}
        name = self._CLASSES.get(identifier)
        if name is None or (identifier == "l1_l2" and not keras2):  # Keras 3 knows l1_l2 only as a function
            raise ValueError(f"unknown Keras regularizer: {identifier!r} (KerasRegularizer knows l1, l2, L1L2)")
        defaults = {"l1": 0.01, "l2": 0.01} if identifier == "l1_l2" else self._DEFAULTS[name]
        unknown = set(config) - set(defaults)
        if unknown:
            raise TypeError(f"{identifier} takes no {sorted(unknown)}")
        self.name, self.config = name, {k: float(v) for k, v in {**defaults, **config}.items()}

    def __call__(self, weight):
        loss = 0.0
        if self.config.get("l1"):
            loss = loss + self.config["l1"] * weight.abs().sum()
        if self.config.get("l2"):
            loss = loss + self.config["l2"] * weight.square().sum()
        return loss

    def get_config(self):
        return {"class_name": self.name, "config": dict(self.config)}

    @staticmethod
    def serialize(regularizer):
        return None if regularizer is None else regularizer.get_config()
'''


_KERAS_CONSTRAINT = '''

class KerasConstraint:
    \"\"\"A Keras weight constraint given by name ("max_norm" / "MaxNorm", "min_max_norm" / "MinMaxNorm",
    "non_neg" / "NonNeg", "unit_norm" / "UnitNorm"), by its arguments (KerasConstraint("MaxNorm", max_value=2)),
    by {"class_name": ..., "config": ...} or as an object that already is one (returned as it is; None stays
    None, as keras.constraints.get does). Called with a weight it gives Keras's projection (axis 0 and
    epsilon 1e-7 by default, as Keras): Keras's optimizer assigns it to the variable after each update; here a
    module's apply_constraints() does it, which the loop calls after each optimizer.step(). get_config() gives
    {"class_name": ..., "config": ...}, which it reads back; serialize(c) is that config, or None for None.\"\"\"

    _CLASSES = {"max_norm": "MaxNorm", "MaxNorm": "MaxNorm", "min_max_norm": "MinMaxNorm", "MinMaxNorm": "MinMaxNorm",
                "non_neg": "NonNeg", "NonNeg": "NonNeg", "unit_norm": "UnitNorm", "UnitNorm": "UnitNorm"}
    _DEFAULTS = {"MaxNorm": {"max_value": 2, "axis": 0}, "NonNeg": {}, "UnitNorm": {"axis": 0},
                 "MinMaxNorm": {"min_value": 0.0, "max_value": 1.0, "rate": 1.0, "axis": 0}}
    EPSILON = 1e-7  # keras.backend.epsilon()

    def __new__(cls, identifier, **config):
        if identifier is None or callable(identifier):
            return identifier
        return super().__new__(cls)

    def __init__(self, identifier, **config):
        if identifier is self:  # __new__ returned it as it was
            return
        if isinstance(identifier, dict):
            identifier, config = identifier["class_name"], {**identifier.get("config", {}), **config}
        name = self._CLASSES.get(identifier)
        if name is None:
            raise ValueError(f"unknown Keras constraint: {identifier!r} (KerasConstraint knows MaxNorm, MinMaxNorm, "
                             "NonNeg, UnitNorm)")
        unknown = set(config) - set(self._DEFAULTS[name])
        if unknown:
            raise TypeError(f"{name} takes no {sorted(unknown)}")
        self.name, self.config = name, {**self._DEFAULTS[name], **config}

    def __call__(self, w):
        c = self.config
        if self.name == "NonNeg":
            return w.clamp(min=0)
        axis = c["axis"]
        dims = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        norms = w.square().sum(dim=dims, keepdim=True).sqrt()
        if self.name == "UnitNorm":
            return w / (self.EPSILON + norms)
        if self.name == "MaxNorm":
            desired = norms.clamp(0, c["max_value"])
        else:
            desired = c["rate"] * norms.clamp(c["min_value"], c["max_value"]) + (1 - c["rate"]) * norms
        return w * (desired / (self.EPSILON + norms))

    def get_config(self):
        return {"class_name": self.name, "config": dict(self.config)}

    @staticmethod
    def serialize(constraint):
        return None if constraint is None else constraint.get_config()
'''

HELPERS["LazyBuild"] = _LAZY_BUILD
HELPERS["KerasConstraint"] = _KERAS_CONSTRAINT
HELPERS["KerasRegularizer"] = _KERAS_REGULARIZER
HELPERS["KerasInitializer"] = _KERAS_INITIALIZER


# --- attention and transformer layers (rules multi-head-attention, layer-normalization) ---------------

_KERAS_MHA = '''

class KerasMultiHeadAttention({nn}modules.lazy.LazyModuleMixin, {nn}Module):
    """keras.layers.MultiHeadAttention, computed as Keras computes it: called as Keras calls it
    (query, value, key=None, attention_mask=None, ...; key defaults to value), with Keras's variables
    (the query/key/value kernels (features, heads, size) with biases (heads, size), the output kernel
    (heads, value size, features) with its bias) and its einsums. The input sizes come from the first
    call, as Keras builds the layer (torch's lazy modules). attention_mask: True (or 1) attends."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None):
        super().__init__()
        self.num_heads, self.key_dim, self.value_dim = num_heads, key_dim, value_dim or key_dim
        self.use_bias = use_bias
        self.output_shape = output_shape[0] if isinstance(output_shape, (tuple, list)) else output_shape
        self.dropout = {nn}Dropout(dropout)
        for name in ("query", "key", "value", "output"):
            self.register_parameter(name + "_kernel", {nn}UninitializedParameter())
            self.register_parameter(name + "_bias", {nn}UninitializedParameter() if use_bias else None)

    def initialize_parameters(self, query, value, key=None, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        key = value if key is None else key
        h, dk, dv = self.num_heads, self.key_dim, self.value_dim
        out = self.output_shape or query.shape[-1]
        shapes = {"query": (query.shape[-1], h, dk), "key": (key.shape[-1], h, dk),
                  "value": (value.shape[-1], h, dv), "output": (h, dv, out)}
        with {torch}no_grad():
            for name, shape in shapes.items():
                kernel = getattr(self, name + "_kernel")
                kernel.materialize(shape)
                fan_in, fan_out = shape[0] * shape[1], shape[0] * shape[2]  # Keras's glorot_uniform fans
                limit = (6.0 / (fan_in + fan_out)) ** 0.5
                kernel.uniform_(-limit, limit)
                if self.use_bias:
                    bias = getattr(self, name + "_bias")
                    bias.materialize(shape[1:] if name != "output" else shape[2:])
                    bias.zero_()

    def _project(self, x, name):
        y = {torch}einsum("bte,ehd->bthd", x, getattr(self, name + "_kernel"))
        return y + getattr(self, name + "_bias") if self.use_bias else y

    def forward(self, query, value, key=None, attention_mask=None, return_attention_scores=False,
                use_causal_mask=False, value_mask=None, key_mask=None):
        key = value if key is None else key
        if query.dim() > 3 and query.dim() == value.dim() == key.dim():
            # (batch, steps..., features): Keras attends over all the step axes at once (attention_axes=None),
            # as over them flattened into one
            if attention_mask is not None or value_mask is not None or key_mask is not None or use_causal_mask:
                raise ValueError("KerasMultiHeadAttention takes masks with (batch, steps, features) inputs only")
            out = self.forward(query.flatten(1, -2), value.flatten(1, -2), key.flatten(1, -2),
                               return_attention_scores=return_attention_scores)
            if not return_attention_scores:
                return out.unflatten(1, query.shape[1:-1])
            out, scores = out
            scores = scores.unflatten(-1, key.shape[1:-1]).unflatten(2, query.shape[1:-1])
            return out.unflatten(1, query.shape[1:-1]), scores
        if query.dim() != 3 or value.dim() != 3:
            raise ValueError("KerasMultiHeadAttention takes (batch, steps, features) inputs")
        masks = [] if attention_mask is None else [attention_mask.bool()]
        if value_mask is not None:
            masks.append(value_mask.bool()[:, None, :])
        if key_mask is not None:
            masks.append(key_mask.bool()[:, None, :])
        if use_causal_mask:
            steps = {torch}ones(query.shape[1], value.shape[1], dtype={torch}bool, device=query.device)
            masks.append(steps.tril()[None])
        q = self._project(query, "query") * (1.0 / self.key_dim ** 0.5)
        k, v = self._project(key, "key"), self._project(value, "value")
        scores = {torch}einsum("bshd,bthd->bhts", k, q)
        if masks:
            mask = masks[0]
            for m in masks[1:]:
                mask = mask & m
            while mask.dim() < 4:
                mask = mask.unsqueeze(-3)
            scores = {torch}softmax(scores.masked_fill(~mask, -1e9), dim=-1)
            if self.dropout.p > 0 or return_attention_scores:
                # Keras 3 computes these with its masked softmax, which gives a query that attends nothing 0
                # (its fused attention, used otherwise, gives it the mean of the values, as above)
                scores = scores.masked_fill(~mask, 0.0)
        else:
            scores = {torch}softmax(scores, dim=-1)
        out = {torch}einsum("bhts,bshd->bthd", self.dropout(scores), v)
        out = {torch}einsum("bthd,hdo->bto", out, self.output_kernel)
        if self.use_bias:
            out = out + self.output_bias
        return (out, scores) if return_attention_scores else out
'''

_LAZY_LAYER_NORM = '''

class LazyLayerNorm({nn}modules.lazy.LazyModuleMixin, {nn}LayerNorm):
    """keras.layers.LayerNormalization over the last axes whose sizes are known only at the first call
    (Keras builds the layer then): an nn.LayerNorm over the last `axes` axes, sized by that call."""

    cls_to_become = {nn}LayerNorm

    def __init__(self, eps=1e-3, elementwise_affine=True, bias=True, axes=1):
        super().__init__(0, eps, elementwise_affine=False)
        self.elementwise_affine, self.axes = elementwise_affine, axes
        if elementwise_affine:
            self.weight = {nn}UninitializedParameter()
            self.bias = {nn}UninitializedParameter() if bias else None

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.normalized_shape != (0,):
            super().reset_parameters()

    def initialize_parameters(self, input):
        self.normalized_shape = tuple(input.shape[-self.axes:])
        if self.has_uninitialized_params():
            with {torch}no_grad():
                for p in (self.weight, self.bias):
                    if p is not None:
                        p.materialize(self.normalized_shape)
                self.reset_parameters()
'''

_SHARED_DROPOUT = '''

class SharedDropout({nn}Module):
    """keras.layers.Dropout(rate, noise_shape): one mask of shape noise_shape (None: the input's size
    on that axis) shared along the axes where it is 1, scaled by 1 / (1 - rate); identity in eval mode."""

    def __init__(self, p, noise_shape):
        super().__init__()
        self.p, self.noise_shape = p, tuple(noise_shape)

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        shape = [x.shape[i] if n is None else n for i, n in enumerate(self.noise_shape)]
        keep = {torch}empty(shape, dtype=x.dtype, device=x.device).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)
'''

_KERAS_ATTENTION = '''

class KerasAttention({nn}modules.lazy.LazyModuleMixin, {nn}Module):
    """keras.layers.Attention (dot-product scores, times a learned scalar when use_scale) and, with
    additive=True, keras.layers.AdditiveAttention (sum(scale * tanh(q + k)) over the features, its scale
    sized by the first call as Keras builds the layer). Called as Keras calls them: [query, value] or
    [query, value, key], mask=[query_mask, value_mask]; a value position whose mask is False gets its score
    lowered by 1e9 before the softmax, a query whose mask is False gets 0."""

    def __init__(self, use_scale=False, dropout=0.0, additive=False):
        super().__init__()
        self.dropout, self.additive = dropout, additive
        if not use_scale:
            self.scale = None
        elif additive:
            self.scale = {nn}UninitializedParameter()
        else:
            self.scale = {nn}Parameter({torch}ones(()))

    def initialize_parameters(self, inputs, *args, **kwargs):
        if self.has_uninitialized_params():
            with {torch}no_grad():
                dim = inputs[0].shape[-1]
                self.scale.materialize((dim,))
                self.scale.uniform_(-(6.0 / (1 + dim)) ** 0.5, (6.0 / (1 + dim)) ** 0.5)  # Keras's glorot_uniform

    def _scores(self, q, k):
        if self.additive:
            t = {torch}tanh(q.unsqueeze(-2) + k.unsqueeze(-3))
            return (t * self.scale if self.scale is not None else t).sum(dim=-1)
        scores = {torch}matmul(q, k.transpose(-2, -1))
        return scores * self.scale if self.scale is not None else scores

    def forward(self, inputs, mask=None, return_attention_scores=False, use_causal_mask=False):
        q, v = inputs[0], inputs[1]
        k = inputs[2] if len(inputs) > 2 else v
        scores = self._scores(q, k)
        q_mask, v_mask = (mask[0], mask[1]) if mask else (None, None)
        keep = v_mask.bool().unsqueeze(-2) if v_mask is not None else None
        if use_causal_mask:
            causal = {torch}ones(scores.shape[-2], scores.shape[-1], dtype={torch}bool, device=scores.device).tril()
            keep = causal if keep is None else keep & causal
        if keep is not None:
            scores = {torch}where(keep, scores, scores - 1e9)
        weights = {torch}softmax(scores, dim=-1)
        if self.training and self.dropout > 0:
            weights = {F}dropout(weights, self.dropout)
        out = {torch}matmul(weights, v)
        if q_mask is not None:
            out = {torch}where(q_mask.bool().unsqueeze(-1), out, {torch}zeros_like(out))
        return (out, weights) if return_attention_scores else out
'''

HELPERS["KerasAttention"] = _KERAS_ATTENTION
HELPERS["SharedDropout"] = _SHARED_DROPOUT
HELPERS["KerasMultiHeadAttention"] = _KERAS_MHA
HELPERS["LazyLayerNorm"] = _LAZY_LAYER_NORM
