"""Same seed, same search: a short RLMSampler search replays its trials, and ends with the same model to the
bit, under other BLAS kernels (``OPENBLAS_CORETYPE``) and other torch thread counts.

Each search runs in a fresh process, since OpenBLAS reads its kernel setting when it loads. Scope: the CPU,
one worker, the pinned library versions (``constraints.txt``); the full-size check is
``experiments/replay_benchmark.py`` (experiments/README.md, "Same seed, same search").
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: A search small enough for a test, with the default model size and prior: the prior's least squares and
#: the model's parallel reductions, where the kernels and threads once made the trials part, are taken.
SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import optuna, torch
    from nasrlm.search import (ArchEvaluator, CandidateSettings, FitSettings, ProposalSettings, RLMSampler,
                               restricted_to_table, run_search)
    from search_spaces import get_space

    torch.set_num_threads(int(sys.argv[2]))
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = get_space("nb201")
    evaluator = ArchEvaluator.for_names(space, ["acc", "pixel3"], data_dir=sys.argv[1])
    space, evaluator = restricted_to_table(space, evaluator)
    sampler = RLMSampler(space, seed=3, proposals=ProposalSettings(proposals_per_fit=4, num_samples=8),
                         fit=FitSettings(fit_steps=30, pretrain_archs=60, pretrain_epochs=1),
                         candidates=CandidateSettings(num_candidates=120, fresh_candidates=30))
    result = run_search(space, evaluator, sampler, budget=14, progress=False)
    weights = hashlib.sha256()
    for name, tensor in sampler.predictor.lm.model.state_dict().items():
        weights.update(name.encode() + tensor.detach().numpy().tobytes())
    prior = json.dumps(sampler.predictor.prior_part.prior.to_dict(), sort_keys=True)
    print(json.dumps({"trials": result.arch_ids, "weights": weights.hexdigest(), "prior": prior,
                      "torch_threads": torch.get_num_threads()}))
    """)


def _search(data_dir: Path, threads: int, **env: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(data_dir), str(threads)],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _openblas_kernels(**env: str) -> str | None:
    """The OpenBLAS kernels numpy runs on in a process with ``env`` (``None``: its BLAS is not OpenBLAS)."""
    probe = ("import json, numpy; from threadpoolctl import threadpool_info; print(json.dumps("
             "[i.get('architecture') for i in threadpool_info() if i.get('internal_api') == 'openblas']))")
    done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, **env}, capture_output=True,
                          text=True, check=True)
    found = json.loads(done.stdout)
    return found[0] if found else None


@pytest.fixture(scope="module")
def reference(data_dir: Path) -> dict:
    """The search on this processor's own kernels and one torch thread."""
    return _search(data_dir, threads=1)


@pytest.mark.slow
def test_other_blas_kernels_replay_the_trials_and_the_model(data_dir: Path, reference: dict) -> None:
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip(f"OPENBLAS_CORETYPE=Prescott names an x86-64 kernel; this is {platform.machine()}")
    own = _openblas_kernels()
    if own is None:
        pytest.skip("numpy's BLAS here is not OpenBLAS: OPENBLAS_CORETYPE changes nothing")
    if _openblas_kernels(OPENBLAS_CORETYPE="Prescott") == own:
        pytest.skip(f"OPENBLAS_CORETYPE=Prescott leaves OpenBLAS on its own kernels here ({own})")
    other = _search(data_dir, threads=1, OPENBLAS_CORETYPE="Prescott")
    assert other["trials"] == reference["trials"]
    assert (other["prior"], other["weights"]) == (reference["prior"], reference["weights"])


@pytest.mark.slow
def test_other_torch_thread_counts_replay_the_trials_and_the_model(data_dir: Path, reference: dict) -> None:
    other = _search(data_dir, threads=2)
    assert other["torch_threads"] == 2  # the process's count, restored after each of the model's steps
    assert other["trials"] == reference["trials"]
    assert (other["prior"], other["weights"]) == (reference["prior"], reference["weights"])
