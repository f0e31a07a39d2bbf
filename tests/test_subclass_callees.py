"""Issue 8's residual block, and the three patterns it showed, wherever they occur:

- a value known only at run time reaching an argument whose translation depends on it (a stride that
  is a parameter is not 1: 'same' padding is computed at each call, never torch's padding='same');
- a channels-first sub-model called from a body that keeps channels-last tensors (permuted at the
  call by the ranks the Sequential pass records, refused where they are unknown);
- an argument dropped from a call whose callee is not known to be a Keras layer (a lambda, a function:
  the `training` argument stays unless every value the attribute may hold is a torch module).

Numerics: fixtures/tf2torch/strided_residual (strides 1, 2 and 3, odd and even sizes) runs and verifies
in tests/test_fixtures.py and tests/test_verify.py; here, what the translation says.
"""
from __future__ import annotations

import textwrap

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")


def tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py", PACK)
    again = translate_source(r.output, "model.py", PACK)
    assert again.output == r.output, "translating the output again must change nothing"
    return r


def errors(r) -> list[str]:
    return [f.code for f in r.findings if f.severity is Severity.ERROR]


BLOCK = '''
import tensorflow as tf

class Block(tf.keras.Model):
    def __init__(self, filters, strides=1):
        super().__init__()
        self.conv = tf.keras.layers.Conv2D(filters, 3, strides=strides, padding="same")
        if strides != 1:
            self.shortcut = tf.keras.Sequential([tf.keras.layers.Conv2D(filters, 1, strides=strides)])
        else:
            self.shortcut = lambda x, _: x

    def call(self, x, training=False):
        return self.conv(x) + self.shortcut(x, training)
'''


def test_the_block_of_the_issue():
    r = tx(BLOCK)
    assert errors(r) == []
    out = r.output
    # 1. no padding="same" at a stride torch refuses it for: TF's padding computed at each call
    assert 'padding="same")' not in out
    assert "self.conv = nn.Sequential(SamePad2d(3, strides), nn.LazyConv2d(filters, 3, stride=strides))" in out
    assert out.count("class SamePad2d(nn.Module):") == 1 and "return F.pad(x, pads)" in out
    # 2. the channels-first Sequential is fed channels-first tensors and gives channels-last ones back
    assert "self.shortcut(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)" in out
    # 3. the lambda that ignored its second argument is a module like the other branch's value
    assert "self.shortcut = nn.Identity()" in out and "lambda" not in out
    assert {(x.source, x.target) for x in r.layers} == {("conv", "conv.1"), ("shortcut.layers[0]", "shortcut.0")}


def test_same_padding_with_a_kernel_or_dilation_known_only_at_run_time():
    r = tx('''
        from tensorflow.keras import Sequential, layers

        def make(k, d, s):
            a = Sequential([layers.Conv2D(4, k, padding="same")])
            b = Sequential([layers.Conv2D(4, 3, strides=2, dilation_rate=d, padding="same")])
            c = Sequential([layers.Conv1D(4, 5, strides=s, padding="same")])
            return a, b, c
    ''')
    assert errors(r) == []
    assert 'nn.LazyConv2d(4, k, padding="same")' in r.output  # stride 1: torch's own 'same' is TF's
    assert "SamePad2d(3, 2, d), nn.LazyConv2d(4, 3, stride=2, dilation=d)" in r.output
    assert "SamePad1d(5, s), nn.LazyConv1d(4, 5, stride=s)" in r.output
    assert "class SamePad1d(nn.Module):" in r.output and "x.shape[:-2:-1]" in r.output


def test_pooling_stride_known_only_at_run_time_is_not_its_default():
    r = tx('''
        from tensorflow.keras import Sequential, layers

        def make(s):
            valid = Sequential([layers.Input((8, 8, 3)), layers.MaxPooling2D(2, strides=s), layers.Flatten(),
                                layers.Dense(4)])
            same = Sequential([layers.Input((8, 8, 3)), layers.MaxPooling2D(3, strides=s, padding="same")])
            return valid, same
    ''')
    assert "nn.MaxPool2d(2, stride=s)" in r.output
    # the pooled size depends on s: the Dense after the Flatten cannot be sized (it was 3 * 4 * 4 = 48
    # when the stride was read as the pool size)
    assert "nn.Linear(48, 4)" not in r.output
    assert "padding='same' needs literal pool_size and strides" in " ".join(f.message for f in r.findings)


