/**
 * The HTTP thread's end of `t2s serve`'s engine thread: it starts the worker (worker.mjs, which runs
 * worker-main.ts), reads the model folder's config and tokenizer here (the weights are loaded there only),
 * and carries rows, abort signals, grammar questions and calls across. Rows submitted in one turn of the
 * event loop go over in one message; an abort goes after every row submitted before it. Each batch of
 * events the engine thread posts is acknowledged through a shared cell, which the engine thread waits on
 * when it is too far ahead (protocol.ts, EVENT_WINDOW). A worker that dies fails every row and call in
 * flight and every later one with `engine_failed`, which /health reports.
 */
import { Worker } from "node:worker_threads";
import { T2sError } from "../../core/errors.js";
import { kitPath, kitRoot } from "../../core/paths.js";
import type { EngineOptions } from "../../model/engine/types.js";
import type { Generation, SequenceRequest, TokenConstraint, TokenDelta } from "../../model/engine/types.js";
import { readModelFolder, type ModelFolder } from "../../model/load.js";
import type { EngineFactory, ServedModel } from "../../model/served-model.js";
import { CELL, CELLS, fromWire, toWire, type EngineCall, type EngineLoadSpec, type EngineSnapshot, type FromEngineThread, type MergeSpec, type ToEngineThread, type WireRow } from "./protocol.js";
import { RemoteEngine, RemoteModel, type EngineLink } from "./remote.js";

/** How long (ms) a stopping server waits for the engine thread to close its engines before ending it. */
const SHUTDOWN_WAIT_MS = 5000;

interface PendingRow {
  resolve: (g: Generation) => void;
  reject: (e: unknown) => void;
  onDelta?: (d: TokenDelta) => void;
  constraint?: TokenConstraint;
  signal?: number;
}

interface SignalEntry {
  signal: AbortSignal;
  rows: number;
  onAbort: () => void;
}

export class EngineThread implements EngineLink {
  /** The base model as this thread sees it (config and tokenizer; the weights are in the engine thread). */
  readonly base: RemoteModel;
  private readonly rows = new Map<number, PendingRow>();
  private readonly calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  private readonly signalIds = new Map<AbortSignal, number>();
  private readonly signals = new Map<number, SignalEntry>();
  private readonly snapshots = new Map<string, EngineSnapshot>();
  private outgoing: WireRow[] = [];
  private sending = false;
  private nextRow = 1;
  private nextCall = 1;
  private nextSignal = 1;
  private failed: T2sError | null = null;
  private closed = false;
  private holding: (() => void) | null = null;
  /** Event batches handled in this turn of the event loop, acknowledged at its end. */
  private unacked = 0;
  /** Messages from the engine thread not handled yet, in the order they came (see receive). */
  private readonly inbox: FromEngineThread[] = [];
  private draining = false;

  private constructor(
    private readonly worker: Worker,
    private readonly cells: Int32Array,
    folder: ModelFolder,
    readonly backend: string,
    /** One line saying what the engine thread loaded, where, and how long it took. */
    readonly loaded: string,
  ) {
    this.base = new RemoteModel(this, folder.name, folder.config, folder.tokenizer, folder.dir);
    worker.on("message", (m: FromEngineThread) => this.receive(m));
    worker.on("error", (e) => this.fail(`it threw ${e instanceof Error ? e.message : String(e)}`));
    worker.on("exit", (code) => this.fail(`it exited (code ${code})`));
    worker.on("messageerror", (e) => this.fail(`a message could not be read (${e.message})`));
  }

  /**
   * Starts the engine thread over a model folder; resolves once the weights are loaded there (a load
   * that fails rejects with the loader's own error, code included).
   */
  static async start(spec: EngineLoadSpec): Promise<EngineThread> {
    // config and tokenizer here (a folder that is not a model fails before any thread starts)
    const folder = readModelFolder(spec.dir, { name: spec.name, contextLength: spec.contextLength });
    const cells = new Int32Array(new SharedArrayBuffer(CELLS * Int32Array.BYTES_PER_ELEMENT));
    const worker = new Worker(kitPath("lib", "serve", "engine-thread", "worker.mjs"), {
      workerData: { spec: { ...spec, dir: folder.dir }, cells },
      // the entry loads the TypeScript itself (or dist/, or the bundle); inherited loader flags would load it twice
      execArgv: [],
      env: { ...process.env, T2S_ROOT: kitRoot() },
    });
    const first = await new Promise<FromEngineThread>((resolve, reject) => {
      const onError = (e: unknown) => reject(new T2sError("engine_failed", `the engine thread did not start: ${e instanceof Error ? e.message : String(e)}`));
      const onExit = (code: number) => reject(new T2sError("engine_failed", `the engine thread exited (code ${code}) while loading the model`));
      worker.once("error", onError);
      worker.once("exit", onExit);
      worker.once("message", (m: FromEngineThread) => {
        worker.off("error", onError);
        worker.off("exit", onExit);
        resolve(m);
      });
    });
    if (first.t !== "ready") {
      await worker.terminate();
      throw first.t === "loadFailed" ? fromWire(first.error) : new T2sError("engine_failed", "the engine thread did not start");
    }
    return new EngineThread(worker, cells, folder, first.backend, first.loaded);
  }

