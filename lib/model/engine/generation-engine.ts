/**
 * The generation engine: one step-wise loop per served model that every sampling path goes through
 * (generate(), the in-process policy, the GRPO sampler, `t2s serve`). Sequences wait in arrival order and
 * are admitted into free slots between decode steps (continuous batching); a sequence that finishes or is
 * cancelled leaves its slot at once, and each step's new tokens are delivered as they are made. Token
 * choice happens in the runner, with one uniform number per token drawn from the sequence's own seeded
 * stream, so a seed gives the same tokens whatever else shares the steps.
 */
import { ENGINE_MAX_TOKENS } from "../../core/defaults.js";
import { T2sError } from "../../core/errors.js";
import type { CausalLM } from "../model.js";
import { sequenceRandom } from "../sampler.js";
import { PREFIX_CACHE_TOKENS } from "./prefix-cache.js";
import { isMultiStep, type SampledToken, type StepRunner } from "./runner.js";
import { advanceGuides, rowSampling, type Sequence } from "./sequence.js";
import { leaseRunner, type RunnerLease } from "./runners.js";
import { StopWatcher } from "./stops.js";
import { emptyEngineMetrics, type EngineMetrics, type EngineOptions, type Generation, type SequenceRequest, type TokenDelta } from "./types.js";
import { WaitQueue } from "./wait-queue.js";

/**
 * Rows cancelled per turn of the event loop at most (a client that leaves, an engine that closes): a
 * request of thousands of rows is cancelled over a few turns, with /health and the streams answered between.
 */
const CANCELS_PER_TURN = 1024;

/** The rows of one abort signal still queued or running, and the listener that cancels them. */
interface SignalRows {
  rows: Set<Sequence>;
  onAbort: () => void;
}

export class GenerationEngine {
  private readonly waiting = new WaitQueue<Sequence>();
  private readonly running: Sequence[] = [];
  /** Rows by their signal: an abort reaches its rows without a scan of the line. */
  private readonly bySignal = new Map<AbortSignal, SignalRows>();
  /**
   * Rows whose signal fired: the queued ones are cancelled CANCELS_PER_TURN per turn of the event loop, apart
   * from the steps; running ones leave at the next step (their slots are the runner's until then).
   * `abortedAt` is the next one to look at.
   */
  private aborted: Sequence[] = [];
  private abortedAt = 0;
  /** Whether a turn of cancellations is scheduled. */
  private cancelling = false;
  /** Cancellations admission may still make this step (rows at the head whose cancellation is pending). */
  private cancelBudget = CANCELS_PER_TURN;
  private readonly freeSlots: number[];
  private loop: Promise<void> | null = null;
  private closed = false;
  readonly metrics: EngineMetrics = emptyEngineMetrics();
  readonly maxBatch: number;
  private readonly eos: Set<number>;

  private readonly runner: StepRunner;

  private constructor(readonly model: CausalLM, private readonly lease: RunnerLease, slots: number, private readonly opts: EngineOptions) {
    this.runner = lease.runner;
    // a reused runner may hold more slots than asked for
    this.maxBatch = Math.min(slots, this.runner.slots);
    this.freeSlots = Array.from({ length: this.maxBatch }, (_, i) => this.maxBatch - 1 - i);
    this.eos = new Set(opts.eosIds ?? (model.tokenizer ? model.tokenizer.eosIds : model.config.eosTokenIds));
  }

  /** An engine over `model` on its backend's best runner. */
  static async create(model: CausalLM, opts: EngineOptions = {}): Promise<GenerationEngine> {
    const slots = Math.max(1, Math.floor(opts.maxBatch ?? 64));
    const prefixCacheTokens = opts.enablePrefixCaching === false ? 0 : Math.max(0, Math.floor(opts.prefixCacheTokens ?? PREFIX_CACHE_TOKENS));
    const lease = await leaseRunner(model, { adapter: opts.adapter ?? null, slots, maxLength: opts.maxLength, prefixCacheTokens });
    return new GenerationEngine(model, lease, slots, opts);
  }

