/**
 * What the chat layer needs of a served model and of its generation engine, whichever thread holds the
 * weights: a CausalLM and a GenerationEngine in this thread satisfy these interfaces as they are, and
 * `t2s serve`'s engine thread (lib/serve/engine-thread/) gives the same surface from another thread, so
 * one request path serves both.
 */
import type { EngineMetrics, EngineOptions } from "./engine/types.js";
import type { Generation, SequenceRequest } from "./engine/types.js";
import type { ModelConfig } from "./config.js";
import type { ChatTokenizer } from "./tokenizer.js";

/** A model as the chat layer and the server see it: its name, config and tokenizer, never its weights. */
export interface ServedModel {
  readonly name: string;
  readonly config: ModelConfig;
  readonly tokenizer: ChatTokenizer | null;
  /** The model folder it came from (null: built in memory). */
  readonly dir: string | null;
  /** The tfjs backend its weights run on. */
  readonly backend: string;
  /** The tokenizer; throws T2sError("no_tokenizer") when there is none. */
  requireTokenizer(): ChatTokenizer;
  /** The logits of every position of one id sequence (echo with logprobs). */
  logitsOf(ids: number[]): Promise<Float32Array[]>;
  /** Frees what the model holds (a merged adapter's weights). */
  dispose(): void;
}

/** The part of GenerationEngine the chat layer uses: submit rows, read the load and counters, close. */
export interface SequenceEngine {
  /** Queues a sequence; resolves with its generation (rejects with `cancelled` if its signal aborts). */
  submit(req: SequenceRequest): Promise<Generation>;
  /** Cancels what is queued or running and frees the engine. */
  close(): Promise<void>;
  /** Sequences decoding now and waiting for a slot. */
  readonly load: { running: number; waiting: number };
  /** The engine's counters (a snapshot taken after a step, for an engine in another thread). */
  readonly metrics: EngineMetrics;
  /** The fraction of the engine's KV-cache token slots in use. */
  cacheUsage(): number;
  /** The served weights changed: what the engine derived from them is dropped. */
  weightsChanged(): void;
}

/** Makes the engine of a served model. */
export type EngineFactory = (model: ServedModel, opts: EngineOptions) => Promise<SequenceEngine>;
