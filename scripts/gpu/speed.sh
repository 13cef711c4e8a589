#!/usr/bin/env bash
# The speed runs on a GPU host, from the checkout's root (docs/model.md "Generation figures", docs/training.md
# "The 0.5B comparison"): the kit's decode with a per-kernel profile beside the lean PyTorch engine, the
# training benches beside torch_ref.py, the kernel checks, and the GRPO round-1 configuration's step time.
#   bash scripts/gpu/speed.sh PHASE [ARGS] [PHASE [ARGS] ...]
#     setup                         unpack out/gpu-bundle.tar.xz
#     decode SHAPE DTYPE BATCHES [QUANTS]
#                                   bench-decode-gpu at lib/model/shapes.ts SHAPE (random weights, the shape's
#                                   own vocabulary), storage fp32|bf16, greedy ids checked against the tfjs
#                                   path first, every batch profiled per kernel; QUANTS e.g. none,int8 (each
#                                   in turn; default none); COPY_LAYERS=1: --copy-layers (7B builds in a minute);
#                                   with .gpu/bench-decode-gpu-before.mjs present, that build runs first
#                                   (the profile "before", same call)
#     torch SHORT BATCHES DTYPES    torch_engine.py at its shape SHORT (0.5b, 3b), e.g. "1,64,256" "fp32 bf16"
#     train                         bench-train --qwen05b (full SFT, GRPO LoRA) beside torch_ref.py train
#     kernels                       bench-kernels --qwen05b (exits 1 when a kernel is off; ONLY=a,b: those groups)
#     gemm [SHAPES]                 bench-gemm: int8 GEMM TOPS and the int8 linear beside the fp32 step GEMM
#     r1 STEPS MAXS [QUANT] [CACHE] the round-1 GRPO configuration for STEPS steps (train_log's step times),
#                                   sampling at QUANT (none|int8, default the config's), with sampling.prefix_caching
#                                   CACHE (on|off, default the config's); the log goes to $OUT/r1-train_log[-QUANT][-CACHE].jsonl
#     serve-prefix ROUNDS REPEATS   bench-serve --prefix-caching-only on webgpu: `t2s serve` over the default model,
#                                   64 streaming clients x ROUNDS shop prompts, prefix caching on against off,
#                                   REPEATS times alternating (TTFT p50/p95, tokens/s, share of prompt tokens found)
# Needs: out/gpu-bundle.tar.xz (npm run bundle:gpu -- --node --pack --no-data) and, in .gpu/, the Vulkan
# loader debs and torch_engine.py / torch_ref.py. Everything goes to $OUT/log.txt.
set -uo pipefail
OUT="${OUT:-/tmp/speed-out}"
source "$(dirname "$0")/host.sh"   # root, B, log, timed, setup, t2s

decode() {
  local shape="$1" wd="$2" batches="$3" quants="${4:-none}"
  local args=(--shape "$shape" --weights-dtype "$wd" --batches "$batches" --profile-batches "$batches" --prompt 128 --new 128 --tfjs-batches none --engine-batches none --check --quantization "$quants" ${COPY_LAYERS:+--copy-layers})
  if [ -f .gpu/bench-decode-gpu-before.mjs ]; then
    cp .gpu/bench-decode-gpu-before.mjs "$B/"
    timed "decode before $shape $wd" bash "$B/run.sh" bench-decode-gpu-before.mjs "${args[@]}"
  fi
  timed "decode $shape $wd $quants" bash "$B/run.sh" bench-decode-gpu.mjs "${args[@]}"
}

torch_engine() {
  local short="$1" batches="$2" dtypes="$3"
  for b in ${batches//,/ }; do timed "torch_engine $short B$b" python3 .gpu/torch_engine.py $dtypes --shape "$short" --batch "$b" --prompt 128 --new 128; done
}

train() {
  timed "bench-train" bash "$B/run.sh" bench-train.mjs --qwen05b --backend webgpu --modes sft-full,grpo-lora
  timed "torch_ref train" python3 .gpu/torch_ref.py train
}

r1() { # configs/shop-sql-4m-grpo-r1.json with fewer steps and an output folder of its own
  # beside the original, so its relative paths still resolve
  local q="${3:-}" cache="${4:-}"
  python3 - "$1" "$q" "$cache" > configs/r1-bench.tmp.json <<'PY'
import json, sys
c = json.load(open("configs/shop-sql-4m-grpo-r1.json"))
c.update(steps=int(sys.argv[1]), output_dir="/tmp/r1-bench")
if sys.argv[2]: c.setdefault("sampling", {})["quantization"] = sys.argv[2]
if sys.argv[3]: c.setdefault("sampling", {})["prefix_caching"] = sys.argv[3] == "on"
print(json.dumps(c))
PY
  rm -rf /tmp/r1-bench
  timed "grpo r1 $1 steps ${q:-config} prefix caching ${cache:-config}" t2s train grpo --config configs/r1-bench.tmp.json --backend webgpu --max-seconds "$2"
  cp /tmp/r1-bench/train_log.jsonl "$OUT/r1-train_log${q:+-$q}${cache:+-$cache}.jsonl" 2>/dev/null
}

while [ $# -gt 0 ]; do
  phase="$1"; shift
  case "$phase" in
    setup) setup ;;
    decode) if [[ "${4:-}" =~ ^(none|int8)(,(none|int8))*$ ]]; then decode "$1" "$2" "$3" "$4"; shift 4; else decode "$1" "$2" "$3"; shift 3; fi ;;
    gemm) if [[ "${1:-}" =~ ^[0-9x,]+$ ]]; then timed "bench-gemm" bash "$B/run.sh" bench-gemm.mjs --shapes "$1"; shift; else timed "bench-gemm" bash "$B/run.sh" bench-gemm.mjs; fi ;;
    torch) torch_engine "$1" "$2" "$3"; shift 3 ;;
    serve-prefix) timed "bench-serve prefix caching" bash "$B/run.sh" bench-serve.mjs --backend webgpu --prefix-caching-only --rounds "$1" --prefix-repeats "$2"; shift 2 ;;
    train) train ;;
    kernels) timed "bench-kernels" bash "$B/run.sh" bench-kernels.mjs --qwen05b ${ONLY:+--only $ONLY} ;;
    r1) if [[ "${3:-}" =~ ^(none|int8)$ && "${4:-}" =~ ^(on|off)$ ]]; then r1 "$1" "$2" "$3" "$4"; shift 4
        elif [[ "${3:-}" =~ ^(none|int8)$ ]]; then r1 "$1" "$2" "$3"; shift 3; else r1 "$1" "$2"; shift 2; fi ;;
    *) log "unknown phase $phase"; exit 2 ;;
  esac
done
