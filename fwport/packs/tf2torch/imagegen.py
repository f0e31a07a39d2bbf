"""The ImageDataGenerator helper written into translations of keras.preprocessing.image.ImageDataGenerator
(rules/tf2torch/image-data-generator.toml): Keras 2's augmenting image iterator in numpy, PIL and torch.

It draws its random parameters from numpy's global generator in Keras's order (np.random.seed(seed + batches
seen) as Keras seeds a flow), builds Keras's affine matrix (rotation @ shift @ shear @ zoom about the centre) and
samples it as scipy.ndimage.affine_transform(order=1) does (bilinear; fill_mode 'nearest' clamps, 'reflect' is
half-sample symmetric, 'constant' gives cval outside the image), so a seeded flow gives Keras's batches;
tests/test_image_data_generator.py compares them with tf_keras's."""
from __future__ import annotations

_IMAGE_DATA_GENERATOR = '''

class ImageDataGenerator:
    \"\"\"keras.preprocessing.image.ImageDataGenerator (channels-last) in numpy and torch: flow(x, y) and
    flow_from_directory(directory) give iterators of (images, labels) batches as float32 torch tensors,
    (batch, height, width, channels), each image augmented with parameters drawn from numpy's global
    generator exactly as Keras draws them (rotation_range degrees; shifts: a fraction of the size below 1, else
    pixels; shear_range degrees; zoom_range [1-z, 1+z] drawn per axis; flips with probability 1/2), moved by
    Keras's affine matrix with bilinear sampling as scipy.ndimage does, then preprocessing_function and
    rescale. Iterating one gives one epoch of batches (len() of them, reshuffled at its end), as fit takes
    them; next() runs on forever as Keras's iterator.\"\"\"

    def __init__(self, samplewise_center=False, samplewise_std_normalization=False, rotation_range=0,
                 width_shift_range=0.0, height_shift_range=0.0, shear_range=0.0, zoom_range=0.0, fill_mode="nearest",
                 cval=0.0, horizontal_flip=False, vertical_flip=False, rescale=None, preprocessing_function=None,
                 data_format="channels_last", validation_split=0.0, interpolation_order=1, dtype=None):
        if data_format not in (None, "channels_last") or interpolation_order != 1:
            raise NotImplementedError("ImageDataGenerator: only channels_last images and interpolation_order=1")
        if fill_mode not in ("nearest", "reflect", "constant"):
            raise NotImplementedError(f"ImageDataGenerator: fill_mode {fill_mode!r} is not translated")
        if not 0 <= validation_split < 1:
            raise ValueError(f"validation_split must be between 0 and 1, got {validation_split}")
        self.samplewise_center, self.samplewise_std_normalization = samplewise_center, samplewise_std_normalization
        self.rotation_range, self.shear_range, self.fill_mode, self.cval = rotation_range, shear_range, fill_mode, cval
        self.width_shift_range, self.height_shift_range = width_shift_range, height_shift_range
        self.horizontal_flip, self.vertical_flip = horizontal_flip, vertical_flip
        self.rescale, self.preprocessing_function, self.dtype = rescale, preprocessing_function, dtype or "float32"
        self._validation_split = validation_split
        if isinstance(zoom_range, (float, int)):
            self.zoom_range = [1 - zoom_range, 1 + zoom_range]
        else:
            self.zoom_range = [zoom_range[0], zoom_range[1]]

    def fit(self, x, augment=False, rounds=1, seed=None):
        \"\"\"Keras computes featurewise statistics here; without featurewise options nothing uses them.\"\"\"
        return None

    def get_random_transform(self, img_shape, seed=None):
        import numpy as np

        if seed is not None:
            np.random.seed(seed)
        theta = np.random.uniform(-self.rotation_range, self.rotation_range) if self.rotation_range else 0
        shifts = []
        for value, axis in ((self.height_shift_range, 0), (self.width_shift_range, 1)):
            if not value:
                shifts.append(0)
                continue
            try:  # an int or a list: one of the values, with a random sign
                shift = np.random.choice(value)
                shift *= np.random.choice([-1, 1])
            except ValueError:  # a float
                shift = np.random.uniform(-value, value)
            if np.max(value) < 1:
                shift *= img_shape[axis]
            shifts.append(shift)
        shear = np.random.uniform(-self.shear_range, self.shear_range) if self.shear_range else 0
        if self.zoom_range[0] == 1 and self.zoom_range[1] == 1:
            zx, zy = 1, 1
        else:
            zx, zy = np.random.uniform(self.zoom_range[0], self.zoom_range[1], 2)
        flip_horizontal = (np.random.random() < 0.5) * self.horizontal_flip
        flip_vertical = (np.random.random() < 0.5) * self.vertical_flip
        return {"theta": theta, "tx": shifts[0], "ty": shifts[1], "shear": shear, "zx": zx, "zy": zy,
                "flip_horizontal": flip_horizontal, "flip_vertical": flip_vertical}

    def apply_transform(self, x, params):
        \"\"\"One (height, width, channels) numpy image moved as Keras's apply_affine_transform moves it (its
        matrix; scipy.ndimage's order-1 sampling and fill modes), then flipped.\"\"\"
        import numpy as np

        theta, tx, ty = params.get("theta", 0), params.get("tx", 0), params.get("ty", 0)
        shear, zx, zy = params.get("shear", 0), params.get("zx", 1), params.get("zy", 1)
        matrix = np.eye(3)
        if theta != 0:
            t = np.deg2rad(theta)
            matrix = matrix @ np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
        if tx != 0 or ty != 0:
            matrix = matrix @ np.array([[1, 0, tx], [0, 1, ty], [0, 0, 1]])
        if shear != 0:
            s = np.deg2rad(shear)
            matrix = matrix @ np.array([[1, -np.sin(s), 0], [0, np.cos(s), 0], [0, 0, 1]])
        if zx != 1 or zy != 1:
            matrix = matrix @ np.array([[zx, 0, 0], [0, zy, 0], [0, 0, 1]])
        if theta != 0 or tx != 0 or ty != 0 or shear != 0 or zx != 1 or zy != 1:
            h, w = x.shape[0], x.shape[1]
            o_x, o_y = h / 2 - 0.5, w / 2 - 0.5
            matrix = np.array([[1, 0, o_x], [0, 1, o_y], [0, 0, 1]]) @ matrix @ np.array(
                [[1, 0, -o_x], [0, 1, -o_y], [0, 0, 1]])
            matrix[:, [0, 1]] = matrix[:, [1, 0]]  # Keras's swap of x and y for row-major images
            matrix[[0, 1]] = matrix[[1, 0]]
            r, c = np.meshgrid(np.arange(h, dtype="float64"), np.arange(w, dtype="float64"), indexing="ij")
            rr = matrix[0, 0] * r + matrix[0, 1] * c + matrix[0, 2]  # the input point each output pixel reads
            cc = matrix[1, 0] * r + matrix[1, 1] * c + matrix[1, 2]
            r0, c0 = np.floor(rr), np.floor(cc)
            fr, fc = rr - r0, cc - c0

            def index(i, n):
                if self.fill_mode == "reflect":  # d c b a | a b c d | d c b a
                    i = np.mod(i, 2 * n)
                    i = np.where(i >= n, 2 * n - 1 - i, i)
                return np.clip(i, 0, n - 1).astype("int64")

            out = np.zeros(x.shape, dtype="float64")
            for dr, wr in ((0, 1 - fr), (1, fr)):
                for dc, wc in ((0, 1 - fc), (1, fc)):
                    out += (wr * wc)[..., None] * x[index(r0 + dr, h), index(c0 + dc, w)]
            if self.fill_mode == "constant":  # scipy's 'constant': no interpolation beyond the edges
                outside = (rr < 0) | (rr > h - 1) | (cc < 0) | (cc > w - 1)
                out[outside] = self.cval
            x = out.astype(x.dtype)
        if params.get("flip_horizontal", False):
            x = x[:, ::-1]
        if params.get("flip_vertical", False):
            x = x[::-1]
        return np.ascontiguousarray(x)

    def random_transform(self, x, seed=None):
        return self.apply_transform(x, self.get_random_transform(x.shape, seed))

    def standardize(self, x):
        import numpy as np

        if self.preprocessing_function:
            x = self.preprocessing_function(x)
        if self.rescale:
            x *= self.rescale
        if self.samplewise_center:
            x -= np.mean(x, keepdims=True)
        if self.samplewise_std_normalization:
            x /= np.std(x, keepdims=True) + 1e-6
        return x

    def _augment(self, x):
        params = self.get_random_transform(x.shape)
        return self.standardize(self.apply_transform(x.astype(self.dtype), params))

    def flow(self, x, y=None, batch_size=32, shuffle=True, sample_weight=None, seed=None, save_to_dir=None,
             save_prefix="", save_format="png", ignore_class_split=False, subset=None):
        \"\"\"Batches of the arrays x (n, height, width, channels) and y; subset "training" / "validation": the
        samples after / before the first validation_split of them, as Keras splits them.\"\"\"
        import numpy as np

        if save_to_dir is not None:
            raise NotImplementedError("ImageDataGenerator.flow: save_to_dir is not translated")
        x = np.asarray(x, dtype=self.dtype)
        y = None if y is None else np.asarray(y)
        sample_weight = None if sample_weight is None else np.asarray(sample_weight)
        if subset is not None:
            split = int(len(x) * self._validation_split)
            if y is not None and not ignore_class_split and not np.array_equal(np.unique(y[:split]),
                                                                               np.unique(y[split:])):
                raise ValueError("Training and validation subsets have different number of classes after the split. "
                                 "If your numpy arrays are sorted by the label, you might want to shuffle them.")
            part = slice(None, split) if subset == "validation" else slice(split, None)
            x, y = x[part], None if y is None else y[part]
            sample_weight = None if sample_weight is None else sample_weight[part]
        generator = self

        def batch(index_array):
            import torch

            out = np.zeros((len(index_array),) + x.shape[1:], dtype=self.dtype)
            for i, j in enumerate(index_array):
                out[i] = generator._augment(x[j])
            out = torch.from_numpy(out)
            if y is None:
                return out
            if sample_weight is None:
                return out, torch.as_tensor(y[index_array])
            return out, torch.as_tensor(y[index_array]), torch.as_tensor(sample_weight[index_array])
        return ImageBatches(len(x), batch_size, shuffle, seed, batch)

    def flow_from_directory(self, directory, target_size=(256, 256), color_mode="rgb", classes=None,
                            class_mode="categorical", batch_size=32, shuffle=True, seed=None, save_to_dir=None,
                            save_prefix="", save_format="png", follow_links=False, subset=None,
                            interpolation="nearest", keep_aspect_ratio=False):
        \"\"\"Batches of the images under directory's class folders (sorted names, or classes), each class's
        files in sorted order (subset "validation": the first validation_split of each class's files,
        "training": the rest, as Keras splits them), loaded with PIL and resized to target_size with
        interpolation; labels by class_mode: "categorical" one-hot float32, "binary" and "sparse" the class
        index as float32 (as Keras gives it), "input" the images, None no labels.\"\"\"
        import os
        import numpy as np
        import PIL.Image

        if save_to_dir is not None or keep_aspect_ratio:
            raise NotImplementedError("flow_from_directory: save_to_dir and keep_aspect_ratio are not translated")
        if class_mode not in ("categorical", "binary", "sparse", "input", None):
            raise NotImplementedError(f"flow_from_directory: class_mode {class_mode!r} is not translated")
        formats = ("png", "jpg", "jpeg", "bmp", "ppm", "tif", "tiff")
        if not classes:
            classes = [d for d in sorted(os.listdir(directory)) if os.path.isdir(os.path.join(directory, d))]
        class_indices = dict(zip(classes, range(len(classes))))
        split = None
        if subset == "validation":
            split = (0, self._validation_split)
        elif subset == "training":
            split = (self._validation_split, 1)
        filenames, labels = [], []
        for name in classes:
            root = os.path.join(directory, name)
            found = [(here, f) for here, _, files in sorted(os.walk(root, followlinks=follow_links), key=lambda w: w[0])
                     for f in sorted(files) for e in formats if f.lower().endswith("." + e)]
            if split:
                found = found[int(split[0] * len(found)):int(split[1] * len(found))]
            for here, f in found:
                filenames.append(os.path.join(name, os.path.relpath(os.path.join(here, f), root)))
                labels.append(class_indices[name])
        labels = np.array(labels, dtype="int32")
        channels = {"rgb": 3, "rgba": 4, "grayscale": 1}[color_mode]
        resample = {"nearest": PIL.Image.NEAREST, "bilinear": PIL.Image.BILINEAR, "bicubic": PIL.Image.BICUBIC,
                    "hamming": PIL.Image.HAMMING, "box": PIL.Image.BOX, "lanczos": PIL.Image.LANCZOS}[interpolation]
        print(f"Found {len(filenames)} images belonging to {len(classes)} classes.")
        generator = self

        def load(path):
            with PIL.Image.open(path) as img:
                img = img.convert({1: "L", 3: "RGB", 4: "RGBA"}[channels])
                size = (target_size[1], target_size[0])
                if img.size != size:
                    img = img.resize(size, resample)
                return np.asarray(img, dtype=generator.dtype).reshape(target_size[0], target_size[1], channels)

        def batch(index_array):
            import torch

            out = np.zeros((len(index_array), target_size[0], target_size[1], channels), dtype=self.dtype)
            for i, j in enumerate(index_array):
                out[i] = generator._augment(load(os.path.join(directory, filenames[j])))
            images = torch.from_numpy(out)
            if class_mode == "input":
                return images, images.clone()
            if class_mode in ("binary", "sparse"):  # both float32, as Keras gives them
                return images, torch.from_numpy(labels[index_array].astype(self.dtype))
            if class_mode == "categorical":
                onehot = np.zeros((len(index_array), len(classes)), dtype=self.dtype)
                onehot[np.arange(len(index_array)), labels[index_array]] = 1.0
                return images, torch.from_numpy(onehot)
            return images
        batches = ImageBatches(len(filenames), batch_size, shuffle, seed, batch)
        batches.class_indices, batches.classes, batches.labels = class_indices, labels, labels
        batches.filenames = filenames
        batches.filepaths = [os.path.join(directory, f) for f in filenames]
        batches.samples, batches.num_classes = len(filenames), len(classes)
        batches.image_shape = (target_size[0], target_size[1], channels)
        return batches

    def flow_from_dataframe(self, *args, **kwargs):
        raise NotImplementedError("ImageDataGenerator.flow_from_dataframe is not translated: list the frame's "
                                  "files and labels and give them to a Dataset that loads each image")


class ImageBatches:
    \"\"\"Keras's image Iterator: len() batches of batch_size; the order of the samples shuffled (numpy's
    permutation, seeded with seed + the batches seen, as Keras seeds it) at the start of each epoch.\"\"\"

    def __init__(self, n, batch_size, shuffle, seed, batch):
        self.n, self.batch_size, self.shuffle, self.seed, self._batch = n, batch_size, shuffle, seed, batch
        self.batch_index, self.total_batches_seen, self.index_array = 0, 0, None

    def _set_index_array(self):
        import numpy as np

        self.index_array = np.random.permutation(self.n) if self.shuffle else np.arange(self.n)

    def __len__(self):
        return (self.n + self.batch_size - 1) // self.batch_size

    def __getitem__(self, idx):
        import numpy as np

        if idx >= len(self):
            raise ValueError(f"Asked to retrieve element {idx}, but the Sequence has length {len(self)}")
        if self.seed is not None:
            np.random.seed(self.seed + self.total_batches_seen)
        self.total_batches_seen += 1
        if self.index_array is None:
            self._set_index_array()
        return self._batch(self.index_array[self.batch_size * idx:self.batch_size * (idx + 1)])

    def on_epoch_end(self):
        self._set_index_array()

    def reset(self):
        self.batch_index = 0

    def __iter__(self):  # one epoch, as fit reads it (Keras's own iterator runs on forever: next())
        for idx in range(len(self)):
            yield self[idx]
        self.on_epoch_end()

    def __next__(self):
        import numpy as np

        if self.seed is not None:
            np.random.seed(self.seed + self.total_batches_seen)
        if self.batch_index == 0:
            self._set_index_array()
        current = (self.batch_index * self.batch_size) % self.n if self.n else 0
        self.batch_index = self.batch_index + 1 if self.n > current + self.batch_size else 0
        self.total_batches_seen += 1
        return self._batch(self.index_array[current:current + self.batch_size])
'''

IMAGEGEN_HELPERS: dict[str, str] = {"ImageDataGenerator": _IMAGE_DATA_GENERATOR}
IMAGEGEN_DEPS: dict[str, tuple[str, ...]] = {}
