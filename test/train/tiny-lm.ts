/** A tiny causal LM for trainer tests: logits_t = E[x_t] W + P[t] U + b (a bigram model with a position term). */
import * as tf from "@tensorflow/tfjs-core";
import "@tensorflow/tfjs-backend-cpu";
import { ensureGradients } from "../../lib/backend/gradients.js";
import type { NamedVariable, TrainableLM } from "../../lib/train/lm.js";
import { SeededRandom } from "../../lib/core/random.js";

ensureGradients();

let counter = 0;

export async function useCpu(): Promise<void> {
  await tf.setBackend("cpu");
  await tf.ready();
}

export class TinyLM implements TrainableLM {
  readonly vocabSize: number;
  readonly hasReference = true;
  readonly params: NamedVariable[];
  private readonly ref: tf.Tensor[];
  constructor(opts: { vocab: number; dim: number; maxLen: number; seed: number; scale?: number }) {
    this.vocabSize = opts.vocab;
    const rng = new SeededRandom(opts.seed);
    const scale = opts.scale ?? 0.5;
    const init = (shape: number[]) => {
      const n = shape.reduce((a, b) => a * b, 1);
      return tf.tensor(Array.from({ length: n }, () => rng.normal() * scale), shape);
    };
    const id = counter++;
    const mk = (name: string, shape: number[]) => ({ name, variable: tf.variable(init(shape), true, `tiny${id}.${name}`) });
    this.params = [mk("E", [opts.vocab, opts.dim]), mk("W", [opts.dim, opts.vocab]), mk("P", [opts.maxLen, opts.dim]), mk("U", [opts.dim, opts.vocab]), mk("b", [opts.vocab])];
    this.ref = this.params.map((p) => tf.keep(p.variable.clone()));
  }
  trainableParams(): NamedVariable[] {
    return this.params;
  }
  logits(ids: number[][], opts: { reference?: boolean; from?: number } = {}): tf.Tensor3D {
    const [E, W, P, U, b] = opts.reference ? this.ref : this.params.map((p) => p.variable);
    const bsz = ids.length;
    const t = ids[0].length;
    const emb = tf.reshape(tf.gather(E, tf.tensor1d(ids.flat(), "int32")), [bsz * t, -1]);
    const tok = tf.reshape(tf.matMul(emb, W), [bsz, t, this.vocabSize]);
    const pos = tf.matMul(tf.slice(P, [0, 0], [t, -1]), U);
    const all = tf.add(tf.add(tok, tf.expandDims(pos, 0)), b) as tf.Tensor3D;
    const from = opts.from ?? 0;
    return from ? (tf.slice(all, [0, from, 0], [bsz, t - from, this.vocabSize]) as tf.Tensor3D) : all;
  }
  dispose(): void {
    for (const p of this.params) p.variable.dispose();
    for (const r of this.ref) r.dispose();
  }
}

/** Central finite difference of `f` with respect to element `index` of `v`. */
export function finiteDiff(f: () => number, v: tf.Variable, index: number, h: number): number {
  const base = v.dataSync().slice() as Float32Array;
  const at = (delta: number) => {
    const x = base.slice();
    x[index] += delta;
    v.assign(tf.tensor(x, v.shape));
    return f();
  };
  const up = at(h);
  const down = at(-h);
  v.assign(tf.tensor(base, v.shape));
  return (up - down) / (2 * h);
}

/** Asserts |a - b| <= atol + rtol |b| element-wise with a readable message. */
export function assertClose(actual: number, expected: number, atol: number, rtol: number, what: string): void {
  if (!(Math.abs(actual - expected) <= atol + rtol * Math.abs(expected))) {
    throw new Error(`${what}: got ${actual}, expected ${expected} (atol ${atol}, rtol ${rtol})`);
  }
}
