"""Op rules judged numerically: every case is a small TensorFlow function; fwport translates it here
(this process imports no framework), ONE TensorFlow subprocess runs every original, ONE torch
subprocess runs every translation, and the outputs are compared case by case: values (float32 to
rtol/atol 1e-6, integers and booleans exactly) and dtypes.

The table leans on the traps: tf.argmax's default axis, l2_normalize on tiny vectors, the three
GELU defaults, leaky_relu's 0.2 slope, one_hot's float32, split's "number of parts", transpose's
default perm, matmul flags, the biased variance of moments, int32 inference of literals.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.util import find_spec

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python

TF = "import tensorflow as tf\n"
KOPS = "import keras\nfrom keras import ops\n"

rng = np.random.default_rng(0)


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def i32(high, *shape):
    return rng.integers(0, high, shape).astype(np.int32)


X = f32(3, 4)
X3 = f32(2, 3, 5)
TINY = np.array([[1e-7, 0.0, 0.0], [3.0, -4.0, 0.0]], np.float32)
TIES = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [5.0, 5.0, 5.0, 5.0, 5.0], [0.5, -1.0, 0.5, 2.0, -1.0]], np.float32)
KB = "from tensorflow.keras import backend as K\n"
HALVES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999], np.float32)

# (id, body of `def f(...)` using the source framework, inputs, compare mode)
KL = "from tensorflow.keras import layers\n"
X34B = f32(3, 4)
X34C = f32(3, 4)

CASES = [
    # --- the function forms of Keras's merge layers (issue 8) ---
    ("layers-add", KL, "return layers.add([x, y, z])", [X, X34B, X34C]),
    ("layers-add-list-not-written-out", KL, "xs = [x, y]; return layers.add(xs)", [X, X34B]),
    ("layers-multiply", KL, "return layers.multiply([x, y])", [X, X34B]),
    ("layers-subtract", KL, "return layers.subtract([x, y])", [X, X34B]),
    ("layers-average", KL, "return layers.average([x, y, z])", [X, X34B, X34C]),
    ("layers-maximum", KL, "return layers.maximum([x, y, z])", [X, X34B, X34C]),
    ("layers-minimum-list", KL, "xs = (x, y, z); return layers.minimum(xs)", [X, X34B, X34C]),
    ("layers-concatenate-default-last-axis", KL, "return layers.concatenate([x, y])", [X, X34B]),
    ("layers-concatenate-axis-0", KL, "return layers.concatenate([x, y], axis=0)", [X, X34B]),
    # --- traps ---
    ("argmax-default-axis-0", TF, "return tf.argmax(x)", [X]),
    ("argmin-axis", TF, "return tf.math.argmin(x, axis=-1)", [X]),
    ("argmax-int32", TF, "return tf.argmax(x, 1, output_type=tf.int32), tf.math.argmin(x, output_type=tf.int64)", [X]),
    ("l2-normalize-tiny", TF, "return tf.math.l2_normalize(x, axis=-1)", [TINY]),
    ("l2-normalize-all", TF, "return tf.nn.l2_normalize(x)", [X]),
    ("gelu-exact", TF, "return tf.nn.gelu(x)", [X3]),
    ("gelu-tanh", TF, "return tf.nn.gelu(x, approximate=True)", [X3]),
    ("keras-ops-gelu-default-tanh", KOPS, "return ops.gelu(x)", [X3]),
    ("keras-activations-gelu-exact", KOPS, "return keras.activations.gelu(x)", [X3]),
    ("leaky-relu-default", TF, "return tf.nn.leaky_relu(x)", [X]),
    ("keras-leaky-relu-default", KOPS, "return keras.activations.leaky_relu(x)", [X]),
    ("one-hot-float32", TF, "return tf.one_hot(i, 5)", [i32(5, 6)]),
    ("one-hot-on-off-axis0", TF, "return tf.one_hot(i, 4, on_value=2.0, off_value=-1.0, axis=0)", [i32(4, 3)]),
    ("one-hot-int", TF, "return tf.one_hot(i, 3, dtype=tf.int64)", [i32(3, 2, 2)]),
    ("split-parts", TF, "return tf.split(x, 2, axis=1)", [X]),
    ("split-sizes", TF, "return tf.split(x, [1, 3], axis=1)", [X]),
    # a name bound only to Python ints is a number of parts (torch.chunk, not torch.split's part size)
    ("split-parts-int-name", TF, "n = int(x.shape[1] / 2); return tf.split(x, n, axis=1)", [X]),
    # tf.py_function: a plain call; results made tensors of Tout's dtypes (a list of one for [tf.float32])
    ("py-function", TF, "p = tf.py_function(lambda x, y: (x * 2, y + 1), [x, y], [tf.float32, tf.float32]); "
                        "return p[0], p[1], tf.py_function(lambda u: u.numpy() * 3, [x], tf.float32), "
                        "tf.py_function(lambda u: u - 1, [x], [tf.float32])[0], len(tf.py_function(lambda u: u, [x], [tf.float32]))",
     [f32(2, 3), f32(3)]),
    # tf.numpy_function: func gets numpy arrays (.astype is numpy's, not torch's), results made tensors of Tout
    # (a Tout list of one is refused: test_numpy_function_list_of_one_refused)
    ("numpy-function", TF + "import numpy as np\n",
     "p, q = tf.numpy_function(lambda u, v: (np.clip(u, 0.0, 0.5).astype(np.float32), (v * 2).astype(np.float32)), "
     "[x, y], [tf.float32, tf.float32]); "
     "return p, q, tf.numpy_function(lambda u: np.sort(u, axis=-1).astype(np.float32), [x], tf.float32), "
     "tf.numpy_function(lambda u: u.astype(np.int64), [y], tf.int64)",
     [f32(2, 3), f32(3)]),
    # a floor division is a number (no sequence takes //): parts; 6 // 2 = 3 parts of 2, where torch.split gives 2 of 3
    ("split-parts-floor-division", TF, "return tf.split(x, x.shape[1] // 2, axis=1)", [f32(2, 6)]),
    ("split-sizes-display-of-names", TF, "return tf.split(x, [1, x.shape[1] - 1], axis=1)", [X]),
    ("transpose-default", TF, "return tf.transpose(x)", [X3]),
    ("transpose-perm", TF, "return tf.transpose(x, perm=[0, 2, 1])", [X3]),
    ("matmul", TF, "return tf.matmul(a, b)", [f32(2, 3, 4), f32(2, 4, 5)]),
    ("matmul-transpose-b", TF, "return tf.matmul(a, b, transpose_b=True)", [f32(2, 3, 4), f32(2, 5, 4)]),
    ("matmul-transpose-a", TF, "return tf.matmul(a, b, transpose_a=True)", [f32(4, 3), f32(4, 2)]),
    ("matmul-adjoint-b", TF, "return tf.linalg.matmul(a, b, adjoint_b=True)", [f32(3, 4), f32(2, 4)]),
    ("moments-biased", TF, "return tf.nn.moments(x, axes=[0, 1])", [X3]),
    ("moments-keepdims", TF, "return tf.nn.moments(x, [1], keepdims=True)", [X3]),
    ("clip-by-value", TF, "return tf.clip_by_value(x, -0.5, 0.5)", [X]),
    ("range-int32", TF, "return tf.range(2, 11, 3)", []),
    ("constant-int32", TF, "return tf.constant([[1, 2], [3, 4]])", []),
    ("fill-int32", TF, "return tf.fill([2, 3], 7)", []),
    ("linspace-int-bounds-float64", TF, "return tf.linspace(0, 10, 6)", []),
    ("round-half-even", TF, "return tf.round(x)", [HALVES]),
    ("cast-truncates", TF, "return tf.cast(x * 3, tf.int32)", [X]),
    ("cast-string-dtype", TF, "return tf.cast(x > 0, 'float32')", [X]),
    ("argsort-descending-int32", TF, "return tf.argsort(x, direction='DESCENDING')", [X]),
    ("shape-indexed", TF, "return tf.reshape(x, [tf.shape(x)[0], -1])", [X3]),
    ("shape-whole", TF, "return tf.shape(x)", [X3]),
    # --- tf.image on channels-last images and batches, and array ops written as torch calls or helpers ---
    ("image-flips-rot90", TF, "return tf.image.flip_left_right(x), tf.image.flip_up_down(x), tf.image.rot90(x), "
                              "tf.image.rot90(x, k=3), tf.image.flip_left_right(y), tf.image.rot90(y, 2)",
     [f32(2, 3, 4, 2), f32(5, 4, 3)]),
    ("image-boxes", TF, "return tf.image.crop_to_bounding_box(x, 1, 2, 2, 3), tf.image.pad_to_bounding_box(x, 1, 2, 6, 9), "
                        "tf.image.central_crop(y, 0.5), tf.image.central_crop(x, 0.7), tf.image.central_crop(y, 1.0)",
     [f32(2, 4, 6, 3), f32(10, 8, 3)]),
    ("image-convert-dtype", TF, "return tf.image.convert_image_dtype(x, tf.float32), tf.image.convert_image_dtype(y, tf.uint8), "
                                "tf.image.convert_image_dtype(y * 2.0, tf.uint8, saturate=True), "
                                "tf.image.convert_image_dtype(x, tf.uint8), tf.image.convert_image_dtype(y, tf.float64)",
     [np.array([[0, 1, 127, 128, 254, 255]], np.uint8), np.array([[0.0, 0.25, 0.5, 0.999, 1.0, 0.0039]], np.float32)]),
    ("eye-band-part", TF, "return tf.eye(3), tf.eye(2, 4, dtype=tf.float64), tf.eye(2, batch_shape=[3]), "
                          "tf.linalg.band_part(x, -1, 0), tf.linalg.band_part(x, 0, -1), tf.linalg.band_part(x, 1, 2), "
                          "tf.linalg.band_part(x, 0, 0), tf.linalg.band_part(x, -1, -1)", [f32(2, 5, 5)]),
    ("unsorted-segment-sum", TF, "return tf.math.unsorted_segment_sum(x, i, 4), tf.math.unsorted_segment_sum(y, j, 3)",
     [f32(6, 3), np.array([0, 2, 2, -1, 0, 3], np.int32), f32(2, 3, 2), np.array([[0, 1, 1], [2, 0, -1]], np.int64)]),
    ("nn-conv2d-max-pool2d", TF, "return tf.nn.conv2d(x, y, strides=2, padding='SAME'), tf.nn.conv2d(x, y, 1, 'VALID', dilations=2), "
                                 "tf.nn.conv2d(x, y, [1, 2, 1, 1], [[0, 0], [1, 2], [0, 1], [0, 0]]), tf.nn.conv2d(x, z, 1, 'SAME'), "
                                 "tf.nn.max_pool2d(x, 3, 2, 'SAME'), tf.nn.max_pool2d(x, [2, 3], [1, 2, 2, 1], 'VALID')",
     [f32(2, 9, 8, 4), f32(3, 2, 4, 5), f32(2, 2, 2, 6)]),
    # "SAME" average pooling counts only the pixels inside the image (the window at the border is smaller)
    ("nn-avg-pool2d", TF, "return tf.nn.avg_pool2d(x, 3, 2, 'SAME'), tf.nn.avg_pool2d(x, [2, 3], [1, 2, 2, 1], 'VALID'), "
                          "tf.nn.avg_pool2d(x, ksize=4, strides=4, padding='SAME'), tf.nn.avg_pool2d(x, 2, 1, 'SAME')",
     [f32(2, 9, 8, 4)]),
    ("image-extract-patches-psnr", TF, "return tf.image.extract_patches(x, [1, 2, 3, 1], [1, 2, 3, 1], [1, 1, 1, 1], 'VALID'), "
                                       "tf.image.extract_patches(x, [1, 3, 2, 1], [1, 2, 1, 1], [1, 1, 2, 1], 'SAME'), "
                                       "tf.image.psnr(x, y, max_val=4.0), tf.image.psnr(a, b, 255)",
     [f32(2, 6, 7, 3), f32(2, 6, 7, 3), i32(256, 2, 5, 4, 3).astype(np.uint8), i32(256, 2, 5, 4, 3).astype(np.uint8)]),
    # tf.shape(x) passed whole as a size: torch takes x.shape there and refuses the int tensor
    ("shape-as-a-size", TF, "return tf.zeros(tf.shape(x)) + tf.fill(tf.shape(x), 2.0) + tf.ones(shape=tf.shape(x)), "
                            "tf.reshape(x, tf.shape(x)), tf.broadcast_to(x[:1], tf.shape(x))", [X3]),
    ("softmax-default-axis", TF, "return tf.nn.softmax(x)", [X3]),
    # --- reductions ---
    ("reduce-mean-axes-keepdims", TF, "return tf.reduce_mean(x, axis=[0, 2], keepdims=True)", [X3]),
    ("reduce-sum-all-keepdims", TF, "return tf.reduce_sum(x, keepdims=True)", [X3]),
    ("reduce-sum-positional", TF, "return tf.math.reduce_sum(x, 1)", [X3]),
    ("reduce-max", TF, "return tf.reduce_max(x, axis=-1)", [X3]),
    ("reduce-min-all", TF, "return tf.reduce_min(x)", [X3]),
    ("reduce-prod", TF, "return tf.reduce_prod(x, axis=1)", [X]),
    ("reduce-any", TF, "return tf.reduce_any(x > 1.0, axis=0)", [X]),
    ("reduce-logsumexp-all", TF, "return tf.reduce_logsumexp(x)", [X3]),
    ("reduce-std", TF, "return tf.math.reduce_std(x, axis=0)", [X]),
    ("reduce-variance", TF, "return tf.math.reduce_variance(x, axis=[0, 1])", [X3]),
    ("cumsum-default-axis", TF, "return tf.cumsum(x)", [X]),
    # --- shapes and indexing ---
    ("concat", TF, "return tf.concat([a, b], axis=-1)", [X, X]),
    ("stack", TF, "return tf.stack([a, b], axis=1)", [X, X]),
    ("unstack", TF, "return tf.unstack(x, axis=1)", [X]),
    ("expand-dims", TF, "return tf.expand_dims(x, -1)", [X]),
    ("squeeze-axis", TF, "return tf.squeeze(x, axis=[0, 2])", [f32(1, 3, 1, 2)]),
    ("tile", TF, "return tf.tile(x, [2, 1])", [X]),
    ("repeat", TF, "return tf.repeat(x, 2, axis=1)", [X]),
    ("reverse", TF, "return tf.reverse(x, [1])", [X]),
    ("roll", TF, "return tf.roll(x, shift=1, axis=1)", [X]),
    ("broadcast-to", TF, "return tf.broadcast_to(x, [2, 3, 4])", [X]),
    ("gather-axis0", TF, "return tf.gather(x, i)", [X, np.array([2, 0, 2], np.int32)]),
    ("gather-axis1-2d-indices", TF, "return tf.gather(x, i, axis=1)", [X3, np.array([[2, 0], [1, 1]], np.int32)]),
    ("gather-last-axis", TF, "return tf.gather(x, i, axis=-1)", [X3, np.array([3, 1], np.int32)]),
    ("boolean-mask", TF, "return tf.boolean_mask(x, x > 0)", [X]),
    ("where-select", TF, "return tf.where(x > 0, x, tf.zeros_like(x))", [X]),
    ("where-indices", TF, "return tf.where(x > 0)", [X3]),
    ("pad-constant", TF, "return tf.pad(x, [[0, 0], [1, 2], [0, 1]], constant_values=-1.0)", [X3]),
    # sizes that are expressions, in a display of pairs: reversed pair by pair for F.pad
    ("pad-expression-sizes", TF, "return tf.pad(x, [[0, x.shape[1] - 1], [x.shape[0] + 1, 0], [0, 1]])", [X3]),
    ("sort-descending", TF, "return tf.sort(x, direction='DESCENDING')", [X]),
    ("einsum", TF, "return tf.einsum('bij,bkj->bik', a, b)", [f32(2, 3, 4), f32(2, 5, 4)]),
    ("tensordot", TF, "return tf.tensordot(a, b, axes=[[1], [0]])", [f32(3, 4), f32(4, 2)]),
    ("add-n", TF, "return tf.add_n([a, b, a * 2.0])", [X, X]),
    # a translation that is an operation keeps binding as the call did
    ("operation-in-expression", TF, "return tf.add_n([a, b]) * 2.0, -tf.nn.softmax_cross_entropy_with_logits(labels=tf.nn.softmax(a), logits=b) ** 2, tf.add_n([a, b])[0]", [X, X]),
    # --- elementwise and activations ---
    ("sqrt-square-exp", TF, "return tf.sqrt(tf.square(x) + 1.0), tf.exp(x)", [X]),
    ("log-log1p-rsqrt", TF, "return tf.math.log(tf.abs(x) + 1.0), tf.math.log1p(tf.abs(x)), tf.math.rsqrt(tf.abs(x) + 0.5)", [X]),
    ("sign-floor-ceil", TF, "return tf.sign(x), tf.floor(x * 3), tf.math.ceil(x * 3)", [X]),
    ("maximum-number", TF, "return tf.maximum(x, 0.0), tf.minimum(0.5, x)", [X]),
    ("maximum-tensors", TF, "return tf.maximum(a, b), tf.pow(tf.abs(a), b)", [X, X]),
    ("comparisons", TF, "return tf.equal(a, b), tf.greater(a, b), tf.logical_and(a > 0, b > 0)", [X, X]),
    ("activations", TF, "return tf.nn.relu(x), tf.nn.relu6(x * 8), tf.nn.elu(x), tf.nn.selu(x), tf.nn.softplus(x), tf.nn.silu(x), tf.nn.swish(x)", [X]),
    ("sigmoid-tanh", TF, "return tf.sigmoid(x), tf.nn.tanh(x), tf.nn.log_softmax(x, axis=0)", [X]),
    ("zeros-ones-like", TF, "return tf.zeros([2, 3]), tf.ones((4,), dtype=tf.int32), tf.zeros_like(x), tf.ones_like(x, dtype=tf.bool)", [X]),
    ("newaxis", TF, "return x[:, tf.newaxis]", [X]),
    # --- losses ---
    ("sigmoid-cross-entropy", TF, "return tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z)",
     [(rng.random((3, 4)) > 0.5).astype(np.float32), f32(3, 4, scale=3.0)]),
    ("softmax-cross-entropy", TF, "return tf.nn.softmax_cross_entropy_with_logits(labels=tf.nn.softmax(y), logits=z)",
     [f32(3, 5), f32(3, 5, scale=3.0)]),
    ("sparse-softmax-cross-entropy-3d", TF, "return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z)",
     [i32(5, 2, 3), f32(2, 3, 5, scale=3.0)]),
    # --- keras.ops ---
    ("ops-reductions", KOPS, "return ops.mean(x, axis=-1), ops.sum(x, axis=(0, 1), keepdims=True), ops.max(x, axis=1), ops.min(x)", [X3]),
    ("ops-shapes", KOPS, "return ops.reshape(x, (2, -1)), ops.transpose(x), ops.expand_dims(x, 1), ops.squeeze(ops.expand_dims(x, 0), axis=0)", [X3]),
    ("ops-concat-stack", KOPS, "return ops.concatenate([a, b]), ops.stack([a, b], axis=-1), ops.matmul(a, ops.transpose(b))", [X, X]),
    ("ops-argmax-int32", KOPS, "return ops.argmax(x, axis=-1), ops.argmax(x)", [X]),
    ("ops-split-indices", KOPS, "return ops.split(x, [1, 3], axis=1)", [X]),
    ("ops-take-flattened", KOPS, "return ops.take(x, i), ops.take(x, i, axis=1)", [X, np.array([1, 3], np.int32)]),
    ("ops-one-hot-where", KOPS, "return ops.one_hot(i, 4), ops.where(i > 1, 1.0, 0.0)", [i32(4, 5)]),
    ("ops-cast-arange-shape", KOPS, "return ops.cast(x, 'float16'), ops.arange(6), ops.shape(x)", [X]),
    ("ops-softmax-activations", KOPS, "return ops.softmax(x), keras.activations.softmax(x), ops.silu(x), keras.activations.relu(x)", [X3]),
    # --- follow-ups: indexing, norms, division, bias, Keras backend ---
    ("gather-nd", TF, "return tf.gather_nd(x, i), tf.gather_nd(y, j)",
     [X, np.array([[0, 1], [2, 3], [1, 0]], np.int32), X3, np.array([[[1], [0]]], np.int32)]),
    ("size", TF, "return tf.size(x), tf.size(x, out_type=tf.int64)", [X3]),
    ("top-k-ties", TF, "return tf.math.top_k(x, k=3), tf.nn.top_k(x, 2).indices, tf.math.top_k(x, 2)[0]", [TIES]),
    ("norm", TF + "import numpy as np\n", "return tf.norm(x), tf.norm(x, axis=-1, keepdims=True), tf.linalg.norm(x, ord=1, axis=1), tf.norm(x, ord=np.inf, axis=[-2, -1]), tf.norm(x, ord=3, axis=0)", [X3]),
    ("slice", TF, "return tf.slice(x, [0, 1, 2], [-1, 2, 3]), tf.slice(x, [1, 0, 0], [1, 3, 5])", [X3]),
    ("divide", TF, "return tf.divide(x, 2.0), tf.truediv(3, 2), tf.math.divide(a, b)", [X, X, X]),
    ("bias-add", TF, "return tf.nn.bias_add(x, b), tf.nn.bias_add(y, c, data_format='NCHW')",
     [X3, f32(5), f32(2, 3, 4, 5), f32(3)]),
    ("dropout-rate", TF, "return tf.nn.dropout(x, rate=0.25)", [np.ones(4000, np.float32)], "dropout(0.25)"),
    ("embedding-lookup", TF, "return tf.nn.embedding_lookup(x, i)", [f32(5, 3), i32(5, 2, 4)]),
    ("ops-full-cumsum", KOPS, "return ops.full((2, 3), 7), ops.full((2,), 1, dtype='int32'), ops.cumsum(x), ops.cumsum(x, axis=1)", [X]),
    ("clip-by-norm", TF, "return tf.clip_by_norm(x, 1.0), tf.clip_by_norm(x, 1.5, axes=[1])", [X * 2]),
    ("matrix-transpose", TF, "return tf.linalg.matrix_transpose(x)", [X3]),
    ("ops-divide-int", KOPS, "return ops.divide(a, b + 1.0), ops.divide(i, i + 1)", [X, X, i32(5, 6)]),
    ("backend-reductions", KB, "return K.mean(x, axis=-1), K.sum(x, keepdims=True), K.max(x, keepdims=True), K.min(x, axis=0), K.std(x, axis=-1), K.var(x)", [X3]),
    ("backend-elementwise", KB, "return K.square(x), K.exp(x), K.sqrt(x), K.log(K.abs(x) + 1.0), K.tanh(x), K.sigmoid(x), K.sign(x), K.maximum(x, 0.0), K.minimum(x, y)", [X, X]),
    ("backend-config", KB, "return K.epsilon(), K.cast(x, K.floatx()), K.image_data_format()", [X]),
    ("backend-shapes", KB, "return K.concatenate([a, b]), K.expand_dims(a), K.int_shape(a), K.reshape(a, [K.shape(a)[0], -1]), K.shape(a), K.reshape(a, (-1, 2)), K.tile(a, [2, 1]), K.stack([a, b], axis=1), K.batch_flatten(a), K.cast(a * 3, 'int32')", [X, X]),
    ("backend-permute", KB, "return K.permute_dimensions(x, (0, 2, 1)), K.transpose(x), K.softmax(x), K.bias_add(x, b)", [X3, f32(5)]),
    ("backend-dot-arange", KB, "return K.dot(x, y), K.dot(a, b), K.arange(5), K.arange(0, 1, 0.25, dtype='float32')", [f32(2, 3, 4), f32(5, 4, 6), X, f32(4, 2)]),
    # --- Python numbers among the tensors of stack / concat (TensorFlow converts them; torch.as_tensor) ---
    ("stack-python-int-list-with-int32-tensor", TF,
     "n = int(i.shape[0]); rows = [k for k in range(n)]; return tf.stack([i - 1, rows], axis=1)", [i32(5, 4)]),
    ("stack-python-ints-with-int64-tensor", TF, "return tf.stack([tf.cast(i, tf.int64), [2 * k + 1 for k in range(4)]])",
     [i32(5, 4)]),
    ("concat-python-floats-with-float-tensor", TF,
     "row = [[0.5, 1.5, -2.0, 3.0]]; return tf.concat([x, row, [[float(k) / 4 for k in range(4)]]], axis=0)", [X]),
    ("stack-python-numbers-only", TF, "return tf.stack([1, 2, 3]), tf.stack([len(x.shape), 7])", [X]),
    # a Python number as an op's input: TensorFlow converts it (float32), torch.square(1e-3) raises (mirnet's loss)
    ("python-number-inputs", TF, "return tf.square(1e-3), tf.exp(-1.0), tf.sqrt(tf.square(x) + tf.square(1e-3)), "
     "tf.abs(-2.5), tf.math.log(2.0)", [X]),
    # tf.image.crop_and_resize: boxes inside, flipped (y1 > y2), partly outside (extrapolation_value), one
    # point (the middle), nearest; a uint8 image gives float32 (keras-io nnclr's random crops)
    ("crop-and-resize", TF,
     "return tf.image.crop_and_resize(x, b, i, (4, 3)), tf.image.crop_and_resize(x, b, i, [1, 5], method='nearest'), "
     "tf.image.crop_and_resize(x, b, i, (3, 4), extrapolation_value=-2.0), tf.image.crop_and_resize(z, b, i, (2, 2))",
     [f32(2, 5, 6, 3), np.array([[0.1, 0.2, 0.8, 0.9], [0.9, 0.0, 0.2, 0.7], [-0.3, 0.5, 1.2, 1.0],
                                 [0.25, 0.25, 0.25, 0.75], [0.0, 0.0, 1.0, 1.0]], np.float32),
      np.array([0, 1, 1, 0, 1], np.int32), rng.integers(0, 255, (2, 5, 6, 3)).astype(np.uint8)]),
    # keras.losses.KLDivergence: y_true and y_pred clipped to [1e-7, 1] (zeros, a value above 1), the sum over the
    # last axis, the mean over the rest; reduction "sum" / None (the per-sample loss); 3-D inputs
    ("kl-divergence-loss", "import keras\n",
     "kl = keras.losses.KLDivergence(); kl_sum = keras.losses.KLDivergence(reduction='sum'); "
     "kl_none = keras.losses.KLDivergence(reduction=None); "
     "return kl(x, y), kl_sum(x, y), kl_none(x, y), kl(c, z)",
     [np.array([[0.2, 0.8, 0.0], [0.5, 0.25, 0.25], [1.2, 0.0, 0.1]], np.float32),
      np.array([[0.1, 0.6, 0.3], [0.0, 0.5, 0.5], [0.3, 0.3, 0.4]], np.float32),
      rng.dirichlet(np.ones(4), (2, 3)).astype(np.float32), rng.dirichlet(np.ones(4), (2, 3)).astype(np.float32)]),
    # tf.map_fn over one tensor: fn on each slice along axis 0, stacked; dtype / fn_output_signature
    ("map-fn", TF, "return tf.map_fn(lambda t: t * 2.0 + tf.reduce_sum(t), x), "
     "tf.map_fn(lambda r: tf.cast(tf.argmax(r, axis=-1), tf.int32), x, dtype=tf.int32), "
     "tf.map_fn(lambda r: tf.reduce_max(r), x, fn_output_signature=tf.float32)", [X3]),
    # tnp.random.randint: numpy's bounds (one bound: [0, n)), size None: one number, int64 by default
    ("tnp-randint-exact", TF + "import tensorflow.experimental.numpy as tnp\n",
     "return tnp.random.randint(3, 4), tnp.random.randint(1, size=(2, 3)), tnp.random.randint(5, 6, 4)", []),
    # --- TensorFlow 1 spellings (tf.compat.v1) with rules of their own (issue 9) ---
    # to_float & co. are tf.cast: float → int truncates toward zero; a size becomes a tensor
    ("v1-to-dtype", TF, "return tf.compat.v1.to_float(i), tf.compat.v1.to_int32(x), tf.compat.v1.to_int64(x), "
     "tf.compat.v1.to_double(x), tf.compat.v1.to_float(tf.compat.v1.shape(x)[1])", [i32(9, 3, 4), f32(3, 4, scale=4.0)]),
    ("v1-shape", TF, "return tf.compat.v1.shape(x), tf.reshape(x, [tf.compat.v1.shape(x)[0], -1]), "
     "tf.zeros(tf.compat.v1.shape(x)), tf.compat.v1.shape(x, out_type=tf.int64)", [X3]),
    ("v1-transpose", TF, "return tf.compat.v1.transpose(x), tf.compat.v1.transpose(x, [1, 0, 2])", [X3]),
    ("v1-gather", TF, "return tf.compat.v1.gather(x, i), tf.compat.v1.gather(x, i, None, None, 1)",
     [f32(3, 3), np.array([2, 0, 2], np.int32)]),
    ("v1-like-pad", TF, "return tf.compat.v1.zeros_like(x), tf.compat.v1.ones_like(x, dtype=tf.int32), "
     "tf.compat.v1.pad(x, [[1, 0], [0, 2]], 'CONSTANT', None, -1.5)", [X]),
    # TF 1's where does not broadcast: a rank-1 condition selects rows (torch.where would pair it with the last
    # axis of this square x); of x's shape; on a scalar condition and Python numbers; one argument: indices
    ("v1-where", TF, "return tf.compat.v1.where(x[:, 0] > 0, x, y), tf.compat.v1.where(x > 0, x, -x), "
     "tf.compat.v1.where(tf.reduce_sum(x) > 0, 1.0, -1.0), tf.compat.v1.where(x > 0)",
     [np.array([[1.0, -2.0, 3.0], [-1.0, 5.0, 6.0], [2.0, 0.5, -3.0]], np.float32), f32(3, 3)]),
    # the main diagonal of each innermost matrix replaced (a batch; tf.shape(x)[:-1], a sliced shape, as a size)
    ("set-diag", TF, "return tf.linalg.set_diag(x, y), tf.linalg.set_diag(x, tf.zeros(tf.shape(x)[:-1])), "
     "tf.ones(tf.shape(x)[1:]), tf.shape(x)[1:]", [f32(2, 3, 3), f32(2, 3)]),
    # float32 images, uint8 ones (scaled to [0, 1] and back, truncated), float64 ones (computed in float32)
    ("rgb-to-grayscale", TF, "return tf.image.rgb_to_grayscale(x), tf.image.rgb_to_grayscale(i), "
     "tf.image.rgb_to_grayscale(z)", [rng.random((2, 4, 5, 3)).astype(np.float32),
                                      rng.integers(0, 256, (4, 5, 3)).astype(np.uint8), rng.random((3, 3)) + 0.0]),
    # int32 counts (a trailing value past the largest, minlength), float64 counts by dtype, weights' dtype
    ("bincount", TF, "return tf.math.bincount(i), tf.math.bincount(i, minlength=9), "
     "tf.math.bincount(i, dtype=tf.float64), tf.math.bincount(i, weights=x)",
     [np.array([1, 3, 3, 0, 6], np.int32), np.array([0.5, 1.0, -2.0, 3.0, 0.25], np.float32)]),
    ("executing-eagerly", TF, "return tf.constant(tf.executing_eagerly())", []),
    # tf.compat.v1 names of TF 2's own functions (compat_v1.SAME_OBJECT) translate as those
    ("v1-same-objects", TF, "return tf.compat.v1.log(tf.compat.v1.cos(x) + 2.0), tf.compat.v1.reverse_v2(x, [0]), "
     "tf.compat.v1.nn.relu(x), tf.compat.v1.cumsum(x, axis=1), tf.compat.v1.matrix_band_part(x, -1, 0)", [f32(4, 4)]),
    ("v1-map-fn", TF, "return tf.compat.v1.map_fn(lambda r: r * 2.0, x)", [X]),
    # tf.cond: the branch pred selects (a tensor or a Python bool), lambdas or callables; TF 1 unpacks a
    # branch's one-element list unless strict
    ("cond", TF, "return tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: -x), "
     "tf.cond(tf.reduce_sum(x) < 0, lambda: x * 2.0, lambda: -x), 1.0 + tf.cond(x.shape[0] == 3, lambda: x, lambda: x - 1), "
     "tf.cond(tf.constant(False), lambda: tf.reduce_max(x), lambda: tf.reduce_min(x)), "
     "tf.cond(tf.constant(True), lambda s=x: s * 3.0, lambda: x)", [X]),
    ("cond-v1", TF, "h, w = tf.compat.v1.cond(tf.reduce_sum(x) > 0, fn1=lambda: (x, x + 1), fn2=lambda: (x - 1, x)); "
     "return h, w, tf.compat.v1.cond(tf.reduce_sum(x) > 0, lambda: [x], lambda: [x * 0.0]), "
     "tf.compat.v1.cond(tf.reduce_sum(x) < 0, lambda: [x], lambda: [x * 0.0], strict=True)", [X]),
    # --- sparse tensors, meshgrid, take_along_axis, ops.array (issue 8's names with no rule) ---
    ("sparse-to-dense-literal", TF, "s = tf.sparse.SparseTensor(indices=[[0, 0], [1, 2]], values=[1.0, 2.0], "
     "dense_shape=[3, 4]); return tf.sparse.to_dense(s), tf.sparse.to_dense(tf.SparseTensor([[0, 1], [2, 3]], [5, 6], "
     "[3, 4]), default_value=0)", []),
    ("sparse-to-dense-tensors", TF, "return tf.sparse.to_dense(tf.sparse.SparseTensor(i, x, [2, 3, 4]))",
     [np.array([[0, 0, 1], [0, 2, 3], [1, 1, 0]], np.int64), f32(3)]),
    ("meshgrid-xy", TF, "return tf.meshgrid(x, y)", [f32(3), f32(4)]),
    ("meshgrid-ij-three", TF, "return tf.meshgrid(x, y, z, indexing='ij')", [f32(2), f32(3), f32(4)]),
    ("meshgrid-lists-xy-three", TF, "return tf.meshgrid([1, 2, 3], [4, 5], [6, 7, 8, 9])", []),
    ("ops-take-along-axis", KOPS, "return ops.take_along_axis(x, i, axis=1), ops.take_along_axis(x, [[0], [3], [1]], "
     "axis=-1)", [X, i32(4, 3, 2)]),
    ("ops-take-along-axis-broadcast", KOPS, "return ops.take_along_axis(x, i, axis=2)", [X3, i32(5, 1, 3, 2)]),
    ("ops-take-along-axis-flat", KOPS, "return ops.take_along_axis(x, i)", [X, i32(12, 5)]),
    ("ops-any-all", KOPS, "return ops.any(x > 1.0), ops.any(x > 0.5, axis=1), ops.all(x > -2.0, axis=0, keepdims=True), "
     "ops.all(x > 0.0)", [X]),
    ("ops-elementwise", KOPS, "return ops.absolute(x), ops.arccos(ops.tanh(x)), ops.ravel(x), ops.moveaxis(y, -1, 0), "
     "ops.tril(x), ops.triu(x, k=1), ops.tril(x, -1)", [X, X3]),
    ("ops-round", KOPS, "return ops.round(x), ops.round(y, 1), ops.round(y, decimals=2)",
     [HALVES, np.array([0.25, -0.35, 1.234, 2.675, -7.449], np.float32)]),
    ("ops-floor-divide", KOPS, "return ops.floor_divide(x, y), ops.floor_divide(i, j)",
     [np.array([7.0, -7.0, 7.5, -0.5], np.float32), np.array([2.0, 2.0, -2.0, 3.0], np.float32),
      np.array([7, -7, 7, -1], np.int32), np.array([2, 2, -2, 3], np.int32)]),
    ("vectorized-map", TF, "return tf.vectorized_map(lambda v: tf.reduce_sum(v * v, axis=-1), x), "
     "tf.vectorized_map(lambda p: p[0] * 2.0 + p[1], (x, y))", [X3, X3 * 0.5]),
    ("confusion-matrix", TF, "n = 4; return tf.math.confusion_matrix(i, j, num_classes=4), "
     "tf.math.confusion_matrix(i, j, n, dtype=tf.float32)", [i32(4, 20), i32(4, 20)]),
    ("acos-pow-from-dense", KB + TF, "return tf.acos(tf.tanh(x)), tf.math.acos(y), K.pow(tf.abs(x), 0.5), "
     "tf.sparse.to_dense(tf.sparse.from_dense(tf.nn.relu(x)))", [X, np.array([0.5, -1.0, 1.0], np.float32)]),
    # a permutation of the rows (mode "rows": the same multiset of rows), one draw per call
    ("random-shuffle", TF, "return tf.random.shuffle(x), tf.random.shuffle(i, seed=5), tf.random.shuffle([1, 2, 3])",
     [f32(6, 3), np.arange(10, dtype=np.int32)], "rows"),
    ("ops-array", KOPS, "return ops.array([1, 2]), ops.array([1.0, 2]), ops.array(7), ops.array(x), "
     "ops.array([3, 4], dtype='int64')", [X]),
    # --- random: distributions only (different generators) ---
    ("random-normal", TF, "return tf.random.normal([2000], mean=1.0, stddev=0.5)", [], "normal(1.0,0.5)"),
    ("random-uniform", TF, "return tf.random.uniform([2000], minval=-2.0, maxval=3.0)", [], "uniform(-2.0,3.0)"),
    # draws of class ids: int64 (batch, num_samples), frequencies those of the rows' softmax (two rows, one
    # with a -inf logit: never drawn); dtype / TF 1's multinomial and output_dtype
    ("random-categorical", TF, "return tf.random.categorical(x, 3000)",
     [np.array([np.log([0.1, 0.6, 0.3]), [0.0, -np.inf, 0.0]], np.float32)], "freq(0.1,0.6,0.3;0.5,0.0,0.5)"),
    ("random-categorical-int32", TF, "return tf.random.categorical(x, 3000, dtype=tf.int32, seed=4)",
     [np.array([[0.0, 1.0, 2.0]], np.float32)], "freq(0.090031,0.244728,0.665241)"),
    ("multinomial-v1", TF, "return tf.compat.v1.multinomial(x, 3000, output_dtype=tf.int32)",
     [np.log(np.array([[0.25, 0.75]], np.float32))], "freq(0.25,0.75)"),
    ("tnp-randint", TF + "import tensorflow.experimental.numpy as tnp\n", "return tnp.random.randint(0, 10, (2000,))",
     [], "uniform(-0.5,9.5)"),
    ("tnp-randint-one-bound", TF + "import tensorflow.experimental.numpy as tnp\n",
     "return tnp.random.randint(10, size=2000)", [], "uniform(-0.5,9.5)"),
    # --- keras.ops and tf names of the coverage lists with exact torch counterparts (ops15) ---
    # keras.ops.slice is tf.slice (a size of -1 runs to the end); slice_update leaves its input as it was
    ("keras-ops-slice", KOPS, "return ops.slice(x, (0, 1, 0), (2, 2, -1)), ops.slice(x, [1, 0, 2], [1, 3, 2])", [X3]),
    ("keras-ops-slice-update", KOPS, "return ops.slice_update(x, (1, 0, 2), y), ops.slice_update(x, [0, 1, 0], y[:, :2, :1]), x",
     [X3, f32(1, 3, 2)]),
    # top_k's tied values in index order, int32 indices; eye's float32; linspace's 50 values by default, float32
    # from int bounds
    ("keras-ops-top-k-eye-linspace", KOPS, "p, q = ops.top_k(x, 2); return p, q, ops.eye(3), ops.eye(2, 4, dtype='int32'), "
     "ops.linspace(-1, 1), ops.linspace(0.0, 2.0, 5)", [TIES]),
    # flip without an axis reverses every axis; std is the population one (ddof 0)
    ("keras-ops-flip-std-reciprocal", KOPS, "return ops.flip(x), ops.flip(x, axis=1), ops.flip(x, (0, 2)), ops.std(x), "
     "ops.std(x, axis=-1, keepdims=True), ops.reciprocal(x)", [X3]),
    # meshgrid's default indexing is "xy"; the keras.ops.nn spellings of softmax and gelu (tanh by default)
    ("keras-ops-meshgrid-empty-nn", KOPS, "gx, gy = ops.meshgrid(x, y); return gx, gy, ops.meshgrid(x, y, indexing='ij')[0], "
     "ops.empty((2, 3), dtype='int32') * 0, ops.nn.softmax(z), ops.nn.gelu(z)", [f32(3), f32(4), X]),
    # Keras 3's hard sigmoid is relu6(x + 3) / 6 (Keras 2's had the slope 0.2)
    ("keras-hard-sigmoid", KOPS, "return keras.activations.hard_sigmoid(x)", [f32(3, 4, scale=4.0)]),
    ("keras-activations-linear", KOPS, "return keras.activations.linear(x + y) * 2.0", [X, X34B]),
    ("keras2-hard-sigmoid", "import tf_keras as keras\n", "return keras.activations.hard_sigmoid(x)", [f32(3, 4, scale=4.0)]),
    # l2_loss has no square root; count_nonzero counts into int64 (dtype: a cast); diag_part of a batch
    ("tf-l2-loss-count-nonzero-diag-part", TF, "return tf.nn.l2_loss(x), tf.math.count_nonzero(i), "
     "tf.math.count_nonzero(i, axis=1), tf.math.count_nonzero(x > 0, axis=[0, 1], dtype=tf.int32), "
     "tf.linalg.diag_part(y), tf.linalg.diag_part(y, k=1), tf.linalg.diag_part(x, k=-2), tf.math.real(x), tf.is_tensor(x), tf.is_tensor(1.0), tf.cast(i, tf.uint32)",
     [X, i32(3, 3, 4), f32(2, 3, 3)]),
    # tf.nn.max_pool / avg_pool on images: told by ksize / strides lists of 4 or 2, or by data_format="NHWC"
    ("tf-nn-max-avg-pool", TF, "return tf.nn.max_pool(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding='SAME'), "
     "tf.nn.avg_pool(x, 3, 2, 'SAME', data_format='NHWC'), tf.nn.max_pool(x, [2, 3], [1, 2], 'VALID'), "
     "tf.nn.avg_pool(x, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding='SAME')", [f32(2, 9, 8, 4)]),
    # scatters: entries (indices of the full rank, a duplicate adding up) and rows (a shorter index); literal lists
    ("tf-scatter-nd", TF, "return tf.tensor_scatter_nd_add(x, i, y), tf.tensor_scatter_nd_sub(x, [[0, 1], [2, 3]], [1.0, 2.0]), "
     "tf.tensor_scatter_nd_update(x, [[2], [0]], z), tf.scatter_nd(i, y, [3, 4]), tf.tensor_scatter_nd_add(x, [[1]], z[:1])",
     [X, np.array([[0, 1], [2, 3], [0, 1], [1, 0], [2, 2]], np.int32), f32(5), f32(2, 4)]),
    # sequence_mask (a batch of lengths; as long as the largest without maxlen); floor division and Python's
    # remainder (the divisor's sign) on negative ints and floats; cumprod's default axis 0
    ("tf-sequence-mask-floordiv-floormod-cumprod", TF, "return tf.sequence_mask(i, 6), tf.sequence_mask(i, dtype=tf.float32), "
     "tf.math.floordiv(j, 3), tf.math.floormod(j, 3), tf.math.mod(j, -4), tf.math.floormod(x, -0.7), "
     "tf.math.floordiv(x, 0.3), tf.math.cumprod(x, axis=1), tf.math.cumprod(x)",
     [np.array([[0, 3, 5], [2, 1, 4]], np.int32), np.arange(-9, 9, dtype=np.int32), X]),
    # exclusive cumprod (each product leaves its own entry out, a 1 first) along a negative and a non-negative axis
    ("tf-cumprod-exclusive", TF, "return tf.math.cumprod(x + 1.0, axis=-1, exclusive=True), tf.math.cumprod(x, exclusive=True), "
     "tf.math.cumprod(y, axis=1, exclusive=True), tf.math.cumprod(y, axis=-2, exclusive=True)", [X, X3]),
    # one replica (the default strategy): the regularization loss as it is
    ("tf-scale-regularization-loss", TF, "return tf.nn.scale_regularization_loss(tf.reduce_sum(x * x) * 0.5)", [X]),
    ("keras-backend-flatten-ndim", KB, "return K.flatten(x), K.ndim(x)", [X3]),
    # dot_product_attention on (batch, steps, heads, size): default scale, causal, a bias and a scale, a boolean
    # mask (every query keeps a key: a row keeping none is NaN in torch, which the translation warns about)
    ("keras-ops-dot-product-attention", KOPS, "return ops.dot_product_attention(x, y, z), "
     "ops.dot_product_attention(x, y, z, is_causal=True), ops.dot_product_attention(x, y, z, bias=b, scale=0.3), "
     "ops.dot_product_attention(x, y, z, mask=c)",
     [f32(2, 5, 3, 4), f32(2, 6, 3, 4), f32(2, 6, 3, 4), f32(2, 3, 5, 6),
      np.concatenate([np.ones((2, 1, 5, 1), bool), rng.random((2, 1, 5, 5)) > 0.5], axis=-1)]),
    # keras.random: the distributions, float32; an int seed draws the same values at every call (the difference: 0)
    ("keras-random-normal", KOPS, "return keras.random.normal((4000,), mean=1.0, stddev=0.5, seed=7)", [], "normal(1.0,0.5)"),
    ("keras-random-normal-default", KOPS, "return keras.random.normal((4000,))", [], "normal(0.0,1.0)"),
    ("keras-random-uniform", KOPS, "return keras.random.uniform((4000,), minval=-1.0, maxval=3.0)", [], "uniform(-1.0,3.0)"),
    ("keras-random-int-seed-repeats", KOPS, "return keras.random.normal((5,), seed=4) - keras.random.normal((5,), seed=4), "
     "keras.random.uniform((5,), seed=4) - keras.random.uniform((5,), seed=4)", []),
    # TensorFlow's numpy: matmul of a matrix and a vector, an int32 sum in int64 (NumPy's, torch's), maximum with a number
    ("tnp-matmul-square-expand-dims-sum-maximum", TF + "import tensorflow.experimental.numpy as tnp\n",
     "return tnp.matmul(x, y), tnp.matmul(x, z), tnp.square(x), tnp.expand_dims(x, 1), tnp.sum(x, axis=1, keepdims=True), "
     "tnp.sum(i), tnp.sum(x), tnp.maximum(x, 0.0), tnp.maximum(x, -x), tf.cast(i, tnp.float32)",
     [X, f32(4, 2), f32(4), i32(9, 3, 4)]),
    # TensorFlow's numpy defaults to NumPy's float64 (ones, randn), Python's int / float as dtypes are int64 / float64;
    # its dtype names, newaxis and ndarray (tf.Tensor itself)
    ("tnp-ones-dtypes-newaxis-ndarray", TF + "import tensorflow.experimental.numpy as tnp\n",
     "return tnp.ones((2, 3)), tnp.ones(4, dtype=tnp.float32), tnp.ones([2], dtype=int), tnp.ones(3, dtype=float), "
     "tf.cast(x, tnp.float64), tf.cast(x, tnp.int32), tf.cast(x, tnp.int64), tf.cast(x, tnp.float16), "
     "tf.cast(x, tnp.bool_), x[tnp.newaxis, :, tnp.newaxis], isinstance(x, tnp.ndarray)", [X]),
    # asarray / array: Python floats float64 and ints int64 (NumPy's), a tensor's dtype kept, dtype= converting
    ("tnp-asarray-array", TF + "import tensorflow.experimental.numpy as tnp\n",
     "return tnp.asarray([[0.5, 1.0], [2.0, 3.0]]), tnp.asarray([1, 2]), tnp.asarray(x), tnp.asarray(x, dtype=tnp.float64), "
     "tnp.array([1.5, 2]), tnp.array(i), tnp.array(i, dtype=float), tnp.asarray(3.0), tnp.asarray(True), tnp.array(x, copy=False)",
     [X, i32(9, 3, 4)]),
    ("tnp-random-randn-float64", TF + "import tensorflow.experimental.numpy as tnp\n",
     "return tnp.random.randn(1000, 4)", [], "normal(0.0,1.0)"),
    ("tnp-random-randn-one-number", TF + "import tensorflow.experimental.numpy as tnp\n",
     "return tnp.random.randn() * 0.0", []),
]

_RUNNER = r'''
import json, sys
import numpy as np
fw, cases_path, inputs_path, out_path = sys.argv[1:]
cases = json.load(open(cases_path))
inputs = np.load(inputs_path)
if fw == "tf":
    import tensorflow as tf
    def to_fw(a): return tf.constant(a)
else:
    import torch
    def to_fw(a): return torch.from_numpy(a.copy())
def flat(o):
    if isinstance(o, (list, tuple)):  # torch.Size is a tuple, like keras.ops.shape's result
        return [x for e in o for x in flat(e)]
    if hasattr(o, "numpy"):
        return [np.asarray(o.numpy())]
    return [np.asarray(o)]
outs, errors = {}, {}
for cid, case in cases.items():
    try:
        ns = {}
        exec(compile(case["src"][fw], cid, "exec"), ns)
        args = [to_fw(inputs[f"{cid}:{i}"]) for i in range(case["n"])]
        for j, a in enumerate(flat(ns["f"](*args))):
            outs[f"{cid}:{j}"] = a
    except Exception as e:
        errors[cid] = f"{type(e).__name__}: {e}"
np.savez(out_path, **outs)
json.dump(errors, open(out_path + ".errors.json", "w"))
'''


def _source(header: str, body: str, n: int) -> str:
    return f"{header}\n\ndef f(*args):\n    {_unpack(body, n)}\n    {body}\n"


def _unpack(body: str, n: int) -> str:
    """Bind the positional inputs to the names the body uses, in order of first appearance."""
    names = []
    for tok in re.findall(r"\b([abcijxyz])\b", body):
        if tok not in names:
            names.append(tok)
    names = names[:n]
    return f"{', '.join(names)}, = args" if names else "pass"


#: the environment of the file's TensorFlow programs (one warm Keras worker)
_TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "KERAS_BACKEND": "tensorflow"}


def _run(fw: str, module: str, tmp, cases_json, inputs_npz) -> tuple[dict, dict]:
    out = tmp / f"{fw}.npz"
    if fw == "tf":  # in the Keras worker the TensorFlow check of the TF 1 spellings shares (_TF_ENV)
        proc = python("-c", _RUNNER, fw, cases_json, inputs_npz, out, side="keras", env=_TF_ENV, timeout=900)
    else:  # the one torch program of the file (as a translation runs, TensorFlow importable): a worker saves nothing
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", KERAS_BACKEND="tensorflow")
        proc = subprocess.run([sys.executable, "-c", _RUNNER, fw, str(cases_json), str(inputs_npz), str(out)],
                              capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = np.load(out)
    return {k: data[k] for k in data.files}, json.loads((tmp / f"{fw}.npz.errors.json").read_text())


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    for mod in ("tensorflow", "torch", "keras"):
        if find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed")
    tmp = tmp_path_factory.mktemp("ops")
    cases, arrays, translations = {}, {}, {}
    for case in CASES:
        cid, header, body, inputs = case[:4]
        src = _source(header, body, len(inputs))
        res = translate_source(src, f"{cid}.py")
        translations[cid] = res
        cases[cid] = {"src": {"tf": src, "torch": res.output}, "n": len(inputs)}
        for i, a in enumerate(inputs):
            arrays[f"{cid}:{i}"] = a
    (tmp / "cases.json").write_text(json.dumps(cases))
    np.savez(tmp / "inputs.npz", **arrays)
    tf_out = _run("tf", "tensorflow", tmp, tmp / "cases.json", tmp / "inputs.npz")
    torch_out = _run("torch", "torch", tmp, tmp / "cases.json", tmp / "inputs.npz")
    return translations, tf_out, torch_out


def _outputs(out: dict, cid: str) -> list[np.ndarray]:
    vals, j = [], 0
    while f"{cid}:{j}" in out:
        vals.append(out[f"{cid}:{j}"])
        j += 1
    return vals


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_matches_tensorflow(case, results):
    cid = case[0]
    mode = case[4] if len(case) > 4 else "exact"
    translations, (tf_vals, tf_err), (pt_vals, pt_err) = results
    res = translations[cid]
    errors = [str(f) for f in res.findings if f.severity is Severity.ERROR]
    assert not errors, f"translation left errors:\n{res.output}\n{errors}"
    assert "tf." not in res.output and "keras" not in res.output, res.output
    assert cid not in tf_err, f"the TensorFlow original failed: {tf_err.get(cid)}"
    assert cid not in pt_err, f"the translation failed in torch: {pt_err.get(cid)}\n{res.output}"
    want, got = _outputs(tf_vals, cid), _outputs(pt_vals, cid)
    assert len(want) == len(got) and want, f"{len(want)} TensorFlow outputs, {len(got)} torch outputs\n{res.output}"
    for k, (w, g) in enumerate(zip(want, got)):
        assert w.dtype == g.dtype, f"output {k}: dtype {w.dtype} in TensorFlow, {g.dtype} in torch\n{res.output}"
        assert w.shape == g.shape, f"output {k}: shape {w.shape} in TensorFlow, {g.shape} in torch\n{res.output}"
        if mode.startswith("normal"):
            mean, std = (float(v) for v in mode[7:-1].split(","))
            for a in (w, g):  # same distribution: sample moments within 5 standard errors
                assert abs(a.mean() - mean) < 5 * std / np.sqrt(a.size)
                assert abs(a.std() - std) < 5 * std / np.sqrt(a.size / 2)
        elif mode.startswith("dropout"):  # inputs of ones: zeros at the rate, the rest scaled by 1 / (1 - rate)
            rate = float(mode[8:-1])
            for a in (w, g):
                assert set(np.unique(a).tolist()) <= {0.0, np.float32(1 / (1 - rate))}
                assert abs((a == 0).mean() - rate) < 5 * np.sqrt(rate * (1 - rate) / a.size)
        elif mode.startswith("uniform"):
            lo, hi = (float(v) for v in mode[8:-1].split(","))
            for a in (w, g):
                assert a.min() >= lo and a.max() < hi
                assert abs(a.mean() - (lo + hi) / 2) < 5 * (hi - lo) / np.sqrt(12 * a.size)
        elif mode.startswith("freq"):  # class ids per row drawn at the given probabilities: within 5 standard errors
            rows = [[float(v) for v in r.split(",")] for r in mode[5:-1].split(";")]
            for a in (w, g):
                assert a.shape[0] == len(rows)
                for row, probs in zip(a, rows):
                    assert set(np.unique(row).tolist()) <= {c for c, q in enumerate(probs) if q > 0}
                    for c, q in enumerate(probs):
                        assert abs((row == c).mean() - q) <= 5 * np.sqrt(q * (1 - q) / row.size) + 1e-9
        elif mode == "rows":
            assert sorted(map(repr, w.reshape(len(w), -1).tolist())) == sorted(map(repr, g.reshape(len(g), -1).tolist()))
        elif np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"output {k}\n{res.output}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}\n{res.output}")


_SEEDED = TF + """
import json
draws = [tf.random.normal([3], seed=7), tf.random.normal([3], seed=7), tf.random.normal([3], mean=1.0, seed=8),
         tf.random.uniform([3], seed=7), tf.random.uniform([3], minval=-1.0, maxval=2.0, seed=7),
         tf.random.uniform([3], maxval=100, dtype=tf.int32, seed=9), tf.random.uniform([3], maxval=100, dtype=tf.int32, seed=9)]
