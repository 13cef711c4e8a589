#!/usr/bin/env bash
# The sizes runs on a GPU host, from the checkout's root: random-weight checkpoints of real shapes written
# by transformers (make_checkpoints.py), then per shape what docs/model.md's sizes table reports: load
# time, device memory, benchmark tokens/s (256 episodes, 128 new tokens), decode tokens/s with 16-bit and
# float32 storage beside torch_engine.py, GRPO LoRA steps with their peak device memory, and the 16-bit KV
# cache against the fp32 one (phase kv: greedy ids, cache bytes, decode tokens/s).
#   bash scripts/gpu/sizes.sh PHASE [ARGS]   (phases below; several may follow each other: "ckpt 0.5b load ...")
#   memory SHAPE GB STEPS: a grpo run at T2S_GPU_MEMORY_GB=GB, then its plan's peak and rows per micro-batch
#   beside the device's peak (summary.jsonl "memory SHAPE"); compare: one table line per such run;
#   update SHAPE ROWS: bench-update-memory (one micro-batch's update, random weights, no checkpoint). The
#   memory table of docs/training.md:
#     bash scripts/gpu/sizes.sh setup ckpt "qwen2.5-7b qwen2.5-1.5b qwen2.5-3b" memory qwen2.5-7b 48 2 \
#       memory qwen2.5-1.5b 20 1 memory qwen2.5-3b 40 1 compare
# Needs: out/gpu-bundle.tar.xz (npm run bundle:gpu -- --node --pack --no-data) and, in .gpu/, the Vulkan
# loader debs and torch_engine.py / torch_ref.py. Everything it prints goes to $OUT/log.txt; one JSON line
# per measurement to $OUT/summary.jsonl.
set -uo pipefail
OUT="${OUT:-/tmp/sizes-out}"
CK="${CK:-/tmp/ck}"
source "$(dirname "$0")/host.sh"   # root, B, log, setup, t2s
note() { echo "$1" >> "$OUT/summary.jsonl"; }

# device memory in use, sampled every 200 ms while a command runs; the peak is noted
# (the series, with timestamps, is kept as $OUT/mem-N.csv, N the measurement's line in summary.jsonl)
mon_start() { nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 200 > /tmp/mem.log 2>/dev/null & MON=$!; }
mon_stop() { kill "$MON" 2>/dev/null; wait "$MON" 2>/dev/null; cp /tmp/mem.log "$OUT/mem-$(( $(cat "$OUT/summary.jsonl" 2>/dev/null | wc -l) + 1 )).csv"; cut -d, -f2 /tmp/mem.log | sort -n | tail -1 | tr -d ' '; }

run() { # label, command...: runs it with the memory monitor, notes seconds and peak MiB
  local label="$1"; shift
  mon_start
  local t0=$(date +%s%N)
  "$@" >> "$OUT/log.txt" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  local peak=$(mon_stop)
  note "{\"what\":\"$label\",\"rc\":$rc,\"ms\":$ms,\"peak_mib\":${peak:-null}}"
  log "== $label rc $rc ${ms} ms peak ${peak:-?} MiB"
}


ckpt() { run "checkpoints $*" python3 scripts/gpu/make_checkpoints.py "$CK" data/models/shop-sql-4m "$@"; grep -h '"shape"' "$OUT/log.txt" | tail -n "$#" >> "$OUT/summary.jsonl"; }

load() { for s in "$@"; do run "load $s" t2s logits --model "$CK/$s" --text "SELECT name FROM" --top 3 --backend webgpu; grep "loaded $s" "$OUT/log.txt" | tail -1 | tee -a "$OUT/summary.jsonl"; done; }

bench() { # 64 train tasks x k 4 = 256 episodes, 128 new tokens per turn
  for s in "$@"; do
    run "benchmark $s" t2s benchmark --policy "tfjs:$CK/$s" --tasks data/shop/tasks.jsonl --split train --limit 64 --k 4 --max-tokens 128 --concurrency 256 --out "/tmp/rows-$s.jsonl" --quiet --json
    python3 - "$s" >> "$OUT/summary.jsonl" <<'PY'
import json, sys
s = sys.argv[1]; rows = [json.loads(l) for l in open(f"/tmp/rows-{s}.jsonl")]
print(json.dumps({"what": f"benchmark rows {s}", "rows": len(rows), "tokens_out": sum(r.get("tokens_out") or 0 for r in rows)}))
PY
  done
}

