"""The language model alone: how well a fine-tuned RLM ranks a space's accuracy, with no forest, no prior.

    python experiments/lm_alone.py --data-dir ../shared/data --base BASE --freeze-encoder --sizes 0,100

The model reads the canonical ONNX text and nothing computed from it by hand: graph labels may be what it
learns to decode (teacher-forced at training, decoded by the model itself at inference), never what it is
given. Each seed's ``default_rng(seed).permutation`` of the table labels its first N rows and ranks the next
``--test`` (the split of ``transfer_benchmark.py``); N = 0 is zero-shot (the base's cross-space accuracy rank,
the tag a new accuracy column starts from). Recipes, each a fixed number of steps from the base:

- ``plain``: decode the accuracy alone, every weight trained (how ``--prior none`` fine-tunes today);
- ``structure``: decode ``--tags`` structural labels first (greedily, at inference), then the accuracy
  sampled after them; ``--unlabelled W`` adds, per step, a batch of unlabelled architectures of the space
  (none of the test rows) whose structural tags stay in the loss with weight W.

``--freeze-encoder`` trains the decoder only (and the shared token embeddings stay too); each text is then
encoded once, without dropout, and its states reused at every step.

Prints one line per run and a table of Kendall τ (mean of ``--samples`` decoded samples, and their median).
A base must never have seen the space's accuracy (``--exclude 'nb201:*acc*'``): the script refuses one
that did.
``--smoke`` runs it in seconds on an untrained tiny base, as its test does.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from _common import encoded, smoke_base
from scipy import stats

from nasrlm.data import Objective, load_table
from nasrlm.free_labels import ALL_FREE_OBJECTIVES
from nasrlm.priors.transfer import ACCURACY_RANK
from nasrlm.rlm.inference import sample_digits
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.pretraining import is_excluded
from nasrlm.rlm.training import EncoderStates, pad_batch
from search_spaces import get_space

#: Structural labels decoded before the accuracy (those constant over the space are dropped).
STRUCTURE = ("params_m", "macs_m", "log10_paths", "compute_path_min", "compute_path_max", "compute_path_mean",
             "conv3_nodes", "conv3_path_mean", "conv1_nodes", "conv1_path_mean", "pool_nodes",
             "block_paths_compute", "block_compute_min", "block_compute_max")


def fine_tune(predictor: RLMPredictor, encoded_texts: list[list[int]], targets: torch.Tensor,
              objectives: tuple[str, ...], train: np.ndarray, unlabelled: np.ndarray, a: argparse.Namespace,
              seed: int) -> float:
    """``a.steps`` AdamW steps (warm-up, cosine) on batches of ``train``, plus as many unlabelled rows
    (accuracy masked out) when ``a.unlabelled`` > 0; returns the seconds taken."""
    model = predictor.lm.model
    encoder = [p for n, p in model.named_parameters() if n.startswith(("t5.encoder", "t5.shared"))]
    for p in encoder:
        p.requires_grad_(not a.freeze_encoder)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=a.lr,
                                  weight_decay=a.weight_decay)
    if a.dropout is not None:
        set_dropout(model, a.dropout)
    warmup, rng = max(1, a.steps // 20), np.random.default_rng(seed)
    torch.manual_seed(seed)

    states = EncoderStates(model, encoded_texts)  # a frozen encoder reads each text once

    def loss_on(rows: np.ndarray, target: torch.Tensor) -> torch.Tensor:
        ids, mask = pad_batch([encoded_texts[i] for i in rows], model.config.text_pad_id)
        if not a.freeze_encoder:
            return model(ids, mask, objectives, target)
        memory = states(rows, ids, mask)
        if a.state_dropout:
            memory = torch.nn.functional.dropout(memory, a.state_dropout)
        return model.decoder_loss(memory, mask, objectives, target)

    start_weights = [(p, p.detach().clone()) for p in model.parameters() if p.requires_grad]
    start = time.perf_counter()
    model.train()
    for step in range(a.steps):
        for group in optimizer.param_groups:
            warm = min(1.0, (step + 1) / warmup)
            group["lr"] = a.lr * warm * 0.5 * (1 + math.cos(math.pi * step / a.steps))
        rows = rng.choice(train, min(a.batch_size, len(train)), replace=False)
        loss = loss_on(rows, targets[rows])
        if a.unlabelled > 0 and len(objectives) > 1:
            other = rng.choice(unlabelled, min(a.batch_size, len(unlabelled)), replace=False)
            masked = targets[other].clone()
            masked[:, -1] = -1  # the accuracy of an unlabelled architecture is unknown
            loss = loss + a.unlabelled * loss_on(other, masked)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if a.decay_to_start:  # decoupled, as AdamW's own decay, toward the base's weights instead of zero
            with torch.no_grad():
                shrink = optimizer.param_groups[0]["lr"] * a.decay_to_start
                for p, p0 in start_weights:
                    p.sub_(shrink * (p - p0))
    model.eval()
    for p in encoder:
        p.requires_grad_(True)
    return time.perf_counter() - start


def set_dropout(model: torch.nn.Module, rate: float) -> None:
    """Every dropout of ``model`` at ``rate``: its ``nn.Dropout`` modules and the attention weights' (a T5
    attention block keeps its rate as a float, ``dropout``)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = rate
        elif isinstance(getattr(module, "dropout", None), float):
            module.dropout = rate