print(json.dumps([[float(v) for v in d] for d in draws]))
"""


def test_op_level_seed_is_one_stream_per_op_and_seed():
    """tf.random.normal(..., seed=s): TensorFlow keeps one stream per op and seed (a second call with the same
    seed draws new values, a new run of the program the same ones); the translation's seeded_generator does
    the same in torch (other values: another generator). keras-io random_walks_with_stable_diffusion."""
    for mod in ("tensorflow", "torch"):
        if find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed")
    res = translate_source(_SEEDED, "seeded.py")
    assert not [f for f in res.findings if f.severity is Severity.ERROR], res.output
    assert "generator=seeded_generator(7" in res.output and "tf." not in res.output, res.output
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    for src in (_SEEDED, res.output):
        runs = []
        for _ in range(2):
            proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, env=env, timeout=600)
            assert proc.returncode == 0, proc.stderr[-3000:]
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        assert runs[0] == runs[1]  # a new run: the same values
        normal, normal_again, shifted, uniform, wide, ints, ints_again = runs[0]
        assert normal != normal_again and ints != ints_again  # the same seed again: new values
        assert all(0.0 <= v < 1.0 for v in uniform) and all(-1.0 <= v < 2.0 for v in wide)
        assert all(0 <= v < 100 and v == int(v) for v in ints + ints_again)


# --- refused calls (no framework needed) ------------------------------------------------------------

def test_refused_call_comes_back_as_written():
    """A call its rule refuses is returned exactly as written, its arguments included: the nested
    tf.reduce_sum is not translated inside it, the nested call's pinned default and the refused
    call's own are not reported, the error quotes the source, and no torch import is added for the
    undone translation. The call around it is still translated."""
    src = (TF + "\n"
           "y = tf.reduce_sum(tf.argmax(tf.argmin(x), output_type=tf.string), axis=0)\n")
    res = translate_source(src, "m.py")
    assert "torch.sum(tf.argmax(tf.argmin(x), output_type=tf.string), dim=0)" in res.output, res.output
    codes = [f.code for f in res.findings if f.code != "keras-version"]
    assert codes == ["unsupported-argument"], res.findings


def test_refusal_quotes_the_argument_as_written():
    res = translate_source(TF + "\ny = tf.cumsum(x, exclusive=tf.cast(f, tf.bool))\n", "m.py")
    assert "y = tf.cumsum(x, exclusive=tf.cast(f, tf.bool))" in res.output, res.output
    [err] = [f for f in res.findings if f.severity is Severity.ERROR]
    assert "exclusive=tf.cast(f, tf.bool)" in err.message, err.message


def test_refused_call_alone_adds_no_import():
    res = translate_source(TF + "\ni = tf.argmax(tf.abs(x), output_type=tf.string)\n", "m.py")
    assert res.output == TF + "\n# fwport: unsupported-argument: dtype tf.string has no torch equivalent\n" \
        "i = tf.argmax(tf.abs(x), output_type=tf.string)\n", res.output
    assert not any(f.code == "default-differs" for f in res.findings)


def test_operation_parenthesised_only_where_needed():
    res = translate_source(TF + "\ny = tf.add_n([a, b])\nz = tf.add_n([a, b]) * 2\nf(tf.add_n([a, b]))\n", "m.py")
    assert res.output == "\ny = a + b\nz = (a + b) * 2\nf(a + b)\n", res.output


def test_numpy_function_list_of_one_refused():
    """tf.numpy_function(f, [x], [tf.float32]) is one tensor eagerly, a list of one in a tf.function or a
    tf.data map: fwport cannot tell which, so it is an error naming the argument, not a guess."""
    res = translate_source(TF + "y = tf.numpy_function(f, [x], [tf.float32])\n", "tf2torch")
    errors = [f for f in res.findings if f.severity is Severity.ERROR]
    assert [f.code for f in errors] == ["unsupported-argument"]
    assert "Tout=[tf.float32]" in errors[0].message and errors[0].line == 2


def test_randint_size_of_unknown_kind_and_map_fn_signature_refused():
    """numpy's size may be an int or a tuple, torch.randint takes a tuple: a name is an error, not a guess; a
    map_fn output signature that is not a dtype, and map_fn's nested form (a tuple of tensors), are errors."""
    res = translate_source(TF + "import tensorflow.experimental.numpy as tnp\n"
                           "a = tnp.random.randint(0, 5, n)\n"
                           "b = tf.map_fn(f, x, fn_output_signature=spec)\n"
                           "c, d = tf.map_fn(fn=g, elems=(x, y))\n", "r.py")
    errors = sorted((f.line, f.code) for f in res.findings if f.severity is Severity.ERROR)
    assert errors == [(3, "unsupported-argument"), (4, "unsupported-argument"), (5, "unsupported-argument")], \
        res.findings


