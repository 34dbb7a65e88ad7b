"""Foundation numbers: canonical-text size and export speed, and latency-measurement throughput.

    python experiments/export_benchmark.py --archs 1000 --measure 20

Prints a markdown table; experiments/README.md records its output with the machine and date.
``--smoke`` runs the whole script in seconds (20 architectures exported, 2 timed), as its test does.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import onnxruntime

from exporters import DeviceProfile, to_text
from nasrlm.measure import LatencyStore, measure_archs
from search_spaces import get_space


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="nb201")
    parser.add_argument("--archs", type=int, default=1000, help="architectures to export")
    parser.add_argument("--measure", type=int, default=20, help="architectures to time (cpu-1t-b1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true",
                        help="20 architectures exported, 2 timed: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.archs, args.measure = 20, 2

    space = get_space(args.space)
    ids = space.sample_ids(args.archs, seed=args.seed)
    archs = [space.parse(i) for i in ids]

    start = time.perf_counter()
    texts = [space.to_text(a) for a in archs]
    text_s = time.perf_counter() - start

    onnx_ids = archs[: max(1, len(archs) // 10)]
    start = time.perf_counter()
    models = [space.to_onnx(a) for a in onnx_ids]
    onnx_s = time.perf_counter() - start
    flat_chars = [len(to_text(m)) for m in models]  # the same models without local functions

    lengths = [len(t) for t in texts]
    rows = [
        ("architectures exported", f"{len(texts):,}"),
        ("canonical text: mean characters", f"{statistics.mean(lengths):,.0f}"),
        ("canonical text: median / min / max", f"{statistics.median(lengths):,.0f} / {min(lengths):,} / "
                                               f"{max(lengths):,}"),
        ("same text without local functions (mean chars)", f"{statistics.mean(flat_chars):,.0f}"),
        ("text exports/s (build + canonicalise + print)", f"{len(texts) / text_s:,.0f}"),
        (f"executable ONNX exports/s ({len(models)} models, weights materialised)",
         f"{len(models) / onnx_s:,.0f}"),
    ]
    if args.measure:
        profile = DeviceProfile("cpu", 1, 1)
        with tempfile.TemporaryDirectory() as tmp, LatencyStore(Path(tmp) / "lat.db") as store:
            start = time.perf_counter()
            results = measure_archs(space, ids[: args.measure], profile, store, progress=False)
            measure_s = time.perf_counter() - start
        medians = sorted(r.median_ms for r in results.values())
        rows += [
            (f"latency measurement ({profile.name}, warm-up 10, 50 runs): archs/s",
             f"{len(results) / measure_s:.1f}"),
            ("measured median latency: min / median / max (ms)",
             f"{medians[0]:.2f} / {statistics.median(medians):.2f} / {medians[-1]:.2f}"),
        ]
    print(f"space `{space.name}`, seed {args.seed}, {platform.processor() or platform.machine()}, "
          f"onnxruntime {onnxruntime.__version__}\n")
    print("| quantity | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
