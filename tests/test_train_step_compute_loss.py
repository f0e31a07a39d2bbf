"""Keras 3's custom ``train_step`` calling the model's own ``self.compute_loss(x=x, y=y, y_pred=y_pred)``
(the class does not define it): the written TrainStepModule gives compute_loss as Keras 3's Trainer does,
compile's loss of (y, y_pred[, sample_weight]) plus each of self.losses summed (the layers' weight
regularizer penalties). Numbers: the source trained by Keras 3, the translation by torch, from the same
weights; the loss each step returns (History) and the weights after the fit compared. (The step returns it
as "total": Keras 3's fit logs its own metrics instead of a step's results whose keys are exactly theirs, here
its never-updated "loss" tracker, which TrainStepModule does not reproduce.)
"""
from __future__ import annotations


from test_train_step import _run, errors, tx
from train_step_net import net_driver, net_source, same_fit

NET = net_source(
    imports="import keras\nfrom keras import layers",
    loss="self.compute_loss(x=x, y=y, y_pred=y_pred)",
    result='        return {"total": loss}',
    compile="net.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3, momentum=0.5),\n"
            "            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))")

# keras-io's pattern with a sample weight (a mask of the labels)
WEIGHTED = NET.replace(
    "            loss = self.compute_loss(x=x, y=y, y_pred=y_pred)",
    "            mask = tf.cast(tf.math.not_equal(y, 0), \"float32\")\n"
    "            loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=mask)")

DRIVER = net_driver(n=8, epochs=2)


def test_compute_loss_with_a_regularizer_trains_as_keras3(tmp_path):
    keras_out, torch_out = _run(tmp_path, NET, DRIVER)
    same_fit(keras_out, torch_out, ["total"])
    # the penalty counts: without it the loss would be the cross-entropy alone
    out = tx(NET).output
    assert "    def compute_loss(self, x=None, y=None, y_pred=None, training=True):" in out
    assert "        loss = self.compute_loss(x=x, y=y, y_pred=y_pred)\n" in out


def test_compute_loss_with_a_sample_weight_trains_as_keras3(tmp_path):
    assert WEIGHTED != NET
    keras_out, torch_out = _run(tmp_path, WEIGHTED, DRIVER)
    same_fit(keras_out, torch_out, ["total"])
    out = tx(WEIGHTED).output
    assert "    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):" in out
    assert "def weighted_loss(loss_fn, input, target, sample_weight):" in out


def _messages(src: str) -> list[str]:
    return [m for _, m in errors(tx(src))]


def test_what_is_not_followed_stays_an_error():
    # compute_metrics: not translated
    msgs = _messages(NET.replace('        return {"total": loss}',
                                 '        return self.compute_metrics(x, y, y_pred)'))
    assert any(m.startswith("self.compute_metrics: ") for m in msgs), msgs
    # self.metrics beside compute_loss: Keras 3's "loss" tracker, which compute_loss does not update
    msgs = _messages(NET.replace('        return {"total": loss}',
                                 '        return {m.name: m.result() for m in self.metrics}'))
    assert any("compute_loss does not update" in m for m in msgs), msgs
    # arguments compute_loss does not take
    msgs = _messages(NET.replace("self.compute_loss(x=x, y=y, y_pred=y_pred)", "self.compute_loss(y, y_pred)"))
    assert any(m.startswith("self.compute_loss: ") and "no y or no y_pred" in m for m in msgs), msgs
    # no compile: no loss to compute
    msgs = _messages(NET.split("net = Net()")[0])
    assert any("no compile of a Net in this file" in m for m in msgs), msgs


def test_a_class_with_its_own_compute_loss_keeps_it():
    src = NET.replace("    def train_step(self, data):",
                      "    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):\n"
                      "        return tf.reduce_mean(tf.square(y_pred))\n\n    def train_step(self, data):")
    r = tx(src)
    assert "    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):\n" in r.output
    assert not any(m.startswith("self.compute_loss") for _, m in errors(r))
