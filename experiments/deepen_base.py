"""Deepen a pre-training run's encoder without changing what it computes, to go on with ``--resume``.

A larger model trained from scratch would first have to relearn what the run's weights already read from the
ONNX text. Instead, new encoder layers are inserted between the run's own, each with its attention and
feed-forward output projections at zero: T5's blocks are residual, so each new block passes its input through
unchanged and the deepened model computes what the run's did (checked here on a batch of its rows) until
training moves them. The new directory holds the deepened weights, the run's rows, and a fresh record (step 0,
so the learning rate warms up again) whose ``init`` is the run's own.

    python experiments/deepen_base.py runs/gpu-b128 runs/deep6 --encoder-layers 6
    nasrlm pretrain -o runs/deep6 --resume --minutes M --batch-size 128 --lr 5e-4 --exclude "$EXCLUDE"
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import replace
from pathlib import Path

import torch

from nasrlm.rlm.model import RegressionLM
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.pretraining import ROWS_FILE, PretrainState, load_tasks
from nasrlm.rlm.training import pad_batch

_BLOCK = re.compile(r"^t5\.encoder\.block\.(\d+)\.(.*)$")


def deepened(model: RegressionLM, layers: int) -> RegressionLM:
    """``model`` with ``layers`` encoder blocks: its own evenly spread, new ones between computing nothing."""
    old = model.config.encoder_layers
    if layers <= old:
        raise SystemExit(f"--encoder-layers {layers}: the run already has {old}")
    places = [round(k * layers / old) for k in range(old)]  # 3 of 6: blocks 0, 2, 4 are the run's
    bigger = RegressionLM(replace(model.config, encoder_layers=layers))
    weights = {}
    for name, value in model.state_dict().items():
        match = _BLOCK.match(name)
        weights[f"t5.encoder.block.{places[int(match[1])]}.{match[2]}" if match else name] = value
    missing, unexpected = bigger.load_state_dict(weights, strict=False)
    new = {k for k in range(layers) if k not in places}
    assert not unexpected and all(int(_BLOCK.match(n)[1]) in new for n in missing), (missing, unexpected)
    with torch.no_grad():
        for k in new:
            block = bigger.t5.encoder.block[k]
            block.layer[0].SelfAttention.o.weight.zero_()
            block.layer[1].DenseReluDense.wo.weight.zero_()
    return bigger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a pre-training run (nasrlm pretrain -o), with its rows")
    parser.add_argument("output", type=Path, help="new directory for the deepened run")
    parser.add_argument("--encoder-layers", type=int, required=True)
    args = parser.parse_args()
    if args.output.exists():
        raise SystemExit(f"{args.output} exists: name a new directory")
    predictor = RLMPredictor.load(args.run)
    parent = PretrainState.load(args.run)
    model = predictor.model.eval()
    bigger = deepened(model, args.encoder_layers).eval()
    texts = load_tasks(args.run / ROWS_FILE)[0].texts[:16]
    ids, mask = pad_batch(predictor.encode_texts(texts), model.config.text_pad_id)
    with torch.no_grad():
        gap = (model.encode(ids, mask) - bigger.encode(ids, mask)).abs().max().item()
    sizes = [sum(p.numel() for p in m.parameters()) for m in (model, bigger)]
    print(f"encoder {model.config.encoder_layers} -> {args.encoder_layers} layers, "
          f"{sizes[0]:,} -> {sizes[1]:,} parameters; the encoder's output on 16 rows moved {gap:.2e} at most")
    predictor.model = bigger
    predictor.save(args.output)
    os.link(args.run / ROWS_FILE, args.output / ROWS_FILE)
    state = PretrainState(exclude=parent.exclude, spaces=parent.spaces, rows=parent.rows,
                          config=parent.config)
    state.started_from(args.run, parent)
    state.save(args.output)


if __name__ == "__main__":
    main()
