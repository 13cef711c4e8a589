/**
 * AdamW with decoupled weight decay (PyTorch's update order), global-norm gradient clipping and a
 * gradient accumulator for micro-batches. State is plain named tensors so checkpoints can store it.
 * On WebGPU the update and the norm run as fused kernels (lib/backend/webgpu/train/optimizer.ts); elsewhere as tfjs ops.
 */
import { tf } from "../backend/tf.js";
import type { NamedVariable } from "./lm.js";
import { fusedAdamWInPlace, fusedOptimizerActive, fusedSumOfSquares, ownsBuffer } from "../backend/webgpu/train/optimizer.js";

export interface AdamWOptions {
  beta1?: number;
  beta2?: number;
  eps?: number;
  weightDecay?: number;
}

export interface OptimizerState {
  /** Number of updates applied so far (the bias-correction step). */
  t: number;
  /** First and second moments by parameter name. */
  m: Map<string, tf.Tensor>;
  v: Map<string, tf.Tensor>;
}

export class AdamW {
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly weightDecay: number;
  private t = 0;
  private readonly m = new Map<string, tf.Tensor>();
  private readonly v = new Map<string, tf.Tensor>();

  constructor(private readonly params: NamedVariable[], opts: AdamWOptions = {}) {
    this.beta1 = opts.beta1 ?? 0.9;
    this.beta2 = opts.beta2 ?? 0.999;
    this.eps = opts.eps ?? 1e-8;
    this.weightDecay = opts.weightDecay ?? 0;
    for (const p of params) {
      this.m.set(p.name, tf.keep(tf.zerosLike(p.variable)));
      this.v.set(p.name, tf.keep(tf.zerosLike(p.variable)));
    }
  }

  /**
   * Applies one update with learning rate `lr`; `grads` maps parameter names to gradients (missing = zero).
   * Each gradient is multiplied by `gradScale` first (the clip factor, folded in rather than a pass of its own).
   */
  step(grads: Map<string, tf.Tensor>, lr: number, gradScale = 1): void {
    this.t += 1;
    const c1 = 1 - Math.pow(this.beta1, this.t);
    const c2 = 1 - Math.pow(this.beta2, this.t);
    const fused = fusedOptimizerActive();
    for (const p of this.params) {
      const g = grads.get(p.name);
      if (!g) continue;
      if (fused) {
        const scalars = { beta1: this.beta1, beta2: this.beta2, gradScale, decay: 1 - lr * this.weightDecay, stepSize: lr / c1, c2, eps: this.eps };
        if (!ownsBuffer(p.variable)) tf.tidy(() => p.variable.assign(ownCopy(p.variable)));
        fusedAdamWInPlace(p.variable, ownedEntry(this.m, p.name), ownedEntry(this.v, p.name), g, scalars);
        continue;
      }
      const [m, v] = [this.m.get(p.name)!, this.v.get(p.name)!];
      const [m2, v2] = tf.tidy(() => [
        tf.add(tf.mul(m, this.beta1), tf.mul(g, (1 - this.beta1) * gradScale)),
        tf.add(tf.mul(v, this.beta2), tf.mul(tf.square(g), (1 - this.beta2) * gradScale * gradScale)),
      ]);
      tf.tidy(() => {
        const decayed = this.weightDecay ? tf.mul(p.variable, 1 - lr * this.weightDecay) : p.variable;
        const update = tf.div(tf.div(m2, c1), tf.add(tf.sqrt(tf.div(v2, c2)), this.eps));
        p.variable.assign(tf.sub(decayed, tf.mul(update, lr)));
      });
      tf.keep(m2);
      tf.keep(v2);
      m.dispose();
      v.dispose();
      this.m.set(p.name, m2);
      this.v.set(p.name, v2);
    }
  }

  /** The state (tensors owned by the optimizer; do not dispose). */
  state(): OptimizerState {
    return { t: this.t, m: this.m, v: this.v };
  }

  /** Replaces the state with copies of the given values (a checkpoint's). */
  loadState(s: { t: number; m: Map<string, Float32Array>; v: Map<string, Float32Array> }): void {
    this.t = s.t;
    for (const p of this.params) {
      for (const [store, src] of [[this.m, s.m], [this.v, s.v]] as const) {
        const data = src.get(p.name);
        if (!data) throw new Error(`optimizer state has no entry for ${p.name}`);
        store.get(p.name)!.dispose();
        store.set(p.name, tf.keep(tf.tensor(data, p.variable.shape, "float32")));
      }
    }
  }

  dispose(): void {
    for (const t of [...this.m.values(), ...this.v.values()]) t.dispose();
  }
}

/** A copy of t in a buffer of its own (tf.clone would share t's buffer). */
function ownCopy(t: tf.Tensor): tf.Tensor {
  return tf.add(t, 0);
}

/** The tensor stored under `name`, first replaced by an own copy if its buffer is shared (it is then overwritten in place). */
function ownedEntry(store: Map<string, tf.Tensor>, name: string): tf.Tensor {
  const t = store.get(name)!;
  if (ownsBuffer(t)) return t;
  const copy = tf.keep(ownCopy(t));
  t.dispose();
  store.set(name, copy);
  return copy;
}

/** The global L2 norm of all gradients. */
export async function globalGradNorm(grads: Map<string, tf.Tensor>): Promise<number> {
  if (grads.size === 0) return 0;
  const gs = [...grads.values()];
  // Squared norms are added pairwise rather than by one addN: WebGPU's AddN binds every input as a storage
  // buffer, and a shader may bind only 8 (a 0.5B model has ~190 gradient tensors). On WebGPU one fused
  // kernel writes every tensor's partial sums into one buffer instead.
  const total = tf.tidy(() => tf.sqrt(fusedOptimizerActive() ? tf.sum(fusedSumOfSquares(gs)) : gs.map((g) => tf.sum(tf.square(g))).reduce((a, b) => tf.add(a, b))));
  const norm = (await total.data())[0];
  total.dispose();
  return norm;
}

/** The factor that brings a gradient of norm `norm` down to `maxNorm` (1 when it is within, or maxNorm is 0). */
export function clipFactor(norm: number, maxNorm: number): number {
  return maxNorm > 0 && Number.isFinite(norm) && norm > maxNorm ? maxNorm / (norm + 1e-6) : 1;
}

/** Scales gradients in place so their global L2 norm is at most `maxNorm`; returns the norm before clipping. */
export async function clipGlobalNorm(grads: Map<string, tf.Tensor>, maxNorm: number): Promise<number> {
  const norm = await globalGradNorm(grads);
  const scale = clipFactor(norm, maxNorm);
  if (scale !== 1) {
    for (const [k, g] of grads) {
      grads.set(k, tf.keep(tf.mul(g, scale)));
      g.dispose();
    }
  }
  return norm;
}

/** Sums gradients over the micro-batches of one optimizer step. */
export class GradAccumulator {
  readonly grads = new Map<string, tf.Tensor>();
  /** Adds `g` (by parameter name) and disposes the given tensors. */
  add(g: Map<string, tf.Tensor>): void {
    for (const [k, t] of g) {
      const prev = this.grads.get(k);
      if (prev) {
        this.grads.set(k, tf.keep(tf.add(prev, t)));
        prev.dispose();
        t.dispose();
      } else this.grads.set(k, tf.keep(t));
    }
  }
  dispose(): void {
    for (const t of this.grads.values()) t.dispose();
    this.grads.clear();
  }
}
