/**
 * What a GRPO update really takes of the wasm backend's heap, beside what the memory plan says: the kit's
 * model (data/models/shop-sql-4m) with an r8 LoRA on q, k, v and o, one micro-batch of N rows of P prompt
 * and R reply tokens, one real update step (forward, backward, AdamW) in a fresh process per point, since
 * the heap never shrinks. Columns: the plan's update phase (lib/train/memory-plan.ts, as `t2s train --plan`
 * prints it for wasm), the peak of live tensor bytes (tf.profile), and the heap's size afterwards (the
 * WebAssembly memory, which only grows, capped at 4 GiB).
 *   npm run bench:wasm-memory                      the default grid
 *   npm run bench:wasm-memory -- --points 4x448x256,8x448x256   rows x prompt x reply
 * Flags: --points LIST  --model DIR (default data/models/shop-sql-4m)  --recompute (gradient checkpointing on)  --json
 */
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { flag, printTable } from "./args.js";

const ROOT = process.cwd();
const MODEL = resolve(ROOT, flag("--model") ?? "data/models/shop-sql-4m");
const RECOMPUTE = process.argv.includes("--recompute");
const DEFAULT_POINTS = ["2x192x64", "8x192x64", "4x448x64", "2x448x256", "2x960x64"];

interface Point {
  rows: number;
  prompt: number;
  reply: number;
}

interface Measured extends Point {
  planned_update: number;
  planned_peak: number;
  /** Peak bytes of tensors in the heap during the step. */
  live_peak: number | null;
  heap: number | null;
  error: string | null;
}

function parsePoint(s: string): Point {
  const [rows, prompt, reply] = s.split("x").map(Number);
  if (![rows, prompt, reply].every((n) => Number.isInteger(n) && n > 0)) throw new Error(`--points: '${s}' is not rows x prompt x reply`);
  return { rows, prompt, reply };
}

/** One point, in this process: plan it, run one update step, report the heap. */
async function runPoint(p: Point): Promise<Measured> {
  const { useBackend } = await import("../lib/backend/select.js");
  const { tf } = await import("../lib/backend/tf.js");
  const { loadModel } = await import("../lib/model/load.js");
  const { createAdapter } = await import("../lib/model/lora.js");
  const { GrpoTrainer } = await import("../lib/train/grpo.js");
  const { ModelTrainable } = await import("../lib/train/trainable-model.js");
  const { planMemory, WASM_HEAP_BYTES, wasmHeapBytes } = await import("../lib/train/memory-plan.js");
  const { SeededRandom } = await import("../lib/core/random.js");
  await useBackend("wasm");
  const tensors = trackTensorAllocations(tf.backend() as unknown as { wasm: WasmAllocator });
  const model = await loadModel(MODEL);
  createAdapter(model, { name: "train", r: 8, alpha: 16, targetModules: ["q_proj", "k_proj", "v_proj", "o_proj"], seed: 1 });
  const lm = new ModelTrainable(model, "train", { recompute: RECOMPUTE });
  const c = model.config;
  const trainable = lm.trainableParams().reduce((s, v) => s + v.variable.size, 0);
  const plan = planMemory({
    config: c, weightBytes: model.loadInfo?.weightBytes ?? 0, packed: false, trainable, fullWeights: false, microBatchRows: p.rows,
    rowTokens: p.prompt + p.reply, scoredTokens: p.reply, sampler: null, reference: false, gradientCheckpointing: RECOMPUTE ? "on" : "off", backend: "wasm", sharedPrefix: 0,
  }, WASM_HEAP_BYTES);
  const rng = new SeededRandom(7);
  const ids = (n: number) => Array.from({ length: n }, () => 3 + rng.below(c.vocabSize - 3));
  // every row its own prompt (no shared prefix to run once: the most a micro-batch of these lengths takes),
  // rewards 0/1 alternating so every row has an advantage
  const group = Array.from({ length: p.rows }, (_, i) => {
    const prompt = ids(p.prompt);
    return { rows: [{ ids: [...prompt, ...ids(p.reply)], mask: [...prompt.map(() => 0), ...Array(p.reply).fill(1)] }], truncated: false, info: i % 2 };
  });
  const trainer = new GrpoTrainer(lm, [0], async () => [group], async (_q, r) => ({ reward: r.info as number, correct: r.info === 1 }), {
    steps: 1, promptsPerStep: 1, groupSize: p.rows, lossType: "dapo", beta: 0, mu: 1, lr: 1e-3, seed: 1,
    maxMicroBatchRows: p.rows, temperature: 1, maxCompletionLength: p.reply, onWarning: () => undefined,
  });
  tensors.peak = tensors.live;
  await trainer.step();
  return { ...p, planned_update: plan.update, planned_peak: plan.peak, live_peak: tensors.peak, heap: wasmHeapBytes(), error: null };
}

