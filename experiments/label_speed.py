"""How fast architectures get their free and graph labels, their texts, and both from the label cache.

Each measurement runs in a fresh Python process (cold in-memory caches: no function body parsed yet) on
``--archs`` random architectures of a space (seed 0):

- ``text``: ONNX build + canonical text, one process (what the language model reads);
- ``labels``: ONNX build + parameters, MACs and graph labels, no text, no label cache, in 1 and in
  ``--jobs`` processes (the issue's "graph + free labels");
- ``describe``: text and labels into an empty label cache in ``--jobs`` processes (what a cold
  ``nasrlm pretrain`` or ``train`` does), then ``cached``: the same rows read back (a warm one).

    python experiments/label_speed.py --spaces nb201,nb101,ofa_mbv3,fbnet --archs 3000

``--smoke`` measures 40 NB201 architectures, as its test does. Results: experiments/README.md,
"Labels at the speed of text".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one(space_name: str, mode: str, archs: int, jobs: int, cache_dir: str) -> float:
    """Architectures per second of one measurement, in this process."""
    from exporters import to_text
    from nasrlm.free_labels import texts_and_free_labels
    from nasrlm.label_cache import LabelCache
    from search_spaces import get_space

    space = get_space(space_name)
    ids = space.sample_ids(archs, seed=0)
    cache = LabelCache(Path(cache_dir) / "labels.db") if mode in ("describe", "cached") else None
    start = time.perf_counter()
    if mode == "text":
        for arch_id in ids:
            to_text(space.build_onnx(space.parse(arch_id)))
    else:
        texts_and_free_labels(space, ids, graph=True, texts=mode != "labels", jobs=jobs, cache=cache)
    return archs / (time.perf_counter() - start)


def measure(space: str, mode: str, archs: int, jobs: int, cache_dir: str) -> float:
    """:func:`one` in a fresh process."""
    out = subprocess.run([sys.executable, __file__, "--one", space, mode, str(archs), str(jobs), cache_dir],
                         check=True, capture_output=True, text=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["rate"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spaces", default="nb201,nb101,ofa_mbv3,fbnet")
    parser.add_argument("--archs", type=int, default=3000)
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--smoke", action="store_true", help="40 NB201 architectures: a quick check")
    parser.add_argument("--one", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        args.spaces, args.archs = "nb201", 40
    if args.one:
        space, mode, archs, jobs, cache_dir = args.one
        print(json.dumps({"rate": one(space, mode, int(archs), int(jobs), cache_dir)}))
        return
    print(f"| space | text, 1 process | labels, 1 process | labels, {args.jobs} processes "
          f"| text + labels into an empty cache, {args.jobs} processes | from the cache |")
    print("|---|---|---|---|---|---|")
    for space in args.spaces.split(","):
        with tempfile.TemporaryDirectory() as cache_dir:
            rates = [measure(space, "text", args.archs, 1, cache_dir),
                     measure(space, "labels", args.archs, 1, cache_dir),
                     measure(space, "labels", args.archs, args.jobs, cache_dir),
                     measure(space, "describe", args.archs, args.jobs, cache_dir),
                     measure(space, "cached", args.archs, args.jobs, cache_dir)]
        print(f"| {space} | " + " | ".join(f"{r:,.0f}/s" for r in rates) + " |", flush=True)


if __name__ == "__main__":
    main()
