"""The RLM sampler (Optuna-style sampler tests), evaluation, the search runner and its report."""

from __future__ import annotations

import copy
import logging
import pickle
import re
import sqlite3
import warnings
from collections import Counter, deque
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import optuna
import pytest
from optuna.storages._cached_storage import _CachedStorage

import nasrlm.search._run as run_module
from nasrlm import cli, free_labels
from nasrlm.data import BenchmarkTable, Objective
from nasrlm.label_cache import LabelCache
from nasrlm.measure import LatencyStore
from nasrlm.metrics import pareto_mask
from nasrlm.search import (
    DEFAULT_MODEL,
    DUPLICATE_ATTR,
    PREDICTED_USER_ATTR,
    SAMPLERS,
    SURPLUS_ATTR,
    ArchEvaluator,
    CandidateSettings,
    Constraint,
    FitSettings,
    MissingValueError,
    PriorSurrogate,
    ProposalSettings,
    RLMSampler,
    SearchStopped,
    Truth,
    UnmeetableConstraintError,
    WorkerSettings,
    make_sampler,
    reference_point,
    run_search,
    sampler_keywords,
    score,
    search_job,
    summary,
    write_report,
)
from nasrlm.search.sampler._coordination import WORKER_COUNT_WINDOW
from nasrlm.search.sampler._startup import startup_transfer
from nasrlm.search.workers._lease import FitLease
from search_spaces import NasBench201, SearchSpace, SubsetSpace, get_space
from search_spaces.nasbench201 import EDGES, OPS, NB201Arch

pytestmark = pytest.mark.usefixtures("quiet_optuna")
SPACE = NasBench201()
ACCURACY = Objective("acc", "", "trial value", "optuna study", True)
TINY = {"d_model": 16, "num_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.0}
#: A sampler that refits in a second, by name (``sampler_keywords``)
TINY_OPTIONS = {"n_startup_trials": 4, "proposals_per_fit": 3, "num_candidates": 40, "fresh_candidates": 10,
                "num_samples": 4, "pretrain_archs": 0, "fit_steps": 3, "model": TINY}


def tiny_sampler(seed: int = 0, space: SearchSpace = SPACE, **options) -> RLMSampler:
    """:data:`TINY_OPTIONS` with ``options`` (flat, as ``--rlm-option`` gives them) changed."""
    return RLMSampler(space, seed=seed, **sampler_keywords({**TINY_OPTIONS, **options}))


def toy_values(arch_id: str) -> tuple[float, float]:
    """A deterministic two-objective toy: 'accuracy' grows with convolutions, 'latency' with 3x3 ones."""
    ops = SPACE.parse(arch_id).ops
    conv = sum(op.startswith("nor_conv") for op in ops)
    return 50.0 + 5 * conv + ops.count("skip_connect"), 1.0 + 2 * ops.count("nor_conv_3x3") + 0.1 * conv


def toy_objective(trial: optuna.Trial) -> tuple[float, float]:
    arch_id = SPACE.arch_id(SPACE.suggest(trial))
    trial.set_user_attr("arch_id", arch_id)
    return toy_values(arch_id)


def completed(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The study's completed trials (the model's latest proposals may be waiting beside them)."""
    return study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))


def changes_from_front(params: dict, trials: list[optuna.trial.FrozenTrial]) -> int:
    """Fewest parameters ``params`` changes from any member of the toy study's front among ``trials``."""
    values = np.array([t.values for t in trials])
    front = [t.params for t, keep in zip(trials, pareto_mask(values, [True, False]), strict=True) if keep]
    return min(sum(params[k] != f[k] for k in f) for f in front)


def make_study(sampler: optuna.samplers.BaseSampler, storage: str | None = None) -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler, storage=storage)
    study.set_metric_names(["acc", "lat"])
    return study


# --- the sampler --------------------------------------------------------------------------------------
def test_same_seed_same_trials_and_no_architecture_twice() -> None:
    runs = []
    for _ in range(2):
        study = make_study(tiny_sampler(seed=3))
        study.optimize(toy_objective, n_trials=10, n_jobs=1)
        runs.append([t.params for t in study.trials])
    assert runs[0] == runs[1]
    ids = [SPACE.arch_id(SPACE.suggest(optuna.trial.FixedTrial(p))) for p in runs[0]]
    assert len(set(ids[4:])) == len(ids[4:]), "model-driven proposals must be new architectures"
    assert not set(ids[4:]) & set(ids[:4])
    other = make_study(tiny_sampler(seed=4))
    other.optimize(toy_objective, n_trials=10)
    assert [t.params for t in other.trials] != runs[0]


def test_works_with_rdb_storage_and_resumes(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = make_study(tiny_sampler(), storage)
    study.optimize(toy_objective, n_trials=6)
    again = optuna.load_study(study_name=study.study_name, storage=storage, sampler=tiny_sampler(seed=1))
    again.optimize(toy_objective, n_trials=3)
    states = [t.state for t in again.trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 9
    # the rest: the model's latest proposals, waiting for the next trials (of any worker)
    assert set(states) <= {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.WAITING}
    assert tiny_sampler().predictor is None


def test_the_model_is_trained_and_predicts_every_objective() -> None:
    sampler = tiny_sampler()
    fits = []
    sampler.on_fit = lambda n, seconds: fits.append(n)
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=8)
    assert fits == [4, 7]  # start-up trials, then one refit per proposals_per_fit proposals
    samples = sampler.predict_samples([SPACE.arch_id(SPACE.sample(np.random.default_rng(0)))], num_samples=5)
    assert samples.shape == (1, 5, 2) and np.isfinite(samples).all()


def test_with_the_free_label_prior_the_model_learns_residuals_and_predicts_values() -> None:
    sampler = tiny_sampler(prior="line")
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=8)
    predictor = sampler.predictor
    assert predictor.lm.decode_order[-2:] == ("acc", "lat")
    assert predictor.prior_part.objectives == ("acc", "lat")
    assert predictor.prior_part.inputs == ("params_m", "macs_m")
    # the prior's normal scores are over the candidate pool, not over the eight trials
    pool = sampler.free_labels_of(sampler.candidate_pool)
    assert len(pool) > 8 and np.array_equal(predictor.prior_part.prior.free[0].knots, np.unique(pool[:, 0]))
    ids = SPACE.sample_ids(30, seed=5)
    samples = sampler.predict_samples(ids, num_samples=4)
    truth = np.array([toy_values(i) for i in ids])
    # in the objectives' units: around the toy's values, not around residual normal scores near 0
    assert samples.shape == (30, 4, 2) and np.isfinite(samples).all()
    assert abs(np.median(samples[..., 0]) - np.median(truth[:, 0])) < 15


def test_with_a_graph_prior_the_model_learns_residuals_of_a_forest_on_the_graph_labels() -> None:
    from nasrlm.free_labels import GRAPH_OBJECTIVES
    from nasrlm.priors.feature_prior import FeaturePrior

    sampler = tiny_sampler(prior="forest")
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=14)  # enough trials for a forest, and checked proposals
    predictor = sampler.predictor
    prior = predictor.prior_part.prior
    assert isinstance(prior, FeaturePrior) and prior.kinds == ["forest", "forest"]
    assert predictor.prior_part.inputs == ("params_m", "macs_m", *(o.name for o in GRAPH_OBJECTIVES))
    assert sampler.last_residual_weights is not None  # weighed on the prior's own inputs
    samples = sampler.predict_samples(SPACE.sample_ids(10, seed=5), num_samples=4)
    assert samples.shape == (10, 4, 2) and np.isfinite(samples).all()
    with pytest.raises(ValueError, match="prior"):
        tiny_sampler(prior="knn")


def test_the_residual_is_weighted_by_how_well_the_model_predicted_its_own_proposals() -> None:
    sampler = tiny_sampler(prior="line")
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=14)  # 4 start-up, rounds of 3: 6 checked proposals by trial 11
    weights = sampler.last_residual_weights
    assert set(weights) == {"acc", "lat"} and all(0.0 <= w <= 1.0 for w in weights.values())
    complete = completed(study)
    proposed = [t for t in complete if PREDICTED_USER_ATTR in t.user_attrs]
    assert len(proposed) >= 6 and not any(PREDICTED_USER_ATTR in t.user_attrs for t in study.trials[:4])
    for t in proposed:  # by objective name, where optuna-dashboard shows it
        assert set(t.user_attrs[PREDICTED_USER_ATTR]) == {"acc", "lat"}
    prior = sampler.predictor.prior_part.prior
    free = sampler.free_labels_of([sampler.arch_id_of(t.params) for t in proposed])
    actual = prior.residuals(free, np.array([t.values for t in proposed]))
    for predicted, expected in ((actual, 1.0), (-actual, 0.0)):  # right on the mark; exactly wrong
        for t, values in zip(proposed, prior.values(free, predicted), strict=True):  # copies: finished trials
            t.user_attrs = {**t.user_attrs, PREDICTED_USER_ATTR: {"acc": values[0], "lat": values[1]}}
        assert sampler.residual_weights(proposed) == pytest.approx({"acc": expected, "lat": expected})
    sampler.proposal_settings = replace(sampler.proposal_settings, weigh_residual=False)
    assert sampler.residual_weights(proposed) is None


