/**
 * The engine thread of `t2s serve` (a node:worker_threads Worker, started by thread.ts through worker.mjs):
 * it loads the model's weights, runs one GenerationEngine per served model, merges adapters and computes
 * prompt logits, so forward passes and each step's host work never hold the HTTP thread. Rows arrive as
 * plain data; their deltas, results and a snapshot of every engine's counters go back in one message per
 * turn of this thread's event loop (about one per engine step). A guided row's grammar stays in the HTTP
 * thread: the engine asks it for each mask and each advance by message.
 */
import { parentPort, workerData } from "node:worker_threads";
import { T2sError } from "../../core/errors.js";
import { GenerationEngine } from "../../model/engine/generation-engine.js";
import type { SequenceRequest, TokenConstraint } from "../../model/engine/types.js";
import { mergedModel } from "../../model/lora.js";
import type { CausalLM } from "../../model/model.js";
import { loadSpecModel } from "./load.js";
import { CELL, EVENT_WINDOW, EVENTS_PER_BATCH, fromWire, toWire, type EngineCall, type EngineLoadSpec, type EngineSnapshot, type FromEngineThread, type RowEvent, type ToEngineThread, type WireRow } from "./protocol.js";

/** How often (ms) an engine with work posts its snapshot even when no row had an event (admissions, cancellations). */
const SNAPSHOT_EVERY_MS = 50;

/** How long (ms) one wait for the HTTP thread's acknowledgement lasts before the wait is looked at again. */
const ACK_WAIT_SLICE_MS = 1000;

const port = parentPort!;
const { spec, cells } = workerData as { spec: EngineLoadSpec; cells: Int32Array };

const models = new Map<string, CausalLM>();
const engines = new Map<string, GenerationEngine>();
/** The abort controllers of the HTTP thread's signals, with the rows still using each. */
const signals = new Map<number, { abort: AbortController; rows: number }>();
/** Grammar questions waiting for the HTTP thread's answer. */
const guideAnswers = new Map<number, { resolve: (a: { mask?: Int32Array; accepted?: boolean; finished?: boolean }) => void; reject: (e: unknown) => void }>();
let nextQuestion = 1;
let outbox: RowEvent[] = [];
let flushing = false;
let batchesSent = 0;
let lastSnapshot = "";
let base: CausalLM | null = null;

function post(msg: FromEngineThread, transfer: ArrayBuffer[] = []): void {
  port.postMessage(msg, transfer);
}

function snapshot(): Record<string, EngineSnapshot> {
  const out: Record<string, EngineSnapshot> = {};
  // the whole counters object crosses (cloned by postMessage), so counters the engine gains flow through
  for (const [name, e] of engines) out[name] = { metrics: e.metrics, load: e.load, cacheUsage: e.cacheUsage() };
  return out;
}

/**
 * Waits (blocking this thread, so the engine pauses) while the HTTP thread is EVENT_WINDOW batches behind:
 * the tokens of a busy server wait in the engine, not in a queue between the threads.
 */
function waitForRoom(): void {
  for (;;) {
    const acked = Atomics.load(cells, CELL.ACKED);
    if (batchesSent - acked < EVENT_WINDOW) return;
    Atomics.wait(cells, CELL.ACKED, acked, ACK_WAIT_SLICE_MS);
  }
}

/** Sends the events so far (EVENTS_PER_BATCH a batch) and the engines' snapshot (nothing when neither changed). */
function flush(): void {
  flushing = false;
  const snap = snapshot();
  const key = JSON.stringify(snap);
  if (!outbox.length && key === lastSnapshot) return;
  lastSnapshot = key;
  const items = outbox;
  outbox = [];
  for (let at = 0; at === 0 || at < items.length; at += EVENTS_PER_BATCH) {
    waitForRoom();
    batchesSent++;
    Atomics.store(cells, CELL.SENT, batchesSent);
    post({ t: "events", snapshot: snap, items: items.slice(at, at + EVENTS_PER_BATCH) });
  }
}

function scheduleFlush(): void {
  if (flushing) return;
  flushing = true;
  setImmediate(flush);
}

function emit(ev: RowEvent): void {
  outbox.push(ev);
  scheduleFlush();
}

/** A reply goes after every event before it (a closed engine's cancellations precede the close's answer). */
function reply(q: number, value?: unknown, error?: unknown, transfer: ArrayBuffer[] = []): void {
  if (outbox.length) flush();
  post(error === undefined ? { t: "reply", q, value } : { t: "reply", q, error: toWire(error) }, transfer);
}

function signalOf(id: number): AbortSignal {
  let s = signals.get(id);
  if (!s) signals.set(id, (s = { abort: new AbortController(), rows: 0 }));
  s.rows++;
  return s.abort.signal;
}

function releaseSignal(id: number | undefined): void {
  if (id === undefined) return;
  const s = signals.get(id);
  if (s && --s.rows <= 0) signals.delete(id);
}

