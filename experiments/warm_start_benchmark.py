"""Every search starts from what is known: samplers warm-started from an earlier study, against cold ones.

    python experiments/warm_start_benchmark.py --data-dir ../shared/data --source acc,pixel3 \\
        --target acc,eyeriss --seeds 0,1,2 --budget 100 --report-at 50,100
    python experiments/warm_start_benchmark.py --data-dir ../shared/data --source acc,fpga \\
        --target cifar100_acc,raspi4 --seeds 0,1,2

Per seed, the earlier study: ``--source-budget`` evaluations of ``--source``'s objectives by TPE seeded so
(a plain Optuna study with its objectives named, as any earlier search leaves). The new study searches
``--target``'s objectives, ``--budget`` distinct evaluations, each sampler seeded the same: ``rlm-warm``, the
RLMSampler reading the earlier study (``warm_start=[study]``: a column of the same name is known, any other
is evidence); ``tpe-warm``, TPE with the earlier front's trials enqueued first (how an Optuna user
warm-starts a sampler, :func:`~nasrlm.search.earlier_front`); and any cold sampler of ``nasrlm search``
(``rlm``, ``tpe``, ``gp``, ...). Only the new study's evaluations count. Hypervolume as
``search_benchmark.py`` measures it (reference: the median of every objective over the table; a ratio to
the true front's). ``--smoke`` runs the script in seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import optuna
import torch
from _common import SMOKE_RLM, machine

from nasrlm.search import (
    ArchEvaluator,
    RLMSampler,
    Truth,
    earlier_front,
    make_sampler,
    open_study,
    reference_point,
    restricted_to_table,
    run_search,
    sampler_keywords,
    score,
)
from search_spaces import get_space


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--space", default="nb201")
    p.add_argument("--source", default="acc,pixel3", help="the earlier study's objectives")
    p.add_argument("--source-budget", type=int, default=100)
    p.add_argument("--target", default="acc,eyeriss", help="the new study's objectives")
    p.add_argument("--samplers", default="rlm-warm,rlm,tpe-warm,tpe,gp")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--budget", type=int, default=100)
    p.add_argument("--report-at", default="50,100", help="budgets to report (≤ --budget)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rlm-options", default="{}", help='RLMSampler options as JSON: {"prior": "forest"}')
    p.add_argument("--save-trials", help="write each run's architectures and values here (JSON), to trace it")
    p.add_argument("--smoke", action="store_true", help="12 evaluations of rlm-warm (tiny) and tpe-warm")
    a = p.parse_args()
    if a.smoke:
        a.samplers, a.seeds, a.budget, a.report_at, a.source_budget = "rlm-warm,tpe-warm", "0", 12, "6,12", 20
        a.rlm_options = json.dumps({**SMOKE_RLM, **json.loads(a.rlm_options)})
    torch.set_num_threads(a.threads)
    optuna.logging.set_verbosity(optuna.logging.ERROR)

    space = get_space(a.space)
    source = ArchEvaluator.for_names(space, a.source.split(","), data_dir=a.data_dir)
    target = ArchEvaluator.for_names(space, a.target.split(","), data_dir=a.data_dir)
    space, target = restricted_to_table(space, target)
    truth = Truth(*target.truth())
    reference = reference_point([], truth)
    at = [int(b) for b in a.report_at.split(",") if int(b) <= a.budget]
    print(f"# {space.name}: from {a.source} ({a.source_budget} TPE evaluations) to {a.target}; "
          f"true front {len(truth.front(target.maximize))} archs; "
          f"reference {np.round(reference, 4).tolist()}")
    rows, per_seed, saved = [], {}, {}
    for sampler in a.samplers.split(","):
        histories, seconds = [], []
        for seed in (int(s) for s in a.seeds.split(",")):
            study = _earlier_study(space, source, seed, a.source_budget)
            start = time.perf_counter()
            enqueue = earlier_front([study], space) if sampler == "tpe-warm" else ()
            result = run_search(space, target, _sampler(sampler, space, seed, a.rlm_options, study),
                                budget=a.budget, label=sampler, study_name=f"{sampler}-{seed}",
                                progress=False, enqueue=enqueue)
            seconds.append(time.perf_counter() - start)
            s = score(result, reference, truth)
            histories.append(s.history)
            saved[f"{sampler} seed {seed}"] = {"arch_ids": result.arch_ids, "values": result.values.tolist()}
            print(f"{sampler} seed {seed}: HV ratio " + ", ".join(f"@{b} {s.history[b - 1]:.3f}" for b in at)
                  + f", {seconds[-1]:.0f} s", flush=True)
        h = np.array(histories)
        per_seed[sampler] = h[:, [b - 1 for b in at]].round(3).tolist()
        cells = [f"{h[:, b - 1].mean():.3f} ± {h[:, b - 1].std():.3f}" for b in at]
        rows.append(f"| {sampler} | {' | '.join(cells)} | {np.mean(seconds):.0f} |")
    print()
    print("| sampler | " + " | ".join(f"HV ratio @{b}" for b in at) + " | seconds per run |")
    print("|---|" + "---|" * (len(at) + 1))
    print("\n".join(rows))
    print(f"\nper seed: {json.dumps(per_seed)}")
    if a.save_trials:
        Path(a.save_trials).write_text(json.dumps(saved, indent=0))
        print(f"the trials of {len(saved)} runs written to {a.save_trials}")
    print(f"{len(a.seeds.split(','))} seeds; {machine()}, {torch.get_num_threads()} torch threads; "
          f"{time.strftime('%Y-%m-%d')}")


def _earlier_study(space, evaluator: ArchEvaluator, seed: int, budget: int) -> optuna.Study:
    """``budget`` trials of TPE seeded ``seed`` on ``evaluator``'s objectives, named (an in-memory study)."""
    study = open_study(optuna.storages.InMemoryStorage(), "earlier", evaluator,
                       optuna.samplers.TPESampler(seed=seed))
    study.optimize(lambda trial: evaluator.measure(space.arch_id(space.suggest(trial)))[0], n_trials=budget)
    return study


def _sampler(name: str, space, seed: int, rlm_options: str, earlier: optuna.Study
             ) -> optuna.samplers.BaseSampler:
    """``rlm-warm``: the RLMSampler reading ``earlier``; ``tpe-warm``: TPE (the front is enqueued by the
    caller); any other, :func:`make_sampler`'s."""
    options = json.loads(rlm_options)
    if name == "rlm-warm":
        return RLMSampler(space, seed=seed, warm_start=[earlier], **sampler_keywords(options))
    if name == "tpe-warm":
        return optuna.samplers.TPESampler(seed=seed)
    return make_sampler(name, space, seed, options=options if name == "rlm" else None)


if __name__ == "__main__":
    main()
