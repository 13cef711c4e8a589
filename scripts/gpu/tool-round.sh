#!/usr/bin/env bash
# The tool-use runs on a GPU host, from the checkout's root (reports/round-tool.md, issue "tool use that
# pays"): a long-context tool SFT stage, the band of the new base, GRPO rounds, and evaluation through
# `t2s serve`. Phases run in the order given; each writes what it makes under $OUT.
#   bash scripts/gpu/tool-round.sh PHASE [ARGS] [PHASE [ARGS] ...]
#     setup                                  unpack out/gpu-bundle.tar.xz
#     base STEPS MAXS                        a new base from scratch: `t2s recipe default-model` (single style,
#                                            the train split and `tasks augment --seed 7` extras) at SHAPE
#                                            (default the 15M shape below), exported to $W/base-model
#     sft INIT CONV STEPS MAXS               full-weight SFT from model folder INIT on conversations CONV
#                                            (.jsonl or .jsonl.gz), exported to $OUT/tool-base
#     check MODEL STYLE                      one in-process holdout run (k 4, eval run 0) of MODEL
#     band MODEL STYLE NAME                  k 8 rollouts on the first 512 train tasks -> $OUT/NAME.jsonl.gz
#     grpo CONFIG MAXS NAME                  a GRPO round; its adapter and log -> $OUT/NAME
#     serve-eval PORT MODEL STYLE [band=ROWS] [quant=int8] NAME[=ADAPTER]... +
#                                            one server for MODEL (and adapters); 3 holdout eval runs per
#                                            served name, all in flight -> $OUT/<name>-<style>-holdout.jsonl.gz;
#                                            with band=, the serving check's rows too; with quant=int8 the base
#                                            samples W8A8 (files ...-holdout-int8); runs in the background
#     wait                                   waits for the serve-eval phases started before it
# Needs: out/gpu-bundle.tar.xz (npm run bundle:gpu -- --node --pack --no-data) and .gpu/debs.
set -uo pipefail
OUT="${OUT:-/tmp/tool-out}"
W="${W:-/tmp/tool-work}"   # the SFT working folder (W=... keeps it where a warm host's next call finds it)
source "$(dirname "$0")/host.sh"   # root, B, log, timed, setup, t2s
# LOCAL=1 runs the checkout's own t2s on the CPU (a smoke run of this script); LIMIT=n cuts every task list
if [ "${LOCAL:-0}" = 1 ]; then t2s() { node "$root/bin/t2s.js" "$@"; }; export T2S_BACKEND=wasm; BACKEND=wasm
else BACKEND=webgpu; fi
LIM=${LIMIT:+--limit $LIMIT}   # BATCH=n: SFT batch (default 64)

# the holdout evaluation every style is compared on (reports/round-tool.md)
EVAL_TOOL=(--style tool --max-tokens 200 --max-context 2048 --preset tool-rl)
EVAL_SINGLE=(--style single --max-tokens 200 --preset binary)
style_args() { if [ "$1" = tool ]; then echo "${EVAL_TOOL[@]}"; else echo "${EVAL_SINGLE[@]}"; fi; }
# the episodes training samples (bands, the serving check): the rounds' configs, 128 tokens per turn besides
train_args() { if [ "$1" = tool ]; then echo --style tool --max-context 2048 --preset tool-rl; else echo --preset binary; fi; }

# the larger tool base's shape (docs/default-model.md, "A larger tool model"): 15.3M parameters, 4,096 positions
SHAPE="${SHAPE:---hidden 384 --layers 8 --heads 6 --kv-heads 2 --intermediate 1152 --max-positions 4096}"