def test_sequential_of_unknown_input_rank_called_from_a_kept_layout_body_is_refused():
    r = tx('''
        import tensorflow as tf

        class Net(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.body = tf.keras.Sequential([tf.keras.layers.Activation("relu"), tf.keras.layers.Conv2D(4, 3)])

            def call(self, x):
                return self.body(x)
    ''')
    assert errors(r) == ["shape-unknown"]
    assert "# fwport: shape-unknown: self.body is an nn.Sequential converted to channels-first" in r.output


def test_sequential_whose_output_only_is_channels_first_is_permuted_back():
    r = tx('''
        import tensorflow as tf

        class Decoder(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.up = tf.keras.Sequential([tf.keras.layers.Dense(32, input_shape=(8,)), tf.keras.layers.Reshape((4, 4, 2)),
                                               tf.keras.layers.Conv2D(3, 3, padding="same")])

            def call(self, z):
                return self.up(z) * 2.0
    ''')
    assert errors(r) == []
    assert "return self.up(z).permute(0, 2, 3, 1) * 2.0" in r.output


def test_training_is_kept_for_callables_that_are_not_modules():
    r = tx('''
        import tensorflow as tf

        class Net(tf.keras.Model):
            def __init__(self, fn, units=4):
                super().__init__()
                self.dense = tf.keras.layers.Dense(units)
                self.noise = lambda x, training: x + 1.0 if training else x
                self.fn = fn
                self.steps = [lambda x, t: x * 2.0 if t else x]

            def call(self, x, training=False):
                x = self.dense(x, training=training)
                x = self.noise(x, training)
                x = self.fn(x, training=training)
                for step in self.steps:
                    x = step(x, training)
                return x
    ''')
    assert errors(r) == []
    out = r.output
    assert "x = self.dense(x)" in out
    assert "x = self.noise(x, self.training)" in out
    assert "x = self.fn(x, training=self.training)" in out
    assert "x = step(x, self.training)" in out


def test_training_is_dropped_for_lists_of_layers():
    r = tx('''
        import tensorflow as tf

        class Net(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.blocks = [tf.keras.layers.Dense(4) for _ in range(3)]
                self.more = []
                for _ in range(2):
                    self.more.append(tf.keras.layers.Dropout(0.1))

            def call(self, x, training=False):
                for b in self.blocks:
                    x = b(x, training=training)
                for d in self.more:
                    x = d(x, training)
                return x
    ''')
    assert "x = b(x)" in r.output
    assert "x = d(x)" in r.output


def test_a_module_or_a_callable_that_uses_training_is_an_error():
    r = tx('''
        import tensorflow as tf

        class Net(tf.keras.Model):
            def __init__(self, noisy):
                super().__init__()
                if noisy:
                    self.noise = tf.keras.layers.Dropout(0.1)
                else:
                    self.noise = lambda x, training: x * 2.0 if training else x

            def call(self, x, training=False):
                return self.noise(x, training)
    ''')
    assert "unsupported-construct" in errors(r)
    msg = next(f.message for f in r.findings if "self.noise" in f.message)
    assert "uses its training argument" in msg
    assert "self.noise(x, self.training)" in r.output  # as written, and a comment says why


def test_a_lambda_beside_a_channels_first_module_that_is_not_an_identity_is_an_error():
    r = tx('''
        import tensorflow as tf

        class Block(tf.keras.Model):
            def __init__(self, filters, strides=1):
                super().__init__()
                if strides != 1:
                    self.shortcut = tf.keras.Sequential([tf.keras.layers.Conv2D(filters, 1, strides=strides)])
                else:
                    self.shortcut = lambda x, _: x * 2.0

            def call(self, x, training=False):
                return self.shortcut(x, training)
    ''')
    assert errors(r) == ["unsupported-construct"]
    assert "self.shortcut holds a channels-first torch module elsewhere" in r.findings[-1].message or any(
        "holds a channels-first torch module elsewhere" in f.message for f in r.findings)


def test_merge_layers_written_out_keep_their_precedence():
    r = tx('''
        import tensorflow as tf
        from tensorflow.keras import layers

        class Net(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.diff = layers.Subtract()
                self.add = layers.Add()
                self.cat = layers.Concatenate()

            def call(self, a, b):
                y = 2.0 * self.diff([a, b]) - self.diff([b, a])
                z = -self.add([a, b]) + self.add([a, b]).sum() + self.add([a, b])[0]
                return y * z + self.cat([a, b])
    ''')
    assert errors(r) == []
    assert "y = 2.0 * (a - b) - (b - a)" in r.output
    assert "z = -(a + b) + (a + b).sum() + (a + b)[0]" in r.output
    assert "return y * z + torch.cat([a, b], dim=-1)" in r.output