def test_lowercase_initializer_names_are_the_classes():
    """keras.initializers.glorot_uniform / he_normal / zeros (and tf.initializers.zeros) are the classes under
    other names: the same translation as GlorotUniform() / HeNormal() / Zeros()."""
    pairs = [("glorot_uniform", "GlorotUniform"), ("he_normal", "HeNormal"), ("lecun_uniform", "LecunUniform"),
             ("zeros", "Zeros")]
    for lower, cls in pairs:
        a = translate_source(TF + f"\ninit = tf.keras.initializers.{lower}(seed=3)\n".replace("zeros(seed=3)", "zeros()"), "a.py")
        b = translate_source(TF + f"\ninit = tf.keras.initializers.{cls}(seed=3)\n".replace("Zeros(seed=3)", "Zeros()"), "b.py")
        assert a.output == b.output and "tf." not in a.output, a.output
        assert not [f for f in a.findings if f.severity is Severity.ERROR], a.findings
    z = translate_source(TF + "\ninit = tf.initializers.zeros()\n", "z.py")
    assert z.output.strip().endswith("init = nn.init.zeros_"), z.output


_TF1_ACTIVATIONS = ["sigmoid", "tanh", "softmax", "log_softmax", "relu6", "softplus", "swish", "leaky_relu", "elu", "relu"]