def test_a_resumed_search_still_weighs_the_residual_by_the_earlier_proposals(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = make_study(tiny_sampler(prior="line"), storage)
    study.optimize(toy_objective, n_trials=10)  # 4 start-up trials and 6 proposals: enough to weigh
    resumed = tiny_sampler(seed=1, prior="line")
    again = optuna.load_study(study_name=study.study_name, storage=storage, sampler=resumed)
    again.optimize(toy_objective, n_trials=1)  # a fresh sampler: its first proposals are weighed already
    assert resumed.last_residual_weights is not None


@pytest.mark.parametrize("archs", [12, 100])
def test_pretraining_learns_free_labels_of_the_candidate_pool_first(archs: int) -> None:
    sampler = tiny_sampler(pretrain_archs=archs)  # a pool of 40 draws
    logs: list[str] = []
    sampler.log = logs.append
    make_study(sampler).optimize(toy_objective, n_trials=5)
    said = [line for line in logs if "pre-training on free labels" in line]
    assert len(said) == 1
    count = int(said[0].split(" of ")[1].split()[0])
    pool = len(sampler.candidate_pool)
    if archs <= pool:
        assert count == archs  # the pool's first architectures, nothing else described
    else:
        assert pool < count <= archs  # the whole pool, topped up with random (distinct) ones
    assert {"params_m", "macs_m"} <= set(sampler.predictor.lm.trained_objectives)


def test_each_round_scores_fresh_random_candidates_beside_the_fixed_pool() -> None:
    def candidates_of_two_rounds(fresh: int) -> tuple[set[str], set[str], set[str]]:
        sampler = tiny_sampler(fresh_candidates=fresh)
        study = make_study(sampler)
        study.optimize(toy_objective, n_trials=5)
        search_space = sampler.infer_relative_search_space(study, study.trials[-1])
        rounds = [set(sampler._candidates(search_space, front=[], taken=set())) for _ in range(2)]
        return set(sampler.candidate_pool), *rounds

    pool, first, second = candidates_of_two_rounds(fresh=30)
    assert pool < first and pool < second  # the pool every round, and more
    assert first != second  # drawn anew
    pool, first, second = candidates_of_two_rounds(fresh=0)
    assert pool == first == second


def test_random_candidates_on_a_table_subset_cover_its_rows_evenly() -> None:
    """Drawn as the space samples (the rows, uniformly), not as random parameters snapped to the nearest
    row: NB101's random parameters build small cells far more often, so a few rows would take most draws
    (a spread of about 12 per row, not about 4.5, here)."""
    base = get_space("nb101")
    ids = base.sample_ids(50, seed=0)
    subset = SubsetSpace(base, ids)
    sampler = RLMSampler(subset, seed=0)
    trial = optuna.create_study().ask()
    subset.suggest(trial)
    rng = np.random.default_rng(0)
    counts = Counter(sampler.arch_id_of(sampler._params.draw(trial.distributions, rng)) for _ in range(1000))
    assert set(counts) == set(ids)
    assert np.std([counts[i] for i in ids]) < 7


class _ConditionalCells(NasBench201):
    """NB201 cells whose first ``edges`` edges are searched and the rest cut (a conditional space, as OFA's
    stages are: a block's parameters exist only below the stage's depth)."""

    def suggest(self, trial: optuna.Trial):
        edges = trial.suggest_int("edges", 1, len(EDGES))
        return NB201Arch(tuple(trial.suggest_categorical(f"edge_{i}_{j}", OPS) if k < edges else "none"
                               for k, (i, j) in enumerate(EDGES)))

    def params_of(self, arch) -> dict:
        edges = max([k + 1 for k, op in enumerate(arch.ops) if op != "none"], default=1)
        used = zip(EDGES[:edges], arch.ops[:edges], strict=True)
        return {"edges": edges, **{f"edge_{i}_{j}": op for (i, j), op in used}}


class _CountingRandom(optuna.samplers.RandomSampler):
    """Records which parameters it drew for trials after the start-up: none, when every proposal is whole."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.late: list[str] = []

    def sample_independent(self, study, trial, param_name, param_distribution):
        if trial.number >= 4:
            self.late.append(param_name)
        return super().sample_independent(study, trial, param_name, param_distribution)


def test_a_conditional_space_whose_trials_never_used_some_parameters_is_searched() -> None:
    space = _ConditionalCells()
    independent = _CountingRandom()
    sampler = RLMSampler(space, seed=0, independent_sampler=independent, **sampler_keywords(TINY_OPTIONS))
    study = make_study(sampler)
    for edges in (1, 2, 1, 2):  # start-up trials that never reach edges 3-6: nothing to draw them from
        study.enqueue_trial({"edges": edges})

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        arch_id = space.arch_id(space.suggest(trial))
        trial.set_user_attr("arch_id", arch_id)
        return toy_values(arch_id)

    study.optimize(objective, n_trials=10)
    assert len(completed(study)) == 10
    # the model proposed deeper cells than any start-up trial, every parameter of them its own: what it
    # scored is what was evaluated (no edge completed at random by Optuna)
    assert max(t.params["edges"] for t in study.trials[4:]) > 2
    assert independent.late == []


def test_a_transfer_startup_picks_the_forests_best_of_each_stratum_of_macs_at_the_second_trial() -> None:
    sampler = tiny_sampler(startup="transfer")
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=4)
    # the first trial at random (no search space yet), the three picks chosen at the second; alone in the
    # study, the sampler kept the other two for its next trials: none waits
    assert len(study.trials) == 4 and not study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    pool = sampler.candidate_pool
    labels = sampler.cache.labels_of(pool)
    scores = startup_transfer("shipped", "nb201", [ACCURACY]).narrowed(labels).predict(labels)
    macs = labels[:, list(sampler.cache.columns).index("macs_m")]
    picked = [pool.index(sampler.arch_id_of(t.params)) for t in study.trials[1:]]
    edges = np.sort(macs)[np.linspace(0, len(pool), 4).astype(int)[:-1]]  # each stratum's lowest MACs
    for k, row in enumerate(sorted(picked, key=lambda r: macs[r])):
        low, high = edges[k], edges[k + 1] if k < 2 else np.inf
        assert low <= macs[row] <= high
        inside = (macs > low) & (macs < high)  # surely in this stratum, whatever the ties
        assert scores[row] >= scores[inside].max(initial=-np.inf)


def test_without_an_accuracy_objective_a_transfer_startup_draws_at_random() -> None:
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=tiny_sampler(startup="transfer"))
    study.set_metric_names(["lat", "size"])
    study.optimize(lambda trial: toy_values(SPACE.arch_id(SPACE.suggest(trial)))[::-1], n_trials=3)
    assert not any(t.system_attrs.get("fixed_params") for t in study.trials)


def test_rejects_meaningless_settings_of_the_sampler_itself_and_across_its_settings() -> None:
    with pytest.raises(ValueError, match="n_startup_trials"):
        RLMSampler(SPACE, n_startup_trials=1)
    with pytest.raises(ValueError, match="has no model: base"):
        RLMSampler(SPACE, base="BASE", proposals=ProposalSettings(surrogate="prior"))
    with pytest.raises(ValueError, match="not both"):
        RLMSampler(SPACE, base="BASE", fit=FitSettings(model=TINY))


def test_with_the_prior_spread_the_samples_scatter_as_far_as_the_prior_erred() -> None:
    sampler = tiny_sampler(prior="forest", spread="prior")
    # enough trials that the prior errs by less than the decoder's range: after 8 (since the random
    # candidates are drawn as the space samples) its out-of-bag error on `lat` was 1.45 normal scores,
    # and samples scattered that far are clipped to the range, which narrows them
    make_study(sampler).optimize(toy_objective, n_trials=12)
    errors = sampler.predictor.prior_part.errors
    assert set(errors) == {"acc", "lat"} and all(e > 0 for e in errors.values())
    ids = SPACE.sample_ids(20, seed=3)
    labels = sampler.cache.labels_of(ids)
    samples = sampler.predict_samples(ids, num_samples=8)
    z = sampler.predictor.prior_part.prior.residuals(np.repeat(labels, 8, axis=0), samples.reshape(-1, 2))
    spread = z.reshape(20, 8, 2).std(axis=1).mean(axis=0)
    assert spread == pytest.approx([errors["acc"], errors["lat"]], rel=0.3)


def test_the_sampler_keeps_the_settings_objects_it_is_given() -> None:
    proposals, fit = ProposalSettings(temperature=2.0), FitSettings(fit_steps=40, batch_size=8)
    candidates = CandidateSettings(num_candidates=300, random_mutations=2)
    sampler = RLMSampler(SPACE, proposals=proposals, fit=fit, candidates=candidates)
    assert (sampler.proposal_settings, sampler.fit_settings, sampler.candidate_settings) == (
        proposals, fit, candidates)


def test_the_sampler_built_from_defaults_has_the_defaults_it_had_as_keywords() -> None:
    sampler = RLMSampler(SPACE)
    assert (sampler.proposal_settings, sampler.fit_settings, sampler.candidate_settings) == (
        ProposalSettings(), FitSettings(), CandidateSettings())
    p, f, c = sampler.proposal_settings, sampler.fit_settings, sampler.candidate_settings
    assert sampler.n_startup_trials == 10 and sampler.base is None and sampler.device == "cpu"
    assert (p.proposals_per_fit, p.refine, p.num_samples, p.temperature, p.spread, p.prior, p.surrogate,
            p.prior_alone_after, p.weigh_residual) == (5, ((50, 100), (150, None)), 16, 1.0, "auto",
                                                       "trend-forest", "rlm", 100, True)
    assert (f.fit_steps, f.pretrain_archs, f.model) == (150, 2000, DEFAULT_MODEL)
    assert DEFAULT_MODEL == {"d_model": 64, "num_heads": 4, "d_ff": 128, "encoder_layers": 2,
                             "decoder_layers": 1, "dropout": 0.0}
    assert (c.num_candidates, c.fresh_candidates) == (2000, 500)
    assert make_sampler("rlm", SPACE, 0, options={}).proposal_settings == p


def test_every_cli_sampler_has_a_factory() -> None:
    parser = cli.build_parser()
    for name in SAMPLERS:
        argv = ["search", "nb201", "--objectives", "acc", "--budget", "1", "--sampler", name]
        assert parser.parse_args(argv).sampler == name


def test_rlm_options_reach_the_sampler_and_bad_ones_say_what_is_valid() -> None:
    sampler = make_sampler("rlm", SPACE, 0, options={"temperature": 2.0, "prior": "line", "fit_steps": 7})
    assert sampler.proposal_settings == ProposalSettings(temperature=2.0, prior="line")
    assert sampler.fit_settings == FitSettings(fit_steps=7)
    with pytest.raises(ValueError, match="unknown rlm option 'temprature'; choose from .*temperature"):
        make_sampler("rlm", SPACE, 0, options={"temprature": 2.0})
    with pytest.raises(ValueError, match="apply to the rlm sampler, not 'tpe'"):
        make_sampler("tpe", SPACE, 0, options={"temperature": 2.0})


def test_cli_rlm_option_errors_are_one_line(capsys, tmp_path) -> None:
    out = tmp_path / "run"
    for option, says in [("temperature", "KEY=VALUE"), ("no_such=1", "unknown rlm option 'no_such'")]:
        code = cli.main(["search", "nb201", "--objectives", "acc,cpu-1t-b1", "--budget", "2",
                         "--out", str(out), "--rlm-option", option])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and says in err, err
    assert not out.exists()


# --- evaluation, runner, report ---------------------------------------------------------------------
def toy_table(ids: list[str]) -> BenchmarkTable:
    objectives = [Objective("acc", "%", "toy accuracy", "test", True),
                  Objective("lat", "ms", "toy latency", "test", False)]
    return BenchmarkTable("nb201", ids, objectives, np.array([toy_values(i) for i in ids]))


def test_evaluator_looks_up_and_reports_missing_rows() -> None:
    ids = SPACE.sample_ids(5, seed=0)
    evaluator = ArchEvaluator(SPACE, toy_table(ids).objectives, toy_table(ids))
    assert evaluator(ids[2]) == list(toy_values(ids[2]))
    missing = next(i for i in SPACE.sample_ids(50, seed=1) if i not in ids)
    with pytest.raises(MissingValueError, match="no acc value"):
        evaluator(missing)
    assert evaluator.truth() is None  # 5 rows do not cover the space


def test_evaluator_measures_device_profiles_live(tmp_path) -> None:
    with LatencyStore(tmp_path / "lat.db") as store:
        evaluator = ArchEvaluator.for_names(SPACE, ["cpu-1t-b1"], store=store)
        evaluator.warmup, evaluator.runs = 1, 3
        arch_id = SPACE.sample_ids(1, seed=2)[0]
        (value,) = evaluator(arch_id)
        assert value > 0 and evaluator.objectives[0].unit == "ms"
        assert store.get("nb201", arch_id, "cpu-1t-b1").median_ms == value  # kept for next time
    with pytest.raises(ValueError, match="latency store"):
        ArchEvaluator.for_names(SPACE, ["cpu-1t-b1"])


def test_parameters_and_macs_are_objectives_of_a_space_without_tables() -> None:
    space = get_space("nds_vanilla")  # no published table: before, "has no published tables"
    evaluator = ArchEvaluator.for_names(space, ["params_m", "macs_m"])
    arch_id = space.sample_ids(1, seed=3)[0]
    assert evaluator(arch_id) == free_labels.free_labels(space, [arch_id])[0].tolist()
    assert evaluator.names == ["params_m", "macs_m"] and evaluator.maximize == [False, False]
    assert evaluator.tabulated() is None  # computed, not looked up: no table to restrict the search to


def test_a_published_parameter_count_stays_the_published_one(data_dir) -> None:
    evaluator = ArchEvaluator.for_names(SPACE, ["params_m"], data_dir=data_dir)
    assert evaluator.computed == [] and "nb201" in evaluator.objectives[0].source


def test_budget_counts_completed_evaluations_and_failures_do_not(tmp_path) -> None:
    covered = SPACE.sample_ids(3000, seed=0)  # about a fifth of the space: some draws miss the table
    evaluator = ArchEvaluator(SPACE, toy_table(covered).objectives, toy_table(covered))
    storage = f"sqlite:///{tmp_path / 's.db'}"
    first = run_search(SPACE, evaluator, optuna.samplers.RandomSampler(seed=0), budget=4, storage=storage,
                       progress=False, max_failures=1000)
    assert len(first.arch_ids) == 4 and first.extra["failed_trials"] > 0
    resumed = run_search(SPACE, evaluator, optuna.samplers.RandomSampler(seed=1), budget=6, storage=storage,
                         progress=False, max_failures=1000)
    assert resumed.arch_ids[:4] == first.arch_ids and len(resumed.arch_ids) == 6
    assert np.array_equal(resumed.values, np.array([toy_values(i) for i in resumed.arch_ids]))
    with pytest.raises(RuntimeError, match="failed trials"):
        run_search(SPACE, evaluator, optuna.samplers.RandomSampler(seed=2), budget=50, progress=False,
                   max_failures=2)


class BrokenForSome(ArchEvaluator):
    """An evaluator that raises for a third of the architectures, as a space with a bug in build_onnx."""

    def __call__(self, arch_id: str) -> list[float]:
        if sum(map(ord, arch_id)) % 3 == 0:
            raise ValueError("Conv: kernel larger than the input")
        return super().__call__(arch_id)


def test_an_architecture_whose_evaluation_raises_fails_its_trial_and_the_search_goes_on() -> None:
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    evaluator = BrokenForSome(SPACE, toy_table(ids).objectives, toy_table(ids))
    lines: list[str] = []
    result = run_search(SPACE, evaluator, optuna.samplers.RandomSampler(seed=0), budget=12, progress=False,
                        log=lines.append)
    assert len(result.arch_ids) == 12 and result.extra["failed_trials"] == len(lines) > 0
    assert all(re.fullmatch(r"warning: trial \d+ failed: architecture \S+: ValueError: Conv: kernel larger "
                            r"than the input", line) for line in lines), lines
    with pytest.raises(SearchStopped, match="the last: architecture .*: ValueError: Conv: kernel"):
        run_search(SPACE, evaluator, optuna.samplers.RandomSampler(seed=1), budget=50, progress=False,
                   max_failures=2, study_name="again")


class _NoNoneEdges(NasBench201):
    """NB201 with a bug: a cell with a ``none`` edge fails to build."""

    def build_onnx(self, arch):
        if "none" in self.arch_id(arch):
            raise ValueError("none edges unsupported")
        return super().build_onnx(arch)


def test_the_model_pretrains_on_the_architectures_the_space_builds_and_skips_the_others() -> None:
    space = _NoNoneEdges()
    sampler = tiny_sampler(space=space, num_candidates=20, fresh_candidates=5, pretrain_archs=60, fit_steps=2)
    study = make_study(sampler)

    def objective(trial: optuna.Trial) -> tuple[float, float]:  # values from a table: nothing built here
        arch_id = space.arch_id(space.suggest(trial))
        trial.set_user_attr("arch_id", arch_id)
        return toy_values(arch_id)

    study.optimize(objective, n_trials=6)  # the first fit pre-trains on more than the candidate pool
    assert len(completed(study)) == 6 and sampler.cache.failed
    assert all("none" in i for i in sampler.cache.failed)
    proposed = [sampler.cache.arch_id_of(t.params) for t in completed(study)[4:]]
    assert proposed and all("none" not in i for i in proposed)  # the model proposes what the space builds


class InterruptedWhileProposing(optuna.samplers.RandomSampler):
    """A sampler that gets ctrl-C while it proposes (as a model's first fit does), after three trials."""

    def sample_independent(self, study, trial, name, distribution):
        if trial.number == 3:
            raise KeyboardInterrupt
        return super().sample_independent(study, trial, name, distribution)


class InterruptedTakingAnEnqueuedTrial(optuna.samplers.RandomSampler):
    """A sampler that gets ctrl-C before its fourth trial, which the ask took from the queue (a warm start's
    enqueued front, a dead worker's retry): numbered below the study's count before the ask."""

    def before_trial(self, study, trial):
        if trial.number == 3:
            raise KeyboardInterrupt
        super().before_trial(study, trial)


@pytest.mark.parametrize("when", ["proposing", "just after the ask", "evaluating", "taking enqueued"])
def test_ctrl_c_prunes_the_trial_it_stopped_and_counts_no_failure(tmp_path, monkeypatch, when: str) -> None:
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    table = toy_table(ids)

    class InterruptedWhileEvaluating(ArchEvaluator):
        calls = 0

        def __call__(self, arch_id: str) -> list[float]:
            self.calls += 1
            if self.calls == 4:
                raise KeyboardInterrupt
            return super().__call__(arch_id)

    evaluating = when == "evaluating"
    evaluator = (InterruptedWhileEvaluating if evaluating else ArchEvaluator)(SPACE, table.objectives, table)
    interrupted = {"proposing": InterruptedWhileProposing,
                   "taking enqueued": InterruptedTakingAnEnqueuedTrial}
    sampler = interrupted.get(when, optuna.samplers.RandomSampler)(seed=0)
    rng = np.random.default_rng(0)
    enqueue = [SPACE.params_of(SPACE.sample(rng)) for _ in range(5)] if when == "taking enqueued" else ()
    storage = f"sqlite:///{tmp_path / 's.db'}"
    if when == "just after the ask":  # ctrl-C as the ask's warning filter closes, the fourth trial created
        @contextmanager
        def interrupted_once_four_trials_exist():
            with warnings.catch_warnings():
                yield
            if len(optuna.load_study(study_name="nasrlm", storage=storage).trials) == 4:
                raise KeyboardInterrupt

        monkeypatch.setattr(run_module, "warnings", SimpleNamespace(
            catch_warnings=interrupted_once_four_trials_exist, simplefilter=warnings.simplefilter))
    with pytest.raises(KeyboardInterrupt):
        run_search(SPACE, evaluator, sampler, budget=10, storage=storage, progress=False, enqueue=enqueue)
    trials = optuna.load_study(study_name="nasrlm", storage=storage).trials
    assert [t.state.name for t in trials if t.state.name != "WAITING"] == ["COMPLETE"] * 3 + ["PRUNED"]
    assert trials[3].user_attrs["interrupted"] is True
    resumed = run_search(SPACE, ArchEvaluator(SPACE, table.objectives, table),
                         optuna.samplers.RandomSampler(seed=1), budget=5, storage=storage, progress=False)
    assert len(resumed.arch_ids) == 5 and resumed.extra["failed_trials"] == 0
    assert resumed.extra["repeated_trials"] == 0  # the stopped trial is neither a failure nor a repeat


def test_ctrl_c_that_breaks_the_studys_session_still_prunes_its_trial(tmp_path, monkeypatch) -> None:
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    table = toy_table(ids)
    broken: list[bool] = []  # once ctrl-C comes, the study's own storage refuses every write
    evaluated: list[str] = []

    class InterruptedWhileEvaluating(ArchEvaluator):
        def __call__(self, arch_id: str) -> list[float]:
            if len(evaluated) == 3:
                broken.append(True)
                raise KeyboardInterrupt
            evaluated.append(arch_id)
            return super().__call__(arch_id)

    def refusing(write):
        def refused_once_broken(self, *args, **kwargs):
            if broken:
                raise optuna.exceptions.StorageInternalError("a transaction half done")
            return write(self, *args, **kwargs)
        return refused_once_broken

    for name in ("set_trial_user_attr", "set_trial_state_values"):
        monkeypatch.setattr(_CachedStorage, name, refusing(getattr(_CachedStorage, name)))
    storage = f"sqlite:///{tmp_path / 's.db'}"
    logged: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        run_search(SPACE, InterruptedWhileEvaluating(SPACE, table.objectives, table),
                   optuna.samplers.RandomSampler(seed=0), budget=10, storage=storage, progress=False,
                   log=logged.append)
    monkeypatch.undo()
    trials = optuna.load_study(study_name="nasrlm", storage=storage).trials
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3 + ["PRUNED"]  # through a storage of its own
    assert trials[3].user_attrs["interrupted"] is True and not logged


def test_ctrl_c_that_leaves_a_write_half_done_in_its_traceback_still_prunes_its_trial(tmp_path) -> None:
    """ctrl-C in the middle of a database write: the frames of its traceback hold the connection, and with it
    SQLite's write lock, until the traceback is let go (1 run in 50 of ``nasrlm search`` left its trial
    running, "database is locked", where the trial was marked inside the ``except`` block)."""
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    table = toy_table(ids)
    db = tmp_path / "s.db"
    evaluated: list[str] = []

    class InterruptedMidWrite(ArchEvaluator):
        def __call__(self, arch_id: str) -> list[float]:
            if len(evaluated) == 3:
                writing = sqlite3.connect(db, isolation_level=None)  # held by this frame alone
                writing.execute("BEGIN IMMEDIATE")  # the write lock, as a commit half done holds it
                raise KeyboardInterrupt
            evaluated.append(arch_id)
            return super().__call__(arch_id)

    logged: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        run_search(SPACE, InterruptedMidWrite(SPACE, table.objectives, table),
                   optuna.samplers.RandomSampler(seed=0), budget=10, storage=f"sqlite:///{db}",
                   progress=False, log=logged.append)
    trials = optuna.load_study(study_name="nasrlm", storage=f"sqlite:///{db}").trials
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3 + ["PRUNED"] and not logged


def test_a_search_stopped_by_failures_leaves_a_report_of_what_it_did(tmp_path, monkeypatch) -> None:
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    monkeypatch.setattr("nasrlm.search._evaluate.load_table", lambda space, names, data_dir: toy_table(ids))
    real = ArchEvaluator.__call__
    evaluated: list[str] = []

    def mostly_broken(self, arch_id: str) -> list[float]:
        if len(evaluated) >= 3:
            raise ValueError("the device went away")
        evaluated.append(arch_id)
        return real(self, arch_id)

    monkeypatch.setattr(ArchEvaluator, "__call__", mostly_broken)
    with pytest.raises(SearchStopped, match=r"the last: architecture .*the device went away\); "
                                            r"a report of the 3 evaluations done is in"):
        search_job(SPACE, ["acc", "lat"], budget=10, out_dir=tmp_path / "run", sampler="random",
                   progress=False, log=lambda line: None)
    assert "3 evaluations with `random`" in (tmp_path / "run" / "report.md").read_text()


def test_a_resumed_study_never_evaluates_an_architecture_twice(tmp_path) -> None:
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    evaluator = ArchEvaluator(SPACE, toy_table(ids).objectives, toy_table(ids))
    storage = f"sqlite:///{tmp_path / 's.db'}"
    for budget in (5, 10):  # the same seed replays its first five draws on resuming
        result = run_search(SPACE, evaluator, optuna.samplers.RandomSampler(seed=0), budget=budget,
                            storage=storage, progress=False)
    assert len(result.arch_ids) == 10 and len(set(result.arch_ids)) == 10
    assert result.extra["repeated_trials"] >= 5
    study = optuna.load_study(study_name="nasrlm", storage=storage)
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert all(t.user_attrs[DUPLICATE_ATTR] in result.arch_ids[:5] for t in pruned)
    small = SubsetSpace(SPACE, ids[:3])  # a space smaller than the budget: a clear error, not a hang
    with pytest.raises(RuntimeError, match="repeated architectures"):
        run_search(small, ArchEvaluator(small, evaluator.objectives, evaluator.table),
                   optuna.samplers.RandomSampler(seed=0), budget=4, progress=False)


@pytest.mark.parametrize("make", [lambda: optuna.samplers.TPESampler(seed=0, n_startup_trials=3),
                                  lambda: tiny_sampler(seed=0)], ids=["tpe", "rlm"])
def test_a_study_extended_twice_with_a_model_sampler_never_repeats_an_architecture(tmp_path, make) -> None:
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    evaluator = ArchEvaluator(SPACE, toy_table(ids).objectives, toy_table(ids))
    storage = f"sqlite:///{tmp_path / 's.db'}"
    for budget in (5, 9, 12):  # each run a fresh sampler of the same seed, as a rerun of the command is
        result = run_search(SPACE, evaluator, make(), budget=budget, storage=storage, progress=False)
    assert len(result.arch_ids) == 12 and len(set(result.arch_ids)) == 12


#: Heartbeats every second, stale after two: dead workers' trials fail within seconds.
QUICK = WorkerSettings(heartbeat_seconds=1, stale_after_seconds=2, poll_seconds=0.1)


def a_searched_study(tmp_path, done: int) -> tuple[ArchEvaluator, str]:
    """The toy table's evaluator and a SQLite study (named ``nasrlm``) with ``done`` random evaluations."""
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    evaluator = ArchEvaluator(SPACE, toy_table(ids).objectives, toy_table(ids))
    storage = f"sqlite:///{tmp_path / 's.db'}"
    run_search(SPACE, evaluator, optuna.samplers.RandomSampler(seed=0), budget=done, storage=storage,
               progress=False, workers=QUICK)
    return evaluator, storage


def search_within(seconds: float, evaluator: ArchEvaluator, storage: str, budget: int, why: str):
    """One worker's ``run_search`` to ``budget`` (seed 1) in a thread, failing with ``why`` if it is not
    done within ``seconds`` (a wait that never ends fails the test instead of hanging it)."""
    import threading

    found = []
    worker = threading.Thread(target=lambda: found.append(run_search(
        SPACE, evaluator, optuna.samplers.RandomSampler(seed=1), budget=budget, storage=storage,
        progress=False, workers=QUICK)), daemon=True)
    worker.start()
    worker.join(timeout=seconds)
    assert not worker.is_alive(), why
    return found[0]


@pytest.mark.parametrize("beat_once", [True, False], ids=["mid-evaluation", "before-its-first-beat"])
def test_a_killed_workers_trial_is_failed_and_its_architecture_run_again(tmp_path, beat_once) -> None:
    import time

    from nasrlm.search.workers._liveness import rdb_storage

    evaluator, storage = a_searched_study(tmp_path, 2)
    # a worker killed mid-evaluation, or between asking for its trial and its first heartbeat
    killed = optuna.load_study(study_name="nasrlm", storage=rdb_storage(storage, QUICK))
    trial = killed.ask()
    lost = SPACE.arch_id(SPACE.suggest(trial))
    trial.set_user_attr("arch_id", lost)
    if beat_once:
        killed._storage.record_heartbeat(trial._trial_id)
    time.sleep(3)
    result = run_search(SPACE, evaluator, optuna.samplers.RandomSampler(seed=1), budget=4, storage=storage,
                        progress=False, workers=QUICK)
    trials = optuna.load_study(study_name="nasrlm", storage=storage).trials
    assert trials[trial.number].state == optuna.trial.TrialState.FAIL and len(result.arch_ids) == 4
    assert optuna.trial.TrialState.RUNNING not in {t.state for t in trials}
    retried = [t for t in trials if t.system_attrs.get("failed_trial") == trial.number]
    assert len(retried) == 1 and retried[0].user_attrs["arch_id"] == lost and lost in result.arch_ids


class TakenForDead(optuna.samplers.RandomSampler):
    """Draws at random; while it draws the first trial's first parameter, another worker takes that trial
    for dead (its beats late on a busy machine) and fails it, and the sampler then stores an attribute of
    it, as the RLMSampler stores its prediction."""

    def __init__(self) -> None:
        super().__init__(seed=1)
        self.struck: int | None = None

    def sample_independent(self, study, trial, name, distribution):
        if self.struck is None:
            self.struck = trial.number
            study._storage.set_trial_state_values(trial._trial_id, state=optuna.trial.TrialState.FAIL)
            study._storage.set_trial_user_attr(trial._trial_id, "predicted", 1.0)  # the trial is finished
        return super().sample_independent(study, trial, name, distribution)


def test_a_worker_whose_trial_is_taken_for_dead_while_it_runs_says_so_and_goes_on(tmp_path) -> None:
    evaluator, storage = a_searched_study(tmp_path, 2)
    lines: list[str] = []
    sampler = TakenForDead()
    result = run_search(SPACE, evaluator, sampler, budget=5, storage=storage, progress=False, workers=QUICK,
                        log=lines.append)
    assert len(result.arch_ids) == 5 == len(set(result.arch_ids))
    assert any(f"trial {sampler.struck}:" in line and "took it for dead" in line for line in lines), lines
    trials = optuna.load_study(study_name="nasrlm", storage=storage).trials
    assert trials[sampler.struck].state == optuna.trial.TrialState.FAIL


def frozen(number: int, state: optuna.trial.TrialState, **system_attrs) -> optuna.trial.FrozenTrial:
    return optuna.trial.FrozenTrial(
        number=number, state=state, value=None, datetime_start=None, datetime_complete=None, params={},
        distributions={}, user_attrs={}, system_attrs=system_attrs, intermediate_values={}, trial_id=number)


def test_a_dead_workers_place_goes_to_its_retry_not_to_a_later_draw() -> None:
    import time

    from nasrlm.search.workers._liveness import RETRY_GRACE_SECONDS, STALE_ATTR

    S = optuna.trial.TrialState
    done = [frozen(0, S.COMPLETE), frozen(1, S.COMPLETE)]
    lost = frozen(2, S.FAIL, **{STALE_ATTR: time.time()})  # failed as dead, its retry not yet enqueued
    fresh = frozen(3, S.RUNNING)
    assert run_module._room([*done, frozen(2, S.RUNNING), fresh], 3, 3) == 0  # before: it runs
    assert run_module._room([*done, lost, fresh], 3, 3) == 0  # the instant between failing and retrying
    retry = frozen(4, S.WAITING, failed_trial=2, retry_history=[2])
    assert run_module._room([*done, lost, fresh, retry], 3, 3) == 0  # the retry comes first
    retry = frozen(4, S.RUNNING, failed_trial=2, retry_history=[2])
    assert run_module._room([*done, lost, fresh, retry], 4, 3) == 1
    # a fresh draw counts the running trials numbered before it, as ever, and nothing after it
    assert run_module._room([*done, fresh, frozen(5, S.RUNNING)], 5, 4) == 1
    assert run_module._room([*done, fresh, frozen(5, S.RUNNING)], 3, 4) == 2
    # a trial failed as dead with no retry to come (its retries spent, or its failer died) frees its place
    expired = frozen(2, S.FAIL, **{STALE_ATTR: time.time() - RETRY_GRACE_SECONDS - 1})
    assert run_module._room([*done, expired, fresh], 3, 3) == 1
    # two retries of one place (two workers failed it at once) hold it once; none once one completed
    twins = [frozen(4, S.WAITING, failed_trial=2, retry_history=[2]),
             frozen(5, S.WAITING, failed_trial=2, retry_history=[2])]
    assert run_module._room([*done, lost, fresh, *twins], 3, 4) == 1
    twins[0] = frozen(4, S.COMPLETE, failed_trial=2, retry_history=[2])
    assert run_module._room([*done, lost, fresh, *twins], 3, 4) == 1


def test_a_dead_trial_holds_its_place_from_its_failing_to_its_retry(tmp_path) -> None:
    import time

    from nasrlm.search.workers._liveness import STALE_ATTR, fail_stale_trials, rdb_storage

    storage = rdb_storage(f"sqlite:///{tmp_path / 's.db'}", QUICK)
    study = optuna.create_study(study_name="nasrlm", storage=storage, directions=["maximize"])
    for value in (1.0, 2.0):
        study.add_trial(optuna.trial.create_trial(value=value))
    dead = study.ask()  # its worker killed mid-evaluation
    study._storage.record_heartbeat(dead._trial_id)
    time.sleep(3)
    fresh = study.ask()  # another worker's draw, waiting for room at the budget's last place
    study._storage.record_heartbeat(fresh._trial_id)
    enqueue = study._storage.get_heartbeat_stale_trial_callback()
    seen = []

    def retry(study: optuna.Study, failed: optuna.trial.FrozenTrial) -> None:  # the instant before it
        seen.append(run_module._room(run_module._trials_now(study), fresh.number, 3))
        enqueue(study, failed)

    study._storage._backend.heartbeat_stale_trial_callback = retry
    fail_stale_trials(study)
    assert seen == [0]
    trials = study.get_trials(deepcopy=False)
    assert trials[dead.number].state == optuna.trial.TrialState.FAIL
    assert STALE_ATTR in trials[dead.number].system_attrs
    again = next(t for t in trials if t.system_attrs.get("failed_trial") == dead.number)
    assert STALE_ATTR not in again.system_attrs  # a retry is not itself failed as dead
    assert run_module._room(trials, fresh.number, 3) == 0 and run_module._room(trials, again.number, 3) == 1


def test_a_draw_held_back_by_a_waiting_retry_gives_its_place_up(tmp_path) -> None:
    import time

    from nasrlm.search.workers._liveness import fail_stale_trials, rdb_storage

    # one worker; the budget's last place is a dead worker's, and its retry waits behind a draw enqueued
    # before it: waiting for the retry would never end (no other worker asks for it), so the draw gives way
    evaluator, storage = a_searched_study(tmp_path, 2)
    study = optuna.load_study(study_name="nasrlm", storage=rdb_storage(storage, QUICK))
    dead = study.ask()
    lost = SPACE.arch_id(SPACE.suggest(dead))
    dead.set_user_attr("arch_id", lost)
    study._storage.record_heartbeat(dead._trial_id)
    other = study.ask()
    SPACE.suggest(other)
    study.tell(other, state=optuna.trial.TrialState.PRUNED)
    study.enqueue_trial(other.params)  # e.g. a proposal another worker left for the next to ask
    time.sleep(3)
    fail_stale_trials(study)  # the retry is enqueued behind it
    result = search_within(60, evaluator, storage, 3, "the draw waited for a retry nobody could ask for")
    assert len(result.arch_ids) == 3 and lost in result.arch_ids
    gave_way = [t for t in optuna.load_study(study_name="nasrlm", storage=storage).trials
                if t.user_attrs.get(SURPLUS_ATTR) and t.params == other.params]
    assert len(gave_way) == 1


def test_a_retry_held_back_by_an_earlier_retry_waits_again_behind_it(tmp_path) -> None:
    import time

    from nasrlm.search.workers._liveness import fail_stale_trials, rdb_storage

    # two dead workers' trials; the later one's retry is enqueued first and asked first, with one place
    # left: it goes back in the queue (it is not a new failure), the earlier one's retry takes the place
    evaluator, storage = a_searched_study(tmp_path, 1)
    study = optuna.load_study(study_name="nasrlm", storage=rdb_storage(storage, QUICK))
    first, second = study.ask(), study.ask()
    for trial in (first, second):
        trial.set_user_attr("arch_id", SPACE.arch_id(SPACE.suggest(trial)))
    study._storage.record_heartbeat(second._trial_id)
    time.sleep(2.2)
    study._storage.record_heartbeat(first._trial_id)  # the first goes stale 2.2 s after the second
    time.sleep(1.0)  # (heartbeat times may be whole seconds)
    fail_stale_trials(study)
    time.sleep(3.2)
    fail_stale_trials(study)
    waiting = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
    assert [t.system_attrs["failed_trial"] for t in waiting] == [second.number, first.number]
    result = search_within(60, evaluator, storage, 2,
                           "a retry waited for an earlier retry nobody could ask for")
    assert result.arch_ids[-1] == first.user_attrs["arch_id"]
    waiting = optuna.load_study(study_name="nasrlm", storage=storage).get_trials(
        states=(optuna.trial.TrialState.WAITING,))
    assert [(t.system_attrs["failed_trial"], t.system_attrs["retry_history"]) for t in waiting] == [
        (second.number, [second.number])]  # still there for a larger budget, no retry used up
    assert SURPLUS_ATTR not in waiting[0].user_attrs


def test_a_retry_giving_way_is_no_twin_of_its_own_copy() -> None:
    S = optuna.trial.TrialState
    giving_way = frozen(4, S.RUNNING, failed_trial=2, retry_history=[2])
    giving_way.user_attrs = {"arch_id": "a", SURPLUS_ATTR: True}  # its copy, 5, is asked before it is told
    assert run_module._twin([giving_way, frozen(5, S.RUNNING)], 5, "a") is None
    running = frozen(4, S.RUNNING)
    running.user_attrs = {"arch_id": "a"}
    assert run_module._twin([running, frozen(5, S.RUNNING)], 5, "a") == 4


def test_report_files_and_scores(tmp_path) -> None:
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    table = toy_table(ids)
    evaluator = ArchEvaluator(SPACE, table.objectives, table)
    known = evaluator.truth()
    assert known is not None and len(known[0]) == SPACE.size
    truth = Truth(*known)
    result = run_search(SPACE, evaluator, optuna.samplers.RandomSampler(seed=0), budget=30, progress=False)
    files = write_report(result, tmp_path, space="nb201", truth=truth)
    assert {p.name for p in files.values()} == {"pareto.csv", "pareto.png", "hypervolume.png", "report.md"}
    rows = files["csv"].read_text().splitlines()
    assert rows[0] == "arch_id,evaluation,acc[%],lat[ms]" and len(rows) == 1 + len(result.front)
    report = files["report"].read_text()
    assert "| acc | % | maximise |" in report and "True front:" in report
    assert files["pareto"].stat().st_size > 5_000
    # NB201 ids hold '|': escaped, each row of the front table keeps its 4 cells (id, evaluation, 2 values)
    table_rows = [line for line in report.splitlines() if line.startswith("| `")]
    assert len(table_rows) == len(result.front)
    for line in table_rows:
        cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        assert len(cells) == 4 and cells[0].replace("\\|", "|").strip("` ") in result.arch_ids


def test_a_single_objective_search_reports_its_best_architecture_without_a_pareto_plot(tmp_path) -> None:
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    two = toy_table(ids)
    table = BenchmarkTable("nb201", ids, two.objectives[:1], two.values[:, :1])
    evaluator = ArchEvaluator(SPACE, table.objectives, table)
    result = run_search(SPACE, evaluator, optuna.samplers.RandomSampler(seed=0), budget=12, progress=False)
    files = write_report(result, tmp_path, space="nb201", truth=Truth(*evaluator.truth()))
    assert {p.name for p in files.values()} == {"pareto.csv", "hypervolume.png", "report.md"}
    assert not (tmp_path / "pareto.png").exists()
    report = files["report"].read_text()
    best = max(result.values[:, 0])
    assert "## Best architecture found" in report and f"| {best:.4g} |" in report
    assert "pareto.png" not in report


def test_search_job_end_to_end_with_the_rlm(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NASRLM_CACHE", str(tmp_path / "cache"))
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    monkeypatch.setattr("nasrlm.search._evaluate.load_table", lambda space, names, data_dir: toy_table(ids))
    monkeypatch.setitem(SAMPLERS, "rlm", lambda space, seed, progress: tiny_sampler(seed))
    job = search_job(SPACE, ["acc", "lat"], budget=8, out_dir=tmp_path / "run", compare=["random"],
                     progress=False, log=lambda line: None)
    assert job.predicted is not None and len(job.predicted.ids) >= 1
    assert len(LabelCache(tmp_path / "cache" / "labels.db")) >= 40  # what it described, for a resumed run
    assert [r.sampler for r in job.baselines] == ["random"]
    report = job.files["report"].read_text()
    assert "| rlm |" in report and "| random |" in report and "predicted front" in report


def test_search_job_on_a_table_covering_part_of_the_space_searches_its_rows(tmp_path, monkeypatch) -> None:
    ids = SPACE.sample_ids(60, seed=7)  # 60 of 15,625 cells: almost every random cell would be missing
    monkeypatch.setattr("nasrlm.search._evaluate.load_table", lambda space, names, data_dir: toy_table(ids))
    lines: list[str] = []
    job = search_job(SPACE, ["acc", "lat"], budget=20, out_dir=tmp_path / "run", sampler="random",
                     progress=False, log=lines.append)
    assert set(job.result.arch_ids) <= set(ids) and len(job.result.arch_ids) == 20
    assert any("searching the 60 of 15,625 nb201 architectures" in line for line in lines)
    assert job.truth is not None and len(job.truth.ids) == 60  # the true front of the tabulated rows


def test_search_job_with_a_bad_objective_leaves_no_run_directory(tmp_path) -> None:
    out = tmp_path / "runs" / "typo"
    with pytest.raises(ValueError, match="no_such_objective"):
        search_job(SPACE, ["no_such_objective", "cpu-1t-b1"], budget=2, out_dir=out, sampler="random",
                   data_dir=tmp_path, progress=False)
    assert not out.exists()


def test_the_docs_list_every_rlm_option() -> None:
    from pathlib import Path

    from nasrlm.search.sampler._options import OPTIONS

    root = Path(__file__).resolve().parents[3]
    readme = (root / "README.md").read_text()
    assert "docs/sampler.md" in readme  # the README links the page that lists them
    page = (root / "docs" / "sampler.md").read_text()
    assert [o for o in OPTIONS if f"`{o}`" not in page] == []


def test_every_refit_starts_from_a_base_model(tmp_path) -> None:
    from nasrlm.free_labels import ALL_FREE_OBJECTIVES
    from nasrlm.rlm.predictor import RLMPredictor
    from nasrlm.rlm.tokenizers import OnnxTokenizer

    ids = SPACE.sample_ids(30, seed=1)
    tokenizer = OnnxTokenizer.train([SPACE.to_text(SPACE.parse(i)) for i in ids], vocab_size=1000)
    known = Objective("nb201:acc", "%", "toy accuracy", "test", True)
    base = RLMPredictor.from_scratch([*ALL_FREE_OBJECTIVES[:2], known], size=None, tokenizer=tokenizer,
                                     **TINY)
    base.save(tmp_path / "base")
    with pytest.raises(ValueError, match="not both"):
        tiny_sampler(base=str(tmp_path / "base"))  # TINY_OPTIONS has a model
    sampler = tiny_sampler(base=str(tmp_path / "base"), model=DEFAULT_MODEL)
    make_study(sampler).optimize(toy_objective, n_trials=8)
    tags = sampler.predictor.lm.model.config.objectives
    assert "acc" in tags and "lat" in tags and "nb201:acc" not in tags  # known tag renamed, new one added
    first = sampler.predictor
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=8)
    assert sampler.predictor is not first  # refitted from a fresh copy of the base
    assert len({t.user_attrs["arch_id"] for t in completed(study)}) == 8


def test_reseed_rng_gives_new_draws_as_optuna_expects() -> None:
    sampler = tiny_sampler(seed=3)
    before = sampler._rng.random()
    sampler.reseed_rng()  # Optuna's hook (e.g. for each process of n_jobs > 1); RandomSampler's too
    assert sampler._rng.random() != before


def test_parallel_workers_never_evaluate_an_architecture_the_model_proposed_twice() -> None:
    study = make_study(tiny_sampler(seed=5))
    study.optimize(toy_objective, n_trials=16, n_jobs=2)
    complete = completed(study)
    assert len(complete) == 16
    proposed = [t.user_attrs["arch_id"] for t in complete if PREDICTED_USER_ATTR in t.user_attrs]
    others = [t.user_attrs["arch_id"] for t in complete if PREDICTED_USER_ATTR not in t.user_attrs]
    assert len(proposed) >= 8
    assert len(set(proposed)) == len(proposed) and not set(proposed) & set(others)


def test_one_fit_s_other_proposals_wait_in_the_study_for_any_worker(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    first = tiny_sampler(seed=1)  # rounds of 3 proposals
    study = make_study(first, storage)
    study.optimize(toy_objective, n_trials=5)  # 4 start-up trials, then the first fit
    assert not study.get_trials(states=(optuna.trial.TrialState.WAITING,))  # alone, it kept the other two
    first.share_proposals(study)  # as run_search does when its run ends
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert first.fits == 1 and len(waiting) == 2
    assert all(set(t.user_attrs[PREDICTED_USER_ATTR]) == {"acc", "lat"} for t in waiting)
    other = tiny_sampler(seed=2)  # another worker, which has fitted nothing
    joined = optuna.load_study(study_name=study.study_name, storage=storage, sampler=other)
    joined.optimize(toy_objective, n_trials=2)  # takes the two waiting proposals: no fit of its own
    assert other.predictor is None
    done = completed(joined)
    proposed = [SPACE.arch_id(SPACE.suggest(optuna.trial.FixedTrial(t.system_attrs["fixed_params"])))
                for t in waiting]
    assert [t.user_attrs["arch_id"] for t in done[-2:]] == proposed
    assert len({t.user_attrs["arch_id"] for t in done}) == 7


def test_running_trials_are_pending_never_proposed_and_believed_when_picking(monkeypatch) -> None:
    import nasrlm.search.sampler._rounds as module

    seen: list[int] = []
    real = module.greedy_ehvi

    def spy(samples, observed, *args, **options):
        seen.append(len(observed))
        return real(samples, observed, *args, **options)

    monkeypatch.setattr(module, "greedy_ehvi", spy)
    sampler = tiny_sampler(seed=2, proposals_per_fit=1)  # a new round for every trial
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=4)
    running = [study.ask() for _ in range(2)]  # as other workers would, not told yet
    ids = [SPACE.arch_id(SPACE.suggest(trial)) for trial in running]
    # two trials running at once: the first fit proposed one for each (one enqueued); the second believed
    # the first trial's proposal and the waiting one at their medians, and proposed one for itself alone
    # (one for each worker, less the one waiting)
    assert seen == [4, 6]
    waiting = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
    assert len(waiting) == 1
    ids.append(SPACE.arch_id(SPACE.suggest(study.ask())))  # takes the waiting proposal: nothing new to fit
    assert seen == [4, 6] and len(set(ids)) == 3


def test_inside_a_refine_range_the_sampler_proposes_mutants_of_the_front_alone() -> None:
    sampler = tiny_sampler(seed=4, refine=[[8, 11]], proposals_per_fit=1)  # as JSON gives it
    assert sampler.proposal_settings.refine == ((8, 11),)
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=14)
    trials = completed(study)
    changes = [changes_from_front(t.params, trials[: t.number]) for t in trials[8:]]
    assert changes[:3] == [1, 1, 1]  # each proposed from the front of the trials before it
    assert max(changes[3:]) > 1  # past the range, the candidates are the whole space again


def test_a_refit_holds_the_fit_lease_and_frees_it_with_its_proposals_enqueued(monkeypatch) -> None:
    sampler = tiny_sampler(seed=3)
    study = make_study(sampler)
    other = FitLease(study, "another worker")
    held: list[bool] = []
    fit = sampler._fit
    monkeypatch.setattr(sampler, "_fit", lambda *a: held.append(other.held_elsewhere()) or fit(*a))
    study.optimize(toy_objective, n_trials=8)
    assert held and all(held)  # every refit ran under the lease
    assert not other.held_elsewhere() and not sampler.awaiting_proposals(study)


def test_a_worker_awaits_proposals_only_while_another_refits_and_none_wait() -> None:
    sampler = tiny_sampler(seed=3)
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=4)
    assert not sampler.awaiting_proposals(study)
    refitting = study.ask()  # another worker's trial, refitting under the lease
    FitLease(study, "another worker").take(refitting._trial_id, seconds=60)
    assert sampler.awaiting_proposals(study)
    study.enqueue_trial(SPACE.params_of(SPACE.sample(np.random.default_rng(0))))
    assert not sampler.awaiting_proposals(study)  # a proposal waits: take it
    study.ask()
    assert sampler.awaiting_proposals(study)
    study.tell(refitting, state=optuna.trial.TrialState.FAIL)  # that worker died
    assert not sampler.awaiting_proposals(study)