base() {
  local steps="$1" maxs="$2"
  mkdir -p "$W"
  [ -f "$W/extra7.jsonl" ] || timed "augment" t2s tasks augment --seed 7 --attempts 1500 --phrasings 3 --out "$W/extra7.jsonl"
  # shellcheck disable=SC2086
  timed "base $steps steps" t2s recipe default-model --work "$W/base" $SHAPE --backend "$BACKEND" --seed 11 --batch-size 64 \
    --micro-batch-rows 64 --steps "$steps" --lr 1e-3 --warmup 30 --extra-tasks "$W/extra7.jsonl" --checkpoint-every 100 \
    --max-seconds "$maxs" --out "$W/base-model" $( [ -d "$W/base/sft/checkpoints" ] && echo --resume )
  cp "$W/base/sft/train_log.jsonl" "$OUT/base-train_log.jsonl"
}

sft() {
  local init="$1" conv="$2" steps="$3" maxs="$4"
  mkdir -p "$W" && rm -rf "$W/init" && cp -r "$init" "$W/init"
  case "$conv" in *.gz) gunzip -c "$conv" > "$W/conv.jsonl" ;; *) cp "$conv" "$W/conv.jsonl" ;; esac
  cat > "$W/sft.json" <<JSON
{ "model": "$W/init", "full_weights": true, "conversations": "$W/conv.jsonl", "steps": $steps, "batch_size": ${BATCH:-64},
  "lr": 0.001, "schedule": "cosine", "warmup_steps": 10, "min_lr_ratio": 0.1, "weight_decay": 0.1,
  "max_grad_norm": 1, "micro_batch_rows": ${BATCH:-64}, "checkpoint_every": 20, "seed": 9, "output_dir": "$W/sft",
  "backend": "$BACKEND" }
JSON
  cp "$W/sft.json" "$OUT/sft.json"
  timed "sft $steps steps" t2s train sft --config "$W/sft.json" --max-seconds "$maxs" $( [ -d "$W/sft/checkpoints" ] && echo --resume )
  local last=$(ls "$W/sft/checkpoints" | grep step- | sort | tail -1 | sed 's/step-0*//')
  rm -rf "$OUT/tool-base"
  timed "export step $last" t2s recipe export --work "$W" --step "$last" --out "$OUT/tool-base"
  cp "$W/sft/train_log.jsonl" "$OUT/tool-base/train_log.jsonl"
}

check() {
  local model="$1" style="$2" name; name="check-$(basename "$model")-$style"
  rm -f "/tmp/$name.jsonl"*   # rows files resume: a file left by an earlier call would be taken as done
  timed "$name" t2s benchmark --policy "tfjs:$model" --tasks data/shop/tasks.jsonl --split holdout $LIM --k 4 --temperature 0.7 \
    $(style_args "$style") --concurrency 1328 --seed 1 --eval-run 0 --out "/tmp/$name.jsonl" --quiet --json
  gzip -c "/tmp/$name.jsonl" > "$OUT/$name.jsonl.gz"; cp "/tmp/$name.jsonl.meta.json" "$OUT/"
}

band() {
  local model="$1" style="$2" name="$3"
  rm -f "/tmp/$name.jsonl"*
  timed "band $name" t2s benchmark --policy "tfjs:$model" --tasks data/shop/tasks.jsonl --split train --limit ${LIMIT:-512} --k 8 \
    --temperature 1.0 --max-tokens 128 $(train_args "$style") \
    --concurrency 1024 --seed 0 --eval-run 0 --out "/tmp/$name.jsonl" --quiet --json
  gzip -c "/tmp/$name.jsonl" > "$OUT/$name.jsonl.gz"; cp "/tmp/$name.jsonl.meta.json" "$OUT/"
}

grpo() {
  local config="$1" maxs="$2" name="$3" dir
  dir="$(python3 -c 'import json,os,sys; c=json.load(open(sys.argv[1])); print(os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), c["output_dir"])))' "$config")"
  timed "grpo $name" t2s train grpo --config "$config" --backend "$BACKEND" --max-seconds "$maxs" \
    $( [ -d "$dir/checkpoints" ] && echo --resume )
  mkdir -p "$OUT/$name" && cp -r "$dir/adapter/." "$OUT/$name/" && cp "$dir/train_log.jsonl" "$dir/config.json" "$OUT/$name/" 2>/dev/null
}

