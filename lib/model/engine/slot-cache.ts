/**
 * Keys and values of the sequences a CPU runner holds, one region per slot and layer, written in place as
 * tokens arrive. A region is laid out [kvHeads, capacity, headDim] and grows by doubling (one copy per
 * doubling), so a slot uses memory in proportion to its own length, never to the longest row of a batch.
 * Only a sequence's own tokens live here; a shared prompt prefix is stored once elsewhere.
 */
export class SlotCache {
  /** keys[slot][layer], values[slot][layer]: Float32Array of kv * capacity[slot] * headDim. */
  private readonly keys: Float32Array[][];
  private readonly values: Float32Array[][];
  private readonly capacity: number[];
  /** Own tokens stored per slot. */
  readonly length: number[];

  constructor(readonly slots: number, readonly layers: number, readonly kvHeads: number, readonly headDim: number) {
    this.keys = Array.from({ length: slots }, () => []);
    this.values = Array.from({ length: slots }, () => []);
    this.capacity = new Array<number>(slots).fill(0);
    this.length = new Array<number>(slots).fill(0);
  }

  /** Empties a slot, keeping its memory for the next sequence. */
  reset(slot: number): void {
    this.length[slot] = 0;
  }

  /** Makes room for `more` tokens after the slot's current length. */
  reserve(slot: number, more: number): void {
    const need = this.length[slot] + more;
    if (need <= this.capacity[slot]) return;
    let cap = Math.max(64, this.capacity[slot]);
    while (cap < need) cap *= 2;
    const { kvHeads: KV, headDim: hd } = this;
    const grow = (old: Float32Array | undefined): Float32Array => {
      const next = new Float32Array(KV * cap * hd);
      if (old) {
        const oldCap = this.capacity[slot];
        for (let j = 0; j < KV; j++) next.set(old.subarray(j * oldCap * hd, (j * oldCap + this.length[slot]) * hd), j * cap * hd);
      }
      return next;
    };
    for (let l = 0; l < this.layers; l++) {
      this.keys[slot][l] = grow(this.keys[slot][l]);
      this.values[slot][l] = grow(this.values[slot][l]);
    }
    this.capacity[slot] = cap;
  }

  /**
   * Writes one token's keys and values ([kvHeads * headDim] each, read from `k`/`v` at `offset`) at own
   * index `at` of the slot (at <= length; the length becomes at least at + 1). Call reserve first.
   */
  write(slot: number, layer: number, at: number, k: Float32Array, v: Float32Array, offset: number): void {
    const { kvHeads: KV, headDim: hd } = this;
    const cap = this.capacity[slot];
    const K = this.keys[slot][layer];
    const V = this.values[slot][layer];
    for (let j = 0; j < KV; j++) {
      const dst = (j * cap + at) * hd;
      const src = offset + j * hd;
      K.set(k.subarray(src, src + hd), dst);
      V.set(v.subarray(src, src + hd), dst);
    }
  }

  /** Marks `n` more tokens as stored (after their write calls for every layer). */
  advance(slot: number, n: number): void {
    this.length[slot] += n;
  }

  /** A copy of the slot's first `n` own tokens, per layer [kvHeads, n, headDim] (a stored prompt's blocks). */
  exportOwn(slot: number, n: number): { keys: Float32Array[]; values: Float32Array[]; tokens: number } {
    if (n > this.length[slot]) throw new RangeError(`slot ${slot} holds ${this.length[slot]} tokens, not ${n}`);
    const pack = (src: Float32Array) => {
      const out = new Float32Array(this.kvHeads * n * this.headDim);
      this.copyHeads(src, this.capacity[slot], out, n, n);
      return out;
    };
    return { keys: this.keys[slot].map(pack), values: this.values[slot].map(pack), tokens: n };
  }

  /** Empties the slot and fills its first `n` own tokens from an exported copy (of at least n tokens). */
  importOwn(slot: number, from: { keys: Float32Array[]; values: Float32Array[]; tokens: number }, n: number): void {
    if (n > from.tokens) throw new RangeError(`a stored copy of ${from.tokens} tokens cannot give ${n}`);
    this.reset(slot);
    this.reserve(slot, n);
    for (let l = 0; l < this.layers; l++) {
      this.copyHeads(from.keys[l], from.tokens, this.keys[slot][l], this.capacity[slot], n);
      this.copyHeads(from.values[l], from.tokens, this.values[slot][l], this.capacity[slot], n);
    }
    this.length[slot] = n;
  }

  /** Empties slot `dst` and fills its first `n` own tokens from slot `src`'s. */
  copyOwn(src: number, dst: number, n: number): void {
    if (n > this.length[src]) throw new RangeError(`slot ${src} holds ${this.length[src]} tokens, not ${n}`);
    this.importOwn(dst, { keys: this.keys[src], values: this.values[src], tokens: this.capacity[src] }, n);
  }

  /** Copies the first n tokens of every kv head between regions laid out [kvHeads, cap, headDim]. */
  private copyHeads(from: Float32Array, fromCap: number, to: Float32Array, toCap: number, n: number): void {
    const hd = this.headDim;
    for (let j = 0; j < this.kvHeads; j++) to.set(from.subarray(j * fromCap * hd, (j * fromCap + n) * hd), j * toCap * hd);
  }

  /** The slot's key and value regions of one layer, their capacity (stride between kv heads in tokens). */
  view(slot: number, layer: number): { k: Float32Array; v: Float32Array; cap: number } {
    return { k: this.keys[slot][layer], v: this.values[slot][layer], cap: this.capacity[slot] };
  }
}