def test_tf1_activation_spellings_translate_as_tf2():
    """activation=tf.nn.sigmoid under ``import tensorflow.compat.v1 as tf`` (TF 1 tutorials) is the module the TF 2
    spelling gives (nn.Sigmoid(), nn.Softmax(dim=-1), ...): TensorFlow computes the same values with both spellings,
    checked in a TensorFlow subprocess."""
    for name in _TF1_ACTIVATIONS:
        body = (f"\nfrom tensorflow import keras\n\nmodel = keras.Sequential([keras.layers.Dense(4, activation=tf.nn.{name}, "
                "input_shape=(3,))])\n")
        tf1 = translate_source("import tensorflow.compat.v1 as tf" + body, "tf1.py")
        tf2 = translate_source("import tensorflow as tf" + body, "tf2.py")
        assert not [f for f in tf1.findings if f.severity is Severity.ERROR], (name, tf1.findings)
        assert tf1.output == tf2.output and "nn.Linear(3, 4), nn." in tf1.output, (name, tf1.output)
    if find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed")
    check = TF + (
        "import numpy as np\nx = tf.constant(np.linspace(-6, 6, 24, dtype=np.float32).reshape(4, 6))\n"
        f"for n in {_TF1_ACTIVATIONS!r}:\n"
        "    np.testing.assert_array_equal(getattr(tf.compat.v1.nn, n)(x).numpy(), getattr(tf.nn, n)(x).numpy())\n"
        "print('ok')\n")
    proc = python("-c", check, side="keras", env=_TF_ENV, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
