"""The RLMSampler as any Optuna user's code meets it past its start-up trials: pickled and deep-copied at any
point, parameters that are not the space's drawn independently, and each in the range its trial asks for."""

from __future__ import annotations

import copy
import pickle
import warnings

import optuna
import pytest

from nasrlm.search import RLMSampler, sampler_keywords
from nasrlm.search.sampler._numbered_draws import NumberedDraws
from search_spaces import NasBench201

SPACE = NasBench201()
TINY = {"d_model": 16, "num_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.0}
#: A sampler past its 4 start-up trials within seconds.
TINY_OPTIONS = {"n_startup_trials": 4, "proposals_per_fit": 3, "num_candidates": 40, "fresh_candidates": 10,
                "num_samples": 4, "pretrain_archs": 0, "fit_steps": 3, "model": TINY}


def tiny_sampler(seed: int = 0) -> RLMSampler:
    return RLMSampler(SPACE, seed=seed, **sampler_keywords(TINY_OPTIONS))


def architecture(trial: optuna.Trial) -> tuple[float, float]:
    """A toy of two objectives read off the architecture the trial draws."""
    arch_id = SPACE.arch_id(SPACE.suggest(trial))
    trial.set_user_attr("arch_id", arch_id)
    ops = SPACE.parse(arch_id).ops
    return float(sum(op.startswith("nor_conv") for op in ops)), float(ops.count("nor_conv_3x3"))


@pytest.fixture(autouse=True)
def _quiet_optuna():
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    yield
    optuna.logging.set_verbosity(level)


def test_a_sampler_pickles_at_any_point_and_a_study_resumed_with_it_repeats_no_architecture(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    sampler = tiny_sampler()
    sampler.on_fit = lambda trials, seconds: None  # hooks of this process (nasrlm search sets both): not kept
    sampler.log = lambda line: None
    pickle.loads(pickle.dumps(sampler))  # before any trial
    study = optuna.create_study(study_name="s", storage=storage, directions=["maximize", "minimize"],
                                sampler=sampler)
    study.optimize(architecture, n_trials=7)  # past the start-up trials: a model, proposals, draws
    assert sampler.fits >= 1
    resumed = pickle.loads(pickle.dumps(sampler))  # Optuna's recipe: save the sampler, load it to resume
    assert resumed.fits == sampler.fits and resumed.on_fit is None
    twin = copy.deepcopy(sampler)
    assert twin.predictor is not sampler.predictor
    assert twin._workers._name != sampler._workers._name  # a worker of its own in a fit lease
    assert resumed._surrogate.log == resumed.log  # the surrogate logs through the loaded sampler's hook
    study = optuna.load_study(study_name="s", storage=storage, sampler=resumed)
    study.optimize(architecture, n_trials=6)
    done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    ids = [t.user_attrs["arch_id"] for t in done]
    assert len(done) >= 13 and len(set(ids)) == len(ids)
    assert not study.get_trials(states=(optuna.trial.TrialState.FAIL,))


def test_the_random_stream_goes_on_where_it_stood_after_a_pickle() -> None:
    draws = NumberedDraws(SPACE, seed=3)
    first = [draws.params(n) for n in range(3)]
    loaded = pickle.loads(pickle.dumps(draws))
    fresh = NumberedDraws(SPACE, seed=3)
    assert [loaded.params(n) for n in range(6)] == [fresh.params(n) for n in range(6)]
    assert [loaded.params(n) for n in range(3)] == first


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
        first, second = architecture(trial)
        return first * scale, second

    study = optuna.create_study(directions=["maximize", "minimize"], sampler=tiny_sampler())
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
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.optimize(architecture, n_trials=12)  # 4 start-up trials, then fits of 3 proposals: one left over
    assert len(study.trials) == 12 and not study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    proposed = [t for t in study.trials if "predicted" in t.user_attrs]
    assert len(proposed) >= 6  # the kept proposals ran as trials, each with the model's prediction
    sampler.share_proposals(study)  # what run_search does as it ends: a resumed run takes them first
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert waiting and all("predicted" in t.user_attrs for t in waiting)
    study.optimize(architecture, n_trials=len(waiting))
    assert not study.get_trials(states=(optuna.trial.TrialState.WAITING,))


def test_a_worker_that_sees_another_takes_its_next_kept_proposal_and_shares_the_rest() -> None:
    sampler = tiny_sampler()
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.optimize(architecture, n_trials=5)  # 4 start-up trials, then a fit of 3: two kept
    kept = [sampler.arch_id_of(params) for params, _ in sampler._workers._kept[study.study_name]]
    assert len(kept) == 2 and not study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    study.ask()  # another worker's trial, running
    mine = study.ask()  # this worker sees two running: it takes its kept proposal, no refit
    assert SPACE.arch_id(SPACE.suggest(mine)) == kept[0] and sampler.fits == 1
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert [sampler.arch_id_of(t.system_attrs["fixed_params"]) for t in waiting] == kept[1:]  # the rest
