/**
 * Loads the served base model from a load spec, the same way on either side of the engine thread: the
 * weights, the sampling quantization and the KV cache's storage, and the one line `t2s serve` prints about it.
 */
import { describeLoad, loadForSampling } from "../../model/load.js";
import type { CausalLM } from "../../model/model.js";
import { resolveKvCacheDtype } from "../../model/engine/runners.js";
import type { EngineLoadSpec } from "./protocol.js";

/** The model of `spec`, quantized and with its cache storage set (a refused setting frees it), and its load line. */
export async function loadSpecModel(spec: EngineLoadSpec): Promise<{ model: CausalLM; loaded: string }> {
  const model = await loadForSampling(spec.dir, { backend: spec.backend, name: spec.name, contextLength: spec.contextLength, weightsDtype: spec.weightsDtype, quantization: spec.quantization, kvCacheDtype: spec.kvCacheDtype });
  return { model, loaded: `${describeLoad(model)}${model.quantization ? `; sampling ${model.quantization}` : ""}; KV cache ${resolveKvCacheDtype(model)}` };
}
