"""Call transforms of ``tf.image.*`` (beside resize, in layer.py) and of a few array ops that need more
than a renamed call: ``tf.eye``, ``tf.linalg.band_part``, ``tf.math.unsorted_segment_sum``.

TensorFlow's images are channels-last, (H, W, C) or a batch (N, H, W, C), and so are the tensors these
translations take and give: flips and rotations act on axes -3 (height) and -2 (width), never on the
channels. Where the translation is more than one torch call, a small function is written out into the
file (``IMAGE_HELPERS``, added to helpers.HELPERS), so the output reads like what a PyTorch engineer
would write and needs nothing of fwport.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import _atom
from fwport.packs.tf2torch import helpers  # noqa: I001 (helpers.HELPERS / DATA_DEPS get this module's helpers)
from fwport.packs.tf2torch.ops import _atom_code, _code, _e, _lit, _spell
from fwport.packs.tf2torch.registry import TRANSFORMS, call_transform

_CONVERT_IMAGE_DTYPE = '''

def convert_image_dtype(image, dtype, saturate=False):
    """TensorFlow's convert_image_dtype: integer images span [0, MAX] of their dtype, floating ones [0, 1].
    int -> float multiplies by 1 / MAX; float -> int multiplies by MAX + 0.5 and truncates (clamped first
    with saturate=True); int -> int shifts by the ratio of the ranges; float -> float only casts."""
    if image.dtype == dtype:
        return image
    if image.is_floating_point():
        if dtype.is_floating_point:
            return image.to(dtype)
        info = {torch}iinfo(dtype)
        scaled = image * (info.max + 0.5)
        if saturate:
            scaled = scaled.clamp(info.min, info.max)
        return scaled.to(dtype)
    if dtype.is_floating_point:
        return image.to(dtype) * (1.0 / {torch}iinfo(image.dtype).max)
    scale_in, scale_out = {torch}iinfo(image.dtype).max + 1, {torch}iinfo(dtype).max + 1
    if scale_in > scale_out:
        return (image // (scale_in // scale_out)).to(dtype)
    return image.to(dtype) * (scale_out // scale_in)
'''

_RANDOM_FLIP = '''

def random_flip(image, dim, generator=None):
    """TensorFlow's random_flip_left_right (dim -2) / random_flip_up_down (dim -3): flipped with probability 1/2,
    each image of a batch (N, H, W, C) on its own (drawn from generator, else torch's global one)."""
    shape = (image.shape[0], 1, 1, 1) if image.dim() == 4 else ()
    device = image.device if generator is None else generator.device
    flip = {torch}rand(shape, device=device, generator=generator).to(image.device) < 0.5
    return {torch}where(flip, image.flip(dim), image)
'''

_RANDOM_CROP = '''

def random_crop(value, size, generator=None):
    """TensorFlow's random_crop: the slice of the given size (one entry per axis of value) at an offset drawn
    uniformly on each axis (from generator, else torch's global one)."""
    offsets = [int({torch}randint(0, n - s + 1, (), generator=generator)) for n, s in zip(value.shape, size)]
    return value[tuple(slice(o, o + s) for o, s in zip(offsets, size))]
'''

_PAD_TO_BOUNDING_BOX = '''

def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """TensorFlow's pad_to_bounding_box: zeros above and left of a channels-last image (or batch) by the offsets,
    then below and right up to the target size."""
    height, width = image.shape[-3], image.shape[-2]
    return {F}pad(image, (0, 0, offset_width, target_width - offset_width - width,
                          offset_height, target_height - offset_height - height))
'''

_CENTRAL_CROP = '''

def central_crop(image, central_fraction):
    """TensorFlow's central_crop: the central part of a channels-last image (or batch), central_fraction of its
    height and width, the border removed on each side rounded down as TensorFlow computes it."""
    if central_fraction == 1.0:
        return image
    height, width = image.shape[-3], image.shape[-2]
    top = int((height - height * central_fraction) / 2)
    left = int((width - width * central_fraction) / 2)
    return image[..., top:height - top, left:width - left, :]
'''

_UNSORTED_SEGMENT_SUM = '''

def unsorted_segment_sum(data, segment_ids, num_segments):
    """TensorFlow's unsorted_segment_sum: out[i] is the sum of the data rows whose segment id is i (zeros where
    none is); segment_ids index the leading axes of data, and negative ids are dropped."""
    ids = segment_ids.reshape(-1)
    rows = data.reshape(ids.shape[0], *data.shape[segment_ids.dim():])
    keep = ids >= 0
    out = rows.new_zeros((int(num_segments), *rows.shape[1:]))
    return out.index_add(0, ids[keep].long(), rows[keep])
'''

_WINDOW_ARGS = '''

def _nhwc_window_args(x, window, strides, padding, dilations):
    """TensorFlow's window arguments as torch takes them: strides / dilations / ksize given as one int, two
    or four (N, H, W, C) become (H, W) pairs, and padding="SAME" (the odd pixel after), "VALID" or an explicit
    [[0, 0], [top, bottom], [left, right], [0, 0]] becomes the pads of x (N, C, H, W) for F.pad."""
    def pair(v):
        v = [v] if isinstance(v, int) else list(v)
        return v * 2 if len(v) == 1 else v[1:3] if len(v) == 4 else v
    window, strides, dilations = pair(window), pair(strides), pair(dilations)
    if padding == "VALID":
        pads = [0, 0, 0, 0]
    elif padding == "SAME":
        pads = []
        for n, k, s, d in zip(x.shape[:1:-1], window[::-1], strides[::-1], dilations[::-1]):
            total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
            pads += [total // 2, total - total // 2]
    else:
        (top, bottom), (left, right) = padding[1], padding[2]
        pads = [left, right, top, bottom]
    return window, strides, dilations, pads
'''

_CONV2D_NHWC = '''

def conv2d_nhwc(x, filters, strides, padding, dilations=1):
    """TensorFlow's nn.conv2d on channels-last tensors: x (N, H, W, C_in), filters (kh, kw, C_in / groups,
    C_out), the output (N, H', W', C_out); TensorFlow's padding (see _nhwc_window_args)."""
    x, filters = x.permute(0, 3, 1, 2), filters.permute(3, 2, 0, 1)
    _, strides, dilations, pads = _nhwc_window_args(x, filters.shape[2:], strides, padding, dilations)
    out = {F}conv2d({F}pad(x, pads), filters, stride=strides, dilation=dilations, groups=x.shape[1] // filters.shape[1])
    return out.permute(0, 2, 3, 1)
'''

_MAX_POOL2D_NHWC = '''

def max_pool2d_nhwc(x, ksize, strides, padding):
    """TensorFlow's nn.max_pool2d on channels-last tensors (N, H, W, C); "SAME" pads with -inf, which no
    window ever takes (see _nhwc_window_args)."""
    x = x.permute(0, 3, 1, 2)
    ksize, strides, _, pads = _nhwc_window_args(x, ksize, strides, padding, 1)
    return {F}max_pool2d({F}pad(x, pads, value=float("-inf")), ksize, strides).permute(0, 2, 3, 1)
'''

_AVG_POOL2D_NHWC = '''

def avg_pool2d_nhwc(x, ksize, strides, padding):
    """TensorFlow's nn.avg_pool2d on channels-last tensors (N, H, W, C); "SAME" averages each window over its
    pixels inside the image only (the padding is not counted), hence the division by the pooled mask of ones."""
    x = x.permute(0, 3, 1, 2)
    ksize, strides, _, pads = _nhwc_window_args(x, ksize, strides, padding, 1)
    total = {F}avg_pool2d({F}pad(x, pads), ksize, strides)
    inside = {F}avg_pool2d({F}pad(x.new_ones((1, 1, *x.shape[2:])), pads), ksize, strides)
    return (total / inside).permute(0, 2, 3, 1)
'''

_EXTRACT_PATCHES = '''

def extract_patches(images, sizes, strides, rates, padding):
    """TensorFlow's image.extract_patches on channels-last images (N, H, W, C): (N, rows, cols, ph * pw * C),
    each patch flattened in (row, column, channel) order, as a ViT's patch embedding reads it; "SAME" pads as
    TensorFlow does (see _nhwc_window_args)."""
    x = images.permute(0, 3, 1, 2)
    (ph, pw), (sh, sw), (rh, rw), pads = _nhwc_window_args(x, sizes, strides, padding, rates)
    x = {F}pad(x, pads)
    n, c, h, w = x.shape
    rows, cols = (h - (ph - 1) * rh - 1) // sh + 1, (w - (pw - 1) * rw - 1) // sw + 1
    patches = {F}unfold(x, (ph, pw), dilation=(rh, rw), stride=(sh, sw))  # (N, C * ph * pw, rows * cols)
    return patches.view(n, c, ph * pw, rows, cols).permute(0, 3, 4, 2, 1).reshape(n, rows, cols, ph * pw * c)
'''

_PSNR = '''

def psnr(a, b, max_val):
    """TensorFlow's image.psnr: the peak signal-to-noise ratio of each image pair (over the last three axes), in
    float32, integer images and max_val scaled to [0, 1] as convert_image_dtype does."""
    max_val = convert_image_dtype({torch}as_tensor(max_val, dtype=a.dtype), {torch}float32)
    a, b = convert_image_dtype(a, {torch}float32), convert_image_dtype(b, {torch}float32)
    mse = (a - b).square().mean(dim=(-3, -2, -1))
    ten = {torch}tensor(10.0)
    return 20 * {torch}log(max_val) / {torch}log(ten) - (10 / {torch}log(ten)) * {torch}log(mse)
'''

_CROP_AND_RESIZE = '''

def crop_and_resize(image, boxes, box_indices, crop_size, method="bilinear", extrapolation_value=0.0):
    """TensorFlow's image.crop_and_resize on channels-last images (N, H, W, C): box i, (y1, x1, y2, x2) in
    coordinates normalised to [0, 1] (y1 > y2 flips the crop), of image box_indices[i], sampled at crop_size
    (h, w) points from y1 * (H - 1) to y2 * (H - 1) (one point: the middle), bilinearly or at the nearest pixel;
    a point outside the image is extrapolation_value. A float32 (boxes, h, w, C) batch, as TensorFlow gives."""
    image, boxes = image.float(), {torch}as_tensor(boxes, dtype={torch}float32, device=image.device)
    height, width = image.shape[1], image.shape[2]
    crop_h, crop_w = (int(v) for v in crop_size)
    index = {torch}as_tensor(box_indices, device=image.device).long()

    def points(lo, hi, size, n):
        if n == 1:
            return (0.5 * (lo + hi) * (size - 1))[:, None]
        scale = (hi - lo) * (size - 1) / (n - 1)
        steps = {torch}arange(n, device=image.device, dtype={torch}float32)
        return (lo * (size - 1))[:, None] + steps * scale[:, None]

    ys, xs = points(boxes[:, 0], boxes[:, 2], height, crop_h), points(boxes[:, 1], boxes[:, 3], width, crop_w)
    inside = ((ys >= 0) & (ys <= height - 1))[:, :, None, None] & ((xs >= 0) & (xs <= width - 1))[:, None, :, None]
    batch = index[:, None, None]
    if method == "nearest":
        y, x = {torch}floor(ys + 0.5).clamp(0, height - 1).long(), {torch}floor(xs + 0.5).clamp(0, width - 1).long()
        out = image[batch, y[:, :, None], x[:, None, :]]
    else:
        top, left = {torch}floor(ys), {torch}floor(xs)
        y_lerp, x_lerp = (ys - top)[:, :, None, None], (xs - left)[:, None, :, None]
        top, bottom = top.clamp(0, height - 1).long(), {torch}ceil(ys).clamp(0, height - 1).long()
        left, right = left.clamp(0, width - 1).long(), {torch}ceil(xs).clamp(0, width - 1).long()

        def row(y):
            a, b = image[batch, y[:, :, None], left[:, None, :]], image[batch, y[:, :, None], right[:, None, :]]
            return a + (b - a) * x_lerp

        upper, lower = row(top), row(bottom)
        out = upper + (lower - upper) * y_lerp
    return {torch}where(inside, out, {torch}as_tensor(float(extrapolation_value), device=image.device))
'''

_IMAGE_GRADIENTS = '''

def image_gradients(image):
    """TensorFlow's image.image_gradients of a batch (N, H, W, C): (dy, dx), each pixel's difference to the next
    one down (dy) and to the right (dx), the input's shape: 0 in the last row of dy and the last column of dx."""
    if image.dim() != 4:
        raise ValueError(f"image_gradients expects a 4D tensor (batch, height, width, depth), not {tuple(image.shape)}")
    dy = {F}pad(image[:, 1:] - image[:, :-1], (0, 0, 0, 0, 0, 1))
    dx = {F}pad(image[:, :, 1:] - image[:, :, :-1], (0, 0, 0, 1))
    return dy, dx
'''

_SSIM = '''

def ssim(img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03, return_index_map=False):
    """TensorFlow's image.ssim of channels-last images (..., H, W, C), in float32 (integer images and max_val
    scaled to [0, 1] as convert_image_dtype does): per channel, the means, variances and covariance under a
    filter_size x filter_size Gaussian window of width filter_sigma (weights summing to 1, the window's valid
    positions only), luminance (c1 = (k1 * max_val) ** 2) times contrast-structure (c2 = (k2 * max_val) ** 2)
    averaged over the positions and the channels: one value per image (the map over the positions, averaged
    over the channels, with return_index_map)."""
    max_val = convert_image_dtype({torch}as_tensor(max_val, dtype=img1.dtype), {torch}float32)
    img1, img2 = {torch}broadcast_tensors(convert_image_dtype(img1, {torch}float32),
                                          convert_image_dtype(img2, {torch}float32))
    coords = {torch}arange(filter_size, dtype={torch}float32, device=img1.device) - (filter_size - 1) / 2.0
    g = coords.square() * (-0.5 / {torch}tensor(filter_sigma, dtype={torch}float32).square())
    window = {torch}softmax((g[None, :] + g[:, None]).reshape(-1), dim=0).reshape(1, 1, filter_size, filter_size)
    channels, lead = img1.shape[-1], img1.shape[:-3]
    window = window.expand(channels, 1, filter_size, filter_size)

    def local_mean(x):  # the Gaussian window over each channel, valid positions only
        y = {F}conv2d(x.reshape(-1, *x.shape[-3:]).movedim(-1, 1), window, groups=channels).movedim(1, -1)
        return y.reshape(*lead, *y.shape[1:])

    c1, c2 = (k1 * max_val) ** 2, (k2 * max_val) ** 2
    mean1, mean2 = local_mean(img1), local_mean(img2)
    num0 = mean1 * mean2 * 2.0
    den0 = mean1.square() + mean2.square()
    luminance = (num0 + c1) / (den0 + c1)
    cs = (local_mean(img1 * img2) * 2.0 - num0 + c2) / (local_mean(img1.square() + img2.square()) - den0 + c2)
    index_map = luminance * cs
    if return_index_map:
        return index_map.mean(dim=-1)
    return index_map.mean(dim=(-3, -2)).mean(dim=-1)
'''

_RGB_TO_GRAYSCALE = '''

def rgb_to_grayscale(images):
    """TensorFlow's image.rgb_to_grayscale: 0.2989 R + 0.5870 G + 0.1140 B over the last axis, kept as an axis
    of size 1; computed in float32 (integer images scaled to [0, 1] first) and converted back to the images'
    dtype as convert_image_dtype does."""
    flt = convert_image_dtype(images, {torch}float32)
    gray = (flt @ {torch}tensor([0.2989, 0.5870, 0.1140])).unsqueeze(-1)
    return convert_image_dtype(gray, images.dtype)
'''

_ADJUST_BRIGHTNESS = '''

def adjust_brightness(image, delta):
    """TensorFlow's image.adjust_brightness: delta added to every value, in float32 for an integer image
    (scaled to [0, 1] by convert_image_dtype, and converted back saturating); a float image is not clipped."""
    flt = image if image.dtype in ({torch}float16, {torch}float32) else convert_image_dtype(image, {torch}float32)
    return convert_image_dtype(flt + {torch}as_tensor(delta, dtype=flt.dtype), image.dtype, saturate=True)
'''

_ADJUST_CONTRAST = '''

def adjust_contrast(images, contrast_factor):
    """TensorFlow's image.adjust_contrast on channels-last images (..., H, W, C): each channel's mean over the
    height and width of its image, (x - mean) * contrast_factor + mean; in float32 for integer images (scaled
    to [0, 1] by convert_image_dtype, and converted back saturating)."""
    flt = images if images.dtype in ({torch}float16, {torch}float32) else convert_image_dtype(images, {torch}float32)
    mean = flt.float().mean(dim=(-3, -2), keepdim=True)
    adjusted = ((flt.float() - mean) * {torch}as_tensor(contrast_factor, dtype={torch}float32) + mean).to(flt.dtype)
    return convert_image_dtype(adjusted, images.dtype, saturate=True)
'''

_ADJUST_SATURATION = '''

def adjust_saturation(image, saturation_factor):
    """TensorFlow's image.adjust_saturation on RGB channels-last images (..., 3): to hue / saturation / value as
    TensorFlow's kernel computes them, the saturation times saturation_factor clipped to [0, 1], and back; in
    float32 (an integer image scaled to [0, 1] by convert_image_dtype, and converted back)."""
    flt = image if image.dtype == {torch}float32 else convert_image_dtype(image, {torch}float32)
    r, g, b = flt.unbind(-1)
    v = flt.amax(dim=-1)
    spread = v - flt.amin(dim=-1)
    s = {torch}where(v > 0, spread / {torch}where(v > 0, v, 1.0), 0.0)
    norm = 1.0 / (6.0 * {torch}where(spread > 0, spread, 1.0))
    h = {torch}where(r == v, norm * (g - b), {torch}where(g == v, norm * (b - r) + 2.0 / 6.0, norm * (r - g) + 4.0 / 6.0))
    h = {torch}where(spread > 0, h, 0.0)
    h = {torch}where(h < 0, h + 1, h)
    s = (s * {torch}as_tensor(saturation_factor, dtype={torch}float32)).clamp(0.0, 1.0)
    c = s * v
    m = v - c
    dh = h * 6
    fmodu = {torch}remainder(dh, 2.0)
    fmodu = {torch}where(fmodu <= 0, fmodu + 2.0, fmodu)
    x = c * (1 - (fmodu - 1).abs())
    zero = {torch}zeros_like(c)
    choices = {torch}stack([{torch}stack(t, dim=-1) for t in ((c, x, zero), (x, c, zero), (zero, c, x), (zero, x, c),
                                                       (x, zero, c), (c, zero, x), (zero, zero, zero))], dim=-2)
    sector = dh.long().clamp(0, 6)[..., None, None].expand(*dh.shape, 1, 3)
    rgb = choices.gather(-2, sector).squeeze(-2) + m[..., None]
    return convert_image_dtype(rgb, image.dtype)
'''

_ADJUST_HUE = '''

def adjust_hue(image, delta):
    """TensorFlow's image.adjust_hue on RGB channels-last images (..., 3): the hue (in sixths of the circle, as
    TensorFlow's kernel keeps it) turned by delta (in [-1, 1]) and wrapped, the smallest and largest channel
    kept; in float32 (an integer image scaled to [0, 1] by convert_image_dtype, and converted back)."""
    delta = {torch}as_tensor(delta, dtype={torch}float32)
    if not -1 <= float(delta) <= 1:
        raise ValueError("delta must be in the interval [-1, 1]")
    flt = image if image.dtype == {torch}float32 else convert_image_dtype(image, {torch}float32)
    r, g, b = flt.unbind(-1)
    v_max, v_min = flt.amax(dim=-1), flt.amin(dim=-1)
    spread = v_max - v_min
    norm = 1.0 / {torch}where(spread > 0, spread, 1.0)
    h = {torch}where(r == v_max, norm * (g - b), {torch}where(g == v_max, norm * (b - r) + 2.0, norm * (r - g) + 4.0))
    h = {torch}where(spread > 0, {torch}where(h < 0, h + 6.0, h), 0.0)
    h = h + delta * 6.0
    h = {torch}where(h < 0, h + 6.0, h)
    h = {torch}where(h >= 6.0, h - 6.0, h)
    sector = h.long().clamp(0, 5)
    ratio = h - sector
    ratio = {torch}where(sector % 2 == 1, 1 - ratio, ratio)
    v_mid = v_min + ratio * spread
    choices = {torch}stack([{torch}stack(t, dim=-1) for t in ((v_max, v_mid, v_min), (v_mid, v_max, v_min),
                                                       (v_min, v_max, v_mid), (v_min, v_mid, v_max),
                                                       (v_mid, v_min, v_max), (v_max, v_min, v_mid))], dim=-2)
    rgb = choices.gather(-2, sector[..., None, None].expand(*sector.shape, 1, 3)).squeeze(-2)
    return convert_image_dtype(rgb, image.dtype)
'''

_RANDOM_BRIGHTNESS = '''

def random_brightness(image, max_delta, generator=None):
    """TensorFlow's image.random_brightness: adjust_brightness by one delta drawn uniformly from
    [-max_delta, max_delta) for the whole image or batch. The draw is torch's (generator=, else torch's global
    one), not TensorFlow's stream."""
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    delta = {torch}empty(()).uniform_(-max_delta, max_delta, generator=generator)
    return adjust_brightness(image, delta)
'''

_RANDOM_CONTRAST = '''

def random_contrast(image, lower, upper, generator=None):
    """TensorFlow's image.random_contrast: adjust_contrast by one factor drawn uniformly from [lower, upper) for
    the whole image or batch. The draw is torch's (generator=, else torch's global one), not TensorFlow's stream."""
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    factor = {torch}empty(()).uniform_(lower, upper, generator=generator)
    return adjust_contrast(image, factor)
'''

_RANDOM_SATURATION = '''

def random_saturation(image, lower, upper, generator=None):
    """TensorFlow's image.random_saturation: adjust_saturation by one factor drawn uniformly from [lower, upper)
    for the whole image or batch. The draw is torch's (generator=, else torch's global one), not TensorFlow's
    stream."""
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    factor = {torch}empty(()).uniform_(lower, upper, generator=generator)
    return adjust_saturation(image, factor)
'''

_RANDOM_HUE = '''

def random_hue(image, max_delta, generator=None):
    """TensorFlow's image.random_hue: adjust_hue by one delta drawn uniformly from [-max_delta, max_delta)
    (max_delta in [0, 0.5]) for the whole image or batch. The draw is torch's (generator=, else torch's global
    one), not TensorFlow's stream."""
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    delta = {torch}empty(()).uniform_(-max_delta, max_delta, generator=generator)
    return adjust_hue(image, delta)
'''

_STATELESS_GENERATOR = '''

def stateless_generator(seed):
    """TensorFlow's stateless seed, a pair of integers: a torch.Generator seeded afresh from it at each call, so
    the same seed gives the same draws every time, as TensorFlow's stateless ops do. The values differ from
    TensorFlow's (another generator)."""
    first, second = (int(s) for s in seed)
    return {torch}Generator().manual_seed(((first & 0xFFFFFFFF) << 32) | (second & 0xFFFFFFFF))
'''

_RESIZE_SEPARABLE = '''

def _resize_separable(images, size, method):
    """TensorFlow's bicubic and area resizes (tf.image.resize, antialias=False) on channels-last images, one
    (H, W, C) or a batch (N, H, W, C), as a weight matrix per axis, in float32 (the result's dtype whatever the
    input's), the scale in_size / out_size in float32 as TensorFlow computes it.
    bicubic: Keys' cubic kernel with a = -0.5 (torch's bicubic has -0.75) at half-pixel centres, the fraction
    rounded to TensorFlow's table of 1024 steps, the taps outside the image dropped and the others renormalised.
    area: each output pixel the average of the input pixels its box covers, weighted by the part covered."""
    x = {torch}as_tensor(images)
    one = x.dim() == 3
    x = (x[None] if one else x).float()

    def weights(n_in, n_out):
        scale = {torch}tensor(float(n_in)) / {torch}tensor(float(n_out))
        out = {torch}arange(n_out, dtype={torch}float32)
        if method == "bicubic":
            loc = (out + 0.5) * scale - 0.5
            start = {torch}floor(loc)
            step = {torch}round((loc - start) * 1024).double() / 1024
            a = -0.5

            def near(t):
                return ((a + 2) * t - (a + 3)) * t * t + 1

            def far(t):
                return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

            w = {torch}stack([far(step + 1), near(step), near(1 - step), far(2 - step)], dim=1).float()
            index = start.long()[:, None] + {torch}arange(-1, 3)
            w = {torch}where((index >= 0) & (index < n_in), w, 0.0)
            w = w * (1.0 / w.sum(dim=1, keepdim=True))
        else:
            lo, hi = (out * scale)[:, None], ((out + 1) * scale)[:, None]
            start, end = {torch}floor(lo).long(), {torch}ceil(hi).long()
            index = start + {torch}arange(int((end - start).max()))
            i = index.float()
            w = {torch}where(i < lo, {torch}where(i + 1 > hi, scale, i + 1 - lo), {torch}where(i + 1 > hi, hi - i, 1.0))
            w = {torch}where(index < end, w, 0.0) / scale
        matrix = {torch}zeros(n_out, n_in)
        rows = {torch}arange(n_out)[:, None].expand_as(index)
        return matrix.index_put_((rows, index.clamp(0, n_in - 1)), w, accumulate=True)

    height, width = (int(s) for s in size)
    y = {torch}einsum("oh,nhwc->nowc", weights(x.shape[1], height).to(x.device), x)
    y = {torch}einsum("pw,nowc->nopc", weights(x.shape[2], width).to(x.device), y)
    return y[0] if one else y
'''

_RESIZE_BICUBIC = '''

def resize_bicubic(images, size):
    """tf.image.resize(images, size, method="bicubic"): TensorFlow's kernel (Keys, a = -0.5), see _resize_separable."""
    return _resize_separable(images, size, "bicubic")
'''

_RESIZE_AREA = '''

def resize_area(images, size):
    """tf.image.resize(images, size, method="area"): the area-weighted average, see _resize_separable."""
    return _resize_separable(images, size, "area")
'''


_RESIZE_V1 = '''

def _resize_v1(images, size, method, align_corners=False, half_pixel_centers=False):
    """tf.compat.v1.image.resize_bilinear / resize_bicubic / resize_nearest_neighbor on a batch of channels-last
    images (N, H, W, C) (a list of (H, W, C) images is stacked), sampled as TensorFlow 1 samples them: the scale
    in_size / out_size in float32 ((in_size - 1) / (out_size - 1) with align_corners=True), output pixel i reading the
    input at i * scale (the default, which no torch interpolate mode samples at), or at (i + 0.5) * scale - 0.5 with
    half_pixel_centers=True. bilinear: the two neighbours, clamped to the image; bicubic: Keys' kernel with
    a = -0.75 read from a table of 1024 steps, the four taps clamped to the image (with half_pixel_centers: a = -0.5,
    the taps outside dropped and the others renormalised); both give float32. nearest keeps the dtype: the pixel at
    floor(i * scale) (rounded with align_corners; (i + 0.5) * scale with half_pixel_centers), clamped."""
    if isinstance(images, (list, tuple)):
        x = {torch}stack([{torch}as_tensor(i) for i in images])
    else:
        x = {torch}as_tensor(images)
    if align_corners and half_pixel_centers:
        raise ValueError("If half_pixel_centers is True, align_corners must be False.")

    def scale_of(n_in, n_out):
        if align_corners and n_out > 1:
            return {torch}tensor(float(n_in - 1)) / {torch}tensor(float(n_out - 1))
        return {torch}tensor(float(n_in)) / {torch}tensor(float(n_out))

    def indices(n_in, n_out):
        loc = {torch}arange(n_out, dtype={torch}float32) + (0.5 if half_pixel_centers else 0.0)
        loc = loc * scale_of(n_in, n_out)
        return ({torch}floor(loc + 0.5) if align_corners else {torch}floor(loc)).long().clamp(0, n_in - 1)

    def weights(n_in, n_out):
        loc = {torch}arange(n_out, dtype={torch}float32)
        loc = (loc + 0.5) * scale_of(n_in, n_out) - 0.5 if half_pixel_centers else loc * scale_of(n_in, n_out)
        start = {torch}floor(loc)
        if method == "bilinear":
            frac = (loc - start)[:, None]
            w = {torch}cat([1 - frac, frac], dim=1)
            index = start.long()[:, None] + {torch}arange(2)
        else:
            step = {torch}round((loc - start) * 1024).double() / 1024
            a = -0.5 if half_pixel_centers else -0.75

            def near(t):
                return ((a + 2) * t - (a + 3)) * t * t + 1

            def far(t):
                return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

            w = {torch}stack([far(step + 1), near(step), near(1 - step), far(2 - step)], dim=1).float()
            index = start.long()[:, None] + {torch}arange(-1, 3)
            if half_pixel_centers:
                w = {torch}where((index >= 0) & (index < n_in), w, 0.0)
                w = w * (1.0 / w.sum(dim=1, keepdim=True))
        matrix = {torch}zeros(n_out, n_in)
        rows = {torch}arange(n_out)[:, None].expand_as(index)
        return matrix.index_put_((rows, index.clamp(0, n_in - 1)), w, accumulate=True)

    height, width = (int(s) for s in size)
    if method == "nearest":
        return x[:, indices(x.shape[1], height).to(x.device)][:, :, indices(x.shape[2], width).to(x.device)]
    x = x.float()
    y = {torch}einsum("oh,nhwc->nowc", weights(x.shape[1], height).to(x.device), x)
    return {torch}einsum("pw,nowc->nopc", weights(x.shape[2], width).to(x.device), y)
'''

_RESIZE_BILINEAR_V1 = '''

def resize_bilinear_v1(images, size, align_corners=False, half_pixel_centers=False):
    """tf.compat.v1.image.resize_bilinear, see _resize_v1."""
    return _resize_v1(images, size, "bilinear", align_corners, half_pixel_centers)
'''

_RESIZE_BICUBIC_V1 = '''

def resize_bicubic_v1(images, size, align_corners=False, half_pixel_centers=False):
    """tf.compat.v1.image.resize_bicubic, see _resize_v1."""
    return _resize_v1(images, size, "bicubic", align_corners, half_pixel_centers)
'''

_RESIZE_NEAREST_V1 = '''

def resize_nearest_v1(images, size, align_corners=False, half_pixel_centers=False):
    """tf.compat.v1.image.resize_nearest_neighbor, see _resize_v1."""
    return _resize_v1(images, size, "nearest", align_corners, half_pixel_centers)
'''


_STATELESS_SPLIT = '''

def stateless_split(seed, num=2):
    """tf.random.split / tf.random.experimental.stateless_split: num new seeds, a (num, 2) tensor of the seed's
    dtype (int32 for a seed of Python ints, as TensorFlow converts it), drawn over that dtype's whole range from a
    torch.Generator seeded from the seed pair, so one seed gives the same new seeds every time, as in TensorFlow;
    which ones differs from TensorFlow's (another generator)."""
    seed = {torch}as_tensor(seed) if hasattr(seed, "dtype") else {torch}tensor(seed, dtype={torch}int32)
    info = {torch}iinfo(seed.dtype)
    return {torch}randint(info.min, info.max, (int(num), 2), generator=stateless_generator(seed), dtype=seed.dtype)
'''


_RESIZE_IMAGES_V1 = '''

def resize_images_v1(images, size, method="bilinear", align_corners=False):
    "\"\"tf.compat.v1.image.resize (resize_images): one channels-last image (H, W, C) or a batch (N, H, W, C), sampled
    as TensorFlow 1 does (see _resize_v1, half-pixel centres off); images already of that size are returned as they
    are (their dtype kept, as TensorFlow returns them), other bilinear and bicubic results are float32.\"\"\"
    x = {torch}stack([{torch}as_tensor(i) for i in images]) if isinstance(images, (list, tuple)) else {torch}as_tensor(images)
    if tuple(x.shape[-3:-1]) == tuple(int(s) for s in size):
        return x
    one = x.dim() == 3
    y = _resize_v1(x[None] if one else x, size, method, align_corners)
    return y[0] if one else y
'''


IMAGE_HELPERS = {
    "_resize_separable": _RESIZE_SEPARABLE,
    "resize_bicubic": _RESIZE_BICUBIC,
    "resize_area": _RESIZE_AREA,
    "_resize_v1": _RESIZE_V1,
    "resize_bilinear_v1": _RESIZE_BILINEAR_V1,
    "resize_bicubic_v1": _RESIZE_BICUBIC_V1,
    "resize_nearest_v1": _RESIZE_NEAREST_V1,
    "adjust_brightness": _ADJUST_BRIGHTNESS,
    "adjust_contrast": _ADJUST_CONTRAST,
    "adjust_saturation": _ADJUST_SATURATION,
    "adjust_hue": _ADJUST_HUE,
    "random_brightness": _RANDOM_BRIGHTNESS,
    "random_contrast": _RANDOM_CONTRAST,
    "random_saturation": _RANDOM_SATURATION,
    "random_hue": _RANDOM_HUE,
    "stateless_generator": _STATELESS_GENERATOR,
    "stateless_split": _STATELESS_SPLIT,
    "resize_images_v1": _RESIZE_IMAGES_V1,
    "extract_patches": _EXTRACT_PATCHES,
    "psnr": _PSNR,
    "_nhwc_window_args": _WINDOW_ARGS,
    "conv2d_nhwc": _CONV2D_NHWC,
    "max_pool2d_nhwc": _MAX_POOL2D_NHWC,
    "avg_pool2d_nhwc": _AVG_POOL2D_NHWC,
    "convert_image_dtype": _CONVERT_IMAGE_DTYPE,
    "random_flip": _RANDOM_FLIP,
    "random_crop": _RANDOM_CROP,
    "pad_to_bounding_box": _PAD_TO_BOUNDING_BOX,
    "central_crop": _CENTRAL_CROP,
    "unsorted_segment_sum": _UNSORTED_SEGMENT_SUM,
    "crop_and_resize": _CROP_AND_RESIZE,
    "image_gradients": _IMAGE_GRADIENTS,
    "ssim": _SSIM,
    "rgb_to_grayscale": _RGB_TO_GRAYSCALE,
}
helpers.HELPERS.update(IMAGE_HELPERS)
helpers.DATA_DEPS.update({"conv2d_nhwc": ("_nhwc_window_args",), "max_pool2d_nhwc": ("_nhwc_window_args",),
                          "avg_pool2d_nhwc": ("_nhwc_window_args",),
                          "extract_patches": ("_nhwc_window_args",), "psnr": ("convert_image_dtype",),
                          "ssim": ("convert_image_dtype",), "rgb_to_grayscale": ("convert_image_dtype",),
                          "adjust_brightness": ("convert_image_dtype",), "adjust_contrast": ("convert_image_dtype",),
                          "adjust_saturation": ("convert_image_dtype",), "adjust_hue": ("convert_image_dtype",),
                          "random_brightness": ("adjust_brightness",), "random_contrast": ("adjust_contrast",),
                          "random_saturation": ("adjust_saturation",), "random_hue": ("adjust_hue",),
                          "resize_bicubic": ("_resize_separable",), "resize_area": ("_resize_separable",),
                          "resize_bilinear_v1": ("_resize_v1",), "resize_bicubic_v1": ("_resize_v1",),
                          "resize_nearest_v1": ("_resize_v1",), "stateless_split": ("stateless_generator",),
                          "resize_images_v1": ("_resize_v1",)})


@call_transform("image-flip")
def image_flip(m, ctx):
    """``tf.image.flip_left_right(image)`` → ``torch.flip(image, dims=[-2])`` (the width of a channels-last
    image or batch); ``flip_up_down`` → ``dims=[-3]`` (the height). The axis comes from the rule's options."""
    image = m.kwargs.get("image")
    return None if image is None else _e(f"{_spell(ctx, 'torch.flip')}({_code(image)}, dims=[{m.rule.emit['options']['dim']}])")


@call_transform("image-random-flip")
def image_random_flip(m, ctx):
    """``tf.image.random_flip_left_right(image)`` → the ``random_flip(image, -2)`` helper (each image of a
    batch flipped or not on its own, as TensorFlow does); ``random_flip_up_down`` → ``random_flip(image, -3)``;
    a seed (made a torch.Generator by the seed's value transform) → the helper's third argument."""
    image = m.kwargs.get("image")
    if image is None:
        return None
    generator = m.kwargs.get("generator")  # an op-level seed / a stateless seed made a generator (values.py)
    extra = "" if generator is None else f", {_code(generator)}"
    return _e(f"{helpers.use(ctx, 'random_flip')}({_code(image)}, {m.rule.emit['options']['dim']}{extra})")


@call_transform("image-rot90")
def image_rot90(m, ctx):
    """``tf.image.rot90(image, k)`` → ``torch.rot90(image, k, dims=(-3, -2))``: counter-clockwise from the
    height axis toward the width axis, TensorFlow's direction (numpy's rot90 on (H, W))."""
    image = m.kwargs.get("image")
    if image is None:
        return None
    k = m.kwargs.get("k")
    k_text = "" if k is None else f"{_code(k)}, "
    return _e(f"{_spell(ctx, 'torch.rot90')}({_code(image)}, {k_text}dims=(-3, -2))")


#: expressions written as they are in a slice bound and as a term of ``a + b`` (anything else is parenthesised)
_BOUND_TERMS = (cst.Name, cst.Integer, cst.Attribute, cst.Subscript, cst.Call, cst.BinaryOperation)


@call_transform("image-crop-to-bounding-box")
def image_crop_to_bounding_box(m, ctx):
    """``tf.image.crop_to_bounding_box(image, oh, ow, th, tw)`` → ``image[..., oh:oh + th, ow:ow + tw, :]``."""
    image = m.kwargs.get("image")
    parts = [m.kwargs.get(n) for n in ("offset_height", "offset_width", "target_height", "target_width")]
    if image is None or any(p is None for p in parts):
        return None
    oh, ow, th, tw = (_code(p) if isinstance(p, _BOUND_TERMS) else f"({_code(p)})" for p in parts)
    return _e(f"{_atom_code(image)}[..., {oh}:{oh} + {th}, {ow}:{ow} + {tw}, :]")


@call_transform("image-helper")
def image_helper(m, ctx):
    """A ``tf.image`` function whose translation is a helper written out into the file, called with the
    same arguments in the same order (the rule's ``options.helper`` names it, ``options.args`` the order)."""
    options = m.rule.emit["options"]
    names = options["args"]
    required = options.get("required", len(names))
    if any(n not in m.kwargs for n in names[:required]):
        return None
    args, gap = [], False
    for n in names:  # positional while none is left out, keywords after the first one that is
        if n not in m.kwargs:
            gap = True
        else:
            args.append(f"{n}={_code(m.kwargs[n])}" if gap else _code(m.kwargs[n]))
    return _e(f"{helpers.use(ctx, options['helper'])}({', '.join(args)})")


@call_transform("eye")
def eye(m, ctx):
    """``tf.eye(n, m, dtype=...)`` → ``torch.eye(n, m, dtype=...)``; ``batch_shape`` (a stack of identities)
    → ``torch.eye(...).repeat(*batch_shape, 1, 1)`` (a copy per matrix, as TensorFlow gives)."""
    n = m.kwargs.get("n")
    if n is None:
        return None
    cols = m.kwargs.get("m")
    dtype = m.kwargs.get("dtype")
    call = f"{_spell(ctx, 'torch.eye')}({_code(n)}" + (f", {_code(cols)}" if cols is not None else "") + \
        (f", dtype={_code(dtype)}" if dtype is not None else "") + ")"
    batch = m.kwargs.get("batch_shape")
    if batch is not None and _lit(batch) is not None:
        call += f".repeat(*{_code(batch)}, 1, 1)"
    return _e(call)


@call_transform("band-part")
def band_part(m, ctx):
    """``tf.linalg.band_part(x, num_lower, num_upper)``: the band of ``num_lower`` diagonals below and
    ``num_upper`` above the main one, a negative count meaning all of them → ``torch.tril``/``torch.triu``
    (``band_part(x, -1, 0)``, a causal mask, is ``torch.tril(x)``). The counts must be int literals: their
    sign decides the form."""
    x = m.kwargs.get("input")
    lower, upper = _lit(m.kwargs.get("num_lower")), _lit(m.kwargs.get("num_upper"))
    if x is None:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lower, upper)):
        m.fail(ctx, "unsupported-argument", "band_part's num_lower and num_upper must be int literals here (a "
               "negative one means the whole triangle): write torch.tril(torch.triu(x, -num_lower), num_upper) by hand")
        return None
    out = _code(x)
    if lower >= 0:
        out = f"{_spell(ctx, 'torch.triu')}({out}, diagonal={-lower})" if lower else f"{_spell(ctx, 'torch.triu')}({out})"
    if upper >= 0:
        out = f"{_spell(ctx, 'torch.tril')}({out}, diagonal={upper})" if upper else f"{_spell(ctx, 'torch.tril')}({out})"
    return _e(out)


@call_transform("random-gamma")
def random_gamma(m, ctx):
    """``tf.random.gamma(shape, alpha, beta)`` → ``torch.distributions.Gamma(alpha, beta).sample(shape)``: both take
    beta as a rate (the inverse of a scale), and both give ``shape`` followed by the broadcast shape of alpha and
    beta. Not numerically comparable with TensorFlow's draws."""
    shape, alpha = m.kwargs.get("sample_shape"), m.kwargs.get("concentration")
    if shape is None or alpha is None:
        return None
    dtype = m.kwargs.get("dtype")
    d = f", dtype={_code(dtype)}" if dtype is not None else ""
    tensor = _spell(ctx, "torch.as_tensor")
    beta = m.kwargs.get("rate")
    rate = f"{tensor}({_code(beta)}{d})" if beta is not None else f"{tensor}(1.0{d})"
    return _e(f"{_spell(ctx, 'torch.distributions.Gamma')}({tensor}({_code(alpha)}{d}), {rate}).sample({_code(shape)})")


@call_transform("image-resize")
def image_resize(m, ctx):
    """``tf.image.resize``: bilinear and nearest → the ``resize_images`` helper (the rule's target, data.py's
    ``helper`` transform); bicubic → ``resize_bicubic(images, size)`` and area → ``resize_area(images, size)``,
    TensorFlow's kernels written out (the method, a literal, read by the resize-method value transform). bicubic
    with antialias is TensorFlow's scale_and_translate (a kernel widened when shrinking): refused."""
    method = m.extras.pop("resize_kernel", None)
    if method is None:
        return TRANSFORMS.calls["helper"](m, ctx)
    images, size = m.kwargs.get("images"), m.kwargs.get("size")
    if images is None or size is None:
        return None
    antialias = m.kwargs.get("antialias")
    if method == "bicubic" and antialias is not None and _lit(antialias) is not False:
        m.fail(ctx, "unsupported-argument", f"antialias={m.written('antialias')} with method=\"bicubic\": TensorFlow then "
               "resamples with scale_and_translate's Keys kernel, widened when shrinking, which is not translated: "
               "write antialias=False (fwport writes TensorFlow's bicubic kernel for that)")
        return None
    return _e(f"{helpers.use(ctx, 'resize_' + method)}({_code(images)}, {_code(size)})")


#: tf.compat.v1.image.ResizeMethod's values (ints) and names → the _resize_v1 method
_V1_METHODS = {0: "bilinear", 1: "nearest", 2: "bicubic", "bilinear": "bilinear", "nearest": "nearest",
               "bicubic": "bicubic", "BILINEAR": "bilinear", "NEAREST_NEIGHBOR": "nearest", "BICUBIC": "bicubic"}


@call_transform("image-resize-v1")
def image_resize_v1(m, ctx):
    """``tf.compat.v1.image.resize(images, size, method=0, align_corners=False)`` → ``resize_images_v1(images, size[,
    method][, align_corners=...])``: the method a literal (ResizeMethod's int or name, or a string) or
    ``ResizeMethod.BILINEAR / NEAREST_NEIGHBOR / BICUBIC``; area (TensorFlow 1's area resize) or a method fwport
    cannot read is refused."""
    images, size = m.kwargs.get("images"), m.kwargs.get("size")
    if images is None or size is None:
        return None
    args = [_code(images), _code(size)]
    if "method" in m.kwargs:
        written = m.written("method")
        lit = _lit(m.kwargs["method"])
        key = lit if isinstance(lit, (int, str)) and not isinstance(lit, bool) else written.rsplit(".", 1)[-1]
        method = _V1_METHODS.get(key) if "ResizeMethod" in written or key == lit else None
        if method is None:
            m.fail(ctx, "unsupported-argument", f"method={written}: bilinear, nearest and bicubic (a literal or "
                   "ResizeMethod.X) are translated; area, or a method fwport cannot read, is not")
            return None
        if method != "bilinear":
            args.append(f'"{method}"')
    if "align_corners" in m.kwargs:
        args.append(f"align_corners={_code(m.kwargs['align_corners'])}")
    return _e(f"{helpers.use(ctx, 'resize_images_v1')}({', '.join(args)})")
