#!/usr/bin/env bash
# Continue pre-training a base model on a GPU machine, three batch sizes side by side on one GPU.
#
# Usage (on the GPU machine, from the repository root; START is a run directory made here by
#   nasrlm pretrain --data-dir ../shared/data -o runs/gpu-start --init nasrlm/base --max-rows 20000 \
#       --free-rows 300 --minutes 95 --lr 3e-4 --exclude "$EXCLUDE" --max-steps 1
# with its optimizer.safetensors removed, so that the machine needs no data directory, only its rows.npz):
#   OUT=folder MINUTES=6.5 bash experiments/device_pretrain.sh runs/gpu-start
#
# Each run resumes START with its own batch size and peak learning rate for MINUTES of training; a run
# still going at LIMIT seconds is interrupted (ctrl-C: pretrain saves where it stands). Each run's weights
# come back as OUT/<name>.tar (float32, without the rows and optimiser state); ship one with
#   tar -C runs -xf OUT/<name>.tar && cp runs/gpu-start/rows.npz runs/<name>/ &&
#   nasrlm pretrain -o runs/<name> --resume --max-steps <its step> --exclude "$EXCLUDE" --ship DIR
# The results page ("Who carries the prediction") has what came of it.
set -u
START=${1:?the run directory to resume, e.g. runs/gpu-start}
OUT=${OUT:?a folder for the logs and weights}
MINUTES=${MINUTES:-6.5}
LIMIT=${LIMIT:-540}
DEVICE=${DEVICE:-cuda}
EXCLUDE='nb201:*acc*,*:titan_rtx_*,*:gold_6226,*:pixel2,*:raspi4,*:eyeriss,*:fpga'
export PYTHONUNBUFFERED=1 TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1
PYTHON=${PYTHON:-python3}

mkdir -p "$OUT"
{
    date -u
    nvidia-smi -L 2>&1
    "$PYTHON" -c 'import torch, transformers; print("torch", torch.__version__, "transformers",
        transformers.__version__, "cuda", torch.cuda.is_available())'
} > "$OUT/machine.log" 2>&1
if [ "$DEVICE" != cpu ]; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 30 > "$OUT/gpu.log" 2>&1 &
fi

run() {  # name, batch size, peak learning rate
    local dir
    dir=$(mktemp -d)/$1
    cp -r "$START" "$dir" && rm -f "$dir/optimizer.safetensors"
    timeout -s INT "$LIMIT" "$PYTHON" -m nasrlm pretrain -o "$dir" --resume --minutes "$MINUTES" \
        --batch-size "$2" --lr "$3" --device "$DEVICE" --threads 4 --exclude "$EXCLUDE" > "$OUT/$1.log" 2>&1
    echo "exit $?" >> "$OUT/$1.log"
    tar -C "$(dirname "$dir")" -cf "$OUT/$1.tar" --exclude rows.npz --exclude optimizer.safetensors "$1"
}

pids=()
run gpu-b32 32 3e-4 & pids+=($!)
run gpu-b128 128 5e-4 & pids+=($!)
run gpu-b512 512 1e-3 & pids+=($!)
wait "${pids[@]}"
date -u >> "$OUT/machine.log"
kill %1 2>/dev/null || true
