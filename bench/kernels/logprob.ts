/**
 * The fused target log-prob kernels (lib/backend/webgpu/train/logprob-kernels.ts) against the ops path of
 * targetLogprobs: log-probs and entropies, the gradient w.r.t. the logits of a weighted sum of the
 * log-probs (as a policy loss takes it), at temperature 0.7 with the entropy, and the time and GPU
 * dispatches of one forward + backward of each path.
 * Shapes: small ones for a software adapter, or (big) the scored positions of a Qwen2-0.5B step at
 * B4 x T512 (logits [4, 256, 151936]) and of the kit's default model ([64, 60, 4096]).
 */
import { tf } from "../../lib/backend/tf.js";
import { ensureGradients } from "../../lib/backend/gradients.js";
import { useFusedKernels } from "../../lib/backend/webgpu/train/fused.js";
import { targetLogprobs } from "../../lib/train/logprobs.js";
import { countDispatches } from "../dispatches.js";
import { bothPaths, relativeError, timePath, type KernelCheck } from "./check.js";

const TEMPERATURE = 0.7;

/** log p, entropy and d(Σ w log p)/d logits: one forward and one backward through targetLogprobs. */
function forwardBackward(x: tf.Tensor3D, targets: tf.Tensor2D, w: tf.Tensor2D): tf.Tensor[] {
  let logp: tf.Tensor | undefined;
  let entropy: tf.Tensor | undefined;
  const g = tf.grad((z: tf.Tensor) => {
    const r = targetLogprobs(z as tf.Tensor3D, targets, TEMPERATURE, true);
    logp = tf.keep(r.logp);
    entropy = r.entropy;
    return tf.sum(tf.mul(r.logp, w));
  })(x);
  return [logp!, entropy!, g];
}

async function check(shape: [number, number, number], seed: number): Promise<KernelCheck> {
  const [b, t, v] = shape;
  const x = tf.randomNormal(shape, 0, 2, "float32", seed) as tf.Tensor3D;
  const targets = tf.randomUniform([b, t], 0, v, "int32", seed + 1) as tf.Tensor2D;
  const w = tf.randomUniform([b, t], 0.5, 1.5, "float32", seed + 2) as tf.Tensor2D;
  const f = () => forwardBackward(x, targets, w);
  const { fused, ops } = bothPaths(f);
  const value_err = Math.max(await relativeError(fused[0], ops[0]), await relativeError(fused[1], ops[1]));
  const grad_err = await relativeError(fused[2], ops[2]);
  tf.dispose([...fused, ...ops]);
  // GPU dispatches of one forward + backward, each path alone
  const count = async (on: boolean) => {
    useFusedKernels(on);
    try {
      const { dispatches } = await countDispatches(async () => {
        const out = f();
        await out[0].data(); // log p [B, T]: small, and no extra dispatch
        tf.dispose(out);
      });
      return dispatches;
    } finally {
      useFusedKernels(true);
    }
  };
  const [dFused, dOps] = [await count(true), await count(false)];
  const reps = v * b * t > 1e8 ? 3 : 5;
  const fused_ms = await timePath(true, f, reps);
  const ops_ms = await timePath(false, f, reps);
  tf.dispose([x, targets, w]);
  return { kernel: "logprob+entropy fwd+bwd", shape: shape.join("x"), value_err, grad_err, fused_ms, ops_ms, note: `dispatches ${dFused} vs ${dOps} (loss included)` };
}

export async function checks(big: boolean): Promise<KernelCheck[]> {
  ensureGradients();
  const shapes: Array<[number, number, number]> = big ? [[4, 256, 151936], [64, 60, 4096]] : [[2, 16, 1000], [3, 7, 4099], [1, 4, 151936]];
  const out: KernelCheck[] = [];
  for (let i = 0; i < shapes.length; i++) out.push(await check(shapes[i], 100 + i));
  return out;
}
