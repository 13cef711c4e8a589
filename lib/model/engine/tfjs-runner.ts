/**
 * The step runner for the CPU and wasm backends. Projections, norms and the MLP run as tfjs ops over the
 * step's real tokens only (every row's new tokens flattened, no padding); attention over each sequence's own
 * tokens runs in plain loops over its slot of the in-place cache (lib/model/engine/slot-cache.ts), and
 * attention over a shared prompt prefix runs as one 2-D matmul per kv head for all rows that share it, the
 * prefix's keys and values stored once. Batched matmuls of many tiny matrices are slow on wasm (several
 * times slower than one 2-D matmul), which is why the per-row part leaves tfjs.
 *
 * A row's arithmetic is independent of the other rows of its step: its own attention sums over its own
 * tokens in position order, the shared part is per-row dot products, and the split between the two is set
 * by the request (prefixLength), so a seed gives the same tokens whatever batch the row lands in.
 */
import { tf } from "../../backend/tf.js";
import { gatherRows } from "../packed.js";
import { linear, rmsNorm } from "../decoder.js";
import type { CausalLM } from "../model.js";
import { rotaryTables } from "../rope.js";
import { biasedLogits, maskedLogits, rawLogprob, sampleToken, topLogprobs } from "../sampler.js";
import { SlotCache } from "./slot-cache.js";
import type { DecodeRow, PrefillRow, RowSampling, SampledToken, StepRunner } from "./runner.js";
import type { PrefixCacheCounters } from "./prefix-cache.js";
import { TfjsPrefixes, type SharedEntry } from "./tfjs-prefixes.js";

/** One token of a step: which row it belongs to, its own index in the row's slot and its absolute position. */
interface StepToken {
  row: number;
  own: number;
  position: number;
}

export class TfjsRunner implements StepRunner {
  private readonly cache: SlotCache;
  /** The shared system part each slot attends to (null: none). */
  private readonly prefixOf: (SharedEntry | null)[];
  private readonly prefixes: TfjsPrefixes;

  /** `prefixCacheTokens`: tokens of prompts kept across calls (0: caching off). */
  constructor(private readonly model: CausalLM, readonly slots: number, private readonly adapter: string | null, prefixCacheTokens = 0) {
    const c = model.config;
    this.cache = new SlotCache(slots, c.numLayers, c.numKvHeads, c.headDim);
    this.prefixOf = new Array<SharedEntry | null>(slots).fill(null);
    this.prefixes = new TfjsPrefixes(model, adapter, prefixCacheTokens);
  }

  get prefixCache(): PrefixCacheCounters | undefined {
    return this.prefixes.caching ? this.prefixes.counters : undefined;
  }

  async prefill(rows: PrefillRow[]): Promise<SampledToken[]> {
    this.prefixes.startCall();
    const split: number[] = [];
    const fresh: boolean[] = [];
    for (const r of rows) {
      this.release(r.slot);
      const p = Math.max(0, Math.min(r.prefixLength, r.ids.length - 1));
      const got = p > 0 ? this.prefixes.attach(r.ids.slice(0, p)) : null;
      this.prefixOf[r.slot] = got?.entry ?? null;
      split.push(p);
      fresh.push(got?.fresh ?? false);
    }
    // own tokens already stored (or computed by an earlier row of this call) are copied, not computed
    const plans = this.prefixes.plan(rows, split, fresh);
    const results: SampledToken[] = new Array(rows.length);
    try {
      for (const phase of [1, 2] as const) {
        const which = rows.map((_, i) => i).filter((i) => plans[i].phase === phase);
        if (!which.length) continue;
        this.prefixes.fill(this.cache, rows, split, plans, phase);
        const out = await this.forward(
          which.map((i) => rows[i].slot),
          which.map((i) => rows[i].ids.slice(plans[i].start)),
          which.map((i) => plans[i].start),
          which.map((i) => rows[i].sampling),
        );
        which.forEach((i, k) => (results[i] = out[k]));
      }
    } catch (e) {
      this.prefixes.abandon(plans);
      throw e;
    }
    this.prefixes.store(this.cache, rows, split, plans);
    return results;
  }

