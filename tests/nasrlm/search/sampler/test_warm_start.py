"""The warm start: earlier studies and tables read against a new study's objectives, and the sampler that
starts from them."""

from __future__ import annotations

import numpy as np
import optuna
import pandas as pd
import pytest

from nasrlm.search import RLMSampler, WarmStartError, earlier_front, sampler_keywords
from nasrlm.search.sampler._warm_start import EVIDENCE_PREFIX, EvidenceInputs, WarmStart, read_source
from search_spaces import get_space
from search_spaces.nasbench201 import NasBench201

pytestmark = [pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning"),
              pytest.mark.usefixtures("quiet_optuna")]
SPACE = NasBench201()
TINY = {"n_startup_trials": 4, "proposals_per_fit": 3, "num_candidates": 40, "fresh_candidates": 10,
        "num_samples": 4, "pretrain_archs": 0, "fit_steps": 3,
        "model": {"d_model": 16, "num_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1,
                  "dropout": 0.0}}


def toy(arch_id: str) -> dict[str, float]:
    """Three quantities of a cell: an 'accuracy', a 'latency' on one device and on another."""
    ops = SPACE.parse(arch_id).ops
    conv = sum(op.startswith("nor_conv") for op in ops)
    three = ops.count("nor_conv_3x3")
    return {"acc": 50.0 + 5 * conv + ops.count("skip_connect"), "lat_a": 1.0 + 2 * three + 0.1 * conv,
            "lat_b": 2.0 + 3 * three + 0.5 * conv}


def arch_of(trial: optuna.Trial) -> str:
    arch_id = SPACE.arch_id(SPACE.suggest(trial))
    trial.set_user_attr("arch_id", arch_id)
    return arch_id


def earlier_study(names: tuple[str, str] = ("acc", "lat_a"), trials: int = 30, named: bool = True
                  ) -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=optuna.samplers.RandomSampler(seed=1))
    if named:
        study.set_metric_names(list(names))
    study.optimize(lambda t: tuple(toy(arch_of(t))[n] for n in names), n_trials=trials)
    return study


def arch_id_of(params: dict) -> str:
    return SPACE.arch_id(SPACE.suggest(optuna.trial.FixedTrial(params)))


# --- reading sources ----------------------------------------------------------------------------------
def test_a_study_is_read_by_architecture_with_its_objectives_names_and_directions() -> None:
    study = earlier_study()
    source = read_source(study, SPACE, arch_id_of)
    assert source.label == f"study {study.study_name}"
    assert source.columns == ("acc", "lat_a") and source.maximize == (True, False)
    assert len(set(source.arch_ids)) == len(source.arch_ids) <= 30
    k = 3
    assert list(source.values[k]) == [toy(source.arch_ids[k])["acc"], toy(source.arch_ids[k])["lat_a"]]


def test_a_study_that_names_no_objective_is_refused_with_how_to_name_them() -> None:
    with pytest.raises(WarmStartError, match="does not name its objectives.*set_metric_names"):
        read_source(earlier_study(named=False), SPACE, arch_id_of)


def test_tables_as_nasrlm_data_writes_them_and_as_dataframes(tmp_path) -> None:
    ids = SPACE.sample_ids(8, seed=0)
    path = tmp_path / "table.csv"
    pd.DataFrame({"arch_id": ids, "acc[%]": [toy(i)["acc"] for i in ids],
                  "lat_b[ms]": [toy(i)["lat_b"] for i in ids]}).to_csv(path, index=False)
    source = read_source(str(path), SPACE, arch_id_of)
    assert source.label == "table.csv" and source.columns == ("acc", "lat_b")
    assert source.maximize == (True, False)  # ms: lower is better
    frame = read_source(pd.DataFrame({"lat_b": [1.0] * 8}, index=pd.Index(ids, name="arch_id")), SPACE,
                        arch_id_of)
    assert frame.arch_ids == tuple(ids) and frame.maximize == (None,)


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: str(p / "missing.csv"), "missing.csv: no such file"),
    (lambda p: pd.DataFrame({"acc": [1.0]}), "no arch_id column"),
    (lambda p: pd.DataFrame({"arch_id": ["not-a-cell"], "acc": [1.0]}), "no architecture of space 'nb201'"),
    (lambda p: pd.DataFrame({"arch_id": [SPACE.sample_ids(1)[0]], "acc": ["high"]}), "'acc' is not numeric"),
    (lambda p: 42, "int is no source"),
])
def test_a_source_that_cannot_be_read_is_one_error_naming_it(tmp_path, make, message) -> None:
    with pytest.raises(WarmStartError, match=message):
        read_source(make(tmp_path), SPACE, arch_id_of)


