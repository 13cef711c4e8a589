/**
 * LoRA weight names and the layouts servers place them by. A PEFT adapter names each matrix
 * `base_model.model.<module>.lora_A[.<adapter>].weight`, where <module> is the module's path in the model
 * PEFT wrapped. That path depends on the class the adapter was trained on:
 *  - peft:            `model.layers.N.self_attn.q_proj` (a text CausalLM; also what vLLM uses for one)
 *  - peft-multimodal: `model.language_model.layers.N...` (the Hugging Face multimodal wrapper, e.g.
 *                     Qwen3.5 / Qwen3-VL ...ForConditionalGeneration)
 *  - vllm-multimodal: `language_model.model.layers.N...` (vLLM's own module names for that wrapper; it
 *                     maps checkpoint names `model.language_model.` to them)
 * A server that cannot place a name skips it without a word, so an adapter of the wrong layout serves the
 * base model: adapter-check.ts checks names against a base, and keyInLayout rewrites them.
 */

export type LoraLayout = "peft" | "peft-multimodal" | "vllm-multimodal";
export const LORA_LAYOUTS: readonly LoraLayout[] = ["peft", "peft-multimodal", "vllm-multimodal"];

/** Where the decoder's modules (layers, embed_tokens, norm) sit in each layout. */
const TEXT_PREFIX: Record<LoraLayout, string> = { peft: "model.", "peft-multimodal": "model.language_model.", "vllm-multimodal": "language_model.model." };
/** Where the output head sits in each layout. */
const HEAD_PREFIX: Record<LoraLayout, string> = { peft: "", "peft-multimodal": "", "vllm-multimodal": "language_model." };
const PEFT_ROOT = "base_model.model.";
const KEY = /^(.+?)\.(lora_A|lora_B|lora_embedding_A|lora_embedding_B)((?:\.[A-Za-z0-9_-]+)?(?:\.weight)?)$/;

/** One adapter weight name taken apart. */
export interface LoraKey {
  key: string;
  /** The wrapped module's path (without `base_model.model.`), e.g. `model.layers.0.self_attn.q_proj`. */
  module: string;
  /** lora_A, lora_B, lora_embedding_A or lora_embedding_B. */
  part: string;
  /** What follows the part: `.weight`, `.default.weight` or nothing. */
  tail: string;
  /** The layout the module path is written in (null: a path no layout names, e.g. a vision tower's). */
  layout: LoraLayout | null;
  /** The path inside the decoder (`layers.0.self_attn.q_proj`), `lm_head` for the head, or null. */
  inner: string | null;
}

/** Returns the parts of a LoRA weight name, or null when the name is not one (no lora_A/lora_B part). */
export function parseLoraKey(key: string): LoraKey | null {
  const body = key.startsWith(PEFT_ROOT) ? key.slice(PEFT_ROOT.length) : key;
  const m = KEY.exec(body);
  if (!m) return null;
  const module = m[1];
  let layout: LoraLayout | null = null;
  let inner: string | null = null;
  // longest prefixes first: "model.language_model." also starts with "model."
  for (const l of ["peft-multimodal", "vllm-multimodal", "peft"] as const) {
    if (module.startsWith(TEXT_PREFIX[l])) {
      layout = l;
      inner = module.slice(TEXT_PREFIX[l].length);
      break;
    }
  }
  if (layout === null && module === "language_model.lm_head") [layout, inner] = ["vllm-multimodal", "lm_head"];
  if (layout === null && module === "lm_head") [layout, inner] = ["peft", "lm_head"];
  return { key, module, part: m[2], tail: m[3], layout, inner };
}

/** The module path of a decoder-relative path (`layers.0.mlp.up_proj`, or `lm_head`) in a layout. */
export function modulePath(inner: string, layout: LoraLayout): string {
  return inner === "lm_head" ? `${HEAD_PREFIX[layout]}lm_head` : `${TEXT_PREFIX[layout]}${inner}`;
}

/** The weight name of a parsed key written in another layout (a path no layout names stays as it is). */
export function keyInLayout(k: LoraKey, layout: LoraLayout): string {
  const module = k.inner === null ? k.module : modulePath(k.inner, layout);
  return `${PEFT_ROOT}${module}.${k.part}${k.tail}`;
}

/** The PEFT (text CausalLM) weight name of one LoRA matrix of a decoder layer's module. */
export function peftLoraKey(layer: number, group: string, module: string, which: "A" | "B"): string {
  return `${PEFT_ROOT}${modulePath(`layers.${layer}.${group}.${module}`, "peft")}.lora_${which}.weight`;
}

/**
 * vLLM's name for a checkpoint module of a base model: for a multimodal wrapper the decoder moves from
 * `model.language_model.` to `language_model.model.`, the head to `language_model.lm_head` and the vision
 * tower from `model.visual.` to `visual.`; a text model keeps its checkpoint names.
 */
export function vllmModuleName(checkpointModule: string, multimodal: boolean): string {
  if (!multimodal) return checkpointModule;
  if (checkpointModule.startsWith("model.language_model.")) return `language_model.model.${checkpointModule.slice("model.language_model.".length)}`;
  if (checkpointModule === "lm_head") return "language_model.lm_head";
  if (checkpointModule.startsWith("model.visual.")) return `visual.${checkpointModule.slice("model.visual.".length)}`;
  return checkpointModule;
}