  async decode(rows: DecodeRow[]): Promise<SampledToken[]> {
    return this.forward(
      rows.map((r) => r.slot),
      rows.map((r) => [r.id]),
      rows.map((r) => r.position),
      rows.map((r) => r.sampling),
    );
  }

  release(slot: number): void {
    this.cache.reset(slot);
    const entry = this.prefixOf[slot];
    this.prefixOf[slot] = null;
    if (entry) this.prefixes.detach(entry);
  }

  weightsChanged(): void {
    this.prefixes.weightsChanged();
  }

  dispose(): void {
    for (let s = 0; s < this.slots; s++) this.release(s);
    this.prefixes.dispose();
  }

  /**
   * Runs `ids[r]` (new tokens of row r, the first at absolute position `starts[r]`) through the model,
   * appends their keys and values to the rows' slots, and samples one token per row from its last position.
   */
  private async forward(slots: number[], ids: number[][], starts: number[], sampling: RowSampling[]): Promise<SampledToken[]> {
    const m = this.model;
    const c = m.config;
    const H = c.numHeads;
    const KV = c.numKvHeads;
    const hd = c.headDim;
    const tokens: StepToken[] = [];
    const last: number[] = [];
    ids.forEach((row, r) => {
      const slot = slots[r];
      this.cache.reserve(slot, row.length);
      const base = this.cache.length[slot];
      row.forEach((_, t) => tokens.push({ row: r, own: base + t, position: starts[r] + t }));
      last.push(tokens.length - 1);
    });
    const N = tokens.length;
    const flatIds = ids.flat();
    const { cos, sin } = rotaryTables(tokens.map((t) => t.position), m.invFreq);
    const adapter = this.adapter;
    let x: tf.Tensor2D = tf.tidy(() => gatherRows(m.weights.embed, tf.tensor1d(flatIds, "int32")) as tf.Tensor2D);
    try {
      for (let l = 0; l < m.weights.layers.length; l++) {
        const w = m.weights.layers[l];
        const qkv = tf.tidy(() => {
          const h = rmsNorm(x, w.inputNorm, c.rmsNormEps);
          let q = linear(h, w.q, adapter);
          let k = linear(h, w.k, adapter);
          const v = linear(h, w.v, adapter);
          if (w.qNorm && w.kNorm) {
            q = tf.reshape(rmsNorm(tf.reshape(q, [N, H, hd]), w.qNorm, c.rmsNormEps), [N, H * hd]);
            k = tf.reshape(rmsNorm(tf.reshape(k, [N, KV, hd]), w.kNorm, c.rmsNormEps), [N, KV * hd]);
          }
          return tf.concat([q, k, v], 1);
        });
        const data = (await qkv.data()) as Float32Array;
        qkv.dispose();
        const width = (H + 2 * KV) * hd;
        const q = new Float32Array(N * H * hd);
        const k = new Float32Array(N * KV * hd);
        const v = new Float32Array(N * KV * hd);
        for (let n = 0; n < N; n++) {
          q.set(data.subarray(n * width, n * width + H * hd), n * H * hd);
          k.set(data.subarray(n * width + H * hd, n * width + (H + KV) * hd), n * KV * hd);
          v.set(data.subarray(n * width + (H + KV) * hd, (n + 1) * width), n * KV * hd);
        }
        rotateInPlace(q, H, hd, cos, sin);
        rotateInPlace(k, KV, hd, cos, sin);
        const scale = Math.fround(1 / Math.sqrt(hd));
        for (let i = 0; i < q.length; i++) q[i] = Math.fround(q[i] * scale);
        for (let n = 0; n < N; n++) this.cache.write(slots[tokens[n].row], l, tokens[n].own, k, v, n * KV * hd);
        const shared = await this.sharedAttention(slots, tokens, q, l);
        const ctx = this.ownAttention(slots, tokens, q, l, shared);
        const next = tf.tidy(() => {
          const attn = tf.tensor2d(ctx, [N, H * hd]);
          const y = tf.add(x, linear(attn, w.o, adapter));
          const h2 = rmsNorm(y, w.postNorm, c.rmsNormEps);
          const gate = linear(h2, w.gate, adapter);
          const act = tf.mul(tf.mul(gate, tf.sigmoid(gate)), linear(h2, w.up, adapter));
          return tf.add(y, linear(act, w.down, adapter)) as tf.Tensor2D;
        });
        x.dispose();
        x = next;
        // on CPU backends a read-back resolves without a turn of the event loop: yield one per layer, so a
        // server answers /health and takes new requests in the middle of a long prefill
        await new Promise((r) => setImmediate(r));
      }
      ids.forEach((row, r) => this.cache.advance(slots[r], row.length));
      const logits = tf.tidy(() => {
        const lastX = tf.gather(x, tf.tensor1d(last, "int32"));
        return linear(rmsNorm(lastX, m.weights.norm, c.rmsNormEps), { weight: m.weights.lmHead ?? m.weights.embed });
      });
      const all = (await logits.data()) as Float32Array;
      logits.dispose();
      const V = c.vocabSize;
      return sampling.map((s, r) => sampleRow(all.subarray(r * V, (r + 1) * V), s));
    } finally {
      x.dispose();
    }
  }

