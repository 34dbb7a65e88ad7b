"""Predictor quality on NAS-Bench-201: the RLM against its ablation and the usual baselines.

    python experiments/predictor_benchmark.py --data-dir ../shared/data --train-sizes 100,1000 --seeds 0,1,2

In one process, on the same random splits (train on N, test on 5,000 others, per seed):
- ``rlm``: the regression language model (digit decoder, all objectives in one model);
- ``rlm+pre``: the same, pre-trained on free labels (params, MACs) of ``--pretrain`` architectures;
- ``rlm+prior``: ``rlm+pre``, then fine-tuned with the free labels decoded first (given at inference)
  and every objective learned as the residual of the free-label prior (``fit(prior_from=...)``);
- ``mse-head``: the same encoder, mean-pooled, with an MSE regression head (the paper's ablation);
- ``gbdt``: gradient-boosted trees on one-hot edge operations, one model per objective;
- zero-cost proxies (``nb201/zero_cost_725.csv``, no training), against accuracy on their 725 cells.
Prints a markdown table (mean ± std over seeds) for experiments/README.md. ``--smoke`` runs a tiny
configuration (40 labels, 100 test cells, a tiny model for 2 epochs, a tokenizer of NB201 texts only) in
seconds, as its test does.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import tempfile
import time
from collections import defaultdict
from datetime import date
from pathlib import Path

import numpy as np
import torch
from _common import gbdt_predict
from scipy import stats

from nasrlm.data import load_nb201
from nasrlm.free_labels import FREE_OBJECTIVES, texts_and_free_labels
from nasrlm.rlm.augment import equivalent_rows
from nasrlm.rlm.model import RegressionLM, RLMConfig
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.recipes import SIZES, TrainConfig
from nasrlm.rlm.tokenizers import OnnxTokenizer
from nasrlm.rlm.training import pad_batch
from search_spaces import NasBench201

OBJECTIVES = ("acc", "pixel3", "eyeriss", "gold_6226", "1080ti_1")
FREE = tuple(o.name for o in FREE_OBJECTIVES)


def rank_scores(pred: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    known = ~np.isnan(truth)
    return (float(stats.kendalltau(pred[known], truth[known]).statistic),
            float(stats.spearmanr(pred[known], truth[known]).statistic))


# --- baselines -------------------------------------------------------------------------------------
def one_hot(space: NasBench201, ids: list[str]) -> np.ndarray:
    from search_spaces.nasbench201 import OPS

    rows = []
    for arch_id in ids:
        ops = space.parse(arch_id).ops
        rows.append([float(op == o) for op in ops for o in OPS])
    return np.array(rows)


def gbdt(space, train_ids, y_train, test_ids, seed) -> np.ndarray:
    return gbdt_predict(one_hot(space, train_ids), y_train, one_hot(space, test_ids), seed)


class MseHead(torch.nn.Module):
    """The RLM's encoder, mean-pooled, with a linear head trained by MSE on normalised labels."""

    def __init__(self, encoder_model: RegressionLM, outputs: int) -> None:
        super().__init__()
        self.body = encoder_model
        self.head = torch.nn.Linear(encoder_model.config.d_model, outputs)

    def forward(self, ids, mask):
        hidden = self.body.encode(ids, mask)
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return self.head(pooled)