def test_a_worker_without_a_model_waits_for_one_that_fitted_lately_and_never_refits_beside_it() -> None:
    sampler = tiny_sampler(seed=3)
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=4)
    sampler._workers._running[study.study_name] = deque([2])  # as if another worker had been seen running
    other = FitLease(study, "a worker with a trained model")
    other.take(None, seconds=60)
    other.release()  # it finished a fit a moment ago, and will refit when it takes a proposal
    assert sampler.awaiting_proposals(study)
    trial = study.ask()  # asked anyway (it lost the last proposal to another worker): no fit of its own
    arch_id = SPACE.arch_id(SPACE.suggest(trial))
    assert sampler.fits == 0
    assert changes_from_front(trial.params, completed(study)) == 1  # a mutant of the front
    assert arch_id not in {t.user_attrs["arch_id"] for t in completed(study)}


def test_workers_are_counted_over_recent_trials_so_one_left_running_by_a_killed_run_stops_counting() -> None:
    sampler = tiny_sampler(seed=3)
    study = make_study(sampler)
    left = study.ask()  # a trial of a worker killed before it told anything
    mine = study.ask()  # this worker's: two running
    assert sampler._workers.worker_count(study) == 2
    study.tell(left, state=optuna.trial.TrialState.FAIL)  # found dead and failed
    study.tell(mine, state=optuna.trial.TrialState.FAIL)
    study.optimize(toy_objective, n_trials=WORKER_COUNT_WINDOW)  # an enqueued retry would count too
    assert sampler._workers.worker_count(study) == 1


