"""Pre-training a base model on every table, excluding columns, resuming, and fine-tuning from it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import stats

from nasrlm.data import Objective
from nasrlm.free_labels import ALL_FREE_OBJECTIVES, GRAPH_OBJECTIVES
from nasrlm.rlm.model import RegressionLM
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.pretraining import (
    ACCURACY_RANK,
    OPTIMIZER_FILE,
    PRETRAINING_FILE,
    PretrainState,
    Task,
    collect_tasks,
    fit_normalizers,
    is_excluded,
    load_tasks,
    parse_exclude,
    pretrain,
    save_tasks,
    varying_graph_labels,
)
from nasrlm.rlm.recipes import PretrainConfig
from nasrlm.rlm.tokenizers import OnnxTokenizer
from nasrlm.rlm.tuning import fine_tune, known_labels
from search_spaces import get_space

TINY = {"size": "tiny"}


def test_exclude_patterns() -> None:
    patterns = parse_exclude("nb201:*acc*, fbnet ,*:pixel3,")
    assert patterns == ["nb201:*acc*", "fbnet:*", "*:pixel3"]
    assert is_excluded("nb201:cifar100_valid_acc_12ep", patterns) and is_excluded("fbnet:raspi4", patterns)
    assert is_excluded("nb201:pixel3", patterns) and not is_excluded("nb201:raspi4", patterns)
    assert not is_excluded("params_m", patterns)


@pytest.fixture(scope="module")
def tasks(data_dir) -> tuple[list[Task], list[Objective]]:
    return collect_tasks(data_dir, exclude=parse_exclude("nb201:*acc*,*:pixel3"),
                         spaces=["nb201", "nds_vanilla"], free_rows=6, max_rows=24, seed=0, progress=False)


def test_rows_not_described_by_the_deadline_are_left_out_and_every_space_keeps_some(tmp_path,
                                                                                     monkeypatch) -> None:
    monkeypatch.setenv("NASRLM_CACHE", str(tmp_path / "cache"))  # cold: nothing described yet
    lines: list[str] = []
    tasks, _ = collect_tasks(None, spaces=["nb201", "nds_vanilla"], free_rows=200, seed=0, progress=False,
                             until=0.0, log=lines.append)  # the deadline passed before the first chunk
    assert [t.space for t in tasks] == ["nb201", "nds_vanilla"]
    assert [len(t.texts) for t in tasks] == [64, 64]  # one chunk each, in turn, then the deadline
    assert lines[0].startswith("nb201: 0 labelled rows") and "0 of them in the label cache" in lines[0]
    assert any("nb201: 136 rows left out" in line for line in lines)
    again, _ = collect_tasks(None, spaces=["nb201"], free_rows=200, seed=0, progress=False, until=0.0,
                             log=lines.append)
    assert len(again[0].texts) == 128  # what the first run described came from the cache, then one chunk


def test_collect_tags_every_column_by_space_and_leaves_out_the_excluded(tasks) -> None:
    rows, objectives = tasks
    nb201, vanilla = rows
    assert (nb201.space, vanilla.space) == ("nb201", "nds_vanilla")
    free = tuple(o.name for o in ALL_FREE_OBJECTIVES)
    assert nb201.objectives[: len(free)] == free and vanilla.objectives == free  # no tables: free labels only
    assert "nb201:raspi4" in nb201.objectives and "nb201:eyeriss" in {o.name for o in objectives}
    assert not [t for t in nb201.objectives if "acc" in t or "pixel3" in t]
    assert "nb201:params_m" not in nb201.objectives  # the published parameter count is the free label's tag
    assert len(nb201.texts) == 30 and len(vanilla.texts) == 6  # 24 labelled rows, then 6 free-only ones
    labels = nb201.values[:, len(free):]
    assert np.isnan(labels[24:]).all() and not np.isnan(labels[:24]).all(axis=1).any()
    assert np.isfinite(nb201.values[:, : len(free)]).all()


def test_tasks_round_trip_through_their_file(tasks, tmp_path) -> None:
    save_tasks(tasks[0], tmp_path / "rows.npz")
    back = load_tasks(tmp_path / "rows.npz")
    for a, b in zip(tasks[0], back, strict=True):
        assert (a.space, a.texts, a.objectives) == (b.space, b.texts, b.objectives)
        np.testing.assert_array_equal(a.values, b.values)


def _base(tasks) -> RLMPredictor:
    rows, objectives = tasks
    predictor = RLMPredictor.from_scratch(objectives, tokenizer=_tokenizer(rows), **TINY)
    fit_normalizers(predictor, rows)
    return predictor


def _tokenizer(rows: list[Task]) -> OnnxTokenizer:
    return OnnxTokenizer.train([text for task in rows for text in task.texts], vocab_size=2000)


def test_pretrain_lowers_the_loss_checkpoints_and_resumes(tasks, tmp_path) -> None:
    rows, _ = tasks
    predictor = _base(tasks)
    config = PretrainConfig(minutes=10, max_steps=12, batch_size=8, warmup_steps=2, progress=False)
    state = pretrain(predictor, rows, config, output=tmp_path)
    assert state.step == 12 and state.finished and (tmp_path / OPTIMIZER_FILE).is_file()
    # the spaces whose objectives it learnt, not nds_vanilla, whose free labels only it read
    assert RLMPredictor.load(tmp_path).spaces == ("nb201",)
    saved = PretrainState.load(tmp_path)
    assert saved.step == 12 and json.loads((tmp_path / PRETRAINING_FILE).read_text())["rows"]["nb201"] == 30
    # resuming continues the step count with the saved weights and optimiser state
    again = RLMPredictor.load(tmp_path)
    config.max_steps = 20
    config.batch_size = 4
    resumed = pretrain(again, rows, config, output=tmp_path, state=saved)
    assert resumed.step == 20 and len(resumed.loss) == 2
    # the record keeps each segment's start, device and config: a resumed run may change its batch size
    segments = PretrainState.load(tmp_path).segments
    assert [(s["step"], s["device"], s["batch_size"]) for s in segments] == [(0, "cpu", 8), (12, "cpu", 4)]
    # a resume with no step left (to ship the run) adds no segment: two ships of one run are the same bytes
    pretrain(RLMPredictor.load(tmp_path), rows, config, output=tmp_path, state=PretrainState.load(tmp_path))
    assert len(PretrainState.load(tmp_path).segments) == 2
    longer = _base(tasks)
    many = pretrain(longer, rows, PretrainConfig(minutes=10, max_steps=60, batch_size=8, warmup_steps=2,
                                                 learning_rate=3e-3, progress=False))
    assert many.loss[-1] < 2.3  # below the loss of uniform digits, log(10)


@pytest.mark.parametrize("every", [True, False])
def test_a_batch_decodes_every_varying_graph_label_last_or_draws_them(tasks, monkeypatch, every) -> None:
    rows, _ = tasks
    graph = {t.space: [t.objectives[c] for c in varying_graph_labels(t)] for t in rows}
    assert graph["nb201"] and graph["nds_vanilla"]  # both spaces vary in some graph labels...
    constant = [o.name for o in GRAPH_OBJECTIVES if o.name not in graph["nb201"]]
    assert constant  # ... and not in others (NB201 has no depthwise convolution)
    predictor = _base(tasks)
    decoded: list[tuple[str, ...]] = []
    forward = RegressionLM.forward
    monkeypatch.setattr(RegressionLM, "forward", lambda model, ids, mask, names, targets: (
        decoded.append(names), forward(model, ids, mask, names, targets))[1])
    pretrain(predictor, rows, PretrainConfig(minutes=10, max_steps=16, batch_size=8, warmup_steps=2,
                                             objectives_per_batch=3, every_graph_label=every, progress=False))
    free = [o.name for o in ALL_FREE_OBJECTIVES[:2]]
    for names in decoded:
        assert list(names[:2]) == free
        space = "nb201" if any(n.startswith("nb201:") for n in names) else "nds_vanilla"
        if every:
            tail = graph[space]
            assert list(names[-len(tail):]) == tail and len(names) <= 2 + 3 + len(tail)
            assert not set(names) & set(constant) or space != "nb201"
        else:
            assert len(names) <= 2 + 3
    assert {("nb201:" in " ".join(n)) for n in decoded} == {True, False}  # both spaces' batches were seen


def test_from_base_keeps_known_tags_renames_the_space_and_adds_new_ones(tasks, tmp_path) -> None:
    base = _base(tasks)
    base.save(tmp_path)
    acc = Objective("acc", "%", "accuracy", "test", True)
    raspi = Objective("raspi4", "ms", "latency", "test", False)
    tuned = RLMPredictor.from_base(tmp_path, [acc, raspi], space="nb201")
    tags = tuned.lm.model.config.objectives
    assert "raspi4" in tags and "nb201:raspi4" not in tags and tags[-1] == "acc"
    assert "nds_vanilla:params_m" not in tags and "params_m" in tags
    tuned_lm, base_lm = tuned.lm, base.lm
    assert tuned_lm.normalizers["raspi4"] == base_lm.normalizers["nb201:raspi4"]
    assert "acc" not in tuned_lm.normalizers
    embed, old = tuned.lm.model.t5.shared.weight, base.lm.model.t5.shared.weight
    tags, base_tags = tuned_lm.model.vocab.tags, base_lm.model.vocab.tags
    assert torch.equal(embed[tags["raspi4"]], old[base_tags["nb201:raspi4"]])
    known = old[base.lm.model.vocab.first_tag : base.lm.model.vocab.first_number]
    assert torch.allclose(embed[tuned.lm.model.vocab.tags["acc"]], known.mean(0))
    # it trains and predicts the new column like any other
    space = get_space("nb201")
    ids = space.sample_ids(12, seed=3)
    from nasrlm.priors.prior import HEADROOM
    from nasrlm.rlm.recipes import TrainConfig

    fine_tune(tuned, space, ids, np.linspace(50, 90, 12), ["acc"], TrainConfig(max_epochs=1, progress=False),
              prior_mode="residual", refit_normalizers=["acc"])
    assert tuned.lm.normalizers["raspi4"] == base.lm.normalizers["nb201:raspi4"]
    known = known_labels(tuned, space, ids[:2])  # the default prior reads free and graph labels
    assert set(known["given"]) == {"params_m", "macs_m"} and len(known["features"]) == len(GRAPH_OBJECTIVES)
    samples = tuned.sample([space.to_text(space.parse(i)) for i in ids[:2]], ["acc"], num_samples=4,
                           calibrated=False, **known)  # as decoded: the calibrated floor may reach further
    room = HEADROOM * 40  # the prior maps back within this much of the labels' range (50-90)
    assert samples.shape == (2, 4, 1) and (samples >= 50 - room).all() and (samples <= 90 + room).all()


def _tiny_model_and_input(tasks) -> tuple[RegressionLM, torch.Tensor, torch.Tensor]:
    """An untrained tiny model with one tag ``a`` (besides the free labels), in eval mode, and an input."""
    predictor = RLMPredictor.from_scratch([Objective("a", "", "", "", True)], tokenizer=_tokenizer(tasks[0]),
                                          **TINY)
    ids = torch.randint(1, 200, (3, 9))
    return predictor.lm.model.eval(), ids, torch.ones_like(ids)


def test_with_objectives_keeps_behaviour_for_kept_tags(tasks) -> None:
    model, ids, mask = _tiny_model_and_input(tasks)
    wider = model.with_objectives(("x", "params_m", "macs_m", "b"), renamed={"a": "b"}).eval()
    targets = torch.as_tensor(np.stack([model.vocab.numbers.encode_many(np.array([1.5, 4.2, 9.9]))] * 2, 1))
    before, after = model(ids, mask, ("macs_m", "a"), targets), wider(ids, mask, ("macs_m", "b"), targets)
    assert torch.allclose(before, after)
    with pytest.raises(ValueError, match="share a name"):
        model.with_objectives(("a",), renamed={"a": "params_m"})


def test_an_exclude_pattern_that_matches_nothing_is_an_error(data_dir) -> None:
    with pytest.raises(ValueError, match="nb210:acc"):  # a typo must not quietly exclude nothing
        collect_tasks(data_dir, exclude=["nb210:acc"], spaces=["nb201"], free_rows=0, max_rows=4,
                      progress=False)


def test_a_space_with_a_published_accuracy_gets_the_cross_space_accuracy_rank(data_dir) -> None:
    tasks, objectives = collect_tasks(data_dir, spaces=["nb201"], exclude=["nb201:*acc_12ep"], free_rows=3,
                                      max_rows=40, progress=False)
    task = tasks[0]
    assert task.objectives[-1] == ACCURACY_RANK.name and ACCURACY_RANK in objectives
    rank, acc = task.values[:, -1], task.values[:, task.objectives.index("nb201:acc")]
    labelled = ~np.isnan(acc)
    assert labelled.sum() == 40 and np.isnan(rank[~labelled]).all()  # free-only rows have no accuracy
    assert rank[labelled].min() == 0 and rank[labelled].max() == 1
    assert stats.spearmanr(rank[labelled], acc[labelled]).statistic == pytest.approx(1)
    without, _ = collect_tasks(data_dir, spaces=["nb201"], exclude=["nb201:*acc*"], free_rows=0, max_rows=8,
                               progress=False)
    assert ACCURACY_RANK.name not in without[0].objectives  # no accuracy seen, no rank of it


def test_a_new_tag_can_start_as_an_existing_one(tasks) -> None:
    model, ids, mask = _tiny_model_and_input(tasks)
    wider = model.with_objectives(("a", "params_m", "macs_m", "b"), like={"b": "a"}).eval()
    targets = torch.as_tensor(model.vocab.numbers.encode_many(np.array([1.5, 4.2, 9.9]))[:, None])
    assert torch.allclose(model(ids, mask, ("a",), targets), wider(ids, mask, ("b",), targets))
    with pytest.raises(ValueError, match="not tags"):
        model.with_objectives(("a", "b"), like={"b": "nope"})


def test_ctrl_c_saves_the_steps_done_and_says_so(tasks, tmp_path, monkeypatch) -> None:
    rows, _ = tasks
    predictor = _base(tasks)
    forward = RegressionLM.forward
    calls = []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 4:  # ctrl-C during the fourth step
            raise KeyboardInterrupt
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(RegressionLM, "forward", interrupted)
    config = PretrainConfig(minutes=10, max_steps=12, batch_size=8, warmup_steps=2, progress=False)
    with pytest.raises(KeyboardInterrupt, match=f"interrupted at step 3: saved in {tmp_path}"):
        pretrain(predictor, rows, config, output=tmp_path)
    saved = PretrainState.load(tmp_path)
    assert saved.step == 3 and not saved.finished and (tmp_path / OPTIMIZER_FILE).is_file()
    monkeypatch.setattr(RegressionLM, "forward", forward)
    resumed = pretrain(RLMPredictor.load(tmp_path), rows, config, output=tmp_path, state=saved)
    assert resumed.step == 12 and resumed.finished


def test_fine_tune_with_its_defaults_blends_a_forest_and_tunes_the_decoder_alone(tasks, tmp_path) -> None:
    from nasrlm.rlm.recipes import DECODER_TUNE

    base = _base(tasks)
    base.save(tmp_path)
    tuned = RLMPredictor.from_base(tmp_path, [Objective("acc", "%", "accuracy", "test", True)], space="nb201")
    encoder = {k: v.clone() for k, v in tuned.lm.model.named_parameters() if ".encoder." in k}
    decoder = {k: v.clone() for k, v in tuned.lm.model.named_parameters() if ".decoder." in k}
    assert encoder and decoder
    space = get_space("nb201")
    ids = space.sample_ids(12, seed=5)
    fine_tune(tuned, space, ids, np.linspace(50, 90, 12), ["acc"], calibration_folds=0)  # as nasrlm train
    assert tuned.prior_part.mode == "blend" and tuned.prior_part is not None
    after = dict(tuned.lm.model.named_parameters())
    assert all(torch.equal(after[k], v) for k, v in encoder.items())  # the text is read as the base learned
    assert any(not torch.equal(after[k], v) for k, v in decoder.items())
    # the recipe nasrlm train prints: few steps without a validation split, the decoder's below 100 rows
    few, many = DECODER_TUNE.config(12), DECODER_TUNE.config(1000)
    assert few.freeze_encoder and few.validation_fraction == 0 and many.validation_fraction > 0
    assert few.max_epochs == DECODER_TUNE.unvalidated_steps
