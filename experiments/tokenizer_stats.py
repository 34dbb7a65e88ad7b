"""Tokens per NAS-Bench-201 architecture for sentencepiece configurations of the ONNX tokenizer.

Trains :class:`~nasrlm.rlm.tokenizers.OnnxTokenizer` with each configuration on random NB201
architectures and encodes 1,000 *other* random architectures (never used for training); prints a
markdown table (tokens median / mean / max, tokenizer training time) for experiments/README.md.

    python experiments/tokenizer_stats.py            # full grid (~3 min on 2 cores)
    python experiments/tokenizer_stats.py --quick    # BPE rows only
    python experiments/tokenizer_stats.py --smoke    # the whole script in seconds, as its test runs it
"""

from __future__ import annotations

import argparse
import inspect
import platform
import statistics
import time
from collections import Counter

import sentencepiece

from nasrlm.rlm.tokenizers import OnnxTokenizer
from search_spaces import available_spaces, get_space

#: What ``OnnxTokenizer.train_on_spaces`` trains one space's tokenizer on by default: its
#: ``samples_per_space`` architectures, and 1,024 pieces per space (the library's DEFAULT_VOCAB_SIZE,
#: not exported: keep the two equal).
DEFAULT_SAMPLES_PER_SPACE = inspect.signature(OnnxTokenizer.train_on_spaces).parameters[
    "samples_per_space"].default
DEFAULT_VOCAB_SIZE = 1024