decode() { # shape: the kit's decode, float32 vs 16-bit storage, then the lean torch engine at the same shape
  local s="$1" short="$2"
  for wd in fp32 auto; do
    run "decode $s $wd" bash "$B/run.sh" bench-decode-gpu.mjs --model "$CK/$s" --weights-dtype "$wd" --batches 1,64,256 --prompt 128 --new 128 --tfjs-batches none --json
    grep '^{' "$OUT/log.txt" | tail -1 | sed "s/^{/{\"what\":\"decode $s $wd\",/" >> "$OUT/summary.jsonl"
  done
  for b in 1 64 256; do
    run "torch_engine $short B$b" python3 .gpu/torch_engine.py fp32 bf16 --shape "$short" --vocab 4096 --batch "$b" --prompt 128 --new 128
    grep '"torch engine' "$OUT/log.txt" | tail -2 >> "$OUT/summary.jsonl"
  done
}

kv() { # shapes: each checkpoint (16-bit weights) with fp32, fp16 and bf16 caches: the check's greedy ids and
  # cache bytes ("kv check" lines), then decode at batch 64 and 256 with each cache
  for s in "$@"; do
    run "kv $s" bash "$B/run.sh" bench-decode-gpu.mjs --model "$CK/$s" --weights-dtype auto --kv-cache-dtype fp32,fp16,bf16 --check --batches 64,256 --profile-batches 0 --prompt 128 --new 128 --tfjs-batches none --engine-batches none --json
    grep -h '^kv check' "$OUT/log.txt" | tail -2 | sed "s/^/$s: /" | tee -a "$OUT/kv.txt"
    grep '^{' "$OUT/log.txt" | tail -1 | sed "s/^{/{\"what\":\"kv $s\",/" >> "$OUT/summary.jsonl"
  done
}

grpo() { # shape, GB the plan targets, steps: LoRA r16 on the 7 projections, 32 prompts x 8 = 256 episodes, 128 new tokens
  # QUANT=int8: the sampler runs the base W8A8 (sampling.quantization); the run and its files are named ...-int8
  local s="$1" gb="$2" steps="${3:-3}" q="${QUANT:-none}"
  local name="$s${QUANT:+-$QUANT}"
  cat > "/tmp/grpo-$name.json" <<JSON
{ "model": "$CK/$s", "tasks": "$root/data/shop/tasks.jsonl", "split": "train", "limit": 256,
  "adapter": { "r": 16, "alpha": 32, "targets": ["q_proj","k_proj","v_proj","o_proj","gate_proj","up_proj","down_proj"] },
  "prompts_per_step": 32, "group_size": 8, "steps": $steps, "loss_type": "dapo", "mask_truncated": true, "lr": 1e-5,
  "sampling": { "temperature": 1.0, "max_tokens": 128, "max_batch": 256, "quantization": "$q" }, "reward_preset": "binary", "seed": 1,
  "output_dir": "/tmp/grpo-$name" }
JSON
  # the run prints its plan too; PLAN=1 also prints it alone first (a model load more)
  [ "${PLAN:-0}" = 1 ] && T2S_GPU_MEMORY_GB="$gb" run "grpo $name plan ${gb}GB" t2s train grpo --config "/tmp/grpo-$name.json" --plan --backend webgpu
  T2S_GPU_MEMORY_GB="$gb" run "grpo $name ${gb}GB" t2s train grpo --config "/tmp/grpo-$name.json" --backend webgpu ${MAXS:+--max-seconds $MAXS} $( [ -d "/tmp/grpo-$name" ] && ls -R /tmp/grpo-$name | grep -q step- && echo --resume )
  [ -f "/tmp/grpo-$name/train_log.jsonl" ] && python3 - "$name" >> "$OUT/summary.jsonl" <<'PY'
import json, sys
s = sys.argv[1]
for l in open(f"/tmp/grpo-{s}/train_log.jsonl"):
    r = json.loads(l)
    if "step" in r and "step_time_s" in r:
        print(json.dumps({"what": f"grpo step {s}", **{k: r.get(k) for k in ("step", "step_time_s", "sample_time_s", "train_time_s", "micro_batches", "tokens_per_s", "completion_length_mean", "is_ratio_mean", "is_ratio_max", "rollout_kl")}}))
PY
}

