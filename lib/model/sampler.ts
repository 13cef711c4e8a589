/**
 * Picking the next token from one row of logits: greedy at temperature 0, otherwise softmax(logits / T)
 * cut to the top-k and then to the smallest set whose mass reaches top-p, drawn with a seeded generator.
 * The reported log-probability is that of the chosen token under softmax(logits / T) before the cuts (the
 * quantity GRPO's ratio uses; greedy reports it at T = 1).
 */
import { mulberry32, type Uniform } from "../core/random.js";

export interface SamplingParams {
  temperature: number;
  topP: number;
  topK: number;
}

/** Returns a generator for sequence `index` of a request seeded with `seed` (independent of batch layout). */
export function sequenceRandom(seed: number, index: number): Uniform {
  let h = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca6b)) >>> 0;
  h ^= h >>> 16;
  return mulberry32(h);
}

/** Returns the chosen token and its log-probability. `logits` is one row of length V. */
export function sampleToken(logits: Float32Array, p: SamplingParams, rand: Uniform): { id: number; logprob: number } {
  const V = logits.length;
  const t = p.temperature > 0 ? p.temperature : 1;
  let max = -Infinity;
  let argmax = 0;
  for (let i = 0; i < V; i++) {
    if (logits[i] > max) {
      max = logits[i];
      argmax = i;
    }
  }
  let z = 0;
  const probs = new Float64Array(V);
  for (let i = 0; i < V; i++) {
    const e = Math.exp((logits[i] - max) / t);
    probs[i] = e;
    z += e;
  }
  const logZ = Math.log(z);
  const logprobOf = (id: number) => (logits[id] - max) / t - logZ;
  if (p.temperature <= 0) return { id: argmax, logprob: logprobOf(argmax) };
  for (let i = 0; i < V; i++) probs[i] /= z;
  let candidates: number[] | null = null;
  if ((p.topK > 0 && p.topK < V) || p.topP < 1) {
    // only tokens that can matter are sorted: with top-k, the k largest; with top-p alone, all with p > 0
    const idx: number[] = [];
    for (let i = 0; i < V; i++) if (probs[i] > 0) idx.push(i);
    idx.sort((a, b) => probs[b] - probs[a] || a - b);
    candidates = p.topK > 0 && p.topK < idx.length ? idx.slice(0, p.topK) : idx;
    if (p.topP < 1) {
      let mass = 0;
      let keep = 0;
      for (const i of candidates) {
        mass += probs[i];
        keep++;
        if (mass >= p.topP) break;
      }
      candidates = candidates.slice(0, Math.max(1, keep));
    }
  }
  const u = rand();
  if (candidates) {
    let total = 0;
    for (const i of candidates) total += probs[i];
    let acc = 0;
    for (const i of candidates) {
      acc += probs[i] / total;
      if (u < acc) return { id: i, logprob: logprobOf(i) };
    }
    const last = candidates[candidates.length - 1];
    return { id: last, logprob: logprobOf(last) };
  }
  let acc = 0;
  for (let i = 0; i < V; i++) {
    acc += probs[i];
    if (u < acc) return { id: i, logprob: logprobOf(i) };
  }
  return { id: argmax, logprob: logprobOf(argmax) };
}

/** Returns a copy of one row of logits with `bias` added (-Infinity bans a token); the row itself without one. */
export function biasedLogits(logits: Float32Array, bias: ReadonlyMap<number, number> | undefined): Float32Array {
  if (!bias || bias.size === 0) return logits;
  const out = new Float32Array(logits);
  for (const [id, b] of bias) if (id >= 0 && id < out.length) out[id] += b;
  return out;
}

/** The `n` most likely tokens under softmax(logits / T) (T = 1 when greedy), most likely first. */
export function topLogprobs(logits: Float32Array, temperature: number, n: number): { id: number; logprob: number }[] {
  if (n <= 0) return [];
  const t = temperature > 0 ? temperature : 1;
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let z = 0;
  for (let i = 0; i < logits.length; i++) z += Math.exp((logits[i] - max) / t);
  const logZ = Math.log(z);
  // a small sorted list of the best so far: n is at most 20, V is thousands
  const best: number[] = [];
  for (let i = 0; i < logits.length; i++) {
    if (best.length === n && logits[i] <= logits[best[n - 1]]) continue;
    let at = best.length;
    while (at > 0 && logits[best[at - 1]] < logits[i]) at--;
    best.splice(at, 0, i);
    if (best.length > n) best.pop();
  }
  return best.map((id) => ({ id, logprob: (logits[id] - max) / t - logZ }));
}

/**
 * A copy of one row of logits with every token outside `allowed` (a bitmask: bit i % 32 of word i >> 5)
 * set to -Infinity; the row itself when there is no mask. Guided decoding's mask, applied before sampling.
 */
export function maskedLogits(logits: Float32Array, allowed: Int32Array | undefined, copied = false): Float32Array {
  if (!allowed) return logits;
  const out = copied ? logits : new Float32Array(logits);
  for (let w = 0; w * 32 < out.length; w++) {
    const bits = allowed[w] ?? 0;
    if (bits === -1) continue;
    const end = Math.min(out.length, w * 32 + 32);
    for (let i = w * 32; i < end; i++) if (((bits >>> (i & 31)) & 1) === 0) out[i] = -Infinity;
  }
  return out;
}

/** log_softmax(logits)[id]: the model's raw log-probability of a token (temperature 1, no bias, no mask). */
export function rawLogprob(logits: Float32Array, id: number): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let z = 0;
  for (let i = 0; i < logits.length; i++) z += Math.exp(logits[i] - max);
  return logits[id] - max - Math.log(z);
}
