"""compile(weighted_metrics=[...]) (Deep Learning with Python, chapter 15). Keras weighs these metrics by the sample
weights a batch brings and, as every compile metric, by the output's Keras mask (checked with Keras 3.15 and tf_keras
2.21: with no sample weights they equal the same metrics given as metrics=, under the same History names). The
written loop takes (x, y) batches, so they are its metrics; what would weigh them (fit's / evaluate's sample_weight=,
class_weight=, metrics= beside them, a dict per output) is refused.

Numbers: trained two epochs by Keras and by the translation from the same weights on fixed data (test_fit_callbacks's
driver), histories and evaluate compared."""
from __future__ import annotations

import numpy as np
from test_fit_callbacks import DRIVER, _run, errors, tx

WEIGHTED = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([keras.Input(shape=(10,)), layers.Dense(16, activation="tanh"), layers.Dense(3)])
model.compile(
    optimizer=keras.optimizers.SGD(learning_rate=0.3),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    weighted_metrics=["accuracy", keras.metrics.SparseTopKCategoricalAccuracy(2, name="top2")],
)


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


def test_weighted_metrics_without_sample_weights_match_keras(tmp_path):
    r = tx(WEIGHTED)
    (said,) = [f for f in r.findings if f.code == "idiom-replaced" and f.message.startswith("weighted_metrics=")]
    assert said.line == 9 and "sample weights" in said.message
    keras_out, torch_out = _run(tmp_path, WEIGHTED, DRIVER)
    kh, th = keras_out["history"], torch_out["history"]
    assert sorted(th) == sorted(kh) == ["accuracy", "loss", "top2", "val_accuracy", "val_loss", "val_top2"]
    for k in kh:
        assert len(th[k]) == len(kh[k]) == 2
        np.testing.assert_allclose(th[k], kh[k], rtol=2e-4, atol=1e-5, err_msg=k)
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=2e-4, atol=1e-5)
    assert kh["top2"] != kh["accuracy"]


def test_what_would_weigh_them_is_refused():
    both = WEIGHTED.replace('    weighted_metrics=', '    metrics=["accuracy"],\n    weighted_metrics=')
    (e,) = [m for _, m in errors(tx(both)) if m.startswith("model.compile(")]
    assert "weighted_metrics beside metrics is not translated" in e
    for call in ("model.fit(x, y, sample_weight=np.ones(len(y)), epochs=2, verbose=0)",
                 "model.fit(x, y, class_weight={0: 1.0, 1: 2.0, 2: 1.0}, epochs=2, verbose=0)",
                 "model.evaluate(x, y, sample_weight=np.ones(len(y)), verbose=0)"):
        src = WEIGHTED + f"\n\ndef other(x, y):\n    return {call}\n"
        found = errors(tx(src))
        assert any("weighted_metrics is not translated (Keras weighs those metrics" in m for _, m in found), found
    # a weighted_metrics=[] is no metric at all (Keras computes none)
    r = tx(WEIGHTED.replace('["accuracy", keras.metrics.SparseTopKCategoricalAccuracy(2, name="top2")]', "[]"))
    assert errors(r) == []


def test_on_a_masked_output_the_loss_mask_warning_says_what_the_loop_does_not():
    # Keras averages a metric over the steps the output's mask keeps (weighted or not); the loop does not: the
    # model's loss-mask warning says so, as for the loss
    r = tx('''
        import keras
        from keras import layers

        inputs = keras.Input(shape=(None,), dtype="int32")
        x = layers.Embedding(10, 4, mask_zero=True)(inputs)
        x = layers.GRU(5, return_sequences=True)(x)
        outputs = layers.Dense(10, activation="softmax")(x)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", weighted_metrics=["accuracy"])
    ''')
    assert errors(r) == []
    (w,) = [f for f in r.findings if f.code == "loss-mask"]
    assert "the loss and the metrics" in w.message
    assert "fit(" not in r.output or "def fit" in r.output