  /** Queues a sequence; resolves with its generation when it finishes (rejects with `cancelled` if aborted). */
  submit(req: SequenceRequest): Promise<Generation> {
    if (this.closed) return Promise.reject(new T2sError("engine_closed", "the generation engine was closed"));
    if (req.ids.length === 0) return Promise.reject(new T2sError("usage", "every prompt needs at least one token"));
    const V = this.model.config.vocabSize;
    for (const id of req.ids) if (!Number.isInteger(id) || id < 0 || id >= V) return Promise.reject(new T2sError("usage", `token id ${id} is outside the vocabulary [0, ${V})`));
    const t = req.temperature ?? 1;
    const topP = req.topP ?? 1;
    const topK = req.topK ?? 0;
    if (!(t >= 0) || !(topP > 0 && topP <= 1) || !(topK >= 0)) return Promise.reject(new T2sError("usage", "temperature must be >= 0, top_p in (0, 1], top_k >= 0"));
    const limit = Math.min(this.model.config.maxPositions, this.runner.maxLength ?? Infinity);
    if (req.ids.length > limit) return Promise.reject(new T2sError("context_length_exceeded", `the prompt has ${req.ids.length} tokens but this engine holds at most ${limit} per sequence`));
    return new Promise((resolve, reject) => {
      const room = limit - req.ids.length;
      const seq: Sequence = {
        req,
        rand: sequenceRandom(req.seed ?? 0, req.sampleIndex ?? 0),
        slot: -1,
        stops: new StopWatcher(this.model.tokenizer, req.stop ?? [], req.onDelta !== undefined, req.skipSpecialTokens ?? true, req.includeStopStr ?? false),
        out: [],
        logprobs: [],
        top: [],
        counts: new Map(),
        bias: new Map(req.logitBias ?? []),
        maxTokens: Math.max(0, Math.min(req.maxTokens ?? ENGINE_MAX_TOKENS, room)),
        submitted: performance.now(),
        resolve,
        reject,
        done: false,
      };
      if (req.signal?.aborted) return this.cancel(seq);
      if (seq.maxTokens === 0) return this.finish(seq, "length");
      if (req.signal) this.watch(req.signal, seq);
      this.waiting.push(seq);
      this.kick();
    });
  }

  /** The fraction of the engine's cache token slots (slots x tokens per slot) the running sequences hold. */
  cacheUsage(): number {
    const perSlot = Math.min(this.model.config.maxPositions, this.runner.maxLength ?? Infinity);
    const held = this.running.reduce((n, s) => n + s.req.ids.length + s.out.length, 0);
    return held / (this.maxBatch * perSlot);
  }

  /** Sequences decoding now and waiting for a slot. */
  get load(): { running: number; waiting: number } {
    return { running: this.running.length, waiting: this.waiting.size };
  }

  /**
   * The model's weights changed (an optimizer step): what the runner derived from them is dropped. Rows still
   * running keep the prefix they started with.
   */
  weightsChanged(): void {
    this.runner.weightsChanged?.();
  }

  /**
   * Cancels everything queued or running and frees the runner. The running rows go at the next step; the
   * queued ones CANCELS_PER_TURN per turn of the event loop, so a long line never stalls it.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.scheduleCancels();
    this.kick();
    await this.loop;
    this.lease.release();
  }

  private scheduleCancels(): void {
    if (this.cancelling) return;
    this.cancelling = true;
    setImmediate(() => this.cancelTurn());
  }

  /** One turn of cancellations: queued rows whose signal fired (and, once closed, any queued row). */
  private cancelTurn(): void {
    this.cancelling = false;
    let budget = CANCELS_PER_TURN;
    while (budget > 0 && this.abortedAt < this.aborted.length) {
      const s = this.aborted[this.abortedAt++];
      if (s.done || s.slot >= 0) continue;
      this.cancel(s);
      budget--;
    }
    if (this.abortedAt === this.aborted.length) {
      this.aborted = [];
      this.abortedAt = 0;
    }
    if (this.closed) while (budget-- > 0 && this.waiting.size) this.cancel(this.waiting.first()!);
    if (this.abortedAt < this.aborted.length || (this.closed && this.waiting.size)) this.scheduleCancels();
  }

  private kick(): void {
    if (!this.loop) this.loop = this.run().finally(() => (this.loop = null));
  }

  /** Files a row under its signal; the signal's one listener hands its rows to the sweep when it fires. */
  private watch(signal: AbortSignal, seq: Sequence): void {
    let entry = this.bySignal.get(signal);
    if (!entry) {
      const onAbort = () => {
        const rows = this.bySignal.get(signal)?.rows;
        if (!rows) return;
        for (const s of rows) this.aborted.push(s);
        this.scheduleCancels();
        this.kick();
      };
      entry = { rows: new Set(), onAbort };
      this.bySignal.set(signal, entry);
      signal.addEventListener("abort", onAbort, { once: true });
    }
    entry.rows.add(seq);
  }

  private async run(): Promise<void> {
    // requests made together (a step's episodes, a batch of clients) arrive within one turn of the event
    // loop: let them all queue before the first admission, so they share one prefill
    await new Promise((r) => setImmediate(r));
    while (this.waiting.size || this.running.length) {
      this.cancelBudget = CANCELS_PER_TURN;
      this.sweepRunning();
      try {
        if (!this.closed) {
          await this.admit();
          await this.step();
        }
      } catch (e) {
        // a failing step fails every sequence it touched; later requests start afresh
        for (const s of [...this.running]) this.fail(s, e);
        for (const s of this.waiting.drain()) this.fail(s, e);
      }
      this.metrics.running = this.running.length;
      this.metrics.waiting = this.waiting.size;
      // let the event loop deliver streamed tokens and take new requests between steps
      await new Promise((r) => setImmediate(r));
    }
  }