def test_run_search_waits_while_the_sampler_awaits_proposals() -> None:
    class Awaiting(optuna.samplers.RandomSampler):
        asked = 0

        def awaiting_proposals(self, study: optuna.Study) -> bool:
            self.asked += 1
            return self.asked <= 3  # three looks, then the proposals are there

    ids = SPACE.sample_ids(50, seed=0)
    evaluator = ArchEvaluator(SPACE, toy_table(ids).objectives, toy_table(ids))
    sampler = Awaiting(seed=0)
    result = run_search(SPACE, evaluator, sampler, budget=2, progress=False, max_failures=10_000,
                        workers=WorkerSettings(poll_seconds=0.01))
    assert len(result.arch_ids) == 2
    assert sampler.asked >= 3 + 2  # it waited three times, then asked before each of its two trials


def test_with_the_trees_spread_candidates_the_trees_disagree_on_scatter_wider(monkeypatch) -> None:
    from scipy.stats import spearmanr

    sampler = tiny_sampler(prior="trend-forest", spread="trees")
    make_study(sampler).optimize(toy_objective, n_trials=12)  # refitted on 10: forests (8 rows or more)
    predictor = sampler.predictor
    assert predictor.prior_part.prior.kinds == ["trend-forest", "sum-forest"]  # lat, a cost, adds up its ops
    ids = SPACE.sample_ids(30, seed=3)
    asked = []
    sample = predictor.sample
    monkeypatch.setattr(predictor, "sample",
                        lambda *a, **k: asked.append(k["residual_spread"]) or sample(*a, **k))
    samples = sampler.predict_samples(ids, num_samples=16)
    labels = sampler.cache.labels_of(ids)
    disagreement = predictor.prior_part.prior.disagreement(labels)
    prior = predictor.prior_part.prior
    z = prior.residuals(np.repeat(labels, 16, axis=0), samples.reshape(-1, 2)).reshape(30, 16, 2)
    for k, name in enumerate(("acc", "lat")):
        # each candidate's spread is the prior's error scaled by its trees' disagreement over the mean's
        expected = predictor.prior_part.errors[name] * disagreement[:, k] / disagreement[:, k].mean()
        np.testing.assert_allclose(asked[0][name], expected)
        # and the samples scatter so (ties blur), where they can: a sample past the range the normaliser
        # covers is clipped to its edge, so a candidate near an edge shows less spread than it was given
        values = samples[:, :, k]
        clipped = (values == values.min()).any(axis=1) | (values == values.max()).any(axis=1)
        assert (~clipped).sum() >= 15
        assert spearmanr(z[~clipped, :, k].std(axis=1), expected[~clipped])[0] > 0.5