def decoded_accuracy(predictor: RLMPredictor, encoded_texts: list[list[int]], rows: np.ndarray,
                     structure: tuple[str, ...], target: str, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and median of ``samples`` decoded values of ``target`` (scaled) per row, after the model's own
    greedy decoding of ``structure``."""
    model, generator = predictor.lm.model, torch.Generator().manual_seed(0)
    means, medians = [], []
    for k in range(0, len(rows), 64):
        ids, mask = pad_batch([encoded_texts[i] for i in rows[k : k + 64]], model.config.text_pad_id)
        given = None
        if structure:
            tags = sample_digits(model, ids, mask, structure, 1, temperature=0)[:, 0]
            given = (structure, tags)
        digits = sample_digits(model, ids, mask, (target,), samples, generator=generator, given=given)
        values = model.vocab.numbers.decode_many(digits.numpy())[..., 0]
        means.append(values.mean(1))
        medians.append(np.median(values, 1))
    return np.concatenate(means), np.concatenate(medians)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir")
    p.add_argument("--base", type=Path, help="a base model directory (nasrlm pretrain)")
    p.add_argument("--space", default="nb201")
    p.add_argument("--recipe", choices=("plain", "structure"), default="structure")
    p.add_argument("--tags", default=",".join(STRUCTURE), help="structural labels decoded first")
    p.add_argument("--unlabelled", type=float, default=1.0, help="weight of the unlabelled rows' tag loss")
    p.add_argument("--freeze-encoder", action="store_true")
    p.add_argument("--sizes", default="0,100")
    p.add_argument("--seeds", default="0")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--state-dropout", type=float, default=0.0,
                   help="dropout on the frozen encoder's states at each step (--freeze-encoder), as "
                        "TrainConfig.state_dropout")
    p.add_argument("--decay-to-start", type=float, default=0.0,
                   help="decoupled decay toward the base's weights (times the learning rate, per step)")
    p.add_argument("--dropout", type=float, help="every dropout rate while fine-tuning (default: the base's)")
    p.add_argument("--test", type=int, default=5000)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="seconds: an untrained tiny base, few rows")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    space = get_space(a.space)
    table = load_table(a.space, ["acc"], a.data_dir)
    ids = list(table.ids)
    if a.smoke:
        ids, a.test, a.steps, a.samples, a.sizes = ids[:80], 30, 4, 4, "0,20"
    texts, labels = encoded(space, ids)
    y = table.column("acc")[: len(ids)]
    with tempfile.TemporaryDirectory() as scratch:
        base = a.base or smoke_base(Path(scratch), texts, accuracy_rank=True)
        tags = RLMPredictor.load(base).lm.model.config.objectives
        seen = [t for t in tags if is_excluded(t, [f"{a.space}:*acc*"])]
        if seen:
            raise SystemExit(f"base {base} saw {a.space} accuracy columns {seen}: pre-train it with "
                             "--exclude")
        names = [o.name for o in ALL_FREE_OBJECTIVES]
        structure = () if a.recipe == "plain" else tuple(
            t for t in a.tags.split(",") if np.ptp(labels[:, names.index(t)]) > 0)
        results: dict[str, list[float]] = defaultdict(list)
        for seed in map(int, a.seeds.split(",")):
            order = np.random.default_rng(seed).permutation(len(ids))
            for n in map(int, a.sizes.split(",")):
                train, test = order[:n], order[n : n + a.test]
                unlabelled = order[n + a.test :]
                results[f"N={n}"].extend(run(a, base, texts, labels, y, structure, train, test, unlabelled,
                                             seed, n))
        print("\n| N | τ (mean of samples) | τ (median) |\n|---|---|---|")
        for key, values in results.items():
            means, medians = values[0::2], values[1::2]
            print(f"| {key} | {np.mean(means):.3f} ± {np.std(means):.3f} | {np.mean(medians):.3f} |")


def run(a: argparse.Namespace, base: Path, texts: list[str], labels: np.ndarray, y: np.ndarray,
        structure: tuple[str, ...], train: np.ndarray, test: np.ndarray, unlabelled: np.ndarray, seed: int,
        n: int) -> list[float]:
    """One fine-tune (none for N = 0) and its τ on ``test``: [mean, median]."""
    accuracy = Objective("acc", "%", "accuracy", "table", True)
    predictor = RLMPredictor.from_base(base, [accuracy], space=a.space)
    names = [o.name for o in ALL_FREE_OBJECTIVES]
    for tag in structure:  # a base normalises each on the rows it saw; a tag it never decoded gets one here
        predictor.lm.normalizers.setdefault(tag, Normalizer.fit(labels[unlabelled, names.index(tag)]))
    target = "acc" if n else ACCURACY_RANK.name
    seconds = 0.0
    if n:
        predictor.lm.normalizers["acc"] = Normalizer.fit(y[train])
        objectives = (*structure, "acc")
        values = np.column_stack([labels[:, [names.index(t) for t in structure]], y])
        targets = torch.as_tensor(predictor.lm.targets(values, objectives))
        seconds = fine_tune(predictor, predictor.lm.encode_texts(texts), targets, objectives, train,
                            unlabelled,
                            a, seed)
    elif target not in predictor.lm.model.config.objectives:
        raise SystemExit(f"base {base} has no {ACCURACY_RANK.name} tag to predict zero-shot with")
    start = time.perf_counter()
    mean, median = decoded_accuracy(predictor, predictor.lm.encode_texts(texts), test, structure, target,
                                    a.samples)
    taus = [float(stats.kendalltau(v, y[test]).statistic) for v in (mean, median)]
    print(f"{a.space} acc N={n} seed {seed} {a.recipe} (unlabelled {a.unlabelled}, frozen encoder "
          f"{a.freeze_encoder}, {len(structure)} tags): τ {taus[0]:.3f} (median {taus[1]:.3f}); fine-tune "
          f"{seconds:.0f} s, {len(test) / (time.perf_counter() - start):.0f} archs/s decoded", flush=True)
    return taus


if __name__ == "__main__":
    main()
