/**
 * The optimizer update alone (global gradient norm, clip factor, AdamW over every weight of a random model),
 * run through tfjs ops and, on WebGPU, through the fused kernels of lib/backend/webgpu/train/optimizer.ts. Prints the
 * time and launches of each path (GPU dispatches on WebGPU, tf.profile kernels elsewhere) and the largest
 * difference between their results, and exits 1 when the paths disagree (so a run on the GPU host also
 * checks the kernels; the first fused update also takes the copy-then-overwrite path for weights whose
 * buffer the start values share).
 *   npm run bench:optimizer                            tiny model, CPU backend (ops path only)
 *   npm run bench:optimizer -- --qwen05b               Qwen2-0.5B shapes (494M weights), best backend
 * Flags: --backend NAME  --steps N (timed updates after one warm-up, default 3)  --json
 */
import { useBackend } from "../lib/backend/select.js";
import { qwen2HalfBConfig, randomModel, tinyConfig } from "../lib/model/random-model.js";
import { tf } from "../lib/backend/tf.js";
import type { NamedVariable } from "../lib/train/lm.js";
import { ModelTrainable } from "../lib/train/trainable-model.js";
import { AdamW, clipFactor, globalGradNorm } from "../lib/train/optimizer.js";
import { fusedOptimizerActive, useFusedOptimizer } from "../lib/backend/webgpu/train/optimizer.js";
import { flag, intFlag } from "./args.js";
import { countDispatches } from "./dispatches.js";

interface PathResult {
  path: "fused" | "ops";
  ms_per_update: number;
  /** GPU dispatches of one update (WebGPU), else tf.profile's kernel count. */
  launches: number;
  norm: number;
  weights: Map<string, tf.Tensor>;
}

/** Runs warm-up + `steps` updates from the same start and gradients; keeps the final weights. */
async function runPath(path: "fused" | "ops", params: NamedVariable[], start: Map<string, tf.Tensor>, grads: Map<string, tf.Tensor>[], steps: number): Promise<PathResult> {
  useFusedOptimizer(path === "fused");
  for (const p of params) p.variable.assign(start.get(p.name)!);
  const opt = new AdamW(params, { weightDecay: 0.01 });
  const sync = async () => void (await params[0].variable.data());
  const update = async (g: Map<string, tf.Tensor>) => {
    const norm = await globalGradNorm(g);
    opt.step(g, 1e-3, clipFactor(norm, 1));
    return norm;
  };
  await update(grads[0]);
  await sync();
  const t0 = performance.now();
  let norm = 0;
  for (let i = 1; i <= steps; i++) norm = await update(grads[i % grads.length]);
  await sync();
  const ms = (performance.now() - t0) / steps;
  const { result: info, dispatches } = await countDispatches(() =>
    tf.profile(async () => {
      await update(grads[0]);
    }),
  );
  const weights = new Map(params.map((p) => [p.name, tf.keep(p.variable.clone())]));
  opt.dispose();
  return { path, ms_per_update: ms, launches: dispatches ?? info.kernels.length, norm, weights };
}

/** Largest absolute difference between two sets of weights, and the largest relative to the weight's size. */
async function maxDifference(a: Map<string, tf.Tensor>, b: Map<string, tf.Tensor>): Promise<{ abs: number; rel: number }> {
  let abs = 0;
  let rel = 0;
  for (const [name, x] of a) {
    const [d, s] = tf.tidy(() => [tf.max(tf.abs(tf.sub(x, b.get(name)!))), tf.max(tf.abs(x))]);
    const [dv, sv] = [(await d.data())[0], (await s.data())[0]];
    d.dispose();
    s.dispose();
    abs = Math.max(abs, dv);
    rel = Math.max(rel, dv / Math.max(sv, 1e-12));
  }
  return { abs, rel };
}

async function main(): Promise<void> {
  const big = process.argv.includes("--qwen05b");
  const choice = await useBackend(flag("--backend") ?? (big ? "auto" : "cpu"));
  const steps = intFlag("--steps", 3);
  const model = randomModel(big ? qwen2HalfBConfig() : tinyConfig(), { seed: 1 });
  const params = new ModelTrainable(model, null).trainableParams();
  const size = params.reduce((s, p) => s + p.variable.size, 0);
  const start = new Map(params.map((p) => [p.name, tf.keep(p.variable.clone())]));
  let seed = 100;
  const grads = [0, 1].map(() => new Map(params.map((p) => [p.name, tf.keep(tf.randomNormal(p.variable.shape, 0, 0.01, "float32", seed++))])));
  process.stderr.write(`backend ${choice.backend}; ${params.length} weight tensors, ${size} weights; ${steps} timed updates after 1 warm-up\n`);

  const canFuse = fusedOptimizerActive();
  const results = [await runPath("ops", params, start, grads, steps)];
  if (canFuse) results.push(await runPath("fused", params, start, grads, steps));
  useFusedOptimizer(true);
  const diff = results.length === 2 ? await maxDifference(results[0].weights, results[1].weights) : null;
  const normGap = results.length === 2 ? Math.abs(results[0].norm - results[1].norm) / results[0].norm : null;
  // fp32 with a different summation order and folded constants: agreement to ~1e-6 of each weight's scale
  const agree = diff === null || (diff.rel < 1e-5 && normGap! < 1e-4);

  const rows = results.map(({ weights: _, ...r }) => ({ ...r, ms_per_update: Number(r.ms_per_update.toFixed(1)) }));
  const summary = { backend: choice.backend, weights: size, tensors: params.length, rows, max_abs_diff: diff?.abs ?? null, max_rel_diff: diff?.rel ?? null, norm_rel_diff: normGap, agree };
  if (process.argv.includes("--json")) process.stdout.write(JSON.stringify(summary) + "\n");
  else {
    process.stdout.write(`backend ${choice.backend}; ${params.length} weight tensors, ${size} weights\n`);
    process.stdout.write("path    ms/update  launches  grad norm\n");
    for (const r of rows) process.stdout.write(`${r.path.padEnd(6)}  ${String(r.ms_per_update).padStart(9)}  ${String(r.launches).padStart(8)}  ${r.norm.toPrecision(6)}\n`);
    if (diff) process.stdout.write(`fused vs ops: max |diff| ${diff.abs.toExponential(2)}, max |diff| / max |w| ${diff.rel.toExponential(2)}, norm gap ${normGap!.toExponential(2)}: ${agree ? "agree" : "DISAGREE"}\n`);
    else process.stdout.write(`fused kernels: not on ${choice.backend} (webgpu only)\n`);
  }
  for (const r of results) for (const t of r.weights.values()) t.dispose();
  model.dispose();
  if (!agree) process.exit(1);
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
