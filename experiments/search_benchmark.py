"""Pareto search on a published table: hypervolume ratio and Pareto recall of each sampler, per budget.

Every sampler searches the published tables (ground truth) for the same objectives; hypervolume uses
the reference point at the median of every objective over the whole table and is reported as a
fraction of the true front's. Where the table covers part of a space (NB101: 20,000 rows with
accuracy; OFA), every sampler searches the table's rows, as ``nasrlm search`` does. Prints a markdown
table (mean ± std over seeds) and, with ``--plot FILE``, draws hypervolume against evaluations.

    python experiments/search_benchmark.py --data-dir ../shared/data --seeds 0,1,2,3,4 --budget 300
    python experiments/search_benchmark.py --data-dir ../shared/data \\
        --objectives acc,pixel3,eyeriss,gold_6226,1080ti_1 --samplers rlm,random,nsga3 --budget 300
    python experiments/search_benchmark.py --data-dir ../shared/data --space nb101 --objectives acc,params_m

Slow samplers can run one seed per process, each saving its curves (``--save-curves``); a last run
plots them beside its own (``--load-curves``), so the plot needs no re-run. ``--smoke`` runs the whole
script in seconds (12 evaluations, one seed, a tiny RLMSampler), as its test does.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import optuna
import torch
from _common import SMOKE_RLM, machine, timed_search

from nasrlm.metrics import hypervolume
from nasrlm.plots import hypervolume_plot_data, plot_hypervolume
from nasrlm.search import (
    ArchEvaluator,
    Truth,
    reference_point,
    restricted_to_table,
    score,
)
from search_spaces import get_space


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--space", default="nb201")
    parser.add_argument("--objectives", default="acc,pixel3")
    parser.add_argument("--samplers", default="rlm,random,nsga2,tpe")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--report-at", default="100,300", help="budgets to report (≤ --budget)")
    parser.add_argument("--plot", help="draw the curves here, e.g. experiments/search_hv.png (default: "
                        "no plot, so that a run never overwrites the committed one)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rlm-options", default="{}", help='RLMSampler options as JSON: {"temperature": 2}')
    parser.add_argument("--save-curves", help="write every HV-ratio curve (per sampler and seed) here")
    parser.add_argument("--load-curves", nargs="*", default=[],
                        help="JSON files of --save-curves (same objectives) whose curves join the plot")
    parser.add_argument("--smoke", action="store_true",
                        help="12 evaluations of rlm (tiny), random and tpe on seed 0: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.samplers, args.seeds, args.budget, args.report_at = "rlm,random,tpe", "0", 12, "6,12"
        args.rlm_options = json.dumps({**SMOKE_RLM, **json.loads(args.rlm_options)})
    torch.set_num_threads(args.threads)
    optuna.logging.set_verbosity(optuna.logging.ERROR)

    names = args.objectives.split(",")
    _check_base(json.loads(args.rlm_options), args.space)
    space = get_space(args.space)
    evaluator = ArchEvaluator.for_names(space, names, data_dir=args.data_dir)
    space, evaluator = restricted_to_table(space, evaluator)
    truth = Truth(*evaluator.truth())
    maximize = evaluator.maximize
    reference = reference_point([], truth)
    at = [int(b) for b in args.report_at.split(",") if int(b) <= args.budget]
    print(f"# {space.name}: {', '.join(names)}; true front {len(truth.front(maximize))} archs; "
          f"reference {np.round(reference, 4).tolist()}; "
          f"true HV {hypervolume(truth.values, reference, maximize):.4g}")
    curves: dict[str, np.ndarray] = {}
    rows = []
    seeds: dict[str, list[int]] = {}
    for sampler in args.samplers.split(","):
        histories, recalls, seconds = [], [], []
        for seed in (int(s) for s in args.seeds.split(",")):
            result, took = timed_search(space, evaluator, sampler, seed, args.budget, args.rlm_options)
            seconds.append(took)
            s = score(result, reference, truth)
            histories.append(s.history)
            recalls.append(s.pareto_recall)
            print(f"{sampler} seed {seed}: HV ratio " + ", ".join(f"@{b} {s.history[b - 1]:.3f}" for b in at)
                  + f", recall {s.pareto_recall:.3f}, {seconds[-1]:.0f} s", flush=True)
        h = np.array(histories)
        curves[sampler] = h
        seeds[sampler] = [int(s) for s in args.seeds.split(",")]
        cells = [f"{h[:, b - 1].mean():.3f} ± {h[:, b - 1].std():.3f}" for b in at]
        rows.append(f"| {sampler} | {' | '.join(cells)} | {np.mean(recalls):.3f} | {np.mean(seconds):.0f} |")
    print()
    print("| sampler | " + " | ".join(f"HV ratio @{b}" for b in at) + f" | Pareto recall @{args.budget} "
          "| seconds per run |")
    print("|---|" + "---|" * (len(at) + 2))
    print("\n".join(rows))
    print(f"\n{len(args.seeds.split(','))} seeds; {machine()}, "
          f"{torch.get_num_threads()} torch threads; {time.strftime('%Y-%m-%d')}")
    if args.save_curves:
        with open(args.save_curves, "w") as f:
            json.dump({"objectives": names, "curves": {k: {"seeds": seeds[k], "history": v.tolist()}
                                                       for k, v in curves.items()}}, f)
    curves = merge_curves(curves, seeds, args.load_curves, names)
    if args.plot:
        title = f"{args.space} {', '.join(names)}: hypervolume vs evaluations"
        plot_hypervolume(hypervolume_plot_data(curves, true_hypervolume=1.0, title=title), args.plot)
        print(f"plot: {args.plot}")


def _check_base(options: dict, space: str) -> None:
    """Refuse a ``base`` pre-trained on any accuracy of the space searched: the search must not know its
    target before it measures it. The base's transfer forest (``nasrlm pretrain`` fits it on exactly
    the accuracy columns it pre-trained on) names them; the search itself does not read it."""
    from pathlib import Path

    from nasrlm.priors.transfer import TRANSFER_FILE, AccuracyTransfer

    base = options.get("base")
    if not isinstance(base, str) or not (Path(base) / TRANSFER_FILE).is_file():
        return
    leaked = sorted(t for t in AccuracyTransfer.find(base).tags if t.startswith(f"{space}:"))
    if leaked:
        raise SystemExit(f"base {base} was pre-trained on {leaked}, columns of the space searched: "
                         f"pre-train it with --exclude '{space}:*acc*'")


def merge_curves(curves: dict[str, np.ndarray], seeds: dict[str, list[int]], files: list[str],
                 names: list[str]) -> dict[str, np.ndarray]:
    """``curves`` and those saved in ``files``, per sampler: each seed once, all cut to one length."""
    per_seed = {k: dict(zip(seeds[k], v, strict=True)) for k, v in curves.items()}
    for path in files:
        with open(path) as f:
            saved = json.load(f)
        if saved["objectives"] != names:
            raise SystemExit(f"{path} holds curves for {saved['objectives']}, not {names}")
        for sampler, entry in saved["curves"].items():
            for seed, history in zip(entry["seeds"], entry["history"], strict=True):
                per_seed.setdefault(sampler, {}).setdefault(seed, np.array(history))
    merged = {}
    for sampler, by_seed in per_seed.items():
        length = min(len(h) for h in by_seed.values())
        merged[sampler] = np.array([by_seed[s][:length] for s in sorted(by_seed)])
    return merged


if __name__ == "__main__":
    main()
