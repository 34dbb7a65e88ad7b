"""How fast does the RLM learn what it is told? Plain fine-tunes on NB201 at several peak learning rates.

    python experiments/learning_rate_probe.py --data-dir ../shared/data --objectives eyeriss \
        --learning-rates 5e-3,2e-3,1e-3,5e-4 --epochs 20 --dropout 0 --threads 1

Eyeriss latency is an exact linear function of NB201's op counts (experiments/README.md, "Predictor
quality on NAS-Bench-201"), so a model that reads the text well must rank it almost perfectly: a clean
test of the optimiser settings, without the pre-training, prior and time budget of
``predictor_benchmark.py``.
Each rate trains ``--epochs`` epochs (warm-up, then cosine to zero) on the benchmark's ``--n`` cells
of ``--seed``, keeps the epoch with the best validation loss and ranks ``--test-size`` held-out cells
by the median of 16 samples.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from predictor_benchmark import OBJECTIVES
from scipy import stats

from nasrlm.augment import equivalent_rows
from nasrlm.data import load_nb201
from nasrlm.predictor import RLMPredictor
from nasrlm.presets import SIZES
from nasrlm.tokenizers import OnnxTokenizer
from nasrlm.training import TrainConfig
from search_spaces import NasBench201


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--objectives", default=",".join(OBJECTIVES), help=f"a subset of {OBJECTIVES}")
    parser.add_argument("--learning-rates", default="2e-3,1e-3,5e-4")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=1000, help="labelled training architectures")
    parser.add_argument("--test-size", type=int, default=1000)
    parser.add_argument("--piece-length", type=int, default=None, help="the tokenizer's longest piece")
    parser.add_argument("--equivalents", type=int, default=0,
                        help="also train on up to this many equivalent cells per labelled one (acc only)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    objectives = tuple(args.objectives.split(","))
    unknown = sorted(set(objectives) - set(OBJECTIVES))
    if unknown:
        parser.error(f"--objectives: {unknown} are not among {OBJECTIVES}")

    space = NasBench201()
    table = load_nb201(objectives, args.data_dir)
    order = np.random.default_rng(args.seed).permutation(len(table.ids))  # the benchmark's split
    test, train = order[: args.test_size], order[5000 : 5000 + args.n]
    pieces = {} if args.piece_length is None else {"max_sentencepiece_length": args.piece_length}
    tokenizer = OnnxTokenizer.train_on_spaces(seed=0, **pieces)
    train_ids = [table.ids[i] for i in train]
    extra = equivalent_rows(space, train_ids, table.values[train], objectives, {"acc"} & set(objectives),
                            copies=args.equivalents, seed=args.seed, exclude=[table.ids[i] for i in test])
    if args.equivalents:
        print(f"{len(extra.arch_ids)} equivalent cells of {len(set(extra.derived_from))} labelled ones",
              flush=True)
    fit_ids, train_values, derived_from = extra.joined(train_ids, table.values[train])
    train_texts = [space.to_text(space.parse(i)) for i in fit_ids]
    test_texts = [space.to_text(space.parse(table.ids[i])) for i in test]

    print("| peak learning rate | s/epoch | best epoch | best validation loss | "
          + " | ".join(("acc τ" if o == "acc" else f"{o} ρ") for o in objectives) + " |")
    print("|---|---|---|---|" + "---|" * len(objectives))
    for rate in (float(r) for r in args.learning_rates.split(",")):
        torch.manual_seed(args.seed)
        predictor = RLMPredictor.create(tokenizer, table.objectives, **SIZES["small"], dropout=args.dropout)
        report = predictor.fit(train_texts, train_values, objectives,
                               TrainConfig(max_epochs=args.epochs, learning_rate=rate, seed=args.seed,
                                           progress=False), derived_from=derived_from)
        pred = np.median(predictor.sample(test_texts, objectives, num_samples=16, seed=args.seed), axis=1)
        truth = table.values[test]
        scores = [stats.kendalltau(pred[:, k], truth[:, k]).statistic if o == "acc"
                  else stats.spearmanr(pred[:, k], truth[:, k]).statistic for k, o in enumerate(objectives)]
        print(f"| {rate:g} | {report.seconds / len(report.train_loss):.1f} | {report.best_epoch + 1} "
              f"| {min(report.validation_loss):.3f} | " + " | ".join(f"{s:.3f}" for s in scores) + " |",
              flush=True)


if __name__ == "__main__":
    main()