  /** Why the engine thread stopped, or null while it runs. */
  failure(): T2sError | null {
    return this.failed;
  }

  /** Makes a served model's engine in the engine thread (ChatEngine's factory). */
  readonly engines: EngineFactory = async (model: ServedModel, opts: EngineOptions) => {
    const first = (await this.call({ op: "engine", model: model.name, opts })) as EngineSnapshot;
    this.snapshots.set(model.name, first);
    return new RemoteEngine(this, model.name, first);
  };

  /** Merges an adapter into a copy of the base's weights in the engine thread and serves it under `name`. */
  async merge(dir: string, name: string, spec: MergeSpec): Promise<ServedModel> {
    await this.call({ op: "merge", name, dir, spec });
    // an adapter keeps its base's config and tokenizer
    return new RemoteModel(this, name, this.base.config, this.base.tokenizer, this.base.dir);
  }

  snapshotOf(model: string): EngineSnapshot | undefined {
    return this.snapshots.get(model);
  }

  call(c: EngineCall): Promise<unknown> {
    if (this.failed) return Promise.reject(this.failed);
    const q = this.nextCall++;
    return new Promise((resolve, reject) => {
      this.calls.set(q, { resolve, reject });
      // a call goes after the rows submitted before it
      this.sendRows();
      this.post({ t: "call", q, call: c });
    });
  }

  tell(c: EngineCall): void {
    this.call(c).catch(() => undefined);
  }

  submit(model: string, req: SequenceRequest): Promise<Generation> {
    if (this.failed) return Promise.reject(this.failed);
    const { signal, onDelta, constraint, logitBias, ...rest } = req;
    const row = this.nextRow++;
    // a row whose signal already fired still goes: the engine cancels it and counts it, as in one thread
    const aborted = signal?.aborted === true;
    const signalId = signal && !aborted ? this.watch(signal) : undefined;
    this.outgoing.push({ row, model, req: { ...rest, logitBias: logitBias ? [...logitBias] : undefined }, signal: signalId, aborted, guided: constraint !== undefined, deltas: onDelta !== undefined });
    this.scheduleRows();
    return new Promise((resolve, reject) => this.rows.set(row, { resolve, reject, onDelta, constraint, signal: signalId }));
  }

  /**
   * Blocks the engine thread until the returned function is called; resolves once it is blocked. For tests
   * and diagnostics: a server whose engine is busy (a step that takes long) must still answer /health.
   */
  async hold(): Promise<() => void> {
    if (this.failed) throw this.failed;
    await new Promise<void>((resolve) => {
      this.holding = resolve;
      this.post({ t: "hold" });
    });
    return () => {
      Atomics.store(this.cells, CELL.HOLD, 0);
      Atomics.notify(this.cells, CELL.HOLD);
    };
  }

  /** Event batches the engine thread has sent and this thread has handled (their gap stays within EVENT_WINDOW). */
  backlog(): { sent: number; acked: number } {
    return { sent: Atomics.load(this.cells, CELL.SENT), acked: Atomics.load(this.cells, CELL.ACKED) };
  }

  /** Ends the engine thread at once, as a crash would (tests: a dead engine fails requests, never hangs them). */
  async kill(): Promise<void> {
    await this.worker.terminate();
  }

  /** Closes the engines and frees the weights in the engine thread, then ends it. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (!this.failed) await Promise.race([this.call({ op: "shutdown" }).catch(() => undefined), new Promise((r) => setTimeout(r, SHUTDOWN_WAIT_MS).unref())]);
    this.failWith(new T2sError("engine_closed", "the generation engine was closed"));
    await this.worker.terminate();
  }

  private post(msg: ToEngineThread): void {
    try {
      this.worker.postMessage(msg);
    } catch (e) {
      this.fail(`a message could not be sent (${(e as Error).message})`);
    }
  }

  private scheduleRows(): void {
    if (this.sending) return;
    this.sending = true;
    setImmediate(() => this.sendRows());
  }

  /** The rows submitted so far, in one message (a request's rows made in one turn share one admission). */
  private sendRows(): void {
    this.sending = false;
    if (!this.outgoing.length) return;
    const rows = this.outgoing;
    this.outgoing = [];
    this.post({ t: "submit", rows });
  }

  private watch(signal: AbortSignal): number {
    const known = this.signalIds.get(signal);
    if (known !== undefined) {
      this.signals.get(known)!.rows++;
      return known;
    }
    const id = this.nextSignal++;
    const onAbort = () => {
      // the abort goes after every row of the signal submitted before it
      this.sendRows();
      this.post({ t: "abort", signal: id });
    };
    this.signalIds.set(signal, id);
    this.signals.set(id, { signal, rows: 1, onAbort });
    signal.addEventListener("abort", onAbort, { once: true });
    return id;
  }

