"""Where the RLMSampler's time goes: seconds per evaluation, split by phase, on a CPU or a GPU.

Runs the sampler on a published table (evaluations are table look-ups, so every second is the
sampler's) and times, exclusive of one another:

- **describe**: building each new candidate's ONNX text and labels (``ArchCache.describe``: CPU work
  whatever the device);
- **fit**: the surrogate's refits (training the model, or refitting the prior), less what they describe;
- **predict**: decoding samples for the candidates (``predict_samples``), less what it describes;
- **other**: the rest: candidate generation, the greedy EHVI pick, Optuna's bookkeeping.

    python experiments/sampler_overhead.py --data-dir ../shared/data --budget 100 --device cpu
    python experiments/sampler_overhead.py --data-dir ../shared/data --budget 100 --device cuda

``--smoke`` runs it in seconds with a tiny model (12 evaluations).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from typing import Any

import optuna
import torch
from _common import SMOKE_RLM

from nasrlm.search import (
    ArchEvaluator,
    RLMSampler,
    Truth,
    reference_point,
    restricted_to_table,
    run_search,
    sampler_keywords,
    score,
)
from search_spaces import get_space

PHASES = ("describe", "fit", "predict", "other")


class PhaseClock:
    """When each phase ran: describe and predict calls are wrapped, refits reported by the sampler's
    ``on_fit`` hook. A phase's exclusive seconds leave out the descriptions made inside it."""

    def __init__(self) -> None:
        self.intervals: dict[str, list[tuple[float, float]]] = {"describe": [], "fit": [], "predict": []}

    def timed(self, phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.intervals[phase].append((start, time.perf_counter()))
        return wrapper

    def fitted(self, trials: int, seconds: float) -> None:
        end = time.perf_counter()
        self.intervals["fit"].append((end - seconds, end))

    def exclusive(self, wall: float) -> dict[str, float]:
        """Seconds per phase; ``other`` is the wall time left."""
        describe = self.intervals["describe"]
        out = {"describe": sum(b - a for a, b in describe)}
        for phase in ("fit", "predict"):
            out[phase] = sum(b - a - sum(max(0.0, min(b, d1) - max(a, d0)) for d0, d1 in describe)
                             for a, b in self.intervals[phase])
        out["other"] = wall - sum(out.values())
        return out


def instrument(sampler: RLMSampler, clock: PhaseClock) -> None:
    """Time the sampler's phases through its public attributes (its cache, its refit hook)."""
    sampler.cache.describe = clock.timed("describe", sampler.cache.describe)  # type: ignore[method-assign]
    sampler.predict_samples = clock.timed("predict", sampler.predict_samples)  # type: ignore[method-assign]
    sampler.on_fit = clock.fitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--space", default="nb201")
    parser.add_argument("--objectives", default="acc,pixel3")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="where the model trains and decodes: cpu or cuda")
    parser.add_argument("--threads", type=int, default=1, help="torch's CPU threads")
    parser.add_argument("--rlm-options", default="{}", help="RLMSampler options by name as JSON")
    parser.add_argument("--out", help="also write the row as JSON here")
    parser.add_argument("--smoke", action="store_true", help="12 evaluations of a tiny model")
    args = parser.parse_args()
    options = json.loads(args.rlm_options)
    if args.smoke:
        args.budget, options = 12, {**SMOKE_RLM, **options}
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no GPU here")
    torch.set_num_threads(args.threads)
    optuna.logging.set_verbosity(optuna.logging.ERROR)

    space = get_space(args.space)
    evaluator = ArchEvaluator.for_names(space, args.objectives.split(","), data_dir=args.data_dir)
    space, evaluator = restricted_to_table(space, evaluator)
    truth = Truth(*evaluator.truth())
    sampler = RLMSampler(space, seed=args.seed, device=args.device, **sampler_keywords(options))
    clock = PhaseClock()
    instrument(sampler, clock)
    start = time.perf_counter()
    result = run_search(space, evaluator, sampler, budget=args.budget, label="rlm", study_name="overhead",
                        progress=False)
    wall = time.perf_counter() - start
    seconds = clock.exclusive(wall)
    hv = score(result, reference_point([], truth), truth).history[-1]

    cpu = platform.processor() or platform.machine()
    name = torch.cuda.get_device_name() if args.device == "cuda" else cpu
    print(f"# {space.name}: {args.objectives}; {args.budget} evaluations, seed {args.seed}; "
          f"{args.device} ({name}), {torch.get_num_threads()} torch threads; {sampler.fits} fits; "
          f"HV ratio {hv:.3f}; {time.strftime('%Y-%m-%d')}")
    print()
    print("| device | s per evaluation | " + " | ".join(f"{p} s" for p in PHASES) + " |")
    print("|---|---|" + "---|" * len(PHASES))
    print(f"| {args.device} | {wall / args.budget:.2f} | "
          + " | ".join(f"{seconds[p]:.1f}" for p in PHASES) + " |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": args.device, "name": name, "budget": args.budget, "seed": args.seed,
                       "wall": wall, "fits": sampler.fits, "hv": hv, "seconds": seconds}, f)


if __name__ == "__main__":
    main()