def test_an_objective_named_like_a_free_label_is_searched_under_its_own_tag() -> None:
    """NB101 publishes ``params_m``: acc × params_m is a common search, and the decoder is given the
    counted ``params_m`` already."""
    from nasrlm.free_labels import free_labels

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        arch_id = SPACE.arch_id(SPACE.suggest(trial))
        trial.set_user_attr("arch_id", arch_id)
        return toy_values(arch_id)[0], float(free_labels(SPACE, [arch_id])[0, 0])

    sampler = tiny_sampler()
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.set_metric_names(["acc", "params_m"])
    study.optimize(objective, n_trials=8)
    assert len({t.user_attrs["arch_id"] for t in completed(study)}) == 8
    assert "params_m#objective" in sampler.predictor.lm.objectives  # beside the free label params_m
    ids = SPACE.sample_ids(5, seed=2)
    samples = sampler.predict_samples(ids, num_samples=4)
    assert samples.shape == (5, 4, 2) and np.isfinite(samples).all()


def test_the_prior_surrogate_searches_without_a_model_and_its_samples_scatter_as_far_as_it_erred() -> None:
    sampler = tiny_sampler(surrogate="prior", prior="forest", spread="prior")
    fits = []
    sampler.on_fit = lambda n, seconds: fits.append(n)
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=14)
    assert fits == [4, 7, 10, 13] and sampler.predictor is None  # refitted every round, no model
    ids = [t.user_attrs["arch_id"] for t in completed(study)]
    assert len(set(ids)) == 14
    assert "predicted" not in completed(study)[-1].user_attrs  # no residual to weigh
    surrogate = sampler._surrogate
    errors = surrogate._errors
    assert errors.shape == (2,) and (errors > 0).all()
    new = SPACE.sample_ids(30, seed=5)
    samples = sampler.predict_samples(new, num_samples=8)
    z = surrogate._prior.residuals(np.repeat(sampler.cache.labels_of(new), 8, axis=0), samples.reshape(-1, 2))
    z = z.reshape(30, 8, 2)
    assert np.abs(z.mean(axis=(0, 1))) == pytest.approx([0, 0], abs=0.3 * errors.max())  # around the mean
    assert z.std(axis=1).mean(axis=0) == pytest.approx(errors, rel=0.25)
    again = tiny_sampler(surrogate="prior", prior="forest", spread="prior")
    make_study(again).optimize(toy_objective, n_trials=14)
    assert [t.params for t in make_study(sampler).trials] == []  # a fresh study starts empty
    assert np.array_equal(again.predict_samples(new, num_samples=8), samples)  # same seed, same samples