  private unwatch(id: number | undefined): void {
    if (id === undefined) return;
    const s = this.signals.get(id);
    if (!s || --s.rows > 0) return;
    this.signals.delete(id);
    this.signalIds.delete(s.signal);
    s.signal.removeEventListener("abort", s.onAbort);
  }

  private settle(row: number, outcome: { done: Generation } | { error: unknown }): void {
    const r = this.rows.get(row);
    if (!r) return;
    this.rows.delete(row);
    // the grammar is this thread's: it goes with its row
    r.constraint?.dispose();
    this.unwatch(r.signal);
    if ("done" in outcome) r.resolve(outcome.done);
    else r.reject(outcome.error);
  }

  /**
   * Queues a message and handles the queue at most one event batch per turn of the event loop. Node hands
   * over every message the engine thread has posted in one go: up to EVENT_WINDOW batches of row events,
   * whose SSE writes could hold this thread for tens of ms with no socket (no /health) served in between.
   * Other messages are cheap and keep their place in the order.
   */
  private receive(m: FromEngineThread): void {
    this.inbox.push(m);
    if (!this.draining) this.drain();
  }

  private drain(): void {
    this.draining = false;
    while (this.inbox.length) {
      const m = this.inbox.shift()!;
      this.onMessage(m);
      if (m.t === "events") {
        // the rest (those queued, and those Node hands over after this one in the same turn) wait a turn
        this.draining = true;
        setImmediate(() => this.drain());
        return;
      }
    }
  }

  private onMessage(m: FromEngineThread): void {
    switch (m.t) {
      case "events": {
        // counters first, so a request that resolves below already shows in /metrics
        for (const [name, s] of Object.entries(m.snapshot)) this.snapshots.set(name, s);
        // rows that end alike (a request's cancelled rows) share one error: making one takes a stack trace
        const errors = new Map<string, Error>();
        for (const ev of m.items) {
          if ("delta" in ev) {
            const r = this.rows.get(ev.row);
            try {
              r?.onDelta?.(ev.delta);
            } catch {
              // a listener's failure (a closed socket) must not stop the other rows; its signal cancels the row
            }
          } else if ("done" in ev) this.settle(ev.row, { done: ev.done });
          else {
            const key = `${ev.error.name}\u0000${ev.error.code}\u0000${ev.error.message}`;
            let e = errors.get(key);
            if (!e) errors.set(key, (e = fromWire(ev.error)));
            this.settle(ev.row, { error: e });
          }
        }
        this.acknowledge();
        return;
      }
      case "guide":
        return void this.answerGuide(m.q, m.row, m.remaining, m.accept);
      case "reply": {
        const c = this.calls.get(m.q);
        if (!c) return;
        this.calls.delete(m.q);
        if (m.error) c.reject(fromWire(m.error));
        else c.resolve(m.value);
        return;
      }
      case "holding":
        this.holding?.();
        this.holding = null;
        return;
      default:
        return;
    }
  }

  /**
   * Counts a handled batch once this thread's event loop has turned: the messages the engine thread posts
   * are handled in one go, and acknowledging within it would let a fast engine thread keep this thread
   * busy with its events, with no socket (no /health) served in between.
   */
  private acknowledge(): void {
    this.unacked++;
    if (this.unacked > 1) return;
    setImmediate(() => {
      Atomics.add(this.cells, CELL.ACKED, this.unacked);
      Atomics.notify(this.cells, CELL.ACKED);
      this.unacked = 0;
    });
  }

  /** Answers the engine thread's question about a guided row: the next mask, or whether a token is taken. */
  private async answerGuide(q: number, row: number, remaining: number | undefined, accept: number | undefined): Promise<void> {
    const c = this.rows.get(row)?.constraint;
    try {
      if (!c) throw new T2sError("cancelled", "the row has ended");
      if (accept !== undefined) {
        const accepted = await c.accept(accept);
        this.post({ t: "guided", q, accepted, finished: c.finished() });
      } else this.post({ t: "guided", q, mask: await c.nextMask(remaining ?? 0) });
    } catch (e) {
      this.post({ t: "guided", q, error: toWire(e) });
    }
  }

  private fail(why: string): void {
    if (this.failed || this.closed) return;
    this.failWith(new T2sError("engine_failed", `the engine thread stopped: ${why}; restart the server`));
  }

  /** Fails every row and call in flight and every later one with `e`. */
  private failWith(e: T2sError): void {
    this.failed ??= e;
    for (const row of [...this.rows.keys()]) this.settle(row, { error: e });
    for (const c of this.calls.values()) c.reject(e);
    this.calls.clear();
    this.outgoing = [];
    this.holding?.();
  }
}