  /** Cancels the running rows whose signal fired (all of them once closed): at most maxBatch to look at. */
  private sweepRunning(): void {
    for (let i = this.running.length - 1; i >= 0; i--) {
      const s = this.running[i];
      if (this.closed || s.req.signal?.aborted) this.cancel(s);
    }
  }

  /** Moves waiting sequences into free slots (first come, first served) and prefills them. */
  private async admit(): Promise<void> {
    const budget = this.opts.maxPrefillTokens ?? this.runner.prefillTokens ?? 8192;
    const batch: Sequence[] = [];
    let tokens = 0;
    while (this.waiting.size && this.freeSlots.length) {
      const next = this.waiting.first()!;
      // a row whose client left is not admitted (its cancellation may still be queued for the sweep)
      if (next.req.signal?.aborted) {
        if (this.cancelBudget-- <= 0) break;
        this.cancel(next);
        continue;
      }
      // a shared prefix is computed once, so only a row's own tokens weigh on the call
      const own = next.req.ids.length - Math.min(next.req.prefixLength ?? 0, next.req.ids.length - 1);
      if (batch.length > 0 && tokens + own > budget) break;
      this.waiting.shift();
      next.slot = this.freeSlots.pop()!;
      batch.push(next);
      tokens += own;
    }
    if (!batch.length) return;
    const now = performance.now();
    for (const s of batch) {
      this.metrics.queueSeconds.sum += (now - s.submitted) / 1000;
      this.metrics.queueSeconds.count++;
    }
    this.running.push(...batch);
    await this.refreshMasks(batch);
    // a row whose grammar failed has left; the rest are prefilled
    const live = batch.filter((s) => !s.done);
    if (!live.length) return;
    this.metrics.promptTokens += live.reduce((n, s) => n + s.req.ids.length, 0);
    const cache = this.runner.prefixCache;
    const [queries, hits] = [cache?.queries ?? 0, cache?.hits ?? 0];
    const sampled = await this.runner.prefill(live.map((s) => ({ slot: s.slot, ids: s.req.ids, prefixLength: s.req.prefixLength ?? 0, sampling: rowSampling(s, this.eos) })));
    // the runner's counters outlive this engine (a device runner is handed on): count this call's share
    this.metrics.prefixCacheQueries += (cache?.queries ?? 0) - queries;
    this.metrics.prefixCacheHits += (cache?.hits ?? 0) - hits;
    const guided = await advanceGuides(live, sampled);
    live.forEach((s, i) => this.accept(s, sampled[i], guided[i]));
  }

  /** One decode step (or a few chained on the device) for every running sequence that has a token to feed. */
  private async step(): Promise<void> {
    const ready = this.running.filter((s) => !s.done && s.out.length > 0);
    if (!ready.length) return;
    await this.refreshMasks(ready);
    // a row whose grammar failed has left
    const rows = ready.filter((s) => !s.done);
    if (!rows.length) return;
    const feed = rows.map((s) => ({ slot: s.slot, id: s.out[s.out.length - 1], position: s.req.ids.length + s.out.length - 1 }));
    const chain = this.chainLength(rows);
    if (chain > 1 && isMultiStep(this.runner)) {
      const plan = Array.from({ length: chain }, () => rows.map((s) => rowSampling(s, this.eos)));
      const out = await this.runner.decodeSteps(feed, plan);
      this.metrics.steps += chain;
      this.metrics.batchRows += rows.length * chain;
      for (let k = 0; k < chain; k++) rows.forEach((s, r) => !s.done && this.accept(s, out[r][k]));
      return;
    }
    const out = await this.runner.decode(rows.map((s, r) => ({ ...feed[r], sampling: rowSampling(s, this.eos) })));
    this.metrics.steps++;
    this.metrics.batchRows += rows.length;
    const guided = await advanceGuides(rows, out);
    rows.forEach((s, r) => this.accept(s, out[r], guided[r]));
  }

  /**
   * Steps that may run without reading tokens back: no row's sampling may change between them (penalties and
   * min_tokens do), and a row that stops early only wastes the rest of the chain.
   */
  private chainLength(rows: Sequence[]): number {
    const want = Math.max(1, this.opts.stepsPerCall ?? this.runner.chainSteps ?? 4);
    // a sequence waiting for a free slot gets it at the next step, not after a chain
    if (want === 1 || (this.waiting.size && this.freeSlots.length)) return 1;
    let n = want;
    for (const s of rows) {
      const r = s.req;
      // a guided row's mask depends on the token just sampled
      if (r.presencePenalty || r.frequencyPenalty || r.constraint || (r.minTokens ?? 0) > s.out.length) return 1;
      n = Math.min(n, s.maxTokens - s.out.length);
    }
    return Math.max(1, n);
  }

