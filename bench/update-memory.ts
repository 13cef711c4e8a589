/**
 * What the learner's update of one micro-batch holds, beside what the memory plan counts for it: random
 * weights of a model shape (lib/model/shapes.ts, 16-bit with --weights-dtype bf16), an r16 LoRA on the
 * seven projections, ROWS rows sharing a PREFIX-token prompt with REPLY tokens of their own scored, the
 * forward and backward of their log-probs as GRPO runs them (layers recomputed, logits in chunks). Columns:
 * the plan's update lines (lib/train/memory-plan.ts: everything the update adds to the weights, the
 * optimizer state left out), the peak of live tensor bytes during the step (tf.profile) and, on WebGPU,
 * the peak of the buffer pool's allocated bytes (tensors, rounded to size classes, and freed buffers the
 * pool keeps), each less what was alive before.
 *   npx tsx bench/update-memory.ts --backend webgpu --tiny          small shapes (lavapipe: minutes)
 *   bash run.sh bench-update-memory.mjs --shape qwen2.5-7b --weights-dtype bf16 --rows 32,64,128   (GPU host)
 * Flags: --shape NAME | --tiny  --vocab N (4096)  --rows LIST (16,32)  --prefix N (382)  --reply N (128)
 *        --own N (own prompt tokens before the reply, 2)  --chunk N (logit_chunk_tokens, 1024)
 *        --keep (gradient checkpointing off)  --weights-dtype fp32|bf16  --backend NAME  --json
 */
import { flag, intFlag, printTable } from "./args.js";

interface Row {
  rows: number;
  plan_update: number;
  live_peak: number;
  /** Peak bytes of buffers in use (tensors, rounded up to the pool's size classes). */
  used_peak: number | null;
  /** Peak bytes the pool held (in use and free), less what it held before the step's warm-up. */
  pool_peak: number | null;
  lines: Record<string, number>;
}

interface PoolLike {
  numBytesAllocated: number;
  numBytesUsed: number;
  acquireBuffer(...args: unknown[]): unknown;
}

