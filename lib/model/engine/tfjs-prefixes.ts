/**
 * What the CPU runner keeps of prompts (tfjs-runner.ts): a request's shared system part (its prefixLength)
 * is computed once at batch 1 and attended to in place from stored tensors, one entry per distinct part,
 * reference-counted while rows attend to it; and, with prefix caching on, the keys and values of the rest of
 * a prompt's full blocks (prefix-cache.ts), copied into a later row's own cache when it is admitted.
 *
 * A row's own keys depend on where its shared part ends (that part's attention is summed apart), so stored
 * blocks carry that length in their hash: they are handed only to rows split at the same place, and a row
 * computes exactly what it would have computed without the cache.
 */
import { disposeCache, shareCache, type SharedPrefix } from "../decoder.js";
import type { CausalLM } from "../model.js";
import type { PrefillRow } from "./runner.js";
import type { SlotCache } from "./slot-cache.js";
import { PREFIX_BLOCK_TOKENS, PrefixCacheIndex, planPrefill, unpinPlans, type PrefixCacheCounters, type RowPlan } from "./prefix-cache.js";

/** Shared system parts kept with no row attending to them (the most recently used first), caching on. */
const IDLE_SHARED = 4;

/** A stored shared system part. */
export interface SharedEntry {
  key: string;
  shared: SharedPrefix;
  /** Slots attending to it now. */
  users: number;
  lastUsed: number;
  /** Computed from weights that have since changed: freed when its last user leaves. */
  stale?: boolean;
}

/** A stored prompt's own keys and values (after its shared part), per layer [kvHeads, tokens, headDim]. */
export interface OwnBlocks {
  keys: Float32Array[];
  values: Float32Array[];
  tokens: number;
}

export class TfjsPrefixes {
  private readonly shared = new Map<string, SharedEntry>();
  /** Null with caching off. */
  private readonly blocks: PrefixCacheIndex<OwnBlocks> | null;
  private clock = 0;
  /** Prefill calls so far: with caching off a shared part is reused only within its call. */
  private call = 0;
  readonly counters: PrefixCacheCounters = { queries: 0, hits: 0 };

  /** A cache of `tokens` stored own tokens (0: caching off). */
  constructor(private readonly model: CausalLM, private readonly adapter: string | null, tokens: number) {
    this.blocks = tokens > 0 ? new PrefixCacheIndex<OwnBlocks>(tokens, () => undefined) : null;
  }

  get caching(): boolean {
    return this.blocks !== null;
  }

  /** Starts a prefill call. */
  startCall(): void {
    this.call++;
  }

  /** The stored shared part for these ids, computed once at batch 1 through the decoder when missing; `fresh` when computed now. */
  attach(ids: number[]): { entry: SharedEntry; fresh: boolean } {
    const key = this.caching ? ids.join(",") : `${this.call}|${ids.join(",")}`;
    let e = this.shared.get(key);
    const fresh = !e;
    if (!e) {
      const first = this.model.step({ ids: [ids], positions: [ids.map((_, i) => i)], valid: [ids.map(() => true)] }, null, { lastOnly: true, adapter: this.adapter });
      first.logits.dispose();
      const held = shareCache(first.cache, 1);
      disposeCache(first.cache);
      e = { key, shared: held.shared!, users: 0, lastUsed: 0 };
      this.shared.set(key, e);
    }
    e.lastUsed = ++this.clock;
    e.users++;
    return { entry: e, fresh };
  }

  /** A row left the entry. */
  detach(e: SharedEntry): void {
    e.users--;
    e.lastUsed = ++this.clock;
    if (e.stale && e.users === 0) drop(e);
    const idle = [...this.shared.values()].filter((x) => x.users === 0).sort((a, b) => b.lastUsed - a.lastUsed);
    for (const x of idle.slice(this.caching ? IDLE_SHARED : 0)) {
      this.shared.delete(x.key);
      drop(x);
    }
  }

  /**
   * Plans a prefill call whose rows split at `split` (their shared parts' lengths): with caching on, where
   * each row's own tokens come from (prefix-cache.ts planPrefill). `fresh[i]`: row i's shared part was
   * computed for it in this call (not a hit).
   */
  plan(rows: readonly PrefillRow[], split: number[], fresh: boolean[]): RowPlan<OwnBlocks>[] {
    const plans = planPrefill(rows.map((r, i) => ({ ids: r.ids, salt: String(split[i]), minStart: split[i], declared: 0 })), this.blocks);
    if (this.caching) {
      rows.forEach((r, i) => {
        this.counters.queries += r.ids.length;
        this.counters.hits += plans[i].start - (fresh[i] ? split[i] : 0);
      });
    }
    return plans;
  }

  /** Fills the own caches of the rows of `phase` with their planned tokens (from stored blocks or an earlier row). */
  fill(cache: SlotCache, rows: readonly PrefillRow[], split: number[], plans: readonly RowPlan<OwnBlocks>[], phase: 1 | 2): void {
    plans.forEach((p, i) => {
      if (p.phase !== phase || !p.from) return;
      const n = p.start - split[i];
      if ("entry" in p.from) cache.importOwn(rows[i].slot, p.from.entry.value, n);
      else cache.copyOwn(rows[p.from.row].slot, rows[i].slot, n);
    });
  }

  /** A failed call: unpins what it read, stores nothing. */
  abandon(plans: readonly RowPlan<OwnBlocks>[]): void {
    unpinPlans(plans, this.blocks);
  }

  /** After the call: unpins what it read and stores each row's full blocks past its shared part that the cache lacks. */
  store(cache: SlotCache, rows: readonly PrefillRow[], split: number[], plans: readonly RowPlan<OwnBlocks>[]): void {
    unpinPlans(plans, this.blocks);
    if (!this.blocks) return;
    rows.forEach((r, i) => {
      const own = plans[i].hashes.length * PREFIX_BLOCK_TOKENS - split[i];
      if (own <= 0) return;
      const got = this.blocks!.reserve(plans[i].hashes, own, () => cache.exportOwn(r.slot, own));
      if (got?.reused) got.entry.value = cache.exportOwn(r.slot, own);
    });
  }

  /** The weights changed: entries in use stay until their rows leave; nothing new attaches to them. */
  weightsChanged(): void {
    for (const e of [...this.shared.values()]) {
      this.shared.delete(e.key);
      if (e.users === 0) drop(e);
      else e.stale = true;
    }
    this.blocks?.clear();
  }

  /** Frees every stored shared part (call after every row has detached). */
  dispose(): void {
    for (const e of this.shared.values()) drop(e);
    this.shared.clear();
    this.blocks?.clear();
  }
}

function drop(e: SharedEntry): void {
  for (const t of [...e.shared.keys.flat(), ...e.shared.values.flat()]) t.dispose();
}