def test_a_study_of_another_space_is_refused() -> None:
    other = get_space("nb101")
    study = optuna.create_study(directions=["maximize"])
    study.set_metric_names(["acc"])
    study.optimize(lambda t: float(len(other.arch_id(other.suggest(t)))), n_trials=2)
    with pytest.raises(WarmStartError, match="is not of this space"):
        RLMSampler(SPACE, warm_start=[study])


# --- read against the new study -----------------------------------------------------------------------
def test_same_names_are_known_and_the_others_evidence_and_a_source_sharing_none_says_so() -> None:
    first = read_source(earlier_study(("acc", "lat_a")), SPACE, arch_id_of)
    second = read_source(earlier_study(("lat_a", "lat_b"), trials=10), SPACE, arch_id_of)
    warm = WarmStart.of([first, second], ["acc", "lat_b"])
    assert warm.known == ("acc", "lat_b") and warm.evidence == ("lat_a",)
    assert len(warm.arch_ids) == len(set(first.arch_ids) | set(second.arch_ids))
    lines = warm.describe()
    assert "acc known; evidence lat_a" in lines[0] and "lat_b known" in lines[1]
    alone = WarmStart.of([first], ["val_acc", "params_m"])
    assert alone.known == () and "shares no objective with this study: evidence only" in alone.describe()[0]
    rows = warm.rows(["lat_b", "acc"], extra=1)  # in the study's order, then a constraint no source knows
    k = first.arch_ids[0]
    assert rows[k][1] == toy(k)["acc"] and np.isnan(rows[k][2])


def test_the_start_up_spreads_along_the_earlier_front_and_earlier_front_gives_it_whole() -> None:
    study = earlier_study(trials=40)
    source = read_source(study, SPACE, arch_id_of)
    front = {source.arch_ids[k] for k in source.front()}
    warm = WarmStart.of([source], ["acc", "lat_b"])
    params = warm.params(lambda a: SPACE.params_of(SPACE.parse(a)))
    picks = [params[a] for a in warm.front_ids(3)]
    assert len(picks) == min(3, len(front)) and {arch_id_of(p) for p in picks} <= front
    assert {arch_id_of(p) for p in earlier_front([study], SPACE)} == front


def test_the_prior_reads_evidence_measured_where_a_source_has_it_and_estimated_elsewhere() -> None:
    source = read_source(earlier_study(("acc", "lat_a"), trials=30), SPACE, arch_id_of)
    warm = WarmStart.of([source], ["acc", "lat_b"])

    def labels_of(ids):
        return np.array([[toy(i)["lat_b"], float(SPACE.parse(i).ops.count("nor_conv_3x3"))] for i in ids])

    evidence = EvidenceInputs(warm, labels_of, seed=0)
    assert evidence.names == (EVIDENCE_PREFIX + "lat_a",)
    seen = source.arch_ids[0]
    unseen = next(i for i in SPACE.sample_ids(50, seed=3) if i not in source.arch_ids)
    got = evidence.of([seen, unseen], labels_of([seen, unseen]))[EVIDENCE_PREFIX + "lat_a"]
    assert got[0] == toy(seen)["lat_a"]
    assert abs(got[1] - toy(unseen)["lat_a"]) < 2.0  # a forest's estimate on two informative labels


