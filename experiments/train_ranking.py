"""Is the training real? Random NB201 cells trained briefly on a small dataset, ranked against NB201's table.

Each cell is built with ``SearchSpace.to_torch`` and trained by ``nasrlm.networks.fit_network`` with the
same short schedule; the Spearman correlation of their best test accuracies with the benchmark's
CIFAR-10 (200-epoch) test accuracies says whether the short training ranks networks like the full one.

    python experiments/train_ranking.py --data-dir ../shared/data --cells 20 --epochs 5 --batch-size 64

``--smoke`` runs the whole script in seconds (3 cells, 1 epoch on the embedded digits), as its test does.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch
from scipy.stats import spearmanr

from nasrlm.data import load_table
from nasrlm.images import load_images
from nasrlm.networks import FitRecipe, fit_network
from search_spaces import get_space


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="the published tables (NB201 accuracies)")
    parser.add_argument("--dataset", default="digits", help="digits (embedded), cifar10, or an image folder")
    parser.add_argument("--images-dir", help="where cifar10 is extracted")
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="which random cells (sample_ids seed)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--no-augment", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="3 cells, 1 epoch on the embedded digits: "
                        "checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.dataset, args.cells, args.epochs = "digits", 3, 1
    torch.set_num_threads(args.threads)

    space = get_space("nb201")
    ids = space.sample_ids(args.cells, seed=args.seed)
    truth = load_table("nb201", ["acc"], args.data_dir, ids=ids).column("acc")
    data = load_images(args.dataset, tuple(space.input_shape[1:]), args.images_dir)
    recipe = FitRecipe(epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.lr,
                       augment=not args.no_augment)
    print(f"# {data}; {recipe}")
    got, seconds = [], []
    for k, arch_id in enumerate(ids):
        torch.manual_seed(k)
        result = fit_network(space.to_torch(space.parse(arch_id), seed=k), data, recipe, progress=False)
        got.append(result.best_accuracy)
        seconds.append(result.seconds)
        print(f"{k:2d} {arch_id}: {result.best_accuracy:5.1f} % here, {truth[k]:5.2f} % CIFAR-10 "
              f"(200 epochs), {result.seconds:.0f} s", flush=True)
    rho = spearmanr(got, truth).statistic
    print(f"\nSpearman {rho:.3f} over {len(ids)} cells; {np.sum(seconds):.0f} s of training "
          f"({np.mean(seconds):.1f} s per cell); {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} torch threads; {time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main()