def test_the_prior_surrogate_spreads_by_tree_disagreement_with_the_trees_spread() -> None:
    sampler = tiny_sampler(surrogate="prior", prior="forest", spread="trees", num_samples=200)
    make_study(sampler).optimize(toy_objective, n_trials=12)
    new = SPACE.sample_ids(40, seed=6)
    surrogate = sampler._surrogate
    labels = sampler.cache.labels_of(new)
    samples = sampler.predict_samples(new)
    z = surrogate._prior.residuals(np.repeat(labels, 200, axis=0), samples.reshape(-1, 2)).reshape(40, 200, 2)
    disagreement = surrogate._prior.disagreement(labels)[:, 0]
    assert disagreement.std() > 0  # the candidates differ ...
    # ... and so do their samples' spreads (clipped where the widest reach the scores' range)
    assert np.corrcoef(z[..., 0].std(axis=1), disagreement)[0, 1] > 0.8


def test_the_first_fit_says_it_starts_through_the_python_logger(caplog) -> None:
    sampler = tiny_sampler(surrogate="prior", prior="forest")
    with caplog.at_level(logging.INFO, logger="nasrlm.search"):
        make_study(sampler).optimize(toy_objective, n_trials=8)
    starts = [r.getMessage() for r in caplog.records if r.getMessage().startswith("first model fit")]
    assert len(starts) == 1 and "candidates" in starts[0]


