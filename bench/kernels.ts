/**
 * The kit's fused WebGPU training kernels against the tfjs ops path, on the GPU: for each kernel the
 * largest difference of the values and of the gradients (relative to the ops path's largest magnitude),
 * and the time of each path. Exits 1 when a check is off by more than its tolerance, so a run on the GPU
 * host also checks the kernels.
 *   npm run bench:kernels                       WebGPU (a software adapter is accepted: small shapes)
 *   npm run bench:kernels -- --qwen05b          the shapes of a Qwen2-0.5B step at B4 x T512
 * Flags: --only a,b (kernel groups)  --json
 */
import { useBackend } from "../lib/backend/select.js";
import { tf } from "../lib/backend/tf.js";
import { flag, printTable } from "./args.js";
import type { KernelCheck } from "./kernels/check.js";

/** Relative error above which a check fails (fp32 kernels that sum in another order stay far below). */
const TOLERANCE = 1e-3;

/** Kernel groups: each module's checks at small (software adapter) or full (--qwen05b) shapes. */
const GROUPS: Record<string, () => Promise<{ checks(big: boolean): Promise<KernelCheck[]> }>> = {
  matmul: () => import("./kernels/matmul.js"),
  layers: () => import("./kernels/layers.js"),
  logprob: () => import("./kernels/logprob.js"),
  attention: () => import("./kernels/attention.js"),
};

async function main(): Promise<void> {
  const choice = await useBackend(flag("--backend") ?? "webgpu");
  if (tf.getBackend() !== "webgpu") throw new Error(`bench:kernels needs the webgpu backend (got ${choice.backend}: ${JSON.stringify(choice.skipped)})`);
  const big = process.argv.includes("--qwen05b");
  const only = flag("--only")?.split(",");
  const rows: KernelCheck[] = [];
  for (const [name, load] of Object.entries(GROUPS)) {
    if (only && !only.includes(name)) continue;
    for (const c of await (await load()).checks(big)) {
      rows.push(c);
      process.stderr.write(`check ${JSON.stringify(c)}\n`);
    }
  }
  const bad = rows.filter((r) => !(r.value_err <= TOLERANCE) || (!Number.isNaN(r.grad_err) && !(r.grad_err <= TOLERANCE)));
  if (process.argv.includes("--json")) process.stdout.write(JSON.stringify({ rows, tolerance: TOLERANCE, failed: bad.length }) + "\n");
  else {
    const e = (x: number) => (Number.isNaN(x) ? "-" : x.toExponential(1));
    printTable(
      ["kernel", "shape", "value err", "grad err", "fused ms", "ops ms", "speed-up", "note"],
      rows.map((r) => [r.kernel, r.shape, e(r.value_err), e(r.grad_err), r.fused_ms.toFixed(2), r.ops_ms.toFixed(2), `${(r.ops_ms / r.fused_ms).toFixed(2)}x`, r.note ?? ""]),
    );
  }
  if (bad.length) {
    process.stderr.write(`error [kernel_mismatch]: ${bad.map((r) => `${r.kernel} ${r.shape}`).join(", ")} differ from the ops path by more than ${TOLERANCE}\n`);
    process.exit(1);
  }
}

main().catch((e) => {
  process.stderr.write(`error [bench]: ${(e as Error).message}\n`);
  process.exit(1);
});
