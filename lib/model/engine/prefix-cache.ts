/**
 * Automatic prefix caching across requests, the part both step runners share. A prompt is cut into blocks
 * of PREFIX_BLOCK_TOKENS tokens; block i is known by a chained hash of the whole prefix up to and including
 * it, so two prompts with one hash at block i agree on every token before it. An entry holds the keys and
 * values of a prompt's first blocks (where is the runner's business: extra slots of the WebGPU cache
 * buffers, arrays on the CPU runner) and is found by any of its block hashes, so a prompt that shares only
 * its system part with a stored one still finds that part.
 *
 * Entries are copied into a row's own cache when it is admitted: a row holds an entry only from its lookup
 * to that copy (`pin`/`unpin`), and an unpinned entry is evicted, least recently used first, when a new one
 * needs room. A prefill call plans its rows with `planPrefill`: a row finds its longest cached block-prefix
 * (never its last token, which is sampled), or waits for an earlier row of the same call that computes the
 * same blocks and copies them from that row's slot.
 */
import { createHash } from "node:crypto";

/** Prompt tokens per cache block: prefixes are stored and found in whole blocks (vLLM's default block size). */
export const PREFIX_BLOCK_TOKENS = 16;

/**
 * Tokens of keys and values the prefix cache holds by default (per served model and adapter): on WebGPU
 * that many tokens of extra cache slots (whole slots of max_model_len tokens, at least one), on the CPU
 * runners that many stored prompt tokens.
 */
export const PREFIX_CACHE_TOKENS = 16384;

/** Extra cache slots of `maxLength` tokens a device runner adds for `tokens` tokens of prefixes (0 tokens: none). */
export function prefixCacheSlots(tokens: number, maxLength: number): number {
  return tokens > 0 ? Math.max(1, Math.ceil(tokens / maxLength)) : 0;
}

/** Prompt tokens looked up in the prefix cache and tokens found there, summed over prefill calls. */
export interface PrefixCacheCounters {
  /** Prompt tokens of the rows prefilled with caching on (vLLM's prefix_cache_queries). */
  queries: number;
  /** Of those, tokens whose keys and values were copied instead of computed (vLLM's prefix_cache_hits). */
  hits: number;
}

/**
 * The chained hashes of the first `blocks` full blocks of `ids`: hashes[i] stands for ids[0 .. 16(i + 1)).
 * `salt` starts the chain: a runner whose stored keys depend on more than the tokens (how a row's prompt
 * was split) puts that in it.
 */
export function blockHashes(ids: readonly number[], blocks: number, salt = ""): string[] {
  const out: string[] = [];
  let prev = `t2s-prefix:${salt}`;
  const words = new Int32Array(PREFIX_BLOCK_TOKENS);
  for (let b = 0; b < blocks; b++) {
    for (let i = 0; i < PREFIX_BLOCK_TOKENS; i++) words[i] = ids[b * PREFIX_BLOCK_TOKENS + i];
    prev = createHash("sha256").update(prev).update(new Uint8Array(words.buffer)).digest("base64");
    out.push(prev);
  }
  return out;
}

/** One stored prefix: the chain hashes of its blocks and where the runner keeps their keys and values. */
export interface PrefixEntry<T> {
  hashes: string[];
  /** What it counts against the cache's capacity (the runner's unit: slots, tokens). */
  cost: number;
  value: T;
  /** Lookups whose copy has not been made yet: a pinned entry is never evicted nor rewritten. */
  pins: number;
  lastUsed: number;
  /** Cleared while pinned: no longer found, and freed when its last pin goes. */
  dropped?: boolean;
}

/** The stored prefixes of one runner, found by block hash and evicted least recently used first. */
export class PrefixCacheIndex<T> {
  private readonly byHash = new Map<string, Set<PrefixEntry<T>>>();
  private readonly entries = new Set<PrefixEntry<T>>();
  private used = 0;
  private clock = 0;

