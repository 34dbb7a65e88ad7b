"""The cross-space accuracy forest: fitted on several spaces' ranks, saved without pickles, refused stale."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from scipy.stats import kendalltau

from nasrlm.data import Objective
from nasrlm.free_labels import ALL_FREE_OBJECTIVES, SAME_LABELS_SINCE
from nasrlm.priors.models import Forest
from nasrlm.priors.transfer import AccuracyTransfer, SourceForest, TransferFileError, is_accuracy
from nasrlm.rlm.pretraining import Task, fit_transfer
from nasrlm.rlm.tuning import fine_tune, known_labels

WIDTH = len(ALL_FREE_OBJECTIVES)
NAMES = tuple(o.name for o in ALL_FREE_OBJECTIVES)


def _space_rows(rng: np.random.Generator, n: int, low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """Labels whose column 5 sets the accuracy (between ``low`` and ``high``), the rest noise."""
    labels = rng.uniform(0, 10, size=(n, WIDTH))
    accuracy = low + (high - low) * labels[:, 5] / 10 + rng.normal(0, 0.01 * (high - low), n)
    return labels, accuracy


def test_ranks_unseen_rows_of_a_new_space_with_the_forest_of_the_space_most_like_it() -> None:
    rng = np.random.default_rng(0)
    a, acc_a = _space_rows(rng, 400, 90.0, 95.0)  # CIFAR-10-like scale
    b, acc_b = _space_rows(rng, 300, 60.0, 78.0)  # ImageNet-like scale, and graphs without label 7
    b[:, 7] = 0.0
    acc_b = acc_b[::-1].copy()  # and a space where the other end is good: its forest ranks backwards
    transfer = AccuracyTransfer.fit([("a", ["a:acc"], a, acc_a[:, None]),
                                     ("b", ["b:top1"], b, acc_b[:, None])])
    assert transfer.tags == ("a:acc", "b:top1") and [s.rows for s in transfer.sources] == [400, 300]
    new, acc_new = _space_rows(rng, 200, 10.0, 20.0)  # graphs like a's
    with pytest.raises(ValueError, match="narrowed"):
        transfer.predict(new)
    narrowed = transfer.narrowed(new)
    assert [s.space for s in narrowed.sources] == ["a"]
    assert kendalltau(narrowed.predict(new), acc_new).statistic > 0.8
    new[:, 7] = 0.0  # now like b's
    assert [s.space for s in transfer.narrowed(new).sources] == ["b"]


def test_a_row_scores_the_mean_of_its_known_columns_and_unknown_rows_are_left_out() -> None:
    rng = np.random.default_rng(1)
    labels, accuracy = _space_rows(rng, 200, 0.0, 1.0)
    values = np.column_stack([accuracy, np.where(np.arange(200) % 2 == 0, np.nan, accuracy)])
    values[:10] = np.nan  # no accuracy at all: not a training row
    transfer = AccuracyTransfer.fit([("s", ["s:acc", "s:acc_12ep"], labels, values)])
    assert transfer.sources[0].rows == 190
    with pytest.raises(ValueError, match="nothing to transfer from"):
        AccuracyTransfer.fit([("s", ["s:acc"], labels[:10], values[:10, :1])])


def test_predict_refuses_rows_that_are_not_the_free_and_graph_labels() -> None:
    rng = np.random.default_rng(2)
    labels, accuracy = _space_rows(rng, 50, 0.0, 1.0)
    transfer = AccuracyTransfer.fit([("s", ["s:acc"], labels, accuracy)])
    with pytest.raises(ValueError, match=f"the {WIDTH} free and graph labels"):
        transfer.narrowed(labels[:, :2])


def test_round_trips_through_safetensors_and_refuses_corrupt_or_stale_files(tmp_path) -> None:
    rng = np.random.default_rng(3)
    labels, accuracy = _space_rows(rng, 80, 0.0, 1.0)
    transfer = AccuracyTransfer.fit([("s", ["s:acc"], labels, accuracy), ("t", ["t:acc"], labels, -accuracy)])
    path = tmp_path / "transfer.safetensors"
    transfer.save(path)
    loaded = AccuracyTransfer.find(tmp_path)  # a directory holding the file works too
    for before, after in zip(transfer.sources, loaded.sources, strict=True):
        np.testing.assert_array_equal(after.predict(labels), before.predict(labels))
        np.testing.assert_array_equal(after.profile, before.profile)
    assert loaded.tags == ("s:acc", "t:acc") and [s.rows for s in loaded.sources] == [80, 80]

    (tmp_path / "bad.safetensors").write_bytes(b"not a tensor file")
    with pytest.raises(TransferFileError, match="bad.safetensors: not a transfer file"):
        AccuracyTransfer.load(tmp_path / "bad.safetensors")
    with pytest.raises(TransferFileError, match="no such transfer file"):
        AccuracyTransfer.load(tmp_path / "absent.safetensors")
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        metadata = dict(f.metadata())
    save_file(load_file(str(path)), str(tmp_path / "old.safetensors"),
              metadata={**metadata, "free_labels_version": "1"})
    with pytest.raises(TransferFileError, match="version 1"):
        AccuracyTransfer.load(tmp_path / "old.safetensors")
    save_file(load_file(str(path)), str(tmp_path / "cols.safetensors"),
              metadata={**metadata, "columns": json.dumps(["params_m", "no_such_label"])})
    with pytest.raises(TransferFileError, match="pre-train the base again"):
        AccuracyTransfer.load(tmp_path / "cols.safetensors")
    save_file(load_file(str(path)), str(tmp_path / "few.safetensors"),
              metadata={**metadata, "columns": json.dumps(["params_m"])})
    with pytest.raises(TransferFileError, match="few.safetensors: not a transfer file"):
        AccuracyTransfer.load(tmp_path / "few.safetensors")


def test_a_file_fitted_before_labels_were_added_reads_today_s_labels_by_name(tmp_path) -> None:
    """Version 7 added labels and changed none (SAME_LABELS_SINCE): a base pre-trained on version 6's
    labels keeps its transfer forest."""
    rng = np.random.default_rng(5)
    labels, accuracy = _space_rows(rng, 80, 0.0, 1.0)
    older = [k for k, name in enumerate(NAMES) if not name.endswith("_all")]
    forest, _ = Forest.fit(labels[:, older], accuracy, 0, trees=50)
    source = SourceForest("s", ("s:acc",), 80, forest, (labels[:, older] != 0).mean(axis=0),
                          tuple(NAMES[k] for k in older))
    AccuracyTransfer((source,)).save(tmp_path / "v7.safetensors")
    from safetensors import safe_open

    with safe_open(str(tmp_path / "v7.safetensors"), framework="numpy") as f:
        metadata = dict(f.metadata())
    save_file(load_file(str(tmp_path / "v7.safetensors")), str(tmp_path / "v6.safetensors"),
              metadata={**metadata, "free_labels_version": str(SAME_LABELS_SINCE)})
    loaded = AccuracyTransfer.load(tmp_path / "v6.safetensors")
    assert loaded.sources[0].labels == tuple(NAMES[k] for k in older)
    np.testing.assert_array_equal(loaded.predict(labels), forest.predict(labels[:, older]))
    assert loaded.sources[0].distance(labels) == 0.0


def test_fit_transfer_reads_only_the_accuracy_columns_the_tasks_hold() -> None:
    rng = np.random.default_rng(4)
    names = tuple(o.name for o in ALL_FREE_OBJECTIVES)
    labels, accuracy = _space_rows(rng, 60, 90.0, 95.0)
    latency = rng.uniform(1, 5, 60)
    task = Task("s", ["text"] * 60, (*names, "s:acc", "s:pixel3"),
                np.column_stack([labels, accuracy, latency]))
    objectives = [Objective("s:acc", "%", "", "", True), Objective("s:pixel3", "ms", "", "", False)]
    assert [is_accuracy(o) for o in objectives] == [True, False]
    transfer = fit_transfer([task], objectives)
    assert transfer is not None and transfer.tags == ("s:acc",) and transfer.sources[0].space == "s"
    assert fit_transfer([task], objectives[1:]) is None  # no accuracy column left (all excluded)


def test_a_predictor_carries_its_transfer_forest_into_its_prior_and_its_checkpoints(tmp_path) -> None:
    from nasrlm.free_labels import free_labels
    from nasrlm.priors.transfer import TRANSFER_FILE, TRANSFER_LABEL
    from nasrlm.rlm.checkpoints import ModelFileError, ModelNotFoundError
    from nasrlm.rlm.predictor import RLMPredictor
    from nasrlm.rlm.recipes import TrainConfig
    from nasrlm.rlm.tokenizers import OnnxTokenizer
    from search_spaces import NasBench201

    space = NasBench201()
    ids = space.sample_ids(40, seed=0)
    labels = free_labels(space, ids, graph=True)
    transfer = AccuracyTransfer.fit([("nb101", ["nb101:acc"], labels, labels[:, 1]),
                                     ("other", ["other:acc"], labels * 0, labels[:, 0])])
    tokenizer = OnnxTokenizer.train([space.to_text(space.parse(i)) for i in ids], vocab_size=1000)
    tiny = {"d_model": 16, "num_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1}
    base = RLMPredictor.from_scratch([Objective("nb101:acc", "%", "", "", True)], tokenizer=tokenizer, **tiny)
    base.transfer = transfer
    base.save(tmp_path / "base")
    accuracy = Objective("acc", "%", "", "", True)
    predictor = RLMPredictor.from_base(tmp_path / "base", [accuracy], space="nb201")
    assert predictor.transfer is not None and predictor.transfer.tags == ("nb101:acc", "other:acc")
    fine_tune(predictor, space, ids[:20], labels[:20, 1], ["acc"], TrainConfig(max_epochs=1))
    assert predictor.prior_part.inputs[-1] == TRANSFER_LABEL
    assert predictor.transfer.tags == ("nb101:acc",)  # the forest of the space like these rows, kept
    known = known_labels(predictor, space, ids[20:])
    np.testing.assert_allclose(known["features"][TRANSFER_LABEL], transfer.sources[0].predict(labels[20:]))
    assert np.isfinite(predictor.sample([space.to_text(space.parse(i)) for i in ids[20:]], ["acc"],
                                        num_samples=2, **known)).all()
    predictor.save(tmp_path / "tuned")
    again = RLMPredictor.load(tmp_path / "tuned")
    assert again.transfer is not None and again.prior_part.inputs == predictor.prior_part.inputs
    np.testing.assert_array_equal(known_labels(again, space, ids[20:])["features"][TRANSFER_LABEL],
                                               known["features"][TRANSFER_LABEL])
    (tmp_path / "tuned" / TRANSFER_FILE).write_bytes(b"truncated")
    with pytest.raises(ModelFileError, match="transfer.safetensors: not a transfer file"):
        RLMPredictor.load(tmp_path / "tuned")
    (tmp_path / "tuned" / TRANSFER_FILE).unlink()
    with pytest.raises(ModelNotFoundError, match="missing transfer.safetensors"):
        RLMPredictor.load(tmp_path / "tuned")


def test_a_trend_forest_line_follows_the_space_own_labels_never_the_transfer_forest_guess() -> None:
    from nasrlm.free_labels import free_labels
    from nasrlm.priors.transfer import TRANSFER_LABEL
    from nasrlm.rlm.predictor import RLMPredictor
    from nasrlm.rlm.recipes import TrainConfig
    from nasrlm.rlm.tokenizers import OnnxTokenizer
    from search_spaces import NasBench201

    space = NasBench201()
    ids = space.sample_ids(60, seed=3)
    labels = free_labels(space, ids, graph=True)
    # a toy accuracy that another space's forest guesses exactly: the best single column by far
    ops = [space.parse(i).ops for i in ids]
    accuracy = np.array([50.0 + 5 * sum(op.startswith("nor_conv") for op in o) + o.count("skip_connect")
                         for o in ops])
    transfer = AccuracyTransfer.fit([("other", ["other:acc"], labels, accuracy),
                                     ("far", ["far:acc"], labels * 0, labels[:, 0])])
    tokenizer = OnnxTokenizer.train([space.to_text(space.parse(i)) for i in ids[:30]], vocab_size=1000)
    tiny = {"d_model": 16, "num_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1}
    predictor = RLMPredictor.from_scratch([Objective("acc", "%", "", "", True)], tokenizer=tokenizer, **tiny)
    predictor.transfer = transfer
    fine_tune(predictor, space, ids[:30], accuracy[:30], ["acc"], TrainConfig(max_epochs=1),
              prior="trend-forest")
    inputs = predictor.prior_part.inputs
    assert TRANSFER_LABEL in inputs and predictor.transfer.tags == ("other:acc",)  # the forest reads it
    assert predictor.prior_part.prior.kinds[0] == "trend-forest"
    # yet the line, which carries predictions past the rows, follows the space's own labels: there
    # another space's guess knows nothing
    assert inputs[predictor.prior_part.prior.models[0].input] != TRANSFER_LABEL
