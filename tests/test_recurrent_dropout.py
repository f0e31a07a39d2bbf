"""recurrent_dropout= of Keras's LSTM / GRU / SimpleRNN in a file that trains (issue 8; deep-learning-with-python
chapter 10/13 timeseries): the RecurrentDropout<kind> helper, a subclass of torch's module (the same parameters),
torch's recurrence in eval() (verified against Keras) and in train() the cell's loop with Keras's masks: one per gate
of the inputs (dropout=) and of the previous output (recurrent_dropout=), drawn once per sequence. The training
step is compared with Keras's own cell given the same masks, and the masks' draw is checked statistically."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_findings as _errors
from runners import Warm

np = pytest.importorskip("numpy")

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_seq():
    return keras.Sequential([keras.Input(shape=(7, 5)), layers.LSTM(6, dropout=0.25, recurrent_dropout=0.3,
                                                                     return_sequences=True),
                             layers.GRU(4, recurrent_dropout=0.5), layers.Dense(2)])


def build_fn():
    inp = keras.Input(shape=(None, 5))
    x = layers.SimpleRNN(3, recurrent_dropout=0.4, return_sequences=True)(inp)
    x = layers.LSTM(4, recurrent_dropout=0.1)(x)
    return keras.Model(inp, layers.Dense(2)(x))


if __name__ == "__main__":
    model = build_seq()
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, y)
'''


@pytest.fixture(scope="module")
def translated():
    r = translate_source(SOURCE, "m.py")
    assert not _errors(r), r.findings
    return r


def test_recurrent_dropout_becomes_the_helper_and_verifies_at_inference(translated, tmp_path):
    out = translated.output
    assert "RecurrentDropoutLSTM(5, 6, batch_first=True, input_dropout=0.25, recurrent_dropout=0.3)" in out
    assert "RecurrentDropoutGRU(6, 4, batch_first=True, recurrent_dropout=0.5)" in out
    assert "RecurrentDropoutRNN(5, 3, batch_first=True, recurrent_dropout=0.4)" in out
    assert "SequenceDropout" not in out  # dropout= is drawn per gate by the helper, not before the module
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(SOURCE)
    (tmp_path / "m_torch.py").write_text(out)
    session = Warm.session()
    for model in ("build_seq", "build_fn"):
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), model,
                              inputs=["float32[3,7,5]"], checks=("forward", "grad"), device="cpu"), session)
        assert cert["verdict"] == "pass", (model, cert.get("problems") or cert.get("first_diverging"))


def _helpers(translated):
    ns: dict = {}
    exec(compile(translated.output, "m_torch.py", "exec"), ns)
    return ns


@pytest.mark.parametrize("kind,gates", [("LSTM", 4), ("GRU", 3), ("RNN", 1)])
def test_training_loop_is_torchs_recurrence_without_dropout_and_masks_once_per_sequence(translated, kind, gates):
    torch = pytest.importorskip("torch")
    ns = _helpers(translated)
    torch.manual_seed(0)
    x = torch.randn(5, 9, 3)
    plain = ns[f"RecurrentDropout{kind}"](3, 4, batch_first=True)
    out_train, state_train = plain.train()(x)
    out_eval, state_eval = plain.eval()(x)
    torch.testing.assert_close(out_train, out_eval, rtol=1e-5, atol=1e-6)  # the loop is torch's recurrence
    for a, b in zip(state_train if kind == "LSTM" else [state_train], state_eval if kind == "LSTM" else [state_eval]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    m = ns[f"RecurrentDropout{kind}"](3, 4, batch_first=True, input_dropout=0.2, recurrent_dropout=0.4).train()
    drawn = []
    masks = m.masks
    m.masks = lambda like, rate, g: drawn.append(masks(like, rate, g)) or drawn[-1]
    m(x)
    assert len(drawn) == 2  # one draw of each kind of mask for the whole sequence, not one per step
    (mx, mh) = drawn
    assert tuple(mx.shape) == (gates, 5, 3) and tuple(mh.shape) == (gates, 5, 4)
    assert all(v == 0 or abs(v - 1 / 0.6) < 1e-6 for v in torch.unique(mh).tolist())  # scaled as Keras's
    # statistically: each gate's mask of the state drops about 40% of its units, independently per gate and sample
    big = ns[f"RecurrentDropout{kind}"](3, 64, batch_first=True, recurrent_dropout=0.4).train()
    keep = big.masks(torch.zeros(2000, 64), 0.4, gates)
    assert abs(float((keep == 0).float().mean()) - 0.4) < 0.01
    if gates > 1:
        assert abs(float(((keep[0] == 0) & (keep[1] == 0)).float().mean()) - 0.16) < 0.01
    assert m.eval()(x)[0].shape == (5, 9, 4) and torch.equal(m(x)[0], m(x)[0])  # eval() draws nothing


def _keras_weights_to_torch(kind, cell, module, torch):
    k, r = np.asarray(cell.kernel), np.asarray(cell.recurrent_kernel)
    b = np.asarray(cell.bias)
    with torch.no_grad():
        if kind == "GRU":  # Keras's gates z, r, h; torch's r, z, n; Keras's bias (2, 3 units): input and recurrent
            order = lambda w: np.concatenate([w[..., 4:8], w[..., 0:4], w[..., 8:12]], axis=-1)
            module.weight_ih_l0.copy_(torch.tensor(order(k).T))
            module.weight_hh_l0.copy_(torch.tensor(order(r).T))
            module.bias_ih_l0.copy_(torch.tensor(order(b[0])))
            module.bias_hh_l0.copy_(torch.tensor(order(b[1])))
        else:
            module.weight_ih_l0.copy_(torch.tensor(k.T))
            module.weight_hh_l0.copy_(torch.tensor(r.T))
            module.bias_ih_l0.copy_(torch.tensor(b))
            module.bias_hh_l0.zero_()


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_a_training_step_is_keras_cells_with_the_same_masks(translated, kind):
    torch = pytest.importorskip("torch")
    keras = pytest.importorskip("keras")
    ns = _helpers(translated)
    keras_name = {"LSTM": "LSTM", "GRU": "GRU", "RNN": "SimpleRNN"}[kind]
    layer = getattr(keras.layers, keras_name)(4, dropout=0.3, recurrent_dropout=0.5, return_sequences=True)
    x = np.random.default_rng(0).normal(size=(6, 8, 3)).astype("float32")
    layer(x)  # built
    assert layer.cell.implementation == 1 if kind != "RNN" else True  # the cell's path Keras takes with recurrent_dropout
    m = ns[f"RecurrentDropout{kind}"](3, 4, batch_first=True, input_dropout=0.3, recurrent_dropout=0.5).train()
    _keras_weights_to_torch(kind, layer.cell, m, torch)
    drawn = []
    masks = m.masks
    m.masks = lambda like, rate, g: drawn.append(masks(like, rate, g)) or drawn[-1]
    got = m(torch.tensor(x))[0].detach().numpy()
    mx, mh = (d.numpy() for d in drawn)
    if kind == "GRU":  # torch's gate order r, z, n → Keras's z, r, h
        mx, mh = mx[[1, 0, 2]], mh[[1, 0, 2]]
    cell = layer.cell
    cell._dropout_mask = list(mx) if kind != "RNN" else mx[0]
    cell._recurrent_dropout_mask = list(mh) if kind != "RNN" else mh[0]
    states = [np.zeros((6, 4), "float32")] * (2 if kind == "LSTM" else 1)
    outs = []
    for t in range(8):
        h, states = cell(x[:, t], states, training=True)
        outs.append(np.asarray(h))
    np.testing.assert_allclose(got, np.stack(outs, 1), rtol=1e-5, atol=1e-5)
    unmasked = ns[f"RecurrentDropout{kind}"](3, 4, batch_first=True)
    _keras_weights_to_torch(kind, layer.cell, unmasked, torch)
    assert not np.allclose(unmasked.train()(torch.tensor(x))[0].detach().numpy(), got, atol=1e-3)