  /**
   * For every token of a row that has a shared prefix: the running max, denominator and unnormalised
   * context of its attention over the prefix, per head ([N][H] max and sum, [N][H][hd] context), computed
   * per prefix and kv head as 2-D matmuls over all of that prefix's tokens at once.
   */
  private async sharedAttention(slots: number[], tokens: StepToken[], q: Float32Array, layer: number): Promise<SharedParts | null> {
    const c = this.model.config;
    const H = c.numHeads;
    const KV = c.numKvHeads;
    const G = H / KV;
    const hd = c.headDim;
    const groups = new Map<SharedEntry, number[]>();
    tokens.forEach((t, n) => {
      const e = this.prefixOf[slots[t.row]];
      if (!e) return;
      const list = groups.get(e);
      if (list) list.push(n);
      else groups.set(e, [n]);
    });
    if (groups.size === 0) return null;
    const N = tokens.length;
    const parts: SharedParts = { max: new Float32Array(N * H).fill(-Infinity), sum: new Float32Array(N * H), ctx: new Float32Array(N * H * hd) };
    for (const [entry, members] of groups) {
      const n = members.length;
      const out = tf.tidy(() => {
        const pieces: tf.Tensor[] = [];
        for (let j = 0; j < KV; j++) {
          // queries of the G heads of kv head j, one row per (token, head)
          const qj = new Float32Array(n * G * hd);
          members.forEach((tok, i) => qj.set(q.subarray((tok * H + j * G) * hd, (tok * H + j * G + G) * hd), i * G * hd));
          const q2 = tf.tensor2d(qj, [n * G, hd]);
          const kj = entry.shared.keys[layer][j];
          const scores = entry.shared.keysTransposed ? tf.matMul(q2, kj) : tf.matMul(q2, kj, false, true);
          const mx = tf.max(scores, 1, true);
          const e = tf.exp(tf.sub(scores, mx));
          pieces.push(tf.concat([mx, tf.sum(e, 1, true), tf.matMul(e, entry.shared.values[layer][j])], 1));
        }
        return tf.stack(pieces);
      });
      const data = (await out.data()) as Float32Array;
      out.dispose();
      const width = hd + 2;
      for (let j = 0; j < KV; j++) {
        members.forEach((tok, i) => {
          for (let g = 0; g < G; g++) {
            const src = ((j * n + i) * G + g) * width;
            const h = j * G + g;
            parts.max[tok * H + h] = data[src];
            parts.sum[tok * H + h] = data[src + 1];
            parts.ctx.set(data.subarray(src + 2, src + 2 + hd), (tok * H + h) * hd);
          }
        });
      }
    }
    return parts;
  }

