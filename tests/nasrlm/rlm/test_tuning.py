"""Fine-tuning on a space's architectures by id, and predicting them: a prior on columns given for every
architecture (``inputs``) instead of the graph labels."""

from __future__ import annotations

import numpy as np
import pytest

from nasrlm.data import Objective
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.recipes import TrainConfig
from nasrlm.rlm.tuning import fine_tune, known_labels, measured_inputs, sample_archs
from search_spaces import NasBench201

TINY = {"d_model": 32, "num_heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1}
NEW = Objective("new", "ms", "a new device", "test", False)


@pytest.fixture(scope="module")
def measured(corpus) -> tuple[RLMPredictor, NasBench201, list[str], np.ndarray]:
    """A tiny model fitted beside a ridge on one measured device's latencies, of which the new one is a power
    law; the space, the 48 architectures and the measured device's latencies."""
    tokenizer, _, _ = corpus
    space = NasBench201()
    ids = space.sample_ids(48, seed=1)  # the corpus's cells
    old = np.random.default_rng(0).uniform(1, 5, len(ids))
    predictor = RLMPredictor.from_scratch([NEW], size=None, tokenizer=tokenizer, **TINY)
    fine_tune(predictor, space, ids, 2 * old**1.5, ["new"], TrainConfig(max_epochs=1, progress=False),
              prior="ridge", inputs={"old": old}, calibration_folds=0)
    return predictor, space, ids, old


def test_a_prior_on_inputs_reads_them_alone_and_predictions_need_them(measured) -> None:
    predictor, space, ids, old = measured
    assert predictor.prior_part.inputs == ("old",) and measured_inputs(predictor) == ("old",)
    with pytest.raises(ValueError, match=r"reads \['old'\], which are not free labels: give their values"):
        known_labels(predictor, space, ids[:3])
    read = known_labels(predictor, space, ids[:3], {"old": old[:3]})
    assert read["given"] == {} and list(read["features"]) == ["old"]
    np.testing.assert_array_equal(read["features"]["old"], old[:3])
    samples = sample_archs(predictor, space, ids, ["new"], num_samples=4, inputs={"old": old})
    median = np.median(samples[..., 0], axis=1)
    assert np.corrcoef(np.argsort(np.argsort(median)), np.argsort(np.argsort(old)))[0, 1] > 0.9  # the ridge


@pytest.mark.parametrize(("options", "says"), [
    ({"prior": None}, "inputs are read by a feature prior, not by prior=None"),
    ({"prior": "line"}, "not by prior='line'"),
    ({"inputs": {"new": np.ones(48)}}, r"inputs \['new'\] are also columns to learn"),
    ({"inputs": {"old": np.ones(47)}}, r"inputs\['old'\] has 47 values for 48 architectures"),
    ({"inputs": {"old": np.r_[np.ones(47), np.nan]}}, r"inputs\['old'\] must be known"),
])
def test_fine_tune_refuses_inputs_it_cannot_read(measured, options, says) -> None:
    predictor, space, ids, old = measured
    arguments = {"prior": "ridge", "inputs": {"old": old}, **options}
    with pytest.raises(ValueError, match=says):
        fine_tune(predictor, space, ids, old, ["new"], **arguments)