class NoneEdgesBreak(NasBench201):
    """NB201 whose ``build_onnx`` raises for cells with two ``none`` edges or more, as a space with a bug
    would (about a third of them)."""

    def build_onnx(self, arch):
        if self.arch_id(arch).count("none") >= 2:
            raise ValueError("none edges unsupported")
        return super().build_onnx(arch)


def test_the_rlm_sampler_leaves_out_candidates_the_space_cannot_build(monkeypatch) -> None:
    space = NoneEdgesBreak()
    lines: list[str] = []
    sampler = tiny_sampler(space=space, label_cache=None)
    sampler.log = lines.append

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        arch = space.suggest(trial)
        space.build_onnx(arch)  # evaluating builds it: a broken one fails its trial
        return toy_values(space.arch_id(arch))

    study = make_study(sampler)
    study.optimize(objective, n_trials=16, catch=(ValueError,))
    proposed = [t for t in study.trials if PREDICTED_USER_ATTR in t.user_attrs]
    assert proposed and all(t.state == optuna.trial.TrialState.COMPLETE for t in proposed)  # all built
    warned = [line for line in lines if line.startswith("warning: the model leaves it out:")]
    assert warned and all("none edges unsupported" in line for line in warned)
    assert len(warned) == len(set(warned))  # each said once


def test_samplers_naming_one_label_cache_describe_each_candidate_once(tmp_path, monkeypatch) -> None:
    path = tmp_path / "labels.db"
    first = tiny_sampler(surrogate="prior", prior="forest", label_cache=path)
    make_study(first).optimize(toy_objective, n_trials=8)
    stored = len(LabelCache(path))
    assert stored >= 40  # the candidate pool at least
    described = []
    monkeypatch.setattr(free_labels, "_describe_chunk", lambda chunk, job: described.append(chunk))
    again = tiny_sampler(surrogate="prior", prior="forest", label_cache=path)  # same seed: same candidates
    make_study(again).optimize(toy_objective, n_trials=8)
    assert described == [] and len(LabelCache(path)) == stored


def test_after_prior_alone_after_trials_the_model_is_no_longer_refitted() -> None:
    sampler = tiny_sampler(prior="forest", prior_alone_after=7)
    fits = []
    sampler.on_fit = lambda n, seconds: fits.append(n)
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=11)
    assert fits == [4, 7, 10] and sampler.fits == 3
    assert isinstance(sampler._surrogate, PriorSurrogate) and sampler.predictor is None
    assert len({t.user_attrs["arch_id"] for t in completed(study)}) == 11


def test_without_a_feature_prior_the_model_predicts_throughout() -> None:
    sampler = tiny_sampler(prior="line", prior_alone_after=5)
    make_study(sampler).optimize(toy_objective, n_trials=8)
    assert sampler.fits == 2 and sampler.predictor is not None


def test_a_search_already_past_prior_alone_after_trains_no_model(monkeypatch) -> None:
    from nasrlm.search import RLMSurrogate

    def refuse(self, pool):
        raise AssertionError("a model was started for a search past prior_alone_after")

    monkeypatch.setattr(RLMSurrogate, "start", refuse)
    sampler = tiny_sampler(prior="forest", prior_alone_after=4)  # reached by the start-up trials
    make_study(sampler).optimize(toy_objective, n_trials=8)
    assert sampler.fits == 2 and isinstance(sampler._surrogate, PriorSurrogate)


# --- a drop-in Optuna sampler past its start-up trials: pickled, parameters beside the space's, alone ---
def test_a_sampler_pickles_at_any_point_and_a_study_resumed_with_it_repeats_no_architecture(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    sampler = tiny_sampler()
    sampler.on_fit = lambda trials, seconds: None  # hooks of this process (nasrlm search sets both): not kept
    sampler.log = lambda line: None
    pickle.loads(pickle.dumps(sampler))  # before any trial
    study = make_study(sampler, storage)
    study.optimize(toy_objective, n_trials=7)  # past the start-up trials: a model, proposals, draws
    assert sampler.fits >= 1
    resumed = pickle.loads(pickle.dumps(sampler))  # Optuna's recipe: save the sampler, load it to resume
    assert resumed.fits == sampler.fits and resumed.on_fit is None
    twin = copy.deepcopy(sampler)
    assert twin.predictor is not sampler.predictor
    assert twin._workers._name != sampler._workers._name  # a worker of its own in a fit lease
    assert resumed._surrogate.log == resumed.log  # the surrogate logs through the loaded sampler's hook
    study = optuna.load_study(study_name=study.study_name, storage=storage, sampler=resumed)
    study.optimize(toy_objective, n_trials=6)
    done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    ids = [t.user_attrs["arch_id"] for t in done]
    assert len(done) >= 13 and len(set(ids)) == len(ids)
    assert not study.get_trials(states=(optuna.trial.TrialState.FAIL,))


def test_a_study_that_draws_no_architecture_samples_every_parameter_independently() -> None:
    def plain(trial: optuna.Trial) -> float:
        return trial.suggest_float("x", 0, 10) ** 2 + trial.suggest_int("n", 1, 4)

    study = optuna.create_study(sampler=tiny_sampler())
    with pytest.warns(UserWarning, match="draw no parameter of search space 'nb201'") as caught:
        study.optimize(plain, n_trials=9)
    assert len([w for w in caught if "search space" in str(w.message)]) == 1  # one warning, not one a trial
    assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == 9


def test_a_parameter_beside_the_architecture_is_drawn_in_the_range_each_trial_asks() -> None:
    low, high = 0.0, 10.0

    def with_extra(trial: optuna.Trial) -> tuple[float, float]:
        scale = trial.suggest_float("scale", low, high)
        first, second = toy_objective(trial)
        return first * scale, second

    study = make_study(tiny_sampler())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Optuna warns of a fixed value outside its range
        study.optimize(with_extra, n_trials=8)  # the model has proposed architectures, queued for trials
        low, high = 20.0, 30.0
        study.optimize(with_extra, n_trials=8)
    late = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))[8:]
    assert late and all(20 <= t.params["scale"] <= 30 for t in late)
    assert any(len(t.params) > 1 for t in late)  # the architecture still drawn with it