memory() { # shape, GB, steps: a GRPO run (grpo above) with its memory plan set beside the device's peak
  local s="$1" gb="$2" steps="$3" name="$1${QUANT:+-$QUANT}"
  local from=$(( $(wc -l < "$OUT/log.txt") + 1 ))
  grpo "$s" "$gb" "$steps"
  # the run printed its plan when it started: that plan's lines, from this run's part of the log
  tail -n +"$from" "$OUT/log.txt" > "$OUT/run-$name.txt"
  python3 - "$name" "$gb" "$OUT" >> "$OUT/summary.jsonl" <<'PY'
import json, re, sys
name, gb, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
text = open(f"{out}/run-{name}.txt").read()
plan = {m.group(1).strip(): float(m.group(2)) for m in re.finditer(r"^  (\S.*?)\s+(\d+\.\d+) GB", text, re.M)}
rows = re.search(r"update: (?:layer inputs kept|activations)\s+\S+ GB\s+(\d+) rows", text)
runs = [json.loads(l) for l in open(f"{out}/summary.jsonl") if l.startswith("{")]
run = [r for r in runs if r.get("what") == f"grpo {name} {sys.argv[2]}GB"]
peak = run[-1].get("peak_mib") if run else None
measured = round(peak * 1048576 / 1e9, 2) if peak else None
print(json.dumps({"what": f"memory {name}", "target_gb": gb, "plan_peak_gb": plan.get("peak"), "rows_per_micro_batch": int(rows.group(1)) if rows else None,
                  "measured_peak_gb": measured, "plan_over_measured": round(plan["peak"] / measured, 3) if measured and plan.get("peak") else None,
                  "fits_target": measured is not None and measured <= gb, "rc": run[-1].get("rc") if run else None, "plan": plan}))
PY
  tail -1 "$OUT/summary.jsonl" | tee -a "$OUT/log.txt"
}

update() { # shape, rows list: bench-update-memory, one micro-batch's learner update on random 16-bit weights (no checkpoint), beside the plan's update lines
  local s="$1" rows="$2"
  run "update-memory $s" bash "$B/run.sh" bench-update-memory.mjs --shape "$s" --weights-dtype bf16 --rows "$rows" --json
  grep '^{"shape"' "$OUT/log.txt" | tail -1 | sed "s/^{/{\"what\":\"update-memory $s\",/" >> "$OUT/summary.jsonl"
}

compare() { # every memory run of this call: the plan's peak against the device's, one line per shape
  python3 - "$OUT" <<'PY' | tee -a "$OUT/log.txt"
import json, sys
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/summary.jsonl") if l.startswith("{")]
rows = [r for r in rows if str(r.get("what", "")).startswith("memory ")]
print(f"{'shape':<16}{'target':>8}{'rows/mb':>9}{'plan peak':>11}{'measured':>10}{'plan/meas':>11}  verdict")
for r in rows:
    ratio = r["plan_over_measured"]
    ok = ratio is not None and 0.85 <= ratio <= 1.15
    verdict = ("fits" if r["fits_target"] else "OVER the target") + ("; plan within 15%" if ok else "; plan off by more than 15%")
    f = lambda v, fmt: format(v, fmt) if v is not None else "-"
    print(f"{r['what'][7:]:<16}{f(r['target_gb'], '.0f') + ' GB':>8}{f(r['rows_per_micro_batch'], 'd'):>9}{f(r['plan_peak_gb'], '.2f') + ' GB':>11}{f(r['measured_peak_gb'], '.2f') + ' GB':>10}{f(ratio, '.3f'):>11}  {verdict} (rc {r['rc']})")
PY
}

while [ $# -gt 0 ]; do
  phase="$1"; shift
  case "$phase" in
    setup) setup ;;
    ckpt) ckpt $1; shift ;;
    load) load $1; shift ;;
    bench) bench $1; shift ;;
    decode) decode "$1" "$2"; shift 2 ;;
    grpo) grpo "$1" "$2" "$3"; shift 3 ;;
    kv) kv $1; shift ;;
    memory) memory "$1" "$2" "$3"; shift 3 ;;
    update) update "$1" "$2"; shift 2 ;;
    compare) compare ;;
    *) log "unknown phase $phase"; exit 2 ;;
  esac
done