# (label, training samples, vocab size, trainer options); the first row is the default.
CONFIGS: list[tuple[str, int, int, dict]] = [
    ("**default**: bpe, len 256", DEFAULT_SAMPLES_PER_SPACE, DEFAULT_VOCAB_SIZE, {}),
    # maximum piece length (characters)
    ("bpe, len 16", 1000, 1024, {"max_sentencepiece_length": 16}),
    ("bpe, len 32", 1000, 1024, {"max_sentencepiece_length": 32}),
    ("bpe, len 64", 1000, 1024, {"max_sentencepiece_length": 64}),
    ("bpe, len 128", 1000, 1024, {"max_sentencepiece_length": 128}),
    ("bpe, len 512 (sentencepiece max)", 1000, 1024, {"max_sentencepiece_length": 512}),
    # vocabulary size
    ("bpe, len 256", 1000, 768, {}),
    ("bpe, len 256", 1000, 896, {}),
    ("bpe, len 256", 1000, 1280, {}),
    ("bpe, len 256", 1000, 2048, {}),
    ("bpe, len 256", 1000, 4096, {}),
    ("bpe, len 64", 1000, 2048, {"max_sentencepiece_length": 64}),
    ("bpe, len 64", 1000, 4096, {"max_sentencepiece_length": 64}),
    ("bpe, len 64", 1000, 8192, {"max_sentencepiece_length": 64}),
    # pre-tokenization
    ("bpe, len 256, split_digits", 1000, 1024, {"split_digits": True}),
    ("bpe, len 256, split_by_whitespace", 1000, 1024, {"split_by_whitespace": True}),
    # training samples
    ("bpe, len 256", 250, 1024, {}),
    ("bpe, len 256", 500, 1024, {}),
    ("bpe, len 256", 2000, 1024, {}),
    ("bpe, len 256", 4000, 1024, {}),
    # unigram language model
    ("unigram, len 16", 1000, 1024, {"model_type": "unigram", "max_sentencepiece_length": 16}),
    ("unigram, len 32", 1000, 1024, {"model_type": "unigram", "max_sentencepiece_length": 32}),
    ("unigram, len 64", 1000, 1024, {"model_type": "unigram", "max_sentencepiece_length": 64}),
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heldout", type=int, default=1000, help="held-out architectures to encode")
    parser.add_argument("--seed", type=int, default=0, help="seed of the training samples")
    parser.add_argument("--quick", action="store_true", help="skip the slow unigram rows")
    parser.add_argument("--smoke", action="store_true", help="three configurations on at most 100 "
                        "architectures, 50 held out, NB201's tokenizer only: checks the script runs")
    args = parser.parse_args(argv)

    space = get_space("nb201")
    configs = [c for c in CONFIGS if not (args.quick and c[3].get("model_type") == "unigram")]
    spaces, per_space = available_spaces(), 50  # the second table: tokens per space
    if args.smoke:  # the default, a short-piece BPE and a unigram row; one space in the second table
        args.heldout, spaces, per_space = 50, ["nb201"], 5
        configs = [(label, min(n, 100), vocab, options) for label, n, vocab, options in CONFIGS
                   if label in ("**default**: bpe, len 256", "bpe, len 16", "unigram, len 16")]
    most = max(n for _, n, _, _ in configs)
    t0 = time.perf_counter()
    # sample_ids(n, seed) is a prefix of sample_ids(m, seed) for n < m: every training set is a prefix.
    train_ids = space.sample_ids(most, seed=args.seed)
    seen = set(train_ids)
    heldout_ids = [i for i in space.sample_ids(most + args.heldout, seed=args.seed + 10_000) if i not in seen]
    heldout_ids = heldout_ids[: args.heldout]
    assert len(heldout_ids) == args.heldout, "search space too small for this many held-out architectures"
    train_texts = [space.to_text(space.parse(i)) for i in train_ids]
    heldout = [space.to_text(space.parse(i)) for i in heldout_ids]
    export_s = time.perf_counter() - t0
    chars = [len(t) for t in heldout]

    print(f"NB201, {args.heldout} held-out architectures (disjoint from training); characters per "
          f"architecture: median {statistics.median(chars):,.0f}, mean {statistics.mean(chars):,.0f}, "
          f"max {max(chars):,}.")
    print(f"Exporting {len(train_texts) + len(heldout):,} texts took {export_s:.1f} s "
          "(not in the training times below).")
    print(f"Python {platform.python_version()}, sentencepiece {sentencepiece.__version__}, "
          f"{platform.machine()}.\n")
    print("| configuration | train archs | vocab (asked → got) | tokens median | mean | max "
          "| chars/token | pieces used (in <1 % of archs) | train s | encode ms/arch |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, n, vocab, options in configs:
        start = time.perf_counter()
        tok = OnnxTokenizer.train(train_texts[:n], vocab, seed=args.seed, **options)
        train_s = time.perf_counter() - start
        start = time.perf_counter()
        ids = tok.encode_batch(heldout)
        encode_ms = 1000 * (time.perf_counter() - start) / len(heldout)
        assert all(tok.decode(x) == t for x, t in zip(ids, heldout, strict=True)), f"{label}: not lossless"
        lengths = [len(x) for x in ids]
        docs = Counter(i for x in ids for i in set(x))
        rare = sum(c < len(heldout) / 100 for c in docs.values())
        print(f"| {label} | {n:,} | {vocab:,} → {tok.vocab_size:,} | {statistics.median(lengths):.0f} "
              f"| {statistics.mean(lengths):.1f} | {max(lengths)} | {sum(chars) / sum(lengths):.1f} "
              f"| {len(docs):,} ({rare:,}) | {train_s:.1f} | {encode_ms:.2f} |", flush=True)

    start = time.perf_counter()
    every = spaces == available_spaces()
    tok = OnnxTokenizer.train_on_spaces(None if every else spaces)
    call, which = ("()", "registered space(s)") if every else (f"({spaces})", "space(s)")
    print(f"\n`OnnxTokenizer.train_on_spaces{call}` (defaults, {len(spaces)} {which}, "
          f"exports included): {time.perf_counter() - start:.1f} s, vocabulary {tok.vocab_size:,}.\n")
    print("| space | characters (median) | tokens (median) | max |\n|---|---:|---:|---:|")
    for name in spaces:  # 50 architectures per space, drawn apart from the training ones
        space = get_space(name)
        texts = [space.to_text(space.parse(i)) for i in space.sample_ids(per_space, seed=args.seed + 99)]
        lengths = [len(x) for x in tok.encode_batch(texts)]
        print(f"| `{name}` | {statistics.median(len(t) for t in texts):,.0f} | "
              f"{statistics.median(lengths):.0f} | {max(lengths)} |", flush=True)


if __name__ == "__main__":
    main()
