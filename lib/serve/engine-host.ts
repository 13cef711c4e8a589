/**
 * Where `t2s serve`'s generation engines run. "worker" (the default of `t2s serve --engine-thread`): the
 * weights, the engines, adapter merging and prompt logits live in a worker thread (engine-thread/), so the
 * HTTP thread only routes, tokenizes, renders templates, parses tool calls, streams and holds the grammars;
 * /health and /metrics never wait for a step. "main": all of it in the HTTP thread, as a library caller that
 * hands startServer a CausalLM it built gets. Both give the server the same surface: the base model, an
 * engine factory for ChatEngine, adapter merging, the engine's health and a close.
 */
import { T2sError } from "../core/errors.js";
import { mergedModel } from "../model/lora.js";
import type { CausalLM } from "../model/model.js";
import { loadSpecModel } from "./engine-thread/load.js";
import type { EngineFactory, ServedModel } from "../model/served-model.js";
import { EngineThread } from "./engine-thread/thread.js";
import type { EngineLoadSpec, MergeSpec } from "./engine-thread/protocol.js";

import { ENGINE_THREAD_DEFAULT, ENGINE_THREAD_MODES, type EngineThreadMode } from "./engine-thread/protocol.js";

export { ENGINE_THREAD_DEFAULT, ENGINE_THREAD_MODES, type EngineLoadSpec, type EngineThreadMode } from "./engine-thread/protocol.js";

export interface EngineHost {
  readonly mode: EngineThreadMode;
  /** The base model as the HTTP thread sees it. */
  readonly base: ServedModel;
  /** The tfjs backend the weights run on. */
  readonly backend: string;
  /** One line saying what was loaded (null for a model the caller built). */
  readonly loaded: string | null;
  /** ChatEngine's engine factory (undefined: engines in this thread). */
  readonly engines?: EngineFactory;
  /** A copy of the base with the adapter at `dir` merged in, served as `name`. */
  merge(dir: string, name: string, spec: MergeSpec): Promise<ServedModel>;
  /** Why the engine can no longer serve (its thread died), or null. */
  failure(): Error | null;
  /** Frees what the host owns: the engine thread, or a model it loaded itself. */
  close(): Promise<void>;
  /** The engine thread (worker mode), for diagnostics and tests. */
  readonly thread?: EngineThread;
}

/** Engines in this thread over a model built or loaded here; `owned` models are disposed at close. */
export function inThreadHost(model: CausalLM, owned: boolean, loaded: string | null = null): EngineHost {
  return {
    mode: "main",
    base: model,
    backend: model.backend,
    loaded,
    merge: (dir, name, spec) => mergedModel(model, dir, { name, ...spec }),
    failure: () => null,
    close: async () => {
      if (owned) model.dispose();
    },
  };
}

/** The engine thread over a model folder, as an EngineHost. */
function workerHost(thread: EngineThread): EngineHost {
  return {
    mode: "worker",
    base: thread.base,
    backend: thread.backend,
    loaded: thread.loaded,
    engines: thread.engines,
    merge: (dir, name, spec) => thread.merge(dir, name, spec),
    failure: () => thread.failure(),
    close: () => thread.close(),
    thread,
  };
}

/** Starts the host a server asked for: the caller's model in this thread, or a model folder loaded in `mode`. */
export async function startEngineHost(opts: { model?: CausalLM; load?: EngineLoadSpec; engineThread?: EngineThreadMode }): Promise<EngineHost> {
  if (opts.model && opts.load) throw new T2sError("usage", "give the server a model or a load spec, not both");
  if (opts.model) {
    if (opts.engineThread === "worker") throw new T2sError("usage", "an engine thread loads its model from a folder: give a load spec instead of a model built in memory");
    return inThreadHost(opts.model, false);
  }
  if (!opts.load) throw new T2sError("usage", "the server needs a model (a CausalLM) or a load spec (a model folder)");
  const mode = opts.engineThread ?? ENGINE_THREAD_DEFAULT;
  if (!ENGINE_THREAD_MODES.includes(mode)) throw new T2sError("usage", `--engine-thread must be one of ${ENGINE_THREAD_MODES.join(", ")}, got ${mode}`);
  if (mode === "worker") {
    return workerHost(await EngineThread.start(opts.load));
  }
  const { model, loaded } = await loadSpecModel(opts.load);
  return inThreadHost(model, true, loaded);
}