  /** `capacity` in the runner's unit; `onEvict` frees an entry's storage. */
  constructor(readonly capacity: number, private readonly onEvict: (value: T) => void) {}

  get size(): number {
    return this.entries.size;
  }

  /** The entry holding the longest prefix of `hashes` and how many blocks of it (null: not even the first). */
  longest(hashes: readonly string[]): { entry: PrefixEntry<T>; blocks: number } | null {
    // a chain hash found at block i means the whole prefix up to i is there, so the first miss ends the search
    let found: { entry: PrefixEntry<T>; blocks: number } | null = null;
    for (let i = 0; i < hashes.length; i++) {
      const set = this.byHash.get(hashes[i]);
      if (!set?.size) break;
      found = { entry: set.values().next().value as PrefixEntry<T>, blocks: i + 1 };
    }
    if (found) found.entry.lastUsed = ++this.clock;
    return found;
  }

  pin(e: PrefixEntry<T>): void {
    e.pins++;
  }

  unpin(e: PrefixEntry<T>): void {
    e.pins = Math.max(0, e.pins - 1);
    if (e.dropped && e.pins === 0) this.onEvict(e.value);
  }

  /**
   * Makes an entry for a prompt's full blocks `hashes`, or returns null when the cache already holds them
   * all or has no room. A stored entry whose chain the prompt extends (and no lookup holds) is taken over
   * (`reused`: its storage is the runner's to rewrite); otherwise unpinned entries are evicted, least recently
   * used first, and `make` gives the new entry's storage (null: none free).
   */
  reserve(hashes: string[], cost: number, make: () => T | null): { entry: PrefixEntry<T>; reused: boolean } | null {
    if (!hashes.length || cost > this.capacity) return null;
    const have = this.longest(hashes);
    if (have && have.blocks === hashes.length) return null;
    if (have && have.entry.hashes.length === have.blocks && have.entry.pins === 0) {
      const e = have.entry;
      this.unindex(e);
      this.used -= e.cost;
      if (!this.makeRoom(cost, e)) {
        this.entries.delete(e);
        this.onEvict(e.value);
        return null;
      }
      e.hashes = hashes;
      e.cost = cost;
      this.index(e);
      this.used += cost;
      return { entry: e, reused: true };
    }
    if (!this.makeRoom(cost, null)) return null;
    const value = make();
    if (value === null) return null;
    const e: PrefixEntry<T> = { hashes, cost, value, pins: 0, lastUsed: ++this.clock };
    this.entries.add(e);
    this.index(e);
    this.used += cost;
    return { entry: e, reused: false };
  }

  /** Drops every entry: none is found again; a pinned one's storage is freed when its copies are made (unpin). */
  clear(): void {
    for (const e of [...this.entries]) {
      if (e.pins === 0) this.evict(e);
      else {
        this.entries.delete(e);
        this.unindex(e);
        this.used -= e.cost;
        e.dropped = true;
      }
    }
  }

  /** Evicts unpinned entries (never `keep`), least recently used first, until `cost` more fits. */
  private makeRoom(cost: number, keep: PrefixEntry<T> | null): boolean {
    if (this.used + cost <= this.capacity) return true;
    const victims = [...this.entries].filter((e) => e.pins === 0 && e !== keep).sort((a, b) => a.lastUsed - b.lastUsed);
    for (const v of victims) {
      this.evict(v);
      if (this.used + cost <= this.capacity) return true;
    }
    return false;
  }

  private evict(e: PrefixEntry<T>): void {
    this.entries.delete(e);
    this.unindex(e);
    this.used -= e.cost;
    this.onEvict(e.value);
  }

  private index(e: PrefixEntry<T>): void {
    for (const h of e.hashes) {
      let set = this.byHash.get(h);
      if (!set) this.byHash.set(h, (set = new Set()));
      set.add(e);
    }
  }