def mse_head(tokenizer, size, train_texts, y_train, test_texts, config: TrainConfig) -> np.ndarray:
    torch.manual_seed(config.seed)
    body = RegressionLM(RLMConfig(text_vocab_size=tokenizer.vocab_size, text_pad_id=tokenizer.pad_id,
                                  objectives=(), **SIZES[size]))
    model = MseHead(body, y_train.shape[1])
    norms = [Normalizer.fit(y_train[:, k]) for k in range(y_train.shape[1])]
    y = np.stack([n.forward(y_train[:, k]) for k, n in enumerate(norms)], axis=1)
    y = torch.tensor(y, dtype=torch.float32)
    ids_train = tokenizer.encode_batch(train_texts)
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(ids_train))
    n_val = max(1, round(config.validation_fraction * len(order)))
    val, tr = order[:n_val], order[n_val:]
    opt = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    best, best_state, stale = math.inf, None, 0
    began = time.perf_counter()

    def loss_of(index):
        ids, mask = pad_batch([ids_train[i] for i in index], tokenizer.pad_id)
        target = y[index]
        known = ~torch.isnan(target)
        return ((model(ids, mask) - torch.nan_to_num(target)) ** 2)[known].mean()

    for _ in range(config.max_epochs):
        model.train()
        for start in range(0, len(tr), config.batch_size):
            loss = loss_of(tr[start : start + config.batch_size])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
            opt.step()
        rng.shuffle(tr)
        model.eval()
        with torch.no_grad():
            v = loss_of(val).item()
        if v < best - 1e-5:
            best, stale = v, 0
            best_state = {k: t.clone() for k, t in model.state_dict().items()}
        else:
            stale += 1
            if stale >= config.patience:
                break
        if config.max_minutes is not None and time.perf_counter() - began > 60 * config.max_minutes:
            break  # the same time budget as the RLM's
    model.load_state_dict(best_state)
    model.eval()
    ids_test = tokenizer.encode_batch(test_texts)
    preds = []
    with torch.no_grad():
        for start in range(0, len(ids_test), 256):
            ids, mask = pad_batch(ids_test[start : start + 256], tokenizer.pad_id)
            preds.append(model(ids, mask).numpy())
    # normalised units, monotone in the labels: only ranks are scored, and mapping back would clamp
    # every prediction outside the training labels' range to one value (ties; NaN rank scores in --smoke)
    return np.concatenate(preds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--train-sizes", default="100,1000")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--test-size", type=int, default=5000)
    parser.add_argument("--methods", default="rlm,rlm+pre,rlm+prior,mse-head,gbdt")
    parser.add_argument("--pretrain", type=int, default=3000, help="architectures with free labels")
    parser.add_argument("--size", choices=list(SIZES), default="small")
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--max-minutes", type=float, default=None, help="per training phase")
    parser.add_argument("--lr", type=float, default=TrainConfig.learning_rate, help="peak learning rate")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--equivalents", type=int, default=0,
                        help="RLM methods also train on up to this many equivalent cells per labelled one "
                             "(accuracy only; never a test cell)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--piece-length", type=int, default=None,
                        help="the tokenizer's max_sentencepiece_length (default: the tokenizer's own)")
    parser.add_argument("--smoke", action="store_true", help="tiny configuration for CI")
    args = parser.parse_args()
    if args.smoke:
        args.train_sizes, args.seeds, args.test_size, args.size = "40", "0", 100, "tiny"
        args.epochs, args.pretrain, args.samples = 2, 60, 8
    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.train_sizes.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    methods = args.methods.split(",")

    space = NasBench201()
    table = load_nb201(OBJECTIVES, args.data_dir)
    ids, values = table.ids, table.values
    pieces = {} if args.piece_length is None else {"max_sentencepiece_length": args.piece_length}
    # --smoke: a tokenizer of NB201 texts only (every registered space's takes ~20 s to learn)
    tokenizer = OnnxTokenizer.train_on_spaces(["nb201"] if args.smoke else None, seed=0, **pieces)
    median_tokens = statistics.median(len(t) for t in tokenizer.encode_batch(
        [space.to_text(space.parse(i)) for i in space.sample_ids(200, seed=0)]))
    print(f"tokenizer: {tokenizer.vocab_size:,} pieces, median {median_tokens:.0f} tokens per NB201 "
          "architecture", flush=True)

    known: dict[str, tuple[str, np.ndarray]] = {}  # text and free labels by arch id, one ONNX build each

    def describe(arch_ids: list[str]) -> None:
        todo = list(dict.fromkeys(i for i in arch_ids if i not in known))
        if todo:
            found = texts_and_free_labels(space, todo, progress=len(todo) > 100)
            known.update(zip(todo, zip(*found, strict=True), strict=True))

    def texts(arch_ids: list[str]) -> list[str]:
        describe(arch_ids)
        return [known[i][0] for i in arch_ids]

    def free_of(arch_ids: list[str]) -> np.ndarray:
        describe(arch_ids)
        return np.array([known[i][1] for i in arch_ids]).reshape(len(arch_ids), len(FREE))

    workdir = tempfile.TemporaryDirectory()  # pre-trained checkpoints

    scores: dict[tuple[str, int, str], list[tuple[float, float]]] = defaultdict(list)
    seconds: dict[tuple[str, int], list[float]] = defaultdict(list)
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(len(ids))
        test = order[: args.test_size]
        test_ids = [ids[i] for i in test]
        pretrained, pretrain_s = None, 0.0  # pre-trained once per seed, then copied for each N and method
        if {"rlm+pre", "rlm+prior"} & set(methods):
            pre_ids = space.sample_ids(args.pretrain, seed=1000 + seed)
            start = time.perf_counter()
            predictor = RLMPredictor.from_scratch(table.objectives, size=args.size, seed=seed,
                                                  tokenizer=tokenizer)
            predictor.fit(texts(pre_ids), free_of(pre_ids), FREE,
                          TrainConfig(max_epochs=args.epochs, seed=seed, max_minutes=args.max_minutes,
                                      learning_rate=args.lr))
            pretrain_s = time.perf_counter() - start
            pretrained = predictor.save(Path(workdir.name) / f"pretrained-{seed}")
            print(f"seed {seed}: pre-trained on {len(pre_ids):,} architectures in {pretrain_s:.0f} s",
                  flush=True)
        for n in sizes:
            train = order[args.test_size : args.test_size + n]
            train_ids = [ids[i] for i in train]
            y_train, y_test = values[train], values[test]
            config = TrainConfig(max_epochs=args.epochs, seed=seed, max_minutes=args.max_minutes,
                                 learning_rate=args.lr)
            extra = equivalent_rows(space, train_ids, y_train, OBJECTIVES, {"acc"}, copies=args.equivalents,
                                    seed=seed, exclude=test_ids)
            fit_ids, fit_values, derived_from = extra.joined(train_ids, y_train)
            if args.equivalents:
                print(f"seed {seed} N={n}: {len(extra.arch_ids):,} equivalent cells of "
                      f"{len(set(extra.derived_from)):,} labelled ones carry their accuracy", flush=True)
            for method in methods:
                start = time.perf_counter()
                if method in ("rlm", "rlm+pre", "rlm+prior"):
                    torch.manual_seed(seed)
                    if method == "rlm":
                        predictor = RLMPredictor.from_scratch(table.objectives, size=args.size, seed=seed,
                                                              tokenizer=tokenizer)
                    else:  # the pre-training time counts towards this method's
                        predictor, start = RLMPredictor.load(pretrained), start - pretrain_s
                    given = None
                    if method == "rlm+prior":
                        report = predictor.fit(texts(fit_ids), np.hstack([free_of(fit_ids), fit_values]),
                                               (*FREE, *OBJECTIVES), config, prior="line", prior_from=FREE,
                                               derived_from=derived_from)
                        given = dict(zip(FREE, free_of(test_ids).T, strict=True))
                    else:
                        report = predictor.fit(texts(fit_ids), fit_values, OBJECTIVES, config,
                                               derived_from=derived_from)
                    train_s = time.perf_counter() - start
                    samples = predictor.sample(texts(test_ids), OBJECTIVES, given=given,
                                               num_samples=args.samples, seed=seed, progress=True)
                    pred = np.median(samples, axis=1)
                elif method == "mse-head":
                    pred = mse_head(tokenizer, args.size, texts(train_ids), y_train,
                                    texts(test_ids), config)
                    train_s = time.perf_counter() - start
                else:
                    pred = gbdt(space, train_ids, y_train, test_ids, seed)
                    train_s = time.perf_counter() - start
                seconds[(method, n)].append(train_s)
                for k, name in enumerate(OBJECTIVES):
                    scores[(method, n, name)].append(rank_scores(pred[:, k], y_test[:, k]))
                acc_tau = scores[(method, n, "acc")][-1][0]
                rhos = ", ".join(f"{o} {scores[(method, n, o)][-1][1]:.3f}" for o in OBJECTIVES[1:])
                details = ""
                if method.startswith("rlm"):  # how far training got: under a time budget it depends on load
                    epochs = len(report.train_loss)
                    best = min(report.validation_loss) if report.validation_loss else float("nan")
                    details = f"; {epochs} epochs ({report.stopped_by}), best validation loss {best:.3f}"
                if method == "rlm+prior" and predictor.prior_part.weights:
                    details += "; residual weights " + ", ".join(
                        f"{o} {w:.2f}" for o, w in predictor.prior_part.weights.items())
                print(f"seed {seed} N={n} {method}: acc tau {acc_tau:.3f}; Spearman {rhos}{details} "
                      f"({train_s:.0f} s incl. prediction)", flush=True)

    def fmt(values: list[float]) -> str:
        mean = statistics.mean(values)
        return f"{mean:.3f} ± {statistics.stdev(values):.3f}" if len(values) > 1 else f"{mean:.3f}"

    print(f"\n{date.today()}, {platform.machine()}, {args.threads} threads, size {args.size}, "
          f"seeds {seeds}, test {args.test_size}, samples {args.samples}, peak learning rate {args.lr:g}, "
          f"equivalents {args.equivalents}\n")
    header = ["method", "N", "acc Kendall τ", "acc Spearman"] + [f"{o} Spearman" for o in OBJECTIVES[1:]]
    print("| " + " | ".join(header + ["train+predict s"]) + " |")
    print("|" + "---|" * (len(header) + 1))
    for n in sizes:
        for method in methods:
            acc = scores[(method, n, "acc")]
            cells = [method, str(n), fmt([a for a, _ in acc]), fmt([b for _, b in acc])]
            cells += [fmt([b for _, b in scores[(method, n, o)]]) for o in OBJECTIVES[1:]]
            print("| " + " | ".join(cells + [fmt(seconds[(method, n)])]) + " |")
    zc = load_nb201(["acc"] + [f"zc_{p}" for p in ("synflow", "nwot", "jacov", "snip", "grad_norm")],
                    args.data_dir)
    print("\n| zero-cost proxy (725 cells) | acc Kendall τ | acc Spearman |\n|---|---|---|")
    for obj in zc.objectives[1:]:
        col = zc.column(obj.name)
        known = ~np.isnan(col) & np.isfinite(col)
        tau, rho = rank_scores(col[known], zc.column("acc")[known])
        print(f"| {obj.name} | {tau:.3f} | {rho:.3f} |")


if __name__ == "__main__":
    main()