def test_alone_in_a_study_it_leaves_no_waiting_trial_and_shares_its_proposals_when_asked() -> None:
    sampler = tiny_sampler()
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=12)  # 4 start-up trials, then fits of 3 proposals: one left over
    assert len(study.trials) == 12 and not study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    proposed = [t for t in study.trials if "predicted" in t.user_attrs]
    assert len(proposed) >= 6  # the kept proposals ran as trials, each with the model's prediction
    sampler.share_proposals(study)  # what run_search does as it ends: a resumed run takes them first
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert waiting and all("predicted" in t.user_attrs for t in waiting)
    study.optimize(toy_objective, n_trials=len(waiting))
    assert not study.get_trials(states=(optuna.trial.TrialState.WAITING,))


def test_a_worker_that_sees_another_takes_its_next_kept_proposal_and_shares_the_rest() -> None:
    sampler = tiny_sampler()
    study = make_study(sampler)
    study.optimize(toy_objective, n_trials=5)  # 4 start-up trials, then a fit of 3: two kept
    kept = [sampler.arch_id_of(params) for params, _ in sampler._workers._kept[study.study_name]]
    assert len(kept) == 2 and not study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    study.ask()  # another worker's trial, running
    mine = study.ask()  # this worker sees two running: it takes its kept proposal, no refit
    assert SPACE.arch_id(SPACE.suggest(mine)) == kept[0] and sampler.fits == 1
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert [sampler.arch_id_of(t.system_attrs["fixed_params"]) for t in waiting] == kept[1:]  # the rest


def constrained_objective(trial: optuna.Trial) -> float:
    """The toy's accuracy alone, under a latency limit that about two cells in three meet: the trial says
    how far it is over (``trial.set_constraint``, Optuna's way), the best feasible cell is 80."""
    acc, latency = toy_values(SPACE.arch_id(SPACE.suggest(trial)))
    trial.set_constraint("latency", latency - 5.0)
    return acc


@pytest.mark.parametrize("options", [{"surrogate": "prior", "prior": "forest"}, {}])
def test_with_a_constraint_the_model_learns_its_value_and_proposes_feasible_networks(options) -> None:
    sampler = tiny_sampler(**options)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(constrained_objective, n_trials=24)
    assert [o.name for o in sampler._surrogate.objectives] == ["objective_0", "latency#constraint"]
    met = [t.constraints["latency"] <= 0 for t in study.trials]
    assert max(t.value for t, ok in zip(study.trials, met, strict=True) if ok) == 80.0
    assert np.mean(met[4:]) >= 0.7  # the proposals, against about 0.65 at random
    proposed = [t for t in study.trials[4:] if PREDICTED_USER_ATTR in t.user_attrs]
    # the constraint's value too: its residual is weighed as the objectives' are
    kept = {"objective_0", "latency#constraint"}
    assert all(set(t.user_attrs[PREDICTED_USER_ATTR]) == kept for t in proposed)


@pytest.mark.parametrize("options", [{"surrogate": "prior", "prior": "forest"}, {}])
def test_before_any_trial_is_feasible_the_model_can_still_draw_feasible_values(options) -> None:
    """Under a limit only conv-free cells meet, no start-up trial meets it: their constraint values are all
    positive over more than a decade, which a latency's log scale would keep above zero for ever."""
    def objective(trial: optuna.Trial) -> float:
        acc, latency = toy_values(SPACE.arch_id(SPACE.suggest(trial)))
        trial.set_constraint("latency", latency - 1.05)
        return acc

    sampler = tiny_sampler(**options, n_startup_trials=6)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(objective, n_trials=7)
    missed = np.array([t.constraints["latency"] for t in study.trials[:6]])
    assert (missed > 0).all() and missed.max() / missed.min() > 10
    draws = sampler.predict_samples(sampler.candidate_pool)[..., 1]
    assert (draws <= 0).any(axis=1).mean() >= 0.1  # before, none: the limit could only be found by chance


def test_the_accuracy_measured_for_one_architecture_is_known_for_those_that_compute_the_same() -> None:
    """Cells whose output ignores their input all compute one function (chance, whatever they cost): once
    one is measured, the others' accuracy is known, their latency not; unnamed objectives: nothing known."""
    chance, twin = ("|none~0|+|none~0|none~1|+|none~0|none~1|none~2|",
                    "|none~0|+|none~0|none~1|+|none~0|none~1|nor_conv_3x3~2|")
    other = "|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    sampler = tiny_sampler()
    study = make_study(sampler)
    for arch_id, values in ((chance, [10.0, 1.0]), (other, [80.0, 3.0]), (other, [82.0, 3.0])):
        study.enqueue_trial(SPACE.params_of(SPACE.parse(arch_id)), skip_if_exists=False)
        study.optimize(lambda t, v=values: (SPACE.suggest(t), v)[1], n_trials=1)
    ids = [twin, other, "|nor_conv_1x1~0|+|none~0|none~1|+|none~0|skip_connect~1|none~2|"]
    known = sampler._known_by_class(study, study.trials, sampler.cache.classes_of(ids))
    assert np.array_equal(known, [[10.0, np.nan], [81.0, np.nan], [np.nan, np.nan]], equal_nan=True)
    unnamed = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    unnamed.add_trial(study.trials[0])
    assert np.isnan(sampler._known_by_class(unnamed, unnamed.trials, [chance])).all()


# --- constraints: the best network under a limit ------------------------------------------------------
def test_a_constraint_parses_says_how_far_it_is_missed_and_refuses_nonsense() -> None:
    at_most, at_least = Constraint.parse(" pixel3 <= 10 "), Constraint.parse("acc>=70.5")
    assert (at_most.quantity, at_most.operator, at_most.limit) == ("pixel3", "<=", 10.0)
    assert at_most.name == "pixel3<=10" and Constraint.parse(at_most.name) == at_most  # names round-trip
    for limit in (10.0000001, 1234567.0, 2.5e-05):  # to the last digit: a resumed study's limit is the same
        assert Constraint.parse(Constraint("lat", "<=", limit).name).limit == limit
    assert at_most.value(12.0) == 2.0 and at_most.value(9.0) == -1.0  # Optuna's: met at 0 or less
    assert at_least.value(71.5) == -1.0 and at_least.value(70.0) == 0.5
    for bad, says in (("pixel3<10", "expected NAME<=LIMIT"), ("pixel3<=fast", "'fast' is not a number"),
                      ("<=3", "expected NAME<=LIMIT"), ("pixel3<=inf", "must be finite")):
        with pytest.raises(ValueError, match=says):
            Constraint.parse(bad)


def test_a_search_under_a_constraint_tells_optuna_and_reports_the_best_feasible(tmp_path, monkeypatch):
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    monkeypatch.setattr("nasrlm.search._evaluate.load_table", lambda space, names, data_dir: toy_table(ids))
    job = search_job(SPACE, ["acc"], budget=20, out_dir=tmp_path / "run", sampler="random", compare=["tpe"],
                     constraints=[Constraint.parse("lat<=5")], progress=False, log=lambda line: None)
    result, truth = job.result, job.truth
    latency = np.array([toy_values(i)[1] for i in result.arch_ids])
    np.testing.assert_allclose(result.limits[:, 0], latency - 5.0)  # each trial's trial.set_constraint
    assert result.constraints == ["lat<=5"] and list(result.feasible) == list(latency <= 5)
    assert all(latency[k] <= 5 for k in result.front)  # the best found is a feasible one
    met = truth.feasible
    assert met.sum() == sum(toy_values(i)[1] <= 5 for i in ids) and truth.values[met].max() == 80.0
    assert [r.constraints for r in job.baselines] == [["lat<=5"]]  # the baseline searched under it too
    report = job.files["report"].read_text()
    best = result.values[result.feasible, 0].max()
    assert "## Constraints" in report and "Searched under `lat<=5`" in report
    assert f"| random | {score(result, reference_point([result], truth), truth).hypervolume:.4g} |" in report
    assert f"| {best:.4g} | {80.0 - best:.4g} |" in report and "## Best feasible architecture found" in report
    assert {p.name for p in job.files.values()} == {"pareto.csv", "pareto.png", "hypervolume.png",
                                                    "report.md"}
    assert (tmp_path / "run" / "pareto.png").stat().st_size > 5_000  # acc against lat, the limit drawn
    assert re.search(r"\d+% feasible, best feasible [\d.]+ \([\d.]+ short of the table's best\)",
                     summary(job)[0])


def test_a_study_resumed_under_other_constraints_is_refused(tmp_path) -> None:
    table = toy_table([SPACE.arch_id(a) for a in SPACE.enumerate()])
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    first = ArchEvaluator(SPACE, table.objectives, table, constraints=[Constraint.parse("lat<=5")])
    run_search(SPACE, first, optuna.samplers.RandomSampler(seed=0), budget=3, storage=storage, progress=False)
    other = ArchEvaluator(SPACE, table.objectives, table, constraints=[Constraint.parse("lat<=4")])
    with pytest.raises(ValueError, match=r"searches under the constraints \['lat<=5'\], not \['lat<=4'\]"):
        run_search(SPACE, other, optuna.samplers.RandomSampler(seed=0), budget=6, storage=storage,
                   progress=False)


def test_constraints_no_architecture_of_the_table_meets_are_refused(tmp_path, monkeypatch) -> None:
    ids = [SPACE.arch_id(a) for a in SPACE.enumerate()]
    monkeypatch.setattr("nasrlm.search._evaluate.load_table", lambda space, names, data_dir: toy_table(ids))
    with pytest.raises(UnmeetableConstraintError, match=r"meets lat<=0.5 \(the closest: lat 1\)"):
        search_job(SPACE, ["acc"], budget=5, out_dir=tmp_path / "run", sampler="random",
                   constraints=[Constraint.parse("lat<=0.5")], progress=False)
    with pytest.raises(UnmeetableConstraintError, match="meets them all together"):
        search_job(SPACE, ["acc"], budget=5, out_dir=tmp_path / "run", sampler="random",
                   constraints=[Constraint.parse("lat<=1"), Constraint.parse("acc>=60")], progress=False)
    assert not (tmp_path / "run").exists()


def test_a_constraint_on_a_latency_measured_live_measures_it_beside_the_objectives(tmp_path) -> None:
    job = search_job(SPACE, ["params_m"], budget=2, out_dir=tmp_path / "run", sampler="random",
                     constraints=[Constraint.parse("cpu-1t-b1<=1000")], progress=False, log=lambda line: None)
    assert job.result.constraints == ["cpu-1t-b1<=1000"] and job.result.feasible.all()  # under a second
    assert (job.result.limits < 0).all() and (tmp_path / "run" / "latency.db").is_file()
