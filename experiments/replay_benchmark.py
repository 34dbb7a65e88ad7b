"""Same seed, same search: one seed's trials under other BLAS kernels and torch thread counts.

Runs ``nasrlm search`` once per seed and setting, each in a fresh process (as a user would, on the published
table), and compares each run's trials (the architectures, in evaluation order) with the first setting's.
A setting is ``KERNELS:THREADS``: ``own`` (the processor's own kernels) or an ``OPENBLAS_CORETYPE`` value
(``Haswell``, ``Prescott``, ``SkylakeX``, ...: OpenBLAS falls back to its own choice where the processor
lacks them; the table names the kernels each run got), or ``avx2-machine`` (numpy's and OpenBLAS's, torch's
and MKL's kernels all held to AVX2, as on a processor without AVX-512), then ``--threads``.

    python experiments/replay_benchmark.py --data-dir ../shared/data --seeds 0,1,2,3,4 --budget 100 \\
        --settings own:1,Haswell:1,Prescott:1,own:2 --parallel 2

Prints, per seed and setting, the hypervolume ratio (as ``search_benchmark.py`` measures it) and how many
trials agree with the first setting's before the first that differs; ``--smoke`` checks the script runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import optuna
from _common import SMOKE_RLM, machine

from nasrlm.search import ArchEvaluator, SearchResult, Truth, reference_point, restricted_to_table, score
from search_spaces import get_space

#: Environment of each kernel setting other than an ``OPENBLAS_CORETYPE`` value.
KERNELS = {"own": {},
           "avx2-machine": {"OPENBLAS_CORETYPE": "Haswell", "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL",
                            "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}}


def environment(kernels: str) -> dict[str, str]:
    """The process environment of a kernel setting."""
    return {**os.environ, **KERNELS.get(kernels, {"OPENBLAS_CORETYPE": kernels})}


def kernels_got(kernels: str) -> str:
    """The BLAS kernels a process of this setting runs numpy on, as threadpoolctl names them."""
    probe = ("import numpy; from threadpoolctl import threadpool_info; "
             "print(' / '.join(sorted({i.get('architecture', '?') for i in threadpool_info() "
             "if i.get('user_api') == 'blas'})))")
    done = subprocess.run([sys.executable, "-c", probe], env=environment(kernels), capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def run(args: argparse.Namespace, seed: int, setting: str, folder: Path) -> tuple[list[str], np.ndarray]:
    """One search in a fresh process: its architectures and values in evaluation order."""
    kernels, threads = setting.split(":")
    out = folder / f"seed{seed}-{kernels}-{threads}"
    storage = f"sqlite:///{out}.db"
    command = ["nasrlm", "search", args.space, "--objectives", args.objectives, "--budget", str(args.budget),
               "--seed", str(seed), "--threads", threads, "--data-dir", args.data_dir, "--storage", storage,
               "--study-name", "replay", "--out", str(out), "--quiet"]
    for key, value in json.loads(args.rlm_options).items():
        command += ["--rlm-option", f"{key}={json.dumps(value)}"]
    done = subprocess.run(command, env=environment(kernels), capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    study = optuna.load_study(study_name="replay", storage=storage)
    trials = sorted(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)),
                    key=lambda t: t.number)
    return [t.user_attrs["arch_id"] for t in trials], np.array([t.values for t in trials], dtype=np.float64)


def agreeing(trials: list[str], reference: list[str]) -> int:
    """How many trials agree with the reference's before the first that differs."""
    return next((k for k, (a, b) in enumerate(zip(trials, reference, strict=False)) if a != b),
                min(len(trials), len(reference)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--space", default="nb201")
    parser.add_argument("--objectives", default="acc,pixel3")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--report-at", default="50,100", help="budgets to report (≤ --budget)")
    parser.add_argument("--settings", default="own:1,Haswell:1,Prescott:1,own:2",
                        help="KERNELS:THREADS, comma-separated; the first is the reference")
    parser.add_argument("--rlm-options", default="{}", help='RLMSampler options as JSON: {"fit_steps": 5}')
    parser.add_argument("--parallel", type=int, default=1, help="searches run side by side")
    parser.add_argument("--save-trials", help="write each run's architectures here (JSON)")
    parser.add_argument("--smoke", action="store_true", help="8 evaluations of a tiny model, own:1 and own:2")
    args = parser.parse_args()
    if args.smoke:
        args.seeds, args.budget, args.report_at, args.settings = "0", 8, "8", "own:1,own:2"
        args.rlm_options = json.dumps({**SMOKE_RLM, **json.loads(args.rlm_options)})
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    settings = args.settings.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    at = [int(b) for b in args.report_at.split(",") if int(b) <= args.budget]

    space = get_space(args.space)
    evaluator = ArchEvaluator.for_names(space, args.objectives.split(","), data_dir=args.data_dir)
    space, evaluator = restricted_to_table(space, evaluator)
    truth = Truth(*evaluator.truth())
    reference = reference_point([], truth)
    got = {s: kernels_got(s.split(":")[0]) for s in settings}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.parallel) as pool:
        jobs = {(seed, s): pool.submit(run, args, seed, s, Path(tmp)) for seed in seeds for s in settings}
        print(f"# {args.space}: {args.objectives}, {args.budget} evaluations; reference {settings[0]}")
        print("| seed | setting (kernels got) | " + " | ".join(f"HV ratio @{b}" for b in at)
              + " | trials as the reference's |")
        print("|---|---|" + "---|" * (len(at) + 1))
        same, saved = 0, {}
        for seed in seeds:
            first, _ = jobs[(seed, settings[0])].result()
            for s in settings:
                arch_ids, values = jobs[(seed, s)].result()
                saved[f"seed{seed} {s}"] = arch_ids
                result = SearchResult("rlm", evaluator.objectives, arch_ids, values)
                history = score(result, reference, truth).history
                agree = agreeing(arch_ids, first)
                same += agree == len(first) == len(arch_ids)
                print(f"| {seed} | {s} ({got[s]}) | " + " | ".join(f"{history[b - 1]:.3f}" for b in at)
                      + f" | {agree} of {len(arch_ids)} |", flush=True)
    if args.save_trials:
        Path(args.save_trials).write_text(json.dumps(saved, indent=0))
    print(f"\n{same} of {len(seeds) * len(settings)} runs replay the reference's trials; {machine()}; "
          f"{time.strftime('%Y-%m-%d')}, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