serve_eval() { # PORT MODEL STYLE [band=ROWS] NAME[=ADAPTER]...
  local port="$1" model="$2" style="$3"; shift 3
  local names=() adapters=() band="" q=none
  for spec in "$@"; do
    case "$spec" in
      band=*) band="${spec#band=}" ;;
      quant=*) q="${spec#quant=}" ;;
      *=*) names+=("${spec%%=*}"); adapters+=(--adapter "$spec") ;;
      *) names+=("$spec") ;;
    esac
  done
  # quant=int8 serves the base W8A8 (the adapters float32 beside it); its files are named ...-int8
  local sfx=""; [ "$q" != none ] && sfx="-$q"
  t2s serve --model "$model" "${adapters[@]}" --port "$port" --backend "$BACKEND" --max-batch 1024 --quantization "$q" >> "$OUT/serve-$port.log" 2>&1 &
  local srv=$! t0=$(date +%s) pids=() url="http://127.0.0.1:$port/v1"
  for m in "${names[@]}"; do rm -f /tmp/$m-$style-holdout$sfx.r[123].jsonl* /tmp/serving-$m.jsonl*; done
  for m in "${names[@]}"; do for r in 1 2 3; do
    t2s benchmark --policy "openai:$m@$url" --tasks data/shop/tasks.jsonl --split holdout $LIM --k 4 --temperature 0.7 \
      $(style_args "$style") --concurrency 128 --workers 2 --seed 1 --eval-run "$r" --warmup 180 \
      --out "/tmp/$m-$style-holdout$sfx.r$r.jsonl" --quiet --json > /dev/null 2>> "$OUT/log.txt" &
    pids+=($!)
  done
  # the serving check's rows: 128 band prompts x 4 at the training temperature (notebook 04)
  [ -n "$band" ] && { t2s benchmark --policy "openai:$m@$url" --tasks data/shop/tasks.jsonl --split train --band "$band:0.1:0.9" \
      --limit 128 --k 4 --temperature 1.0 --max-tokens 128 $(train_args "$style") \
      --concurrency 128 --workers 2 --seed 0 --eval-run serving --warmup 180 --out "/tmp/serving-$m.jsonl" --quiet --json > /dev/null 2>> "$OUT/log.txt" & pids+=($!); }
  done
  for p in "${pids[@]}"; do wait "$p"; done
  kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
  log "== serve-eval $port $style $q ${names[*]} $(( $(date +%s) - t0 )) s"
  for m in "${names[@]}"; do
    cat /tmp/$m-$style-holdout$sfx.r[123].jsonl | gzip > "$OUT/$m-$style-holdout$sfx.jsonl.gz"
    cp "/tmp/$m-$style-holdout$sfx.r1.jsonl.meta.json" "$OUT/$m-$style-holdout$sfx.jsonl.meta.json"
    [ -n "$band" ] && gzip -c "/tmp/serving-$m.jsonl" > "$OUT/serving-$m.jsonl.gz" && cp "/tmp/serving-$m.jsonl.meta.json" "$OUT/"
  done
}

BG=()
while [ $# -gt 0 ]; do
  phase="$1"; shift
  case "$phase" in
    setup) setup ;;
    base) base "$1" "$2"; shift 2 ;;
    sft) sft "$1" "$2" "$3" "$4"; shift 4 ;;
    check) check "$1" "$2"; shift 2 ;;
    band) band "$1" "$2" "$3"; shift 3 ;;
    grpo) grpo "$1" "$2" "$3"; shift 3 ;;
    serve-eval) # its arguments run up to a lone "+"; the server and its runs go on in the background
      a=(); while [ $# -gt 0 ] && [ "$1" != + ]; do a+=("$1"); shift; done; [ $# -gt 0 ] && shift
      serve_eval "${a[@]}" & BG+=($!) ;;
    wait) for p in "${BG[@]}"; do wait "$p"; done; BG=() ;;
    *) log "unknown phase $phase"; exit 2 ;;
  esac
done