function ask(row: number, q: { remaining?: number; accept?: number }): Promise<{ mask?: Int32Array; accepted?: boolean; finished?: boolean }> {
  const id = nextQuestion++;
  return new Promise((resolve, reject) => {
    guideAnswers.set(id, { resolve, reject });
    post({ t: "guide", q: id, row, ...q });
  });
}

/** A row's grammar as the engine sees it: each mask and advance answered by the HTTP thread, which disposes it when the row settles. */
function remoteConstraint(row: number): TokenConstraint {
  let finished = false;
  return {
    nextMask: async (remaining) => (await ask(row, { remaining })).mask!,
    accept: async (id) => {
      const a = await ask(row, { accept: id });
      finished = a.finished === true;
      return a.accepted === true;
    },
    finished: () => finished,
    dispose: () => undefined,
  };
}

function submit(rows: WireRow[]): void {
  for (const w of rows) {
    const engine = engines.get(w.model);
    if (!engine) {
      emit({ row: w.row, error: toWire(new T2sError("engine_closed", `the engine of ${w.model} was closed`)) });
      continue;
    }
    const req: SequenceRequest = {
      ...w.req,
      signal: w.aborted ? AbortSignal.abort() : w.signal === undefined ? undefined : signalOf(w.signal),
      constraint: w.guided ? remoteConstraint(w.row) : undefined,
      onDelta: w.deltas ? (delta) => emit({ row: w.row, delta }) : undefined,
    };
    engine.submit(req).then(
      (done) => emit({ row: w.row, done }),
      (e: unknown) => emit({ row: w.row, error: toWire(e) }),
    ).finally(() => releaseSignal(w.signal));
  }
  scheduleFlush();
}

function model(name: string): CausalLM {
  const m = models.get(name);
  if (!m) throw new T2sError("model_not_found", `model '${name}' is not loaded in the engine thread`);
  return m;
}

async function call(c: EngineCall): Promise<{ value?: unknown; transfer?: ArrayBuffer[] }> {
  switch (c.op) {
    case "engine": {
      let e = engines.get(c.model);
      if (!e) engines.set(c.model, (e = await GenerationEngine.create(model(c.model), c.opts)));
      return { value: snapshot()[c.model] };
    }
    case "closeEngine": {
      const e = engines.get(c.model);
      if (!e) return {};
      await e.close();
      engines.delete(c.model);
      return { value: { metrics: e.metrics, load: e.load, cacheUsage: 0 } satisfies EngineSnapshot };
    }
    case "weightsChanged":
      engines.get(c.model)?.weightsChanged();
      return {};
    case "merge": {
      if (models.has(c.name)) throw new T2sError("usage", `two served models are named ${c.name}; give each adapter its own name`);
      models.set(c.name, await mergedModel(base!, c.dir, { name: c.name, ...c.spec }));
      return {};
    }
    case "dispose": {
      const m = models.get(c.model);
      if (m && m !== base) {
        models.delete(c.model);
        m.dispose();
      }
      return {};
    }
    case "logits": {
      const rows = await model(c.model).logitsOf(c.ids);
      return { value: rows, transfer: rows.map((r) => r.buffer as ArrayBuffer) };
    }
    case "shutdown": {
      for (const e of engines.values()) await e.close();
      engines.clear();
      for (const m of models.values()) m.dispose();
      models.clear();
      return {};
    }
  }
}

/** Blocks this thread until the HTTP thread clears the HOLD cell (tests: the server answers while its engine is busy). */
function hold(): void {
  Atomics.store(cells, CELL.HOLD, 1);
  post({ t: "holding" });
  while (Atomics.load(cells, CELL.HOLD) === 1) Atomics.wait(cells, CELL.HOLD, 1, ACK_WAIT_SLICE_MS);
}

function onMessage(msg: ToEngineThread): void {
  switch (msg.t) {
    case "submit":
      return submit(msg.rows);
    case "abort":
      signals.get(msg.signal)?.abort.abort();
      return;
    case "guided": {
      const a = guideAnswers.get(msg.q);
      if (!a) return;
      guideAnswers.delete(msg.q);
      if (msg.error) a.reject(fromWire(msg.error));
      else a.resolve(msg);
      return;
    }
    case "call":
      call(msg.call).then(
        (r) => reply(msg.q, r.value, undefined, r.transfer),
        (e: unknown) => reply(msg.q, undefined, e),
      );
      return;
    case "hold":
      return hold();
  }
}

async function start(): Promise<void> {
  try {
    const { model: m, loaded } = await loadSpecModel(spec);
    base = m;
    models.set(m.name, m);
    port.on("message", onMessage);
    // an engine with work posts its state even in turns without events, so /health sees the line move
    setInterval(() => {
      for (const e of engines.values()) if (e.load.running || e.load.waiting) return scheduleFlush();
      if (JSON.stringify(snapshot()) !== lastSnapshot) scheduleFlush();
    }, SNAPSHOT_EVERY_MS);
    post({ t: "ready", backend: m.backend, loaded });
  } catch (e) {
    post({ t: "loadFailed", error: toWire(e) });
  }
}

void start();
