/**
 * The messages between `t2s serve`'s HTTP thread and its engine thread (the worker that holds the weights
 * and runs the generation engines). Only plain data crosses: a row's request without its signal, listener
 * and grammar; the engine's deltas and results; a snapshot of every engine's counters; calls and replies.
 * EngineMetrics crosses as the whole object, so a counter the engine gains flows through unchanged.
 */
import { T2sError, UsageError } from "../../core/errors.js";
import type { EngineMetrics, EngineOptions } from "../../model/engine/types.js";
import type { Generation, SequenceRequest, TokenDelta } from "../../model/engine/types.js";
import type { AdapterLimits } from "../../model/lora-read.js";
import type { QuantizationName } from "../../model/quantization.js";
import type { KvCacheDtypeName } from "../../model/kv-cache-dtype.js";
import type { WeightsDtype } from "../../model/weights-dtype.js";

/** Where a served model's engine runs: a worker thread of its own, or the HTTP server's thread. */
export type EngineThreadMode = "worker" | "main";
export const ENGINE_THREAD_MODES: readonly EngineThreadMode[] = ["worker", "main"];
/** `t2s serve` runs its engine in a worker thread unless told otherwise (--engine-thread main). */
export const ENGINE_THREAD_DEFAULT: EngineThreadMode = "worker";

/** What the engine thread loads: a model folder and the options `t2s serve` gives loadModel. */
export interface EngineLoadSpec {
  /** The model folder (config.json, safetensors, tokenizer files). */
  dir: string;
  /** Name the base model is served under (default: the folder's base name). */
  name?: string;
  /** tfjs backend: auto (default), webgpu, tensorflow, wasm, cpu. */
  backend?: string;
  /** Longest prompt + completion (default: config.json's max_position_embeddings). */
  contextLength?: number;
  weightsDtype?: WeightsDtype;
  quantization?: QuantizationName;
  /** The KV cache's storage (default auto: 16-bit beside 16-bit weights on WebGPU). */
  kvCacheDtype?: KvCacheDtypeName;
}

/** How an adapter is merged: the caps and the base rule the server applies, and the roots it is confined to. */
export interface MergeSpec {
  roots?: string[];
  limits: AdapterLimits;
  allowBaseMismatch: boolean;
}

/** A row's request as it crosses: no signal, listener or grammar (those stay in the HTTP thread). */
export type WireRequest = Omit<SequenceRequest, "signal" | "onDelta" | "constraint" | "logitBias"> & { logitBias?: [number, number][] };

/** An error as it crosses: a kit error keeps its code, so the client gets the same status as in one thread. */
export interface WireError {
  name?: string;
  code?: string;
  message: string;
}

/** One engine's state after a step: its whole counters object, its load and its cache use. */
export interface EngineSnapshot {
  metrics: EngineMetrics;
  load: { running: number; waiting: number };
  cacheUsage: number;
}

/** A row submitted to a served model's engine. */
export interface WireRow {
  row: number;
  model: string;
  req: WireRequest;
  /** The id of the row's abort signal in the HTTP thread (rows of one request share it). */
  signal?: number;
  /** The signal had already fired when the row was submitted: the engine cancels it (and counts it) at once. */
  aborted?: boolean;
  /** The row's grammar lives in the HTTP thread: the engine asks for masks and advances by message. */
  guided: boolean;
  /** Whether the HTTP thread wants the row's deltas. */
  deltas: boolean;
}

/** Calls the HTTP thread makes; each gets one reply. */
export type EngineCall =
  | { op: "engine"; model: string; opts: EngineOptions }
  | { op: "closeEngine"; model: string }
  | { op: "weightsChanged"; model: string }
  | { op: "merge"; name: string; dir: string; spec: MergeSpec }
  | { op: "dispose"; model: string }
  | { op: "logits"; model: string; ids: number[] }
  | { op: "shutdown" };

export type ToEngineThread =
  | { t: "submit"; rows: WireRow[] }
  | { t: "abort"; signal: number }
  | { t: "call"; q: number; call: EngineCall }
  | { t: "guided"; q: number; mask?: Int32Array; accepted?: boolean; finished?: boolean; error?: WireError }
  | { t: "hold" };

/** What happened to a row: new tokens, its generation, or the error that ended it. */
export type RowEvent = { row: number; delta: TokenDelta } | { row: number; done: Generation } | { row: number; error: WireError };

export type FromEngineThread =
  | { t: "ready"; backend: string; loaded: string }
  | { t: "loadFailed"; error: WireError }
  | { t: "events"; snapshot: Record<string, EngineSnapshot>; items: RowEvent[] }
  | { t: "guide"; q: number; row: number; remaining?: number; accept?: number }
  | { t: "reply"; q: number; value?: unknown; error?: WireError }
  | { t: "holding" };

/**
 * Cells shared by both threads (an Int32Array over a SharedArrayBuffer): SENT counts the event batches the
 * engine thread has posted and ACKED those the HTTP thread has handled (counted once its event loop has
 * turned after them, so its sockets are served between batches), which the engine thread waits on when it
 * is EVENT_WINDOW batches ahead; HOLD is set while the engine thread is held (tests and
 * diagnostics: the server must answer while the engine is busy).
 */
export const CELL = { SENT: 0, ACKED: 1, HOLD: 2 } as const;
export const CELLS = 3;

/**
 * Event batches (about one per engine step) the engine thread may have sent and the HTTP thread not yet
 * handled: past it the engine thread waits, so a busy HTTP thread slows the engine instead of queueing
 * its tokens without bound.
 */
export const EVENT_WINDOW = 8;

/**
 * Row events in one batch at most: a turn in which thousands of rows end (a client with 65,536 queued rows
 * leaves) goes over in several batches, so the HTTP thread handles at most EVENT_WINDOW x this many before
 * it answers /health again (it acknowledges a batch only after its event loop has turned).
 */
export const EVENTS_PER_BATCH = 512;

/** An error as it crosses the thread boundary. */
export function toWire(e: unknown): WireError {
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    return { name: e.name, message: e.message, code: typeof code === "string" ? code : undefined };
  }
  return { message: String(e) };
}

/** The error a WireError stands for: a kit error comes back as one, with its code. */
export function fromWire(w: WireError): Error {
  if (w.name === "UsageError") return new UsageError(w.message);
  if (w.code !== undefined && w.name === "T2sError") return new T2sError(w.code, w.message);
  const e = new Error(w.message);
  if (w.name) e.name = w.name;
  return e;
}
