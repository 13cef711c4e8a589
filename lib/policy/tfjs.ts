/**
 * The in-process policy "tfjs:<model dir>[+<adapter dir>]": the local model sampled directly (no server),
 * through the same chat layer as `t2s serve`, so concurrent episodes are batched together. The adapter is
 * merged into a copy of the weights, as a server would serve it. The backend is T2S_BACKEND or the best
 * available.
 */
import { resolve } from "node:path";
import { UsageError } from "../core/errors.js";
import { loadModel } from "../model/load.js";
import { mergedModel } from "../model/lora.js";
import type { CausalLM } from "../model/model.js";
import { ChatEngine } from "../model/chat.js";
import { openAiToolCalls } from "../model/toolcalls.js";
import { registerPolicyKind } from "./spec.js";
import { PolicyError, type ChatMessage, type Completion, type Policy, type SampleOptions, type ToolSpec } from "./types.js";

/** Splits "<model dir>[+<adapter dir>]". */
export function parseTfjsSpec(rest: string): { modelDir: string; adapterDir: string | null } {
  const [modelDir, adapterDir, extra] = rest.split("+");
  if (!modelDir || extra !== undefined || adapterDir === "") throw new UsageError(`policy 'tfjs:${rest}' must look like tfjs:<model dir> or tfjs:<model dir>+<adapter dir>`);
  return { modelDir: resolve(modelDir), adapterDir: adapterDir ? resolve(adapterDir) : null };
}

/** Returns a Policy that samples the local model (plus adapter) in this process. */
export async function tfjsPolicy(rest: string, opts: { backend?: string } = {}): Promise<Policy> {
  const { modelDir, adapterDir } = parseTfjsSpec(rest);
  const base = await loadModel(modelDir, { backend: opts.backend });
  let served: CausalLM = base;
  if (adapterDir) served = mergedModel(base, adapterDir);
  const engine = new ChatEngine(served);
  return {
    name: `tfjs:${rest}`,
    model: base.name,
    adapter: adapterDir,
    async complete(messages: ChatMessage[], o: SampleOptions & { tools?: ToolSpec[] }): Promise<Completion[]> {
      if (o.signal?.aborted) throw new PolicyError("aborted", "the request was cancelled");
      const started = Date.now();
      let result: Awaited<ReturnType<ChatEngine["complete"]>>;
      try {
        result = await engine.complete({ model: served.name, messages, tools: o.tools, n: o.n, temperature: o.temperature, topP: o.top_p, maxTokens: o.max_tokens, stop: o.stop, seed: o.seed });
      } catch (e) {
        throw new PolicyError("local_model", `the local model failed: ${(e as Error).message}`, { fatal: true });
      }
      const latency = Date.now() - started;
      return result.choices.map((c) => ({
        text: c.content ?? "",
        tool_calls: openAiToolCalls(c.toolCalls),
        finish_reason: c.finishReason,
        tokens_in: result.promptTokens,
        tokens_out: c.ids.length,
        latency_ms: latency,
      }));
    },
    async close() {
      if (served !== base) served.dispose();
      base.dispose();
    },
  };
}

registerPolicyKind("tfjs", (rest) => tfjsPolicy(rest));
