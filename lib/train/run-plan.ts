/**
 * The memory plan of one `t2s train` run (lib/train/memory-plan.ts) from its config and loaded model: the
 * sequence length comes from the longest rendered prompt of (up to 64 of) the run's tasks plus the turn's
 * token budget, the micro-batch from micro_batch_rows or max_tensor_elements, and the sampler's cache from
 * sampling.max_batch. The same length sizes the sampler's cache, so it holds what episodes need rather
 * than the runner's 2,048-token default.
 */
import type { CausalLM } from "../model/model.js";
import type { ChatMessage } from "../policy/types.js";
import { deviceMemoryBytes } from "../backend/device-memory.js";
import { resolveKvCacheDtype } from "../model/engine/runners.js";
import type { TrainConfig } from "./config.js";
import { firstScored, type TokenRow } from "./batching.js";
import { commonPrefix } from "../model/prefix.js";
import { PREFIX_CACHE_TOKENS, prefixCacheSlots } from "../model/engine/prefix-cache.js";
import { planMemory, rowsThatFit, WASM_HEAP_BYTES, widestActivation, type MemoryPlan, type PlanInput } from "./memory-plan.js";
import { MIN_SHARED_PREFIX, type ModelTrainable } from "./trainable-model.js";
import { scoredWidth } from "./logprobs.js";

/** Prompts rendered to find the longest (a GRPO band holds hundreds of tasks of similar length). */
const PROMPTS_MEASURED = 64;

export interface RunPlan {
  plan: MemoryPlan;
  input: PlanInput;
  /** Tokens per sequence the sampler's cache holds. */
  samplerLength: number;
  /** Rows per micro-batch: micro_batch_rows, or with 0 the most that fit the device (and max_tensor_elements). */
  microBatchRows: number;
}

/** Rounds up to a multiple of 64 tokens, so similar runs share a cache size. */
const round64 = (n: number) => Math.ceil(n / 64) * 64;

/**
 * Tokens every row of a micro-batch shares at its start, which the trainer runs once (ModelTrainable):
 * the common prefix of `rows`, a lower bound for any micro-batch drawn from them; 0 below MIN_SHARED_PREFIX.
 */
function sharedPrefixOf(rows: number[][]): number {
  const n = rows.length > 1 ? commonPrefix(rows) : 0;
  return n >= MIN_SHARED_PREFIX ? n : 0;
}

/**
 * The plan for a run. `promptIds` renders one opening's ids (GRPO), `sftRows` are SFT's examples (ids and
 * loss mask); whichever applies to the mode is used.
 */
export async function planRun(cfg: TrainConfig, model: CausalLM, lm: ModelTrainable, opts: { openings?: ChatMessage[][]; promptIds?: (m: ChatMessage[]) => number[]; sftRows?: TokenRow[] }): Promise<RunPlan> {
  const c = model.config;
  const trainable = lm.trainableParams().reduce((s, p) => s + p.variable.size, 0);
  let rowTokens: number;
  let scored: number;
  let sampler: PlanInput["sampler"] = null;
  let rows: number;
  let prefixRows: number[][];
  // what one scored position of a micro-batch holds whole (the trainers cap micro-batches by it: logprobs.ts scoredWidth)
  const width = scoredWidth(lm);
  if (cfg.mode === "grpo") {
    prefixRows = (opts.openings ?? []).slice(0, PROMPTS_MEASURED).map((m) => opts.promptIds!(m));
    const longest = prefixRows.reduce((m, ids) => Math.max(m, ids.length), 1);
    // a tool episode grows over turns up to its context budget; a single-style one by one turn
    const bound = cfg.episode.style === "tool" ? cfg.episode.max_context_tokens : Math.min(cfg.episode.max_context_tokens, Math.ceil(longest * 1.1) + cfg.sampling.max_tokens);
    rowTokens = Math.min(c.maxPositions, round64(bound));
    scored = cfg.episode.style === "tool" ? rowTokens : cfg.sampling.max_tokens;
    const episodes = cfg.prompts_per_step * cfg.group_size;
    // the cache as the sampler's runner will store it (the model's kv_cache_dtype, auto resolved); the prefix
    // cache of a device sampler takes whole slots of the same buffers
    sampler = { slots: Math.min(cfg.sampling.max_batch, episodes), maxLength: rowTokens, kvCacheDtype: resolveKvCacheDtype(model), cacheSlots: cfg.sampling.prefix_caching ? prefixCacheSlots(PREFIX_CACHE_TOKENS, rowTokens) : 0 };
    rows = cfg.micro_batch_rows || Math.max(1, Math.floor(cfg.max_tensor_elements / (scored * width)));
    rows = Math.min(rows, episodes);
  } else {
    const examples = opts.sftRows ?? [];
    prefixRows = examples.map((e) => e.ids);
    rowTokens = prefixRows.reduce((m, ids) => Math.max(m, ids.length), 1);
    // a micro-batch's logits span from its rows' earliest scored position to its longest row's end (batching.ts)
    scored = examples.length ? Math.max(1, rowTokens - 1 - examples.reduce((m, e) => Math.min(m, firstScored(e)), rowTokens)) : rowTokens;
    rows = Math.min(cfg.batch_size, cfg.micro_batch_rows || Math.max(1, Math.floor(cfg.max_tensor_elements / (scored * width))));
  }
  // no activation may pass max_tensor_elements either (WebGPU binds at most 2 GiB): the MLP's [tokens,
  // intermediate] tensors are the widest, so a micro-batch runs its rows in groups under that (the trainer
  // does it; a 7B model's would reach 3 GB at 64 rows x 640 tokens in one piece)
  const groupTokens = Math.max(rowTokens, Math.floor(cfg.max_tensor_elements / widestActivation(c)));
  const info = model.loadInfo;
  const weightBytes = info?.weightBytes ?? model.tensors().reduce((s, t) => s + t.size * 4, 0);
  const input: PlanInput = {
    config: c, weightBytes, packed: (info?.packedBytes ?? 0) > 0, trainable, fullWeights: cfg.adapter === null,
    microBatchRows: rows, rowTokens, groupTokens, scoredTokens: scored, sampler, reference: cfg.mode === "grpo" && cfg.beta > 0, gradientCheckpointing: cfg.gradient_checkpointing,
    backend: model.backend, sharedPrefix: rows > 1 ? sharedPrefixOf(prefixRows) : 0, logitChunkTokens: lm.logitChunk(),
  };
  // the device's memory matters on a GPU, and wasm's one heap is capped at 4 GiB; the cpu backend uses the
  // host's memory, which the plan does not check
  const limit = model.backend === "webgpu" ? deviceMemoryBytes() : model.backend === "wasm" ? WASM_HEAP_BYTES : null;
  // micro_batch_rows 0: the most rows that fit (when the device's memory is known)
  if (!cfg.micro_batch_rows && limit !== null) Object.assign(input, rowsThatFit(input, limit));
  return { plan: planMemory(input, limit), input, samplerLength: rowTokens, microBatchRows: input.microBatchRows };
}