  private unindex(e: PrefixEntry<T>): void {
    for (const h of e.hashes) {
      const set = this.byHash.get(h);
      set?.delete(e);
      if (set && !set.size) this.byHash.delete(h);
    }
  }
}

/** What a runner tells the planner about one row of a prefill call. */
export interface PlanInput {
  ids: readonly number[];
  /** Stored keys of this row are interchangeable only with rows of the same salt. */
  salt: string;
  /** Tokens a row must compute itself at least from (the CPU runner's shared system part sits before it). */
  minStart: number;
  /**
   * The request's shared prefix (PrefillRow.prefixLength, already capped) that an earlier row of the call with
   * the same one may hand over, at any length; 0: none. Used with caching off too.
   */
  declared: number;
}

/** Where a row's first `start` prompt tokens come from. */
export type PrefixSource<T> = { entry: PrefixEntry<T> } | { row: number } | null;

export interface RowPlan<T> {
  /** 1: prefilled first; 2: after the rows of phase 1, copying from one of them. */
  phase: 1 | 2;
  /** Prompt tokens the row gets without computing them (it prefills ids[start..]). */
  start: number;
  from: PrefixSource<T>;
  /** The chain hashes of the prompt's full blocks (empty with caching off). */
  hashes: string[];
}

/**
 * Plans one prefill call: per row, the longest prefix it can copy (from the cache, or from an earlier row of
 * the call that computes it in phase 1) and the phase it runs in. With no index (caching off), only the
 * requests' declared shared prefixes are handed from row to row within the call. Entries a plan copies from
 * are pinned: the runner unpins them once its copies are issued (`unpinPlans`).
 */
export function planPrefill<T>(rows: readonly PlanInput[], index: PrefixCacheIndex<T> | null): RowPlan<T>[] {
  const declaredDonor = new Map<string, number>();
  const blockDonor = new Map<string, number>();
  return rows.map((r, i) => {
    const n = r.ids.length;
    const hashes = index ? blockHashes(r.ids, Math.floor(n / PREFIX_BLOCK_TOKENS), r.salt) : [];
    // the last token is always computed: its logits are sampled
    const usable = hashes.slice(0, Math.floor((n - 1) / PREFIX_BLOCK_TOKENS));
    let best: { start: number; from: PrefixSource<T>; phase: 1 | 2 } = { start: r.minStart, from: null, phase: 1 };
    const hit = index?.longest(usable);
    if (hit && hit.blocks * PREFIX_BLOCK_TOKENS > best.start) best = { start: hit.blocks * PREFIX_BLOCK_TOKENS, from: { entry: hit.entry }, phase: 1 };
    for (let b = usable.length; b > 0; b--) {
      const j = blockDonor.get(usable[b - 1]);
      if (j === undefined) continue;
      if (b * PREFIX_BLOCK_TOKENS > best.start) best = { start: b * PREFIX_BLOCK_TOKENS, from: { row: j }, phase: 2 };
      break;
    }
    const key = r.declared > 0 ? `${r.salt}|${r.ids.slice(0, r.declared).join(",")}` : null;
    const donor = key === null ? undefined : declaredDonor.get(key);
    if (donor !== undefined && r.declared > best.start) best = { start: r.declared, from: { row: donor }, phase: 2 };
    if (best.phase === 1) {
      // a row computed in phase 1 holds its whole prompt afterwards: later rows of the call may copy from it
      if (key !== null && !declaredDonor.has(key)) declaredDonor.set(key, i);
      for (const h of hashes) if (!blockDonor.has(h)) blockDonor.set(h, i);
    }
    if (best.from && "entry" in best.from) index!.pin(best.from.entry);
    return { ...best, hashes };
  });
}

/** Releases the entries the plans pinned (their copies have been issued). */
export function unpinPlans<T>(plans: readonly RowPlan<T>[], index: PrefixCacheIndex<T> | null): void {
  for (const p of plans) if (p.from && "entry" in p.from) index?.unpin(p.from.entry);
}
