/**
 * The WebGPU runner's prefix cache (prefix-cache.ts has the shared part): stored prompt prefixes live in
 * extra slots of the runner's own per-layer key/value buffers, after the slots that hold sequences, and
 * move with the runner's prefix-copy kernel (positions [0, n) of one slot to another), so they never depend
 * on how the buffers store a number. One cache slot holds one prompt's full blocks.
 */
import type { PrefillRow } from "./runner.js";
import { PREFIX_BLOCK_TOKENS, PrefixCacheIndex, planPrefill, unpinPlans, type PrefixCacheCounters, type RowPlan } from "./prefix-cache.js";

/** Shared prefixes shorter than this are recomputed per row (a copy costs more than it saves). */
export const MIN_SHARED_PREFIX = 16;

/** A copy of positions [0, len) of every layer from slot `src` to slot `dst`. */
export interface SlotCopy {
  src: number;
  dst: number;
  len: number;
}

export class WebgpuPrefixCache {
  /** Null with caching off (no cache slots). */
  private readonly index: PrefixCacheIndex<number> | null;
  private readonly free: number[];
  readonly counters: PrefixCacheCounters = { queries: 0, hits: 0 };

  /** Cache slots `firstSlot .. firstSlot + cacheSlots - 1` of the buffers; 0 slots: caching off. */
  constructor(firstSlot: number, readonly cacheSlots: number) {
    this.free = Array.from({ length: cacheSlots }, (_, i) => firstSlot + cacheSlots - 1 - i);
    this.index = cacheSlots > 0 ? new PrefixCacheIndex<number>(cacheSlots, (slot) => this.free.push(slot)) : null;
  }

  /** Plans a prefill call (pinning the cache slots it reads) and counts its queried and found tokens. */
  plan(rows: readonly PrefillRow[]): RowPlan<number>[] {
    const plans = planPrefill(
      rows.map((r) => {
        const P = Math.max(0, Math.min(r.prefixLength, r.ids.length - 1));
        return { ids: r.ids, salt: "", minStart: 0, declared: P >= MIN_SHARED_PREFIX ? P : 0 };
      }),
      this.index,
    );
    if (this.index) {
      rows.forEach((r, i) => {
        this.counters.queries += r.ids.length;
        this.counters.hits += plans[i].start;
      });
    }
    return plans;
  }

  /** The copies that give the rows of `phase` their planned prefixes. */
  copiesFor(rows: readonly PrefillRow[], plans: readonly RowPlan<number>[], phase: 1 | 2): SlotCopy[] {
    const out: SlotCopy[] = [];
    plans.forEach((p, i) => {
      if (p.phase !== phase || !p.from) return;
      out.push({ src: "entry" in p.from ? p.from.entry.value : rows[p.from.row].slot, dst: rows[i].slot, len: p.start });
    });
    return out;
  }

  /** A failed call: unpins what it read, stores nothing. */
  abandon(plans: readonly RowPlan<number>[]): void {
    unpinPlans(plans, this.index);
  }

  /**
   * After the call's copies were issued: unpins what it read, then stores each row's full prompt blocks that
   * the cache lacks, returning the copies into cache slots to issue.
   */
  store(rows: readonly PrefillRow[], plans: readonly RowPlan<number>[]): SlotCopy[] {
    unpinPlans(plans, this.index);
    if (!this.index) return [];
    const out: SlotCopy[] = [];
    rows.forEach((r, i) => {
      const got = this.index!.reserve(plans[i].hashes, 1, () => this.free.pop() ?? null);
      if (got) out.push({ src: r.slot, dst: got.entry.value, len: plans[i].hashes.length * PREFIX_BLOCK_TOKENS });
    });
    return out;
  }

  /** The weights changed: every stored prefix is stale. */
  clear(): void {
    this.index?.clear();
  }
}