  /**
   * Each token's attention over its row's own tokens up to itself (causal), merged with its shared-prefix
   * part under one max and one denominator; returns the normalised context [N, H * hd].
   */
  private ownAttention(slots: number[], tokens: StepToken[], q: Float32Array, layer: number, shared: SharedParts | null): Float32Array {
    const c = this.model.config;
    const H = c.numHeads;
    const hd = c.headDim;
    const ctx = new Float32Array(tokens.length * H * hd);
    const work = { scores: new Float64Array(64), acc: new Float64Array(hd) };
    for (let n = 0; n < tokens.length; n++) {
      const t = tokens[n];
      const { k, v, cap } = this.cache.view(slots[t.row], layer);
      if (work.scores.length < t.own + 1) work.scores = new Float64Array(2 * (t.own + 1));
      attendOwn(q, k, v, cap, n, t.own + 1, H, H / c.numKvHeads, hd, shared, ctx, work.scores, work.acc);
    }
    return ctx;
  }
}

/**
 * Token n's attention, per head, over keys/values 0..S-1 of its slot region (laid out [kv, cap, hd]),
 * merged with its shared-prefix part; writes the normalised context to ctx. Plain loops over typed arrays
 * passed as arguments, so the engine compiles them tight.
 */
function attendOwn(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  cap: number,
  n: number,
  S: number,
  H: number,
  G: number,
  hd: number,
  shared: SharedParts | null,
  ctx: Float32Array,
  scores: Float64Array,
  acc: Float64Array,
): void {
  for (let h = 0; h < H; h++) {
    const qo = (n * H + h) * hd;
    const base = ((h / G) | 0) * cap * hd;
    const sh = n * H + h;
    let mx = shared ? shared.max[sh] : -Infinity;
    for (let s = 0; s < S; s++) {
      const ko = base + s * hd;
      let d0 = 0;
      let d1 = 0;
      for (let d = 0; d < hd; d += 2) {
        d0 += q[qo + d] * k[ko + d];
        d1 += q[qo + d + 1] * k[ko + d + 1];
      }
      const dot = d0 + d1;
      scores[s] = dot;
      if (dot > mx) mx = dot;
    }
    let denom = 0;
    if (shared && shared.sum[sh] > 0) {
      const f = Math.exp(shared.max[sh] - mx);
      denom = shared.sum[sh] * f;
      for (let d = 0; d < hd; d++) acc[d] = shared.ctx[qo + d] * f;
    } else {
      for (let d = 0; d < hd; d++) acc[d] = 0;
    }
    for (let s = 0; s < S; s++) {
      const e = Math.exp(scores[s] - mx);
      denom += e;
      const vo = base + s * hd;
      for (let d = 0; d < hd; d++) acc[d] += e * v[vo + d];
    }
    const inv = 1 / denom;
    for (let d = 0; d < hd; d++) ctx[qo + d] = acc[d] * inv;
  }
}

interface SharedParts {
  max: Float32Array;
  sum: Float32Array;
  ctx: Float32Array;
}

/** Rotates x [N, heads, hd] in place by the half-split rotary tables [N, hd]. */
function rotateInPlace(x: Float32Array, heads: number, hd: number, cos: Float32Array, sin: Float32Array): void {
  const half = hd / 2;
  const N = x.length / (heads * hd);
  for (let n = 0; n < N; n++) {
    for (let h = 0; h < heads; h++) {
      const o = (n * heads + h) * hd;
      for (let j = 0; j < half; j++) {
        const x1 = x[o + j];
        const x2 = x[o + j + half];
        const c1 = cos[n * hd + j];
        const s1 = sin[n * hd + j];
        x[o + j] = x1 * c1 - x2 * s1;
        x[o + j + half] = x2 * c1 + x1 * s1;
      }
    }
  }
}

/** Samples one row of logits under its settings (bias first, then temperature, top-k, top-p). */
export function sampleRow(logits: Float32Array, s: RowSampling): SampledToken {
  const biased = biasedLogits(logits, s.bias);
  const processed = maskedLogits(biased, s.allowed, biased !== logits);
  const { id, logprob } = sampleToken(processed, s, () => s.u);
  // raw mode: the model's own distribution, whatever the temperature, bias or mask (vLLM's raw_logprobs)
  if (s.rawLogprobs) return s.topLogprobs ? { id, logprob: rawLogprob(logits, id), top: topLogprobs(logits, 1, s.topLogprobs) } : { id, logprob: rawLogprob(logits, id) };
  return s.topLogprobs ? { id, logprob, top: topLogprobs(processed, s.temperature, s.topLogprobs) } : { id, logprob };
}