async function main(): Promise<void> {
  const { useBackend } = await import("../lib/backend/select.js");
  const { tf } = await import("../lib/backend/tf.js");
  const { ensureGradients } = await import("../lib/backend/gradients.js");
  const { randomModel, tinyConfig } = await import("../lib/model/random-model.js");
  const { shapeConfig } = await import("../lib/model/shapes.js");
  const { createAdapter } = await import("../lib/model/lora.js");
  const { ModelTrainable } = await import("../lib/train/trainable-model.js");
  const { sequenceLogprobs } = await import("../lib/train/logprobs.js");
  const { planMemory, widestActivation } = await import("../lib/train/memory-plan.js");
  const { MAX_TENSOR_ELEMENTS } = await import("../lib/core/defaults.js");
  const { SeededRandom } = await import("../lib/core/random.js");
  const backend: string = (await useBackend(flag("--backend") ?? process.env.T2S_BACKEND)).backend;
  ensureGradients();
  const vocab = intFlag("--vocab", 4096);
  const shape = flag("--shape");
  const config = shape ? shapeConfig(shape, vocab) : tinyConfig({ vocabSize: vocab, hiddenSize: 256, intermediateSize: 704, numLayers: 4, numHeads: 4, numKvHeads: 2, headDim: 64 });
  const bf16 = flag("--weights-dtype") === "bf16";
  const recompute = !process.argv.includes("--keep");
  const prefix = intFlag("--prefix", shape ? 382 : 96);
  const own = intFlag("--own", 2);
  const reply = intFlag("--reply", shape ? 128 : 32);
  const chunk = intFlag("--chunk", 1024);
  const rowsList = (flag("--rows") ?? "16,32").split(",").map(Number);
  const model = randomModel(config, { seed: 1, weightsDtype: bf16 ? "bf16" : "fp32", copyLayers: !!shape });
  createAdapter(model, { name: "train", r: 16, alpha: 32, targetModules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], seed: 1 });
  const lm = new ModelTrainable(model, "train", { recompute, logitChunkTokens: chunk });
  const vars = lm.trainableParams().map((p) => p.variable);
  const trainable = vars.reduce((s, v) => s + v.size, 0);
  const pool = backend === "webgpu" ? ((tf.backend() as unknown as { bufferManager?: PoolLike }).bufferManager ?? null) : null;
  const poolState = { used: 0, allocated: 0 };
  if (pool) {
    const acquire = pool.acquireBuffer.bind(pool);
    pool.acquireBuffer = (...args: unknown[]) => {
      const b = acquire(...args);
      poolState.used = Math.max(poolState.used, pool.numBytesUsed);
      poolState.allocated = Math.max(poolState.allocated, pool.numBytesAllocated);
      return b;
    };
  }
  const rng = new SeededRandom(7);
  const ids = (n: number) => Array.from({ length: n }, () => 3 + rng.below(config.vocabSize - 3));
  const shared = ids(prefix);
  const results: Row[] = [];
  for (const rows of rowsList) {
    const batch = Array.from({ length: rows }, () => [...shared, ...ids(own + reply)]);
    const from = prefix + own - 1;
    const T = prefix + own + reply - 1;
    const plan = planMemory({
      config, weightBytes: 0, packed: bf16, trainable, fullWeights: false, microBatchRows: rows, rowTokens: T, scoredTokens: reply, sampler: null, reference: false,
      gradientCheckpointing: recompute ? "on" : "off", backend, sharedPrefix: from, logitChunkTokens: lm.logitChunk(), groupTokens: Math.max(T, Math.floor(MAX_TENSOR_ELEMENTS / widestActivation(config))),
    }, null);
    const updateLines = plan.lines.filter((l) => l.what.startsWith("update: "));
    const weights = tf.tensor2d(Array.from({ length: rows * reply }, () => rng.normal()), [rows, reply]);
    // one warm-up, so compiled programs are not what the step counts; the pool's peak spans both runs
    const poolBefore = pool?.numBytesAllocated ?? 0;
    poolState.allocated = poolBefore;
    for (const measure of [false, true]) {
      const before = tf.memory().numBytes;
      const usedBefore = pool?.numBytesUsed ?? 0;
      poolState.used = usedBefore;
      const profile = await tf.profile(async () => {
        const { value, grads } = tf.variableGrads(() => tf.sum(tf.mul(sequenceLogprobs(lm, batch, { from }).logp, weights)) as ReturnType<typeof tf.scalar>, vars);
        await value.data();
        tf.dispose([value, ...Object.values(grads)]);
      });
      if (measure) {
        results.push({
          rows, plan_update: updateLines.reduce((s, l) => s + l.bytes, 0), live_peak: profile.peakBytes - before,
          used_peak: pool ? poolState.used - usedBefore : null, pool_peak: pool ? poolState.allocated - poolBefore : null,
          lines: Object.fromEntries(updateLines.map((l) => [l.what.slice(8), l.bytes])),
        });
      }
    }
    weights.dispose();
  }
  if (process.argv.includes("--json")) {
    process.stdout.write(JSON.stringify({ shape: shape ?? "tiny", backend, recompute, chunk, prefix, reply, results }) + "\n");
    return;
  }
  const gb = (b: number | null) => (b === null ? "-" : (b / 1e9).toFixed(3));
  process.stdout.write(`${shape ?? "tiny"} (${config.numLayers} layers, D ${config.hiddenSize}, vocab ${config.vocabSize}) on ${backend}, ${bf16 ? "16-bit" : "float32"} base, layers ${recompute ? "recomputed" : "kept"}, logit chunk ${lm.logitChunk()}, prefix ${prefix} + ${own} + ${reply} scored\n`);
  const ratio = (a: number | null, b: number) => (a === null ? "-" : (a / b).toFixed(2));
  printTable(["rows", "plan update GB", "live tensors GB", "live / plan", "buffers used GB", "used / plan", "pool GB", "pool / plan", "plan lines"], results.map((r) => [
    String(r.rows), gb(r.plan_update), gb(r.live_peak), ratio(r.live_peak, r.plan_update), gb(r.used_peak), ratio(r.used_peak, r.plan_update), gb(r.pool_peak), ratio(r.pool_peak, r.plan_update),
    Object.entries(r.lines).map(([k, v]) => `${k} ${gb(v)}`).join("; "),
  ]));
}

main().catch((e) => {
  process.stderr.write(`error [bench]: ${(e as Error).message}\n`);
  process.exit(1);
});
