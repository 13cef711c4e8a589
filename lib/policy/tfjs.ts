/**
 * The in-process policy: a model sampled directly (no server) through the same chat layer as `t2s serve`,
 * so concurrent episodes are batched together and each request's sampling settings (temperature, top_p,
 * max_tokens, stop, seed) reach the engine. `chatPolicy` answers requests on a given chat engine (the GRPO
 * sampler's, with the adapter being trained); "tfjs:<model dir>[+<adapter dir>]" loads a model for it, on
 * T2S_BACKEND or the best backend available. The adapter is applied unmerged, its low-rank pair beside the
 * frozen base (y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ, as the GRPO sampler and the trainer run it): folding it into the
 * weights would make a float32 copy of every matrix it targets (an adapter on the seven projections of a
 * 7B base: 26 GB beside its 13 GB of 16-bit weights). With `quantization: "int8"` the base samples W8A8 and the
 * adapter stays float32 beside it, as `t2s serve --quantization int8` runs it.
 */
import { resolve } from "node:path";
import { UsageError, isT2sError } from "../core/errors.js";
import { loadForSampling } from "../model/load.js";
import { attachAdapter } from "../model/lora.js";
import type { QuantizationName } from "../model/quantization.js";
import type { KvCacheDtypeName } from "../model/kv-cache-dtype.js";
import { ChatEngine, type ChatResult } from "../model/chat.js";
import { openAiToolCalls } from "../model/toolcalls.js";
import { registerPolicyKind } from "./spec.js";
import { CONTEXT_EXCEEDED, PolicyError, type ChatMessage, type Completion, type Policy, type SampleOptions, type ToolSpec } from "./types.js";

/** Splits "<model dir>[+<adapter dir>]". */
export function parseTfjsSpec(rest: string): { modelDir: string; adapterDir: string | null } {
  const [modelDir, adapterDir, extra] = rest.split("+");
  if (!modelDir || extra !== undefined || adapterDir === "") throw new UsageError(`policy 'tfjs:${rest}' must look like tfjs:<model dir> or tfjs:<model dir>+<adapter dir>`);
  return { modelDir: resolve(modelDir), adapterDir: adapterDir ? resolve(adapterDir) : null };
}

/** A Policy on a chat engine, whose `turn` also returns the engine's result (prompt ids, generated ids, log-probs). */
export interface ChatPolicy extends Policy {
  turn(messages: ChatMessage[], opts: SampleOptions & { tools?: ToolSpec[] }): Promise<{ completions: Completion[]; result: ChatResult }>;
}

/**
 * Returns a Policy that answers on `engine` with its model named `served` (default `ident.model`): every
 * request's sampling settings go to the engine as they are, and the choices come back as the OpenAI
 * protocol carries them.
 */
export function chatPolicy(engine: ChatEngine, ident: { name: string; model: string; adapter: string | null }, served = ident.model): ChatPolicy {
  const turn: ChatPolicy["turn"] = async (messages, o) => {
    if (o.signal?.aborted) throw new PolicyError("aborted", "the request was cancelled");
    const started = Date.now();
    let result: ChatResult;
    try {
      result = await engine.complete(
        { model: served, messages, tools: o.tools, n: o.n, temperature: o.temperature, topP: o.top_p, maxTokens: o.max_tokens, stop: o.stop, seed: o.seed },
        { signal: o.signal },
      );
    } catch (e) {
      if (o.signal?.aborted) throw new PolicyError("aborted", "the request was cancelled");
      // a prompt that fills the model's window: the same setup error a server's refusal is
      if (isT2sError(e, "context_length_exceeded")) throw new PolicyError(CONTEXT_EXCEEDED, `${ident.name}: ${(e as Error).message}`, { setup: true });
      throw new PolicyError("local_model", `the local model failed: ${(e as Error).message}`, { fatal: true });
    }
    const latency = Date.now() - started;
    const completions = result.choices.map((c) => ({
      text: c.content ?? "",
      tool_calls: openAiToolCalls(c.toolCalls),
      finish_reason: c.finishReason,
      tokens_in: result.promptTokens,
      tokens_out: c.ids.length,
      latency_ms: latency,
    }));
    return { completions, result };
  };
  return {
    ...ident,
    turn,
    complete: async (messages, o) => (await turn(messages, o)).completions,
    promptTokens: async (messages, tools) => engine.promptIds({ model: served, messages, tools }).length,
    contextWindow: () => engine.model(served).config.maxPositions,
  };
}

/** Returns a Policy that samples the local model (plus adapter) in this process. */
export async function tfjsPolicy(rest: string, opts: { backend?: string; quantization?: QuantizationName; kvCacheDtype?: KvCacheDtypeName; allowBaseMismatch?: boolean } = {}): Promise<Policy> {
  const { modelDir, adapterDir } = parseTfjsSpec(rest);
  const base = await loadForSampling(modelDir, { backend: opts.backend, quantization: opts.quantization, kvCacheDtype: opts.kvCacheDtype });
  let engine: ChatEngine;
  try {
    if (adapterDir) attachAdapter(base, adapterDir, { name: ADAPTER, allowBaseMismatch: opts.allowBaseMismatch });
    engine = new ChatEngine(base, [], { adapter: adapterDir ? ADAPTER : undefined });
  } catch (e) {
    base.dispose();
    throw e;
  }
  return {
    ...chatPolicy(engine, { name: `tfjs:${rest}`, model: base.name, adapter: adapterDir }),
    quantization: base.quantization,
    async close() {
      base.dispose();
    },
  };
}

/** The name the policy's adapter is attached under (unmerged, beside the base). */
const ADAPTER = "adapter";

registerPolicyKind("tfjs", (rest, opts) => tfjsPolicy(rest, { quantization: opts.quantization, kvCacheDtype: opts.kvCacheDtype, allowBaseMismatch: opts.allowBaseMismatch }));
