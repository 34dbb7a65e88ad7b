"""The regression language model: missing labels, decoding, determinism, checkpoints."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from scipy.stats import kendalltau, norm

import nasrlm.rlm._members
import nasrlm.rlm.checkpoints
import nasrlm.rlm.predictor
from nasrlm.data import Objective
from nasrlm.rlm._residuals import UNVALIDATED_RESIDUAL_WEIGHT
from nasrlm.rlm.inference import _IncrementalDecoder, sample_digits
from nasrlm.rlm.language_model import LanguageModel
from nasrlm.rlm.model import RegressionLM, RLMConfig
from nasrlm.rlm.normalize import HIGH, LOW, Normalizer
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.recipes import TrainConfig
from nasrlm.rlm.tokenizers import DigitTokenizer
from nasrlm.rlm.training import Stepper, pad_batch

TINY = {"d_model": 32, "num_heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1,
        "dropout": 0.0}
OBJECTIVES = (Objective("acc", "%", "accuracy", "test", True),
              Objective("lat", "ms", "latency", "test", False))


#: the product's format and a shorter one, so that no length of 4 is assumed anywhere
FORMATS = pytest.mark.parametrize("number", [DigitTokenizer(), DigitTokenizer(2)], ids=["4digits", "2digits"])


def tiny_model(vocab: int = 50, number: DigitTokenizer | None = None) -> RegressionLM:
    torch.manual_seed(0)
    return RegressionLM(RLMConfig(text_vocab_size=vocab, text_pad_id=0, objectives=("a", "b"),
                                  number=(number or DigitTokenizer()).to_dict(), **TINY))


def test_normalizer_is_monotone_and_invertible() -> None:
    values = np.random.default_rng(0).lognormal(size=500)
    norm = Normalizer.fit(values)
    scaled = norm.forward(np.sort(values))
    assert norm.log and np.all(np.diff(scaled) >= 0) and scaled.min() >= LOW and scaled.max() <= HIGH
    np.testing.assert_allclose(norm.inverse(norm.forward(values)), values, rtol=1e-6)
    assert np.isnan(norm.forward(np.array([np.nan])))[0]
    assert Normalizer.from_dict(norm.to_dict()) == norm


def test_missing_labels_do_not_contribute_to_the_loss() -> None:
    model = tiny_model().eval()
    ids, mask = pad_batch([[3, 4, 5], [6, 7]], pad_id=0)
    numbers = model.vocab.numbers
    targets = torch.tensor(np.stack([numbers.encode_many(np.array([2.5, 7.25])),
                                     numbers.encode_many(np.array([3.0, 4.0]))]))
    masked = targets.clone()
    masked[0, 1] = -1
    other = masked.clone()
    other[1, 1] = torch.tensor(numbers.encode_many([9.0])[0])  # a known value changes the loss ...
    with torch.no_grad():
        base = model(ids, mask, ("a", "b"), masked)
        assert model(ids, mask, ("a", "b"), other) != base
        # ... but the digits hidden behind a missing label never do, whatever they would be
        swapped = masked.clone()
        swapped[0, 1] = -1
        assert model(ids, mask, ("a", "b"), swapped) == base


def teacher_forced_argmax(model: RegressionLM, ids, mask, objectives, targets) -> torch.Tensor:
    """Greedy digit at each position of ``targets`` (batch, objectives, length), full forward pass."""
    with torch.no_grad():
        hidden = model.t5.decoder(input_ids=model.decoder_inputs(objectives, targets),
                                  encoder_hidden_states=model.encode(ids, mask),
                                  encoder_attention_mask=mask).last_hidden_state
        hidden = hidden.reshape(len(ids), len(objectives), model.vocab.span, -1)[:, :, 1:]
        return model.head(hidden).argmax(-1)


@FORMATS
def test_sampling_only_yields_valid_numbers_and_matches_teacher_forcing(number) -> None:
    model = tiny_model(number=number).eval()
    ids, mask = pad_batch([[3, 4, 5, 9], [6, 7]], pad_id=0)
    digits = sample_digits(model, ids, mask, ("a", "b"), 32, generator=torch.Generator().manual_seed(0))
    assert digits.shape == (2, 32, 2, number.length)
    assert bool(((digits >= 0) & (digits < 10)).all())
    values = model.vocab.numbers.decode_many(digits.numpy())
    assert ((values >= 0) & (values < 10)).all()
    greedy = sample_digits(model, ids, mask, ("a", "b"), 1, temperature=0)[:, 0]
    assert torch.equal(teacher_forced_argmax(model, ids, mask, ("a", "b"), greedy), greedy), \
        "cached decoding must equal the full forward pass"


def test_the_decoder_reads_each_objective_as_its_tag_and_its_digits() -> None:
    model = tiny_model()
    vocab, d = model.vocab, model.vocab.first_number
    targets = torch.tensor([[[1, 2, 3, 4], [-1, -1, -1, -1]], [[9, 0, 0, 7], [5, 6, 7, 8]]])
    seq = model.decoder_inputs(("b", "a"), targets).tolist()
    assert seq[0] == [vocab.start, vocab.tags["b"], d + 1, d + 2, d + 3, d + 4, vocab.tags["a"],
                      *[vocab.missing] * 3]  # the last digit is never fed
    assert seq[1] == [vocab.start, vocab.tags["b"], d + 9, d, d, d + 7, vocab.tags["a"], d + 5, d + 6, d + 7]
    assert vocab.size == d + 10 and vocab.span == 5 and tiny_model(number=DigitTokenizer(2)).vocab.span == 3


@FORMATS
def test_incremental_decoder_equals_the_transformers_stack(number) -> None:
    model = tiny_model(number=number).eval()
    for block in model.t5.decoder.block:  # random, non-trivial norms so a skipped one shows
        block.layer[1].layer_norm.weight.data.uniform_(0.5, 1.5)
    ids, mask = pad_batch([[3, 4, 5, 9, 11], [6, 7]], pad_id=0)  # padding in the source
    samples, tokens = 3, torch.randint(model.vocab.first_number, model.vocab.size, (6, 7))
    tokens[:, :3] = tokens[::samples, :3].repeat_interleave(samples, dim=0)  # a prefix shared by samples
    with torch.no_grad():
        memory = model.encode(ids, mask)
        rows_memory = memory.repeat_interleave(samples, dim=0)
        expected = model.t5.decoder(input_ids=tokens, encoder_hidden_states=rows_memory,
                                    encoder_attention_mask=mask.repeat_interleave(samples, dim=0)
                                    ).last_hidden_state
        for shared in (False, True):  # the prefix per sample, or once per input
            decoder = _IncrementalDecoder(model, memory, mask, samples, max_length=7)
            prefix = decoder.feed(tokens[::samples, :3], shared=True).repeat_interleave(samples, dim=0) \
                if shared else decoder.feed(tokens[:, :3])  # several tokens at once, then one at a time
            got = [prefix] + [decoder.feed(tokens[:, t : t + 1]) for t in range(3, 7)]
            torch.testing.assert_close(torch.stack(got, 1), expected[:, 2:], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="exceeds"):
        decoder.feed(tokens[:, :1])
    with torch.no_grad():
        fresh = _IncrementalDecoder(model, memory, mask, samples, max_length=7)
        fresh.feed(tokens[:, :1])
    with pytest.raises(ValueError, match="shared feed must come before"):
        fresh.feed(tokens[::samples, 1:2], shared=True)


@FORMATS
def test_decoding_given_known_values_matches_teacher_forcing(number) -> None:
    model = tiny_model(number=number).eval()
    ids, mask = pad_batch([[3, 4, 5, 9], [6, 7]], pad_id=0)
    known = torch.as_tensor(number.encode_many(np.array([2.5, 7.25])))[:, None]  # (batch, 1, digits)
    greedy = sample_digits(model, ids, mask, ("b",), 3, temperature=0, given=(("a",), known))
    assert greedy.shape == (2, 3, 1, known.shape[-1])
    targets = torch.cat([known, greedy[:, 0]], dim=1)  # "a" fed, "b" decoded after it
    argmax = teacher_forced_argmax(model, ids, mask, ("a", "b"), targets)
    assert torch.equal(argmax[:, 1], greedy[:, 0, 0])
    unconditioned = sample_digits(model, ids, mask, ("b",), 1, temperature=0)
    assert unconditioned.shape == greedy[:, :1].shape
    with pytest.raises(ValueError, match="given tokens have shape"):
        sample_digits(model, ids, mask, ("b",), 1, given=(("a",), known[:1]))


@FORMATS
def test_reading_first_equals_its_greedy_decoding_fed_as_given(number) -> None:
    torch.manual_seed(0)
    model = RegressionLM(RLMConfig(text_vocab_size=50, text_pad_id=0, objectives=("a", "b", "c"),
                                   number=number.to_dict(), **TINY)).eval()
    ids, mask = pad_batch([[3, 4, 5, 9], [6, 7]], pad_id=0)
    known = torch.as_tensor(number.encode_many(np.array([2.5, 7.25])))[:, None]
    for given, reads in ((None, ("a", "b")), ((("a",), known), ("b",))):
        read = sample_digits(model, ids, mask, reads, 1, temperature=0, given=given)[:, 0]
        fed = (reads, read) if given is None else ((*given[0], *reads), torch.cat([given[1], read], dim=1))
        two_passes = sample_digits(model, ids, mask, ("c",), 8, generator=torch.Generator().manual_seed(0),
                                   given=fed)
        one_pass = sample_digits(model, ids, mask, ("c",), 8, generator=torch.Generator().manual_seed(0),
                                 given=given, reads=reads)
        assert one_pass.shape == (2, 8, 1, number.length)
        assert torch.equal(one_pass, two_passes), f"reading {reads} after {given and given[0]}"


def test_training_learns_is_deterministic_and_survives_a_checkpoint(corpus, tmp_path) -> None:
    tokenizer, texts, values = corpus
    config = TrainConfig(max_epochs=25, batch_size=16, learning_rate=3e-3, patience=25, progress=False)

    def fitted() -> RLMPredictor:
        predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
        partial = values.copy()
        partial[::3, 1] = np.nan  # missing labels still train
        report = predictor.fit(texts, partial, ("acc", "lat"), config)
        assert report.validation_loss[report.best_epoch] < report.validation_loss[0]
        return predictor

    first, second = fitted(), fitted()
    weights = second.lm.model.state_dict()
    for name, a in first.lm.model.state_dict().items():
        assert torch.equal(a, weights[name]), f"weights differ at {name}"
    predictions = first.predict(texts[:4], num_samples=16, seed=3)
    assert set(predictions[0]) == {"acc", "lat"} and predictions[0]["lat"].unit == "ms"
    p = predictions[0]["acc"]
    assert p.quantiles["q05"] <= p.median <= p.quantiles["q95"]

    first.save(tmp_path / "model")
    loaded = RLMPredictor.load(tmp_path / "model")
    assert loaded.lm.trained_objectives == ("acc", "lat")
    np.testing.assert_array_equal(loaded.sample(texts[:4], num_samples=16, seed=3),
                                  first.sample(texts[:4], num_samples=16, seed=3))


def test_keeping_the_last_epoch_trains_every_epoch_and_still_reports_its_validation_rows(corpus) -> None:
    tokenizer, texts, values = corpus
    shuffled = values[np.random.default_rng(0).permutation(len(values))]  # nothing to learn: it overfits
    config = TrainConfig(max_epochs=8, batch_size=16, learning_rate=1e-2, patience=1, keep_best=False,
                         progress=False)
    reports = []
    for keep_best in (False, True):
        predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
        reports.append(predictor.fit(texts, shuffled, ("acc", "lat"),
                                     TrainConfig(**{**vars(config), "keep_best": keep_best})))
    last, best = reports
    assert last.stopped_by == "max_epochs" and len(last.train_loss) == 8 == len(last.validation_loss)
    assert last.best_epoch == 7 and last.validation_rows
    # the same run keeping its best epoch stopped early, on the same validation losses
    assert best.stopped_by == "early_stopping" and best.best_epoch < len(best.validation_loss) - 1
    assert best.validation_loss == last.validation_loss[: len(best.validation_loss)]


def test_a_frozen_encoder_stays_as_it_was_while_the_decoder_learns(corpus) -> None:
    tokenizer, texts, values = corpus
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer,
                                          **{**TINY, "dropout": 0.1})
    before = {n: p.detach().clone() for n, p in predictor.lm.model.named_parameters()}
    config = TrainConfig(max_epochs=8, batch_size=16, learning_rate=3e-3, validation_fraction=0.0,
                         freeze_encoder=True, progress=False)
    report = predictor.fit(texts, values, ("acc", "lat"), config)
    assert report.train_loss[-1] < report.train_loss[0]  # the decoder learned from the cached states
    for name, p in predictor.lm.model.named_parameters():
        same = torch.equal(p, before[name])
        assert same == name.startswith(("t5.encoder.", "t5.shared.")), name
        assert p.requires_grad  # frozen for the fit only


def test_state_dropout_masks_the_stored_states_in_training_only(corpus, monkeypatch) -> None:
    tokenizer, texts, values = corpus
    seen = []  # per call of the decoder: whether it was training, and the share of zeros it read
    real = RegressionLM.decoder_loss

    def reading(model, memory, *args):
        seen.append((model.training, float((memory == 0).float().mean())))
        return real(model, memory, *args)

    monkeypatch.setattr(RegressionLM, "decoder_loss", reading)
    config = TrainConfig(max_epochs=2, batch_size=16, learning_rate=3e-3, validation_fraction=0.25,
                         freeze_encoder=True, progress=False, keep_best=False)
    zeros = {}
    for rate in (0.0, 0.5):
        seen.clear()
        predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
        predictor.fit(texts, values, ("acc", "lat"), TrainConfig(**{**vars(config), "state_dropout": rate}))
        zeros[rate] = {training: np.mean([z for t, z in seen if t == training]) for training in (True, False)}
    assert zeros[0.5][True] > zeros[0.0][True] + 0.3  # about half of the states masked, in training
    assert zeros[0.5][False] == zeros[0.0][False]  # the validation rows read them whole
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
    refused = (({"state_dropout": 1.0}, "in \\[0, 1\\)"), ({"freeze_encoder": False}, "freeze_encoder"))
    for bad, message in refused:
        with pytest.raises(ValueError, match=message):
            predictor.fit(texts, values, ("acc", "lat"),
                          TrainConfig(**{**vars(config), "state_dropout": 0.5, **bad}))


def test_half_precision_weights_load_back_as_float32(corpus, tmp_path) -> None:
    tokenizer, texts, _ = corpus
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
    full, half = predictor.save(tmp_path / "full"), predictor.save(tmp_path / "half", half=True)
    size = {p: (p / "model.safetensors").stat().st_size for p in (full, half)}
    assert size[half] < 0.55 * size[full]
    loaded = RLMPredictor.load(half)
    assert next(predictor.lm.model.parameters()).dtype == torch.float32  # the saved model is left as it was
    for (name, a), b in zip(predictor.lm.model.state_dict().items(), loaded.lm.model.state_dict().values(),
                            strict=True):
        assert b.dtype == torch.float32 and torch.allclose(a, b, atol=1e-3, rtol=1e-3), name


def test_a_save_is_never_half_written_and_keeps_other_files(corpus, tmp_path, monkeypatch) -> None:
    tokenizer, texts, _ = corpus
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
    path = predictor.save(tmp_path / "model")
    modes = {f.name: f.stat().st_mode & 0o777 for f in path.iterdir()}
    assert set(modes) == {"config.json", "model.safetensors", "tokenizer.model"}
    assert len(set(modes.values())) == 1  # one file mode for all
    first = {f.name: f.read_bytes() for f in path.iterdir()}
    predictor.save(path)  # the same model again: the same bytes, the names of its tied weights too
    assert {f.name: f.read_bytes() for f in path.iterdir()} == first
    (path / "optimizer.safetensors").write_bytes(b"a pre-training's own file")
    before = {f.name: f.read_bytes() for f in path.iterdir()}

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(nasrlm.rlm.checkpoints, "save_model", fail)  # dies while writing the weights
    with pytest.raises(OSError, match="disk full"):
        predictor.save(path)
    with pytest.raises(OSError, match="disk full"):
        predictor.save(tmp_path / "new")
    assert {f.name: f.read_bytes() for f in path.iterdir()} == before  # the old checkpoint, untouched
    assert sorted(f.name for f in tmp_path.iterdir()) == ["model"]  # no half model, no staging left
    monkeypatch.undo()
    (path / "prior.safetensors").write_bytes(b"an earlier fit's prior, which this model has not")
    predictor.save(path)
    assert (path / "optimizer.safetensors").read_bytes() == b"a pre-training's own file"
    assert not (path / "prior.safetensors").exists()  # removed once config.json no longer names it
    assert sorted(f.name for f in path.iterdir()) == ["config.json", "model.safetensors",
                                                      "optimizer.safetensors", "tokenizer.model"]
    RLMPredictor.load(path)


def test_loading_something_else_fails_clearly(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="not a nasrlm model directory"):
        RLMPredictor.load(tmp_path)


def test_normalizer_headroom_reaches_past_the_training_range() -> None:
    values = np.array([10.0, 20.0, 30.0, 40.0])
    plain, roomy = Normalizer.fit(values), Normalizer.fit(values, headroom=0.1)
    assert plain.inverse(np.array([HIGH]))[0] == 40.0  # clamped to the best label seen
    assert roomy.inverse(np.array([HIGH]))[0] == pytest.approx(55.0)  # half the span beyond it
    assert roomy.inverse(np.array([LOW]))[0] == pytest.approx(-5.0)
    inside = roomy.forward(values)
    assert np.all(np.diff(inside) > 0) and inside[0] > LOW and inside[-1] < HIGH
    np.testing.assert_allclose(roomy.inverse(inside), values)
    with pytest.raises(ValueError, match="headroom"):
        Normalizer.fit(values, headroom=0.5)


def test_free_label_prior_ranks_by_the_free_label_before_any_learning_and_is_saved(corpus, tmp_path) -> None:
    tokenizer, texts, values = corpus
    convs = np.sqrt(values[:, 1] - 1)  # the toy "free label": known for every architecture
    free = Objective("convs", "count", "conv ops in the cell", "test", True)
    predictor = RLMPredictor.from_scratch((free, *OBJECTIVES), size=None, tokenizer=tokenizer, **TINY)
    labelled = np.column_stack([convs, values[:, 1]])
    one_step = TrainConfig(max_epochs=1, batch_size=48, validation_fraction=0.0, progress=False)
    predictor.fit(texts, labelled, ("convs", "lat"), one_step, prior="line", prior_from=("convs",))
    assert predictor.prior_part.inputs == ("convs",) and predictor.prior_part.objectives == ("lat",)
    with pytest.raises(ValueError, match="features="):
        predictor.sample(texts[:4], ("lat",), num_samples=4)
    samples = predictor.sample(texts, ("lat",), num_samples=32, given={"convs": convs})
    # one optimiser step teaches the model nothing; the prior alone orders latency by the conv count
    assert kendalltau(np.median(samples[:, :, 0], axis=1), values[:, 1])[0] > 0.9
    assert samples.min() >= values[:, 1].min() - 0.1 * np.ptp(values[:, 1])

    predictor.save(tmp_path / "model")
    loaded = RLMPredictor.load(tmp_path / "model")
    assert loaded.prior_part.objectives == ("lat",)
    np.testing.assert_array_equal(loaded.sample(texts, ("lat",), num_samples=32, given={"convs": convs}),
                                  samples)
    with pytest.raises(ValueError, match="prior_from"):
        predictor.fit(texts, labelled, ("convs", "lat"), one_step, prior="line", prior_from=("acc",))

    # weight 0: each text's median is the prior's own prediction, the samples keep their spread
    centred = predictor.sample(texts, ("lat",), num_samples=9, given={"convs": convs},
                               residual_weight={"lat": 0.0})
    prior_alone = predictor.prior_part.prior.values(np.column_stack([convs]), np.zeros((len(texts), 1)))[:, 0]
    np.testing.assert_allclose(np.median(centred[:, :, 0], axis=1), prior_alone)
    assert np.ptp(centred[:, :, 0], axis=1).max() > 0
    with pytest.raises(ValueError, match="residual_weight"):
        predictor.sample(texts, ("lat",), given={"convs": convs}, residual_weight={"acc": 0.5})

    # the prior's own error (in normal scores) as the spread: same medians, a spread of that width
    error = predictor.prior_part.errors["lat"]
    assert error > 0
    for spread in (0.0, error, 5 * error):
        wide = predictor.sample(texts, ("lat",), num_samples=9, given={"convs": convs},
                                residual_weight={"lat": 0.0}, residual_spread={"lat": spread})
        np.testing.assert_allclose(np.median(wide[:, :, 0], axis=1), prior_alone)
        z = predictor.prior_part.prior.residuals(np.repeat(convs[:, None], 9, axis=0), wide.reshape(-1, 1))
        expected = spread * np.std(norm.ppf((np.arange(9) + 0.5) / 9))
        assert np.std(z.reshape(-1, 9), axis=1).mean() == pytest.approx(expected, rel=0.2, abs=1e-6)
    with pytest.raises(ValueError, match="residual_spread"):
        predictor.sample(texts, ("lat",), given={"convs": convs}, residual_spread={"acc": 0.5})


def test_derived_rows_train_but_are_never_validated(corpus) -> None:
    tokenizer, texts, values = corpus
    copies = list(range(0, 48, 2))  # every other row again, as if an equivalent architecture
    partial = np.vstack([values, values[copies]])
    partial[48:, 1] = np.nan  # equivalents carry accuracy only
    derived_from = np.concatenate([np.full(48, -1), copies])
    config = TrainConfig(max_epochs=2, batch_size=16, validation_fraction=0.25, progress=False)
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
    report = predictor.fit(texts + [texts[i] for i in copies], partial, ("acc", "lat"), config,
                           derived_from=derived_from)
    assert len(report.validation_rows) == 12 and max(report.validation_rows) < 48
    with pytest.raises(ValueError, match="original rows"):
        predictor.fit(texts[:3], values[:3], ("acc", "lat"), config, derived_from=[-1, 2, 1])
    with pytest.raises(ValueError, match="entries"):
        predictor.fit(texts[:3], values[:3], ("acc", "lat"), config, derived_from=[-1, -1])


def test_the_residual_is_weighed_on_the_validation_rows_and_saved(corpus, tmp_path, monkeypatch) -> None:
    import nasrlm.rlm.predictor

    monkeypatch.setattr(nasrlm.rlm.predictor, "MIN_VALIDATION_ROWS", 12)  # the corpus is small
    tokenizer, texts, values = corpus
    convs = np.sqrt(values[:, 1] - 1)
    free = Objective("convs", "count", "conv ops in the cell", "test", True)
    predictor = RLMPredictor.from_scratch((free, *OBJECTIVES), size=None, tokenizer=tokenizer, **TINY)
    labelled = np.column_stack([convs, values])
    config = TrainConfig(max_epochs=2, batch_size=16, validation_fraction=0.25, progress=False)
    report = predictor.fit(texts, labelled, ("convs", "acc", "lat"), config, prior="line",
                           prior_from=("convs",))
    assert len(report.validation_rows) == 12
    weights = predictor.prior_part.weights
    assert set(weights) == {"acc", "lat"} and all(0.0 <= w <= 1.0 for w in weights.values())
    given = {"convs": convs[:6]}
    default = predictor.sample(texts[:6], given=given, num_samples=4)
    np.testing.assert_array_equal(default, predictor.sample(texts[:6], given=given, num_samples=4,
                                                            residual_weight=weights))
    predictor.save(tmp_path / "model")
    assert RLMPredictor.load(tmp_path / "model").prior_part.weights == weights
    everything = TrainConfig(max_epochs=1, validation_fraction=0.0, progress=False)
    predictor.fit(texts, labelled, ("convs", "acc", "lat"), everything, prior="line", prior_from=("convs",))
    assert predictor.prior_part.weights == {"acc": 0.0, "lat": 0.0}  # no validation rows: not trusted yet


def test_free_label_prior_takes_its_normal_scores_over_the_reference_population(corpus) -> None:
    tokenizer, texts, values = corpus
    convs = np.sqrt(values[:, 1] - 1)
    free = Objective("convs", "count", "conv ops in the cell", "test", True)
    predictor = RLMPredictor.from_scratch((free, *OBJECTIVES), size=None, tokenizer=tokenizer, **TINY)
    labelled = np.column_stack([convs, values[:, 1]])
    one_step = TrainConfig(max_epochs=1, batch_size=48, validation_fraction=0.0, progress=False)
    population = np.arange(0.0, 10.0, 0.5)[:, None]  # e.g. a search's candidates, not its trials
    predictor.fit(texts, labelled, ("convs", "lat"), one_step, prior="line", prior_from=("convs",),
                  prior_reference=population)
    np.testing.assert_array_equal(predictor.prior_part.prior.free[0].knots, population[:, 0])
    with pytest.raises(ValueError, match="prior_reference"):
        predictor.fit(texts, labelled, ("convs", "lat"), one_step, prior="line", prior_from=("convs",),
                      prior_reference=np.ones((5, 2)))


def test_a_feature_prior_reads_inputs_the_decoder_never_sees_and_is_saved(corpus, tmp_path) -> None:
    tokenizer, texts, values = corpus
    convs = np.sqrt(values[:, 1] - 1)
    noise = np.random.default_rng(0).random(len(texts))
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
    one_step = TrainConfig(max_epochs=1, batch_size=48, validation_fraction=0.0, progress=False)
    predictor.fit(texts, values[:, 1:], ("lat",), one_step, prior_inputs={"convs": convs, "noise": noise},
                  prior="forest")
    assert predictor.prior_part.inputs == ("convs", "noise") and predictor.predicts == ("lat",)
    features = {"convs": convs, "noise": noise}
    with pytest.raises(ValueError, match="noise"):
        predictor.sample(texts, num_samples=4, features={"convs": convs})
    samples = predictor.sample(texts, num_samples=16, features=features)
    assert kendalltau(np.median(samples[:, :, 0], axis=1), values[:, 1])[0] > 0.8  # the forest's ranking
    predictor.save(tmp_path / "model")
    assert (tmp_path / "model" / "prior.safetensors").is_file()
    loaded = RLMPredictor.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.sample(texts, num_samples=16, features=features), samples)
    (tmp_path / "model" / "prior.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="prior.safetensors"):
        RLMPredictor.load(tmp_path / "model")
    with pytest.raises(ValueError, match="prior_from"):
        predictor.fit(texts, values[:, 1:], ("lat",), one_step, prior_inputs={"lat": convs})
    with pytest.raises(ValueError, match="convs"):
        predictor.fit(texts, values[:, 1:], ("lat",), one_step, prior_inputs={"convs": convs[:5]})
    predictor.fit(texts, values[:, 1:], ("lat",), one_step)
    predictor.save(tmp_path / "model")  # no prior now: no stale forests beside it
    assert not (tmp_path / "model" / "prior.safetensors").exists()


def test_a_blended_prior_weighs_the_model_alone_against_the_prior(corpus, tmp_path) -> None:
    tokenizer, texts, values = corpus
    convs = np.sqrt(values[:, 1] - 1)
    features = {"convs": convs, "noise": np.random.default_rng(0).random(len(texts))}
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
    config = TrainConfig(max_epochs=3, batch_size=16, learning_rate=3e-3, validation_fraction=0.0,
                         progress=False)
    predictor.fit(texts, values[:, 1:], ("lat",), config, prior_inputs=features, prior="forest",
                  prior_mode="blend", calibration_folds=3)
    assert predictor.prior_part.mode == "blend" and predictor.predicts == ("lat",)
    assert set(predictor.prior_part.weights) == {"lat"} and 0 <= predictor.prior_part.weights["lat"] <= 1
    assert set(predictor.spreads) == {"lat"}  # the cross-fits that weighed the model calibrated it too

    # weight 1 is the model alone: what it decodes of the text, the prior's inputs unread
    alone = copy.copy(predictor)
    alone.prior_part, alone.spreads = None, {}
    decoded = alone.sample(texts, num_samples=9, seed=3)
    own = predictor.sample(texts, num_samples=9, seed=3, features=features, residual_weight={"lat": 1.0},
                           calibrated=False)
    np.testing.assert_allclose(own, decoded, rtol=1e-9)
    # weight 0 is the prior's mean, around which the model's own spread stays (the median of an even
    # number of samples too)
    prior_only = predictor.sample(texts, num_samples=8, seed=3, features=features,
                                  residual_weight={"lat": 0.0}, calibrated=False)
    x = np.column_stack(list(features.values()))
    mean = predictor.prior_part.prior.values(x, np.zeros((len(texts), 1)))[:, 0]
    np.testing.assert_allclose(np.median(prior_only[:, :, 0], axis=1), mean, rtol=1e-9)

    predictor.save(tmp_path / "model")
    loaded = RLMPredictor.load(tmp_path / "model")
    assert loaded.prior_part.mode == "blend" and loaded.prior_part.weights == predictor.prior_part.weights
    np.testing.assert_array_equal(loaded.sample(texts, num_samples=9, seed=3, features=features),
                                  predictor.sample(texts, num_samples=9, seed=3, features=features))
    # without rows held out (no validation split, no cross-fit) nothing weighs the model: the prior alone
    predictor.fit(texts, values[:, 1:], ("lat",), config, prior_inputs=features, prior="forest",
                  prior_mode="blend")
    assert predictor.prior_part.weights == {"lat": UNVALIDATED_RESIDUAL_WEIGHT}
    with pytest.raises(ValueError, match="prior_mode"):
        predictor.fit(texts, values[:, 1:], ("lat",), config, prior="forest", prior_inputs=features,
                      prior_mode="sum")
    with pytest.raises(ValueError, match="feature prior"):  # the model would decode the prior's inputs
        predictor.fit(texts, values, ("acc", "lat"), config, prior_from=("acc",), prior="forest",
                      prior_mode="blend")
    with pytest.raises(ValueError, match="feature prior"):
        predictor.fit(texts, values[:, 1:], ("lat",), config, prior_inputs=features, prior="line",
                      prior_mode="blend")


def test_a_prior_is_named_with_its_inputs_or_not_at_all_and_its_old_keyword_still_works(corpus) -> None:
    tokenizer, texts, values = corpus
    convs = {"convs": np.sqrt(values[:, 1] - 1)}
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
    one_step = TrainConfig(max_epochs=1, batch_size=48, validation_fraction=0.0, progress=False)
    for named in ({"prior_inputs": convs}, {"prior": "ridge"}, {"prior": "knn", "prior_inputs": convs}):
        with pytest.raises(ValueError, match="prior"):  # inputs without a prior, a prior without inputs
            predictor.fit(texts, values[:, 1:], ("lat",), one_step, **named)
    assert predictor.prior_part is None and predictor.lm.decode_order == ()  # refused: as it was
    with pytest.warns(DeprecationWarning, match="prior_kind= is now prior="):
        predictor.fit(texts, values[:, 1:], ("lat",), one_step, prior_kind="ridge", prior_inputs=convs)
    assert predictor.prior_part.prior.kinds == ["ridge"]
    with pytest.raises(TypeError, match="'prior_kinds'"):
        predictor.fit(texts, values[:, 1:], ("lat",), one_step, prior_kinds="ridge", prior_inputs=convs)


def test_a_fit_without_validation_rows_calibrates_its_spread_by_cross_fitting(corpus, tmp_path) -> None:
    tokenizer, texts, values = corpus
    config = TrainConfig(max_epochs=6, batch_size=16, learning_rate=3e-3, validation_fraction=0.0,
                         progress=False)

    def fitted(folds: int) -> RLMPredictor:
        predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
        predictor.fit(texts, values, ("acc", "lat"), config, calibration_folds=folds)
        return predictor

    plain, calibrated = fitted(0), fitted(4)
    assert plain.spreads == {} and set(calibrated.spreads) == {"acc", "lat"}
    assert values[:, 1].max() / values[:, 1].min() > 10  # a latency over decades: its spread in logs
    assert calibrated.spreads["lat"].log and not calibrated.spreads["acc"].log
    for name, weights in plain.lm.model.state_dict().items():  # the cross-fits leave no trace in the model
        assert torch.equal(weights, calibrated.lm.model.state_dict()[name]), name
    raw = calibrated.sample(texts[:8], num_samples=16, seed=1, calibrated=False)
    np.testing.assert_array_equal(raw, plain.sample(texts[:8], num_samples=16, seed=1))
    widened = calibrated.sample(texts[:8], num_samples=16, seed=1)
    np.testing.assert_array_equal(np.median(widened, axis=1), np.median(raw, axis=1))
    assert not np.allclose(widened, raw)
    calibrated.save(tmp_path / "model")
    loaded = RLMPredictor.load(tmp_path / "model")
    assert loaded.spreads == calibrated.spreads
    np.testing.assert_array_equal(loaded.sample(texts[:8], num_samples=16, seed=1), widened)


def test_every_cross_fit_starts_from_the_weights_the_model_had(corpus, monkeypatch) -> None:
    tokenizer, texts, values = corpus
    config = TrainConfig(max_epochs=2, batch_size=16, learning_rate=3e-3, validation_fraction=0.0,
                         progress=False)
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
    start = {k: v.clone() for k, v in predictor.lm.model.state_dict().items()}
    fit, seen = RLMPredictor.fit, []

    def recording(self, *args, **kwargs):
        if kwargs.get("calibration_folds") == 0:  # a cross-fit: a clone, and the weights it starts from
            seen.append(self is not predictor
                        and all(torch.equal(v, start[k]) for k, v in self.lm.model.state_dict().items()))
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(RLMPredictor, "fit", recording)
    predictor.fit(texts, values, ("acc", "lat"), config, calibration_folds=3)
    assert seen == [True, True, True]  # not the last fold's, which learned this fold's rows


def test_enough_validation_rows_calibrate_the_spread_without_cross_fitting(corpus, monkeypatch) -> None:
    monkeypatch.setattr(nasrlm.rlm.predictor, "MIN_VALIDATION_ROWS", 12)  # the corpus is small

    def refused(*args, **kwargs):
        raise AssertionError("cross-fitted although the validation rows were enough")

    monkeypatch.setattr(nasrlm.rlm.predictor, "cross_fitted_spreads", refused)
    tokenizer, texts, values = corpus
    convs = np.sqrt(values[:, 1] - 1)
    free = Objective("convs", "count", "conv ops in the cell", "test", True)
    predictor = RLMPredictor.from_scratch((free, *OBJECTIVES), size=None, tokenizer=tokenizer, **TINY)
    config = TrainConfig(max_epochs=2, batch_size=16, validation_fraction=0.25, progress=False)
    predictor.fit(texts, np.column_stack([convs, values]), ("convs", "acc", "lat"), config,
                  prior="line", prior_from=("convs",))
    assert set(predictor.spreads) == {"acc", "lat"}  # what it decodes, not the labels it is given


def test_a_stepper_clips_the_gradients_of_its_own_training_only() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 1))
    for p in model.parameters():  # an earlier training's gradients, then the first layer frozen
        p.grad = torch.full_like(p, 100.0)
    model[0].requires_grad_(False)
    stepper = Stepper(model, weight_decay=0.0, clip_norm=1.0)
    before = model[1].weight.detach().clone()
    loss = model(torch.ones(4, 3)).pow(2).mean()
    stepper.step(loss, learning_rate=0.0)  # no move: the clipped gradient is left to read
    assert model[0].weight.grad is None and torch.equal(model[1].weight, before)
    total = torch.sqrt(sum(p.grad.pow(2).sum() for p in model[1].parameters()))
    assert total <= 1.0 + 1e-6


def test_a_deepened_model_computes_what_it_did_until_training_moves_its_new_layers() -> None:
    torch.manual_seed(0)
    config = RLMConfig(text_vocab_size=50, text_pad_id=0, objectives=("acc", "lat"),
                       **{**TINY, "encoder_layers": 2, "dropout": 0.0})
    model = RegressionLM(config).eval()
    deeper = model.deepened(5).eval()
    assert deeper.config.encoder_layers == 5 and model.config.encoder_layers == 2
    ids, mask = torch.randint(1, 50, (3, 7)), torch.ones(3, 7, dtype=torch.long)
    targets = torch.randint(0, 10, (3, 2, model.vocab.numbers.length))
    with torch.no_grad():
        assert torch.equal(deeper.encode(ids, mask), model.encode(ids, mask))
        names = ("acc", "lat")
        assert torch.equal(deeper(ids, mask, names, targets), model(ids, mask, names, targets))
    deeper(ids, mask, names, targets).backward()
    new = [deeper.t5.encoder.block[k] for k in (1, 2, 4)]  # the model's own blocks went to 0 and 3
    assert all(b.layer[1].DenseReluDense.wo.weight.grad.abs().sum() > 0 for b in new)  # training moves them
    with pytest.raises(ValueError, match="already has 2"):
        model.deepened(2)


def test_a_stepper_saves_its_state_and_none_before_its_first_step(tmp_path) -> None:
    model = torch.nn.Linear(3, 1)
    path = tmp_path / "optimizer.safetensors"
    path.write_bytes(b"stale")
    Stepper(model, weight_decay=0.0, clip_norm=1.0).save(path)  # no step: nothing to keep, nothing left
    assert not path.exists()
    stepper = Stepper(model, weight_decay=0.0, clip_norm=1.0)
    stepper.step(model(torch.ones(2, 3)).sum(), learning_rate=0.1)
    stepper.save(path)
    again = Stepper(model, weight_decay=0.0, clip_norm=1.0)
    again.load(path)
    saved, loaded = stepper.optimizer.state_dict()["state"], again.optimizer.state_dict()["state"]
    assert all(torch.equal(saved[0][k], loaded[0][k]) for k in ("exp_avg", "exp_avg_sq", "step"))


def test_a_fit_reading_labels_first_trains_on_its_own_reading_and_samples_after_it(corpus, tmp_path,
                                                                                    monkeypatch) -> None:
    tokenizer, texts, values = corpus
    config = TrainConfig(max_epochs=3, batch_size=16, learning_rate=3e-3, validation_fraction=0.0,
                         progress=False)
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
    predictor.fit(texts, values, ("acc", "lat"), config)  # a "base" that decodes lat
    predictor.save(tmp_path / "plain")  # nothing read: a config as before reading existed
    assert "reads_first" not in (tmp_path / "plain" / "config.json").read_text()
    reading = predictor.lm.read(texts, ("lat",))
    assert reading.shape == (len(texts), 1) and np.isfinite(reading).all()
    with pytest.raises(ValueError, match="reads"):  # a label the fit trains is no reading
        predictor.fit(texts, values[:, :1], ("acc",), config, reads=("acc",))
    trained, fit = [], nasrlm.rlm._members.train

    def recording(model, inputs, targets, objectives, *args, **kwargs):
        trained.append((objectives, targets.copy()))
        return fit(model, inputs, targets, objectives, *args, **kwargs)

    monkeypatch.setattr(nasrlm.rlm._members, "train", recording)  # every fit trains through it
    predictor.fit(texts, values[:, :1], ("acc",), config, reads=("lat",), calibration_folds=2)
    assert [objectives for objectives, _ in trained] == [("lat", "acc")] * 3  # two cross-fits, then the fit
    np.testing.assert_array_equal(trained[-1][1][:, 0], predictor.lm.targets(reading, ("lat",))[:, 0])
    assert predictor.lm.reads_first == ("lat",) and predictor.predicts == ("acc",)
    samples = predictor.sample(texts[:6], num_samples=8, seed=2)
    assert samples.shape == (6, 8, 1)
    raw = predictor.sample(texts[:6], num_samples=8, seed=2, calibrated=False)
    asked = predictor.sample(texts[:6], ("acc", "lat"), num_samples=8, seed=2, calibrated=False)
    predictor.lm.reads_first = ()  # the samples are conditioned on the reading
    assert not np.array_equal(predictor.sample(texts[:6], num_samples=8, seed=2, calibrated=False), raw)
    # a read label asked for is sampled, still first
    in_order = predictor.sample(texts[:6], ("lat", "acc"), num_samples=8, seed=2, calibrated=False)
    np.testing.assert_array_equal(asked, in_order[..., ::-1])
    predictor.lm.reads_first = ("lat",)
    with pytest.raises(ValueError, match="prior_from"):  # given labels come first at inference
        predictor.fit(texts, values[:, :1], ("acc",), config, reads=("lat",), prior="line",
                      prior_from=("acc",))
    predictor.save(tmp_path / "model")
    loaded = RLMPredictor.load(tmp_path / "model")
    assert loaded.lm.reads_first == ("lat",)
    np.testing.assert_array_equal(loaded.sample(texts[:6], num_samples=8, seed=2), samples)


def test_the_reads_chosen_are_those_whose_reading_ranks_the_labels_best(corpus, monkeypatch) -> None:
    tokenizer, texts, _ = corpus
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
    truth = np.arange(10.0)
    columns = {"a": -truth, "b": truth ** 3, "c": np.roll(truth, 3), "d": truth + np.where(truth == 4, 9, 0)}
    monkeypatch.setattr(LanguageModel, "read", lambda self, texts, labels: np.column_stack(
        [columns[name] for name in labels]))
    chosen = predictor.lm.choose_reads(texts[:10], truth, ("a", "b", "c", "d"), 2)
    assert chosen == ("b", "d")  # in the order given; a ranks the labels backwards
    assert predictor.lm.choose_reads(texts[:10], truth, ("a", "b", "c"), 5) == ("a", "b", "c")
    unknown = np.where(truth < 6, truth, np.nan)  # only labelled rows count
    assert predictor.lm.choose_reads(texts[:10], unknown, ("c", "d"), 1) == ("d",)
    assert predictor.lm.choose_reads(texts[:10], np.where(truth < 2, truth, np.nan), ("a", "b"), 1) == ()
    assert predictor.lm.choose_reads(texts[:10], np.ones(10), ("a", "b"), 1) == ()  # nothing to rank
    with pytest.raises(ValueError, match="k=-1"):
        predictor.lm.choose_reads(texts[:10], truth, ("a", "b"), -1)


def test_a_gaussian_process_prior_is_saved_and_loaded_with_the_model(corpus, tmp_path) -> None:
    tokenizer, texts, values = corpus
    features = {"convs": np.sqrt(values[:, 1] - 1), "noise": np.random.default_rng(0).random(len(texts))}
    predictor = RLMPredictor.from_scratch(OBJECTIVES, size=None, tokenizer=tokenizer, **TINY)
    config = TrainConfig(max_epochs=1, batch_size=16, validation_fraction=0.0, progress=False)
    predictor.fit(texts, values[:, 1:], ("lat",), config, prior_inputs=features, prior="gp",
                  prior_mode="blend", calibration_folds=2)
    assert predictor.prior_part.prior.kinds == ["gp"]
    predictor.save(tmp_path / "model")
    again = RLMPredictor.load(tmp_path / "model")
    np.testing.assert_array_equal(again.sample(texts, num_samples=4, seed=1, features=features),
                                  predictor.sample(texts, num_samples=4, seed=1, features=features))