interface WasmAllocator {
  _malloc(bytes: number): number;
  _free(ptr: number): void;
}

/**
 * Counts the bytes tensors hold in the heap (every tensor's memory is one _malloc from the backend's JS
 * side, released by one _free), and their peak: the heap minus this is the allocator's own (XNNPACK's
 * scratch, fragmentation, the heap's growth steps).
 */
function trackTensorAllocations(backend: { wasm: WasmAllocator }): { live: number; peak: number } {
  const state = { live: 0, peak: 0 };
  const sizes = new Map<number, number>();
  const m = backend.wasm;
  // emscripten binds its exports on first call, replacing the property: bind them before wrapping
  m._free(m._malloc(8));
  const malloc = m._malloc.bind(m);
  const free = m._free.bind(m);
  m._malloc = (bytes: number) => {
    const ptr = malloc(bytes);
    sizes.set(ptr >>> 0, bytes);
    state.live += bytes;
    if (state.live > state.peak) state.peak = state.live;
    return ptr;
  };
  m._free = (ptr: number) => {
    state.live -= sizes.get(ptr >>> 0) ?? 0;
    sizes.delete(ptr >>> 0);
    free(ptr);
  };
  return state;
}

const gb = (b: number | null) => (b === null ? "-" : (b / 1e9).toFixed(2));

async function main(): Promise<void> {
  const only = flag("--point");
  if (only) {
    process.stdout.write(JSON.stringify(await runPoint(parsePoint(only))) + "\n");
    return;
  }
  const points = (flag("--points")?.split(",") ?? DEFAULT_POINTS).map(parsePoint);
  const results: Measured[] = [];
  for (const p of points) {
    const spec = `${p.rows}x${p.prompt}x${p.reply}`;
    process.stderr.write(`point ${spec} ...\n`);
    const child = spawnSync(process.execPath, ["--import", "tsx", "bench/wasm-memory.ts", "--point", spec, "--model", MODEL, ...(RECOMPUTE ? ["--recompute"] : [])], { cwd: ROOT, encoding: "utf8", maxBuffer: 1 << 26 });
    const line = child.stdout.trim().split("\n").pop() ?? "";
    try {
      results.push(JSON.parse(line) as Measured);
    } catch {
      const why = (child.stderr.match(/(Aborted\([^)]*\)|RangeError[^\n]*|out of memory[^\n]*|OOM[^\n]*)/i)?.[0] ?? `exit ${child.status}`).slice(0, 60);
      results.push({ ...p, planned_update: 0, planned_peak: 0, live_peak: null, heap: null, error: why });
    }
  }
  if (process.argv.includes("--json")) process.stdout.write(JSON.stringify(results) + "\n");
  else {
    const ratio = (a: number | null, b: number) => (a && b ? (a / b).toFixed(2) : "-");
    printTable(["rows", "prompt", "reply", "plan tensors GB", "tensors GB", "tensors / plan", "plan peak GB", "heap GB", "heap / plan peak", "error"], results.map((r) => [
      String(r.rows), String(r.prompt), String(r.reply), gb(r.planned_update), gb(r.live_peak), ratio(r.live_peak, r.planned_update),
      gb(r.planned_peak), gb(r.heap), ratio(r.heap, r.planned_peak), r.error ?? "",
    ]));
  }
}

main().catch((e) => {
  process.stderr.write(`error [bench]: ${(e as Error).message}\n`);
  process.exit(1);
});