  /** Guided rows' masks of the tokens allowed next; a row whose grammar fails is failed alone. */
  private async refreshMasks(rows: Sequence[]): Promise<void> {
    await Promise.all(
      rows.map(async (s) => {
        if (!s.req.constraint || s.done) return;
        try {
          s.mask = await s.req.constraint.nextMask(s.maxTokens - s.out.length);
        } catch (e) {
          this.fail(s, e);
        }
      }),
    );
  }

  /**
   * Appends a sampled token, delivers it, and finishes the sequence when a stop condition is met; `guided`
   * is the grammar's answer to the token (sequence.ts advanceGuides), true for an unguided row.
   */
  private accept(s: Sequence, t: SampledToken, guided: unknown = true): void {
    if (s.done) return;
    s.out.push(t.id);
    s.logprobs.push(t.logprob);
    if (t.top) s.top.push(t.top);
    s.counts.set(t.id, (s.counts.get(t.id) ?? 0) + 1);
    this.metrics.generatedTokens++;
    const r = s.req;
    if (guided instanceof Error) return this.fail(s, guided);
    if (r.constraint && guided !== true) return this.fail(s, new T2sError("guided_decoding", `token ${t.id} was sampled outside the grammar's mask`));
    const endsOnId = (!r.ignoreEos && this.eos.has(t.id)) || (r.stopTokenIds?.includes(t.id) ?? false);
    const textStop = endsOnId ? null : s.stops.push(t.id);
    const delta: TokenDelta = { ids: [t.id], logprobs: [t.logprob], text: "" };
    if (t.top) delta.top = [t.top];
    if (endsOnId) {
      delta.text = s.stops.flush(true);
      this.emit(s, delta);
      return this.finish(s, "stop", this.eos.has(t.id) && !r.ignoreEos ? "eos" : `token:${t.id}`);
    }
    if (textStop) {
      delta.text = textStop.delta;
      this.emit(s, delta);
      return this.finish(s, "stop", textStop.stop);
    }
    if (r.constraint?.finished()) {
      delta.text = s.stops.flush(false);
      this.emit(s, delta);
      return this.finish(s, "stop", "grammar");
    }
    if (s.out.length >= s.maxTokens) {
      delta.text = s.stops.flush(false);
      this.emit(s, delta);
      return this.finish(s, "length");
    }
    delta.text = s.stops.safeDelta();
    this.emit(s, delta);
  }

  private emit(s: Sequence, d: TokenDelta): void {
    if (!s.req.onDelta) return;
    try {
      s.req.onDelta(d);
    } catch {
      // a listener's failure (a closed socket) must not stop the other rows; its signal cancels the row
    }
  }

  private leave(s: Sequence): void {
    s.done = true;
    s.req.constraint?.dispose();
    if (s.slot >= 0) {
      // only a row with a slot runs (at most maxBatch of them)
      const i = this.running.indexOf(s);
      if (i >= 0) this.running.splice(i, 1);
    } else this.waiting.delete(s);
    const signal = s.req.signal;
    const entry = signal ? this.bySignal.get(signal) : undefined;
    if (signal && entry && entry.rows.delete(s) && entry.rows.size === 0) {
      // a long-lived signal (an in-process caller's) keeps no listener for rows that ended
      this.bySignal.delete(signal);
      signal.removeEventListener("abort", entry.onAbort);
    }
    if (s.slot >= 0) {
      this.runner.release(s.slot);
      this.freeSlots.push(s.slot);
      s.slot = -1;
    }
  }

  private finish(s: Sequence, reason: "stop" | "length", by?: string): void {
    this.leave(s);
    this.metrics.finished++;
    const endsWithStopId = by === "eos" || (by?.startsWith("token:") ?? false);
    s.resolve({
      ids: s.out,
      text: s.stops.text(endsWithStopId ? s.out.slice(0, -1) : s.out),
      logprobs: s.logprobs,
      topLogprobs: s.top.length ? s.top : undefined,
      finishReason: reason,
      stoppedBy: reason === "stop" ? by : undefined,
      promptTokens: s.req.ids.length,
    });
  }

  private cancel(s: Sequence): void {
    if (s.done) return;
    this.leave(s);
    this.metrics.cancelled++;
    s.reject(new T2sError("cancelled", "the generation was cancelled"));
  }

  private fail(s: Sequence, e: unknown): void {
    this.leave(s);
    s.reject(e);
  }
}