# --- the sampler that starts from them -----------------------------------------------------------------
def test_a_warm_sampler_starts_along_the_earlier_front_and_trains_on_what_it_knows() -> None:
    earlier = earlier_study(("acc", "lat_a"), trials=40)
    source = read_source(earlier, SPACE, arch_id_of)
    front = {source.arch_ids[k] for k in source.front()}
    sampler = RLMSampler(SPACE, seed=0, warm_start=[earlier], **sampler_keywords(TINY))
    lines: list[str] = []
    sampler.log = lines.append
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.set_metric_names(["acc", "lat_b"])
    study.optimize(lambda t: tuple(toy(arch_of(t))[n] for n in ("acc", "lat_b")), n_trials=7)
    ids = [t.user_attrs["arch_id"] for t in study.trials]
    assert set(ids[1:4]) <= front  # the start-up trials after the first
    assert any(line.startswith(f"warm start: study {earlier.study_name}") and "acc known; evidence lat_a"
               in line for line in lines)
    fit = next(line for line in lines if line.startswith("first model fit"))
    assert "on 4 evaluations and" in fit and "known from the warm start" in fit
    assert sampler.predictor.prior_part.inputs[-1] == EVIDENCE_PREFIX + "lat_a"
    assert len(ids) == len(set(ids))


def test_optunas_samplers_evaluate_the_earlier_front_first_and_ours_reads_the_study_instead() -> None:
    from nasrlm.search import ArchEvaluator, run_search, warm_enqueued

    earlier = earlier_study(trials=30)
    front = [t.user_attrs["arch_id"] for t in earlier.best_trials]
    assert warm_enqueued("rlm", SPACE, [earlier]) == []
    enqueue = warm_enqueued("tpe", SPACE, [earlier])
    assert sorted(arch_id_of(p) for p in enqueue) == sorted(front)
    evaluator = ArchEvaluator.for_names(SPACE, ["params_m", "macs_m"])
    result = run_search(SPACE, evaluator, optuna.samplers.TPESampler(seed=0), budget=len(front) + 2,
                        progress=False, enqueue=enqueue)
    assert sorted(result.arch_ids[: len(front)]) == sorted(front)


def warm_references(monkeypatch, refine: list, n_trials: int) -> list[np.ndarray]:
    """The reference point of each round of a warm study that refines over ``refine``."""
    import nasrlm.search.sampler._rounds as rounds

    references: list[np.ndarray] = []
    greedy = rounds.greedy_ehvi

    def spy(drawn, observed, reference, *args, **kwargs):
        references.append(np.array(reference))
        return greedy(drawn, observed, reference, *args, **kwargs)

    monkeypatch.setattr(rounds, "greedy_ehvi", spy)
    earlier = earlier_study(("acc", "lat_a"), trials=40)
    sampler = RLMSampler(SPACE, seed=0, warm_start=[earlier],
                         **sampler_keywords({**TINY, "surrogate": "prior", "refine": refine}))
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.set_metric_names(["acc", "lat_b"])
    study.optimize(lambda t: tuple(toy(arch_of(t))[n] for n in ("acc", "lat_b")), n_trials=n_trials)
    return references


def test_a_refining_round_measures_improvement_from_the_last_random_rounds_typical_architecture(
        monkeypatch) -> None:
    """The front's mutants are no typical architecture: their median tightens as the front improves, so a
    warm start's refining rounds keep the reference point of its last round of random candidates."""
    references = warm_references(monkeypatch, [[10, None]], n_trials=16)
    assert len(references) >= 3
    first, *refining = references[1:]  # from 7 trials a round of random candidates, from 10 the mutants
    assert all(np.array_equal(r, first) for r in refining)


def test_a_study_that_refines_from_its_first_round_measures_from_the_candidate_pool(monkeypatch) -> None:
    """No random round before (a resumed study, or ``refine`` from the start): the pool's medians, once."""
    references = warm_references(monkeypatch, [[4, None]], n_trials=10)
    assert len(references) >= 2 and all(np.array_equal(r, references[0]) for r in references)
    assert np.all(np.isfinite(references[0]))
