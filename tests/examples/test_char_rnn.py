"""examples/rnn/char_rnn.py: data preparation, falling loss, graph = eager, sampling."""

from __future__ import annotations

import numpy as np
import pytest
from examples_support import EXAMPLES, load_example
from singa import device


@pytest.fixture(scope="module")
def cr():
    return load_example("rnn/char_rnn.py", "singa_example_char_rnn")


def test_shipped_text_is_small_public_domain_ascii():
    text = (EXAMPLES / "rnn" / "shakespeare.txt").read_text()
    assert 2000 < len(text) < 20000
    assert "public domain" in text.splitlines()[3] or "public domain" in text[:600]
    assert text.isascii()


def test_data_sequences_and_targets(cr, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("abcdefghij" * 20)
    d = cr.Data(str(path), batch_size=4, seq_length=9, train_ratio=0.75, seed=1)
    assert d.vocab_size == 10 and d.idx_to_char[0] == "a"
    assert d.train_dat.shape == (15, 10) and d.val_dat.shape == (5, 10)
    # each sequence is 10 consecutive characters of the text
    for row in np.concatenate([d.train_dat, d.val_dat]):
        s = "".join(d.idx_to_char[int(i)] for i in row)
        assert s in "abcdefghij" * 21
    x = cr.one_hot_steps(d.train_dat[:4, :-1], d.vocab_size)
    assert x.shape == (9, 4, 10)
    np.testing.assert_array_equal(x.argmax(-1), d.train_dat[:4, :-1].T)


def _short_run(cr, graph, epochs=6):
    data = cr.Data(str(EXAMPLES / "rnn" / "shakespeare.txt"), batch_size=16, seq_length=24)
    _, train_losses, val_losses = cr.train(data, epochs, hidden_size=32, seq_length=24,
                                           lr=0.01, dev=device.get_default_device(),
                                           graph=graph, verbose=False)
    return data, train_losses, val_losses


def test_loss_falls_and_graph_matches_eager(cr):
    data, g_train, g_val = _short_run(cr, graph=True)
    # train() has no schedule over epochs (fixed-rate Adam, data shuffled once), so eager
    # mode's first two epochs must give graph mode's first two (the other four would only
    # repeat the comparison: on a device without the fused LSTM kernels, e.g. OpenCL, they
    # cost a minute)
    _, e_train, e_val = _short_run(cr, graph=False, epochs=2)
    start = np.log(data.vocab_size)
    assert g_train[0] < start + 0.2  # the first epoch starts from uniform over the vocabulary
    assert g_train[-1] < g_train[0] - 0.5 and g_val[-1] < g_val[0] - 0.3
    assert len(e_train) == len(e_val) == 2
    np.testing.assert_allclose(g_train[:2], e_train, rtol=1e-4)
    np.testing.assert_allclose(g_val[:2], e_val, rtol=1e-4)


def test_sampling_and_checkpoint_round_trip(cr, tmp_path):
    data = cr.Data(str(EXAMPLES / "rnn" / "shakespeare.txt"), batch_size=8, seq_length=12)
    dev = device.get_default_device()
    m, _, _ = cr.train(data, 1, hidden_size=16, seq_length=12, dev=dev, verbose=False)
    text = cr.sample(m, data, dev, "Shall", nsamples=40)
    assert text.startswith("Shall") and len(text) == 45
    assert set(text) <= set(data.char_to_idx)
    greedy = cr.sample(m, data, dev, "Shall", nsamples=20, use_max=True)
    assert greedy == cr.sample(m, data, dev, "Shall", nsamples=20, use_max=True)
    ckpt = tmp_path / "rnn.zip"
    m.save_states(str(ckpt))
    fresh = cr.CharRNN(data.vocab_size, 16)
    fresh.eval()
    inputs, _ = cr.make_placeholders(8, 12, data.vocab_size, dev)
    fresh(inputs)  # creates the parameters and the state tensors
    fresh.load_states(str(ckpt))
    assert greedy == cr.sample(fresh, data, dev, "Shall", nsamples=20, use_max=True)
