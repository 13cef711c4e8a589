/**
 * `t2s adapter check` and `t2s adapter convert`: does every LoRA weight of an adapter name a module of the
 * base model, under the rules PEFT (Hugging Face) and vLLM place weights by (see lora-layout.ts), with
 * shapes that fit, and does the adapter change anything at all (a lora_B or lora_A of zeros is a no-op)?
 * What does each runtime (the kit, PEFT, vLLM) do with what adapter_config.json and the weights say beyond
 * plain LoRA (per-module rank/alpha patterns, DoRA, embedding LoRA, bias, modules_to_save)? One finding per
 * cause, never one per key. And: rewrite the names for another layout. Reads only safetensors headers of the
 * base, so a 35B base is checked without loading it.
 */
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { T2sError } from "../core/errors.js";
import { readWholeFile, runSync } from "./adapter-files.js";
import { BASE_RECORD_KEY, baseDifferences, readBaseRecord, recordInMetadata, recordMetadata, type BaseRecord } from "./base-record.js";
import { readConfig } from "./config.js";
import { keyInLayout, LORA_LAYOUTS, parseLoraKey, vllmModuleName, type LoraKey, type LoraLayout } from "./lora-layout.js";
import { readAdapterSteps, type LoraBase } from "./lora-read.js";
import { jsonErrorPosition, readSafetensors, readSafetensorsHeader, readSafetensorsMetadata, readWeightMap, writeSafetensors, type StDtype } from "./safetensors.js";

/** The modules of a base checkpoint: module path -> weight shape, and whether it is a multimodal wrapper. */
export interface BaseModules {
  modules: Map<string, number[]>;
  multimodal: boolean;
}

/** Reads the base's module names and weight shapes from its safetensors headers (single file or shards). */
export function readBaseModules(dir: string): BaseModules {
  const map = readWeightMap(dir);
  const files: string[] = [];
  if (map) files.push(...new Set(Object.values(map)).values());
  else if (existsSync(join(dir, "model.safetensors"))) files.push("model.safetensors");
  else throw new T2sError("missing_file", `${dir} has neither model.safetensors nor model.safetensors.index.json (is it a base model folder?)`);
  const modules = new Map<string, number[]>();
  for (const f of files) {
    for (const [name, e] of Object.entries(readSafetensorsHeader(join(dir, f)))) {
      if (name.endsWith(".weight")) modules.set(name.slice(0, -".weight".length), e.shape);
    }
  }
  // tied embeddings: the head has no weight of its own, but servers still place a LoRA on lm_head
  const embed = [...modules.keys()].find((m) => m.endsWith("embed_tokens"));
  if (!modules.has("lm_head") && embed) modules.set("lm_head", modules.get(embed)!);
  const multimodal = [...modules.keys()].some((m) => m.startsWith("model.language_model."));
  return { modules, multimodal };
}

export type CheckTarget = "kit" | "peft" | "vllm";
export const CHECK_TARGETS: readonly CheckTarget[] = ["kit", "peft", "vllm"];

/** What one runtime does with a cause: serves it as trained, serves something else (or refuses), or may. */
export type Verdict = "ok" | "warn" | "fail";

/** One thing the adapter holds beyond plain LoRA A/B pairs, and what each runtime does with it. */
export interface ConfigFinding {
  cause: "missing_config" | "pattern" | "dora" | "embedding" | "bias" | "modules_to_save";
  /** What the adapter holds, e.g. `use_dora in adapter_config.json, 28 lora_magnitude_vector weights`. */
  what: string;
  runtimes: Record<CheckTarget, { verdict: Verdict; says: string }>;
}

export interface PlacementResult {
  /** Weight names placed on a base module. */
  matched: number;
  /** Weight names that name no module of the base under these rules (a server skips them). */
  unmatched: string[];
}

export interface AdapterCheck {
  base: string;
  adapter: string;
  multimodal: boolean;
  keys: number;
  /** How many keys are written in each layout (null: in none). */
  layouts: Record<string, number>;
  peft: PlacementResult;
  vllm: PlacementResult;
  /** Pairs whose shapes do not fit the base module ([out, in] against A [r, in], B [out, r]). */
  shapeErrors: string[];
  /** lora_B (or lora_A) weights that are all zeros: that module's update is a no-op. */
  zeroKeys: string[];
  /** LoRA pairs (A and B of one module) in the file. */
  pairs: number;
  /** What adapter_config.json and the special weights mean for each runtime, one finding per cause. */
  findings: ConfigFinding[];
  /** The kit's own loader run on this base (null when `kit` is not a target): ok, or what it refuses. */
  kit: { ok: boolean; code?: string; error?: string } | null;
  /** The base the adapter records (null: none) against this base's record, and what differs. */
  baseRecord: BaseComparison;
  /** Problems that fail the check, one line each; empty when it passes. */
  failures: string[];
  /** Things a selected runtime may do differently, one line each (they do not fail the check). */
  warnings: string[];
}

function placement(keys: LoraKey[], names: Set<string>, rename: (m: string) => string): PlacementResult {
  const unmatched = keys.filter((k) => !names.has(rename(k.module))).map((k) => k.key);
  return { matched: keys.length - unmatched.length, unmatched };
}

const list = (keys: string[]) => `${keys.slice(0, 5).join(", ")}${keys.length > 5 ? ` and ${keys.length - 5} more` : ""}`;

/** An adapter's recorded base against the base it is checked on. */
export interface BaseComparison {
  recorded: BaseRecord | null;
  actual: BaseRecord | null;
  /** What differs (config.json, weight names and shapes, weight values); empty when the same or unknown. */
  differs: string[];
  /** Why the base's own record could not be read, when it could not. */
  unreadable?: string;
}

/** The adapter's recorded base compared with the base folder's, by the loader's own rules (base-record.ts). */
function compareBase(baseDir: string, metadata: Record<string, string>): BaseComparison {
  const recorded = recordInMetadata(metadata);
  if (!recorded) return { recorded: null, actual: null, differs: [] };
  try {
    const actual = readBaseRecord(baseDir);
    return { recorded, actual, differs: baseDifferences(recorded, actual) };
  } catch (e) {
    return { recorded, actual: null, differs: [], unreadable: (e as Error).message };
  }
}

/**
 * The kit's loader (lib/model/lora-read.ts, as t2s serve, benchmark's tfjs policy and train's init run
 * it) on this base's config.json, reading no tensor data; null when it accepts the adapter. The recorded
 * base is compared apart (compareBase), for every runtime.
 */
function kitRefusal(baseDir: string, adapterDir: string): { code?: string; error: string } | null {
  try {
    const base: LoraBase = { name: basename(resolve(baseDir)), config: readConfig(resolve(baseDir)), dir: resolve(baseDir) };
    runSync(readAdapterSteps(resolve(adapterDir), base, { allowBaseMismatch: true }));
    return null;
  } catch (e) {
    return { code: (e as { code?: string }).code, error: (e as Error).message };
  }
}

/**
 * Checks an adapter folder against a base folder under the rules of `targets` (default both PEFT and
 * vLLM). Returns the facts and `failures`: keys that are not LoRA weights, keys a target cannot place,
 * shapes that do not fit, an adapter whose every pair is zero, what the kit's own loader refuses (target
 * `kit`), and an adapter recorded as trained on another base (a warning with `allowBaseMismatch`).
 */
export function checkAdapter(baseDir: string, adapterDir: string, targets: readonly CheckTarget[] = ["peft", "vllm"], opts: { allowBaseMismatch?: boolean } = {}): AdapterCheck {
  const base = readBaseModules(resolve(baseDir));
  const wFile = join(resolve(adapterDir), "adapter_model.safetensors");
  if (!existsSync(wFile)) throw new T2sError("missing_file", `${adapterDir} has no adapter_model.safetensors (is it a PEFT adapter folder?)`);
  const tensors = readSafetensors(wFile);
  const config = readAdapterConfig(adapterDir);
  const special = specialKeys([...tensors.keys()], Array.isArray(config?.modules_to_save) ? (config!.modules_to_save as unknown[]).map(String) : []);
  const explained = new Set([...special.magnitude, ...special.bias, ...special.saved]);
  const parsed: LoraKey[] = [];
  const notLora: string[] = [];
  for (const key of tensors.keys()) {
    if (explained.has(key)) continue;
    const k = parseLoraKey(key);
    if (k) parsed.push(k);
    else notLora.push(key);
  }
  const findings = configFindings(config, special, parsed, tensors);
  const layouts: Record<string, number> = {};
  for (const k of parsed) layouts[k.layout ?? "none"] = (layouts[k.layout ?? "none"] ?? 0) + 1;
  const peftNames = new Set(base.modules.keys());
  const vllmNames = new Set([...base.modules.keys()].map((m) => vllmModuleName(m, base.multimodal)));
  const peft = placement(parsed, peftNames, (m) => m);
  const vllm = placement(parsed, vllmNames, (m) => vllmModuleName(m, base.multimodal));

  const byModule = new Map<string, { A?: number[]; B?: number[] }>();
  const zeroKeys: string[] = [];
  for (const k of parsed) {
    const t = tensors.get(k.key)!;
    const half = k.part.endsWith("A") ? "A" : "B";
    if (!byModule.has(k.module)) byModule.set(k.module, {});
    byModule.get(k.module)![half] = t.shape;
    if (t.data.every((v) => v === 0)) zeroKeys.push(k.key);
  }
  const shapeErrors: string[] = [];
  for (const [module, { A, B }] of byModule) {
    if (!A || !B) {
      shapeErrors.push(`${module} has lora_${A ? "A" : "B"} but not its partner`);
      continue;
    }
    const w = base.modules.get(module);
    if (!w || w.length !== 2 || module.endsWith("embed_tokens")) continue; // placement reports a missing module; embeddings store A/B transposed
    const [out, inp] = w;
    if (A.length !== 2 || B.length !== 2 || A[1] !== inp || B[0] !== out || B[1] !== A[0]) shapeErrors.push(`${module}: A [${A}] and B [${B}] do not fit the base weight [${out}, ${inp}]`);
  }
  const zeroModules = new Set(parsed.filter((k) => zeroKeys.includes(k.key)).map((k) => k.module));
  const failures: string[] = [];
  if (parsed.length === 0) failures.push(`${wFile} holds no LoRA weights at all`);
  if (notLora.length) failures.push(`${notLora.length} weight(s) are not LoRA A/B matrices: ${list(notLora)}`);
  for (const t of targets) {
    if (t === "kit") continue; // the kit reads PEFT's names (lib/model/lora.ts); its refusals are findings
    const r = t === "peft" ? peft : vllm;
    if (r.unmatched.length) {
      const hint = suggestedLayout(parsed, base, t);
      failures.push(`${r.unmatched.length} of ${parsed.length} weight(s) name no module of the base under ${t === "peft" ? "PEFT's" : "vLLM's"} names, so ${t === "peft" ? "PEFT" : "vLLM"} would skip them${hint ? ` (t2s adapter convert --to ${hint} fixes the names)` : ""}: ${list(r.unmatched)}`);
    }
  }
  failures.push(...shapeErrors.map((s) => `shape mismatch: ${s}`));
  if (byModule.size > 0 && zeroModules.size === byModule.size) failures.push(`every LoRA pair has an all-zero matrix, so the adapter changes nothing (a no-op): ${list(zeroKeys)}`);
  const warnings: string[] = [];
  for (const f of findings) {
    const worst = targets.some((t) => f.runtimes[t].verdict === "fail") ? "fail" : targets.some((t) => f.runtimes[t].verdict === "warn") ? "warn" : "ok";
    const line = `${f.what}: ${CHECK_TARGETS.map((t) => `${RUNTIME_NAMES[t]} ${f.runtimes[t].says}`).join("; ")}`;
    if (worst === "fail") failures.push(line);
    else if (worst === "warn") warnings.push(line);
  }
  let kit: AdapterCheck["kit"] = null;
  if (targets.includes("kit")) {
    const refusal = kitRefusal(baseDir, adapterDir);
    kit = refusal ? { ok: false, ...refusal } : { ok: true };
    // a cause a finding already names as the kit's refusal is not said twice
    if (refusal && !findings.some((f) => f.runtimes.kit.verdict === "fail")) failures.push(`the kit refuses it (t2s serve, benchmark's tfjs: policy and train's init load adapters this way): ${refusal.error}`);
  }
  const baseRecord = compareBase(resolve(baseDir), readSafetensorsMetadata(wFile));
  if (baseRecord.recorded && baseRecord.differs.length) {
    const line = `trained on base '${baseRecord.recorded.name}', and this base differs from it in ${baseRecord.differs.join(", ")}: every runtime would serve it on a model it was not trained for`;
    if (opts.allowBaseMismatch) warnings.push(`${line} (allowed by --allow-base-mismatch)`);
    else failures.push(`${line}; the kit refuses it unless --allow-base-mismatch`);
  } else if (baseRecord.unreadable) warnings.push(`the adapter records base '${baseRecord.recorded!.name}', but this base's own record cannot be read to compare: ${baseRecord.unreadable}`);
  return { base: resolve(baseDir), adapter: resolve(adapterDir), multimodal: base.multimodal, keys: tensors.size, layouts, peft, vllm, shapeErrors, zeroKeys, pairs: byModule.size, findings, kit, baseRecord, failures, warnings };
}

const RUNTIME_NAMES: Record<CheckTarget, string> = { kit: "the kit", peft: "PEFT", vllm: "vLLM" };

/** Weights that are not LoRA A/B matrices but mean something to PEFT: DoRA magnitudes, LoRA biases, saved modules. */
function specialKeys(keys: string[], savedModules: string[]): { magnitude: string[]; bias: string[]; saved: string[]; embedding: string[] } {
  const names = ["embed_tokens", "lm_head", ...savedModules].map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const savedPlain = new RegExp(`(^|\\.)(${names.join("|")})\\.(weight|bias)$`);
  const saved = keys.filter((k) => /\.(modules_to_save|original_module)\./.test(k) || (!/\.lora_/.test(k) && savedPlain.test(k)));
  const magnitude = keys.filter((k) => /\.lora_magnitude_vector(\.|$)/.test(k));
  const bias = keys.filter((k) => !saved.includes(k) && /\.bias$/.test(k));
  const embedding = keys.filter((k) => /\.lora_embedding_[AB](\.|$)/.test(k) || (/\.lora_[AB](\.|$)/.test(k) && /\.embed_tokens\.lora_/.test(k)));
  return { magnitude, bias, saved, embedding };
}

/** adapter_config.json, or null when the folder has none (read as every load reads it: a regular file only). */
function readAdapterConfig(dir: string): Record<string, unknown> | null {
  const file = join(resolve(dir), "adapter_config.json");
  if (!existsSync(file)) return null;
  const bytes = runSync(readWholeFile(file, file));
  let v: unknown;
  try {
    v = JSON.parse(bytes.toString("utf8"));
  } catch (e) {
    throw new T2sError("bad_adapter", `${file}: not valid JSON${jsonErrorPosition(e)}`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new T2sError("bad_adapter", `${file}: not a JSON object`);
  return v as Record<string, unknown>;
}

const say = (kit: [Verdict, string], peft: [Verdict, string], vllm: [Verdict, string]): ConfigFinding["runtimes"] => ({
  kit: { verdict: kit[0], says: kit[1] },
  peft: { verdict: peft[0], says: peft[1] },
  vllm: { verdict: vllm[0], says: vllm[1] },
});

/** Per-module scales a pattern sets that differ from the global lora_alpha / r (the only one vLLM uses). */
function patternScales(cfg: Record<string, unknown>, parsed: LoraKey[], tensors: Map<string, { shape: number[] }>): string[] {
  const r = Number(cfg.r), alpha = Number(cfg.lora_alpha);
  const ranks = (cfg.rank_pattern ?? {}) as Record<string, number>;
  const alphas = (cfg.alpha_pattern ?? {}) as Record<string, number>;
  const rs = cfg.use_rslora === true;
  const scale = (a: number, rank: number) => (rs ? a / Math.sqrt(rank) : a / rank);
  const matches = (pattern: Record<string, number>, module: string) => Object.entries(pattern).find(([k]) => module === k || module.endsWith(`.${k}`) || new RegExp(`^${k}$`).test(module))?.[1];
  const differing = new Set<string>();
  for (const k of parsed) {
    if (!k.part.endsWith("A")) continue;
    const rank = matches(ranks, k.module) ?? tensors.get(k.key)?.shape[0] ?? r;
    const a = matches(alphas, k.module) ?? alpha;
    if (Math.abs(scale(a, rank) - scale(alpha, r)) > 1e-9) differing.add(k.module);
  }
  return [...differing];
}

/** One finding per cause: what adapter_config.json and the special weights mean for the kit, PEFT and vLLM. */
function configFindings(cfg: Record<string, unknown> | null, special: ReturnType<typeof specialKeys>, parsed: LoraKey[], tensors: Map<string, { shape: number[] }>): ConfigFinding[] {
  const out: ConfigFinding[] = [];
  if (cfg === null) {
    out.push({ cause: "missing_config", what: "no adapter_config.json", runtimes: say(["fail", "refuses the folder"], ["fail", "cannot load it (r, lora_alpha and target_modules live there)"], ["fail", "refuses it"]) });
    return out;
  }
  const hasPattern = ["rank_pattern", "alpha_pattern"].filter((k) => cfg[k] && typeof cfg[k] === "object" && Object.keys(cfg[k] as object).length > 0);
  if (hasPattern.length) {
    const differing = patternScales(cfg, parsed, tensors);
    const what = `${hasPattern.join(" and ")} in adapter_config.json (${differing.length} module(s) scaled unlike lora_alpha/r)`;
    const vllm: [Verdict, string] = differing.length ? ["fail", `ignores the patterns and scales every module by lora_alpha/r, so ${differing.length} module(s) serve a different update than trained (e.g. ${differing[0]})`] : ["ok", "ignores the patterns, which change no scale here"];
    out.push({ cause: "pattern", what, runtimes: say(["ok", "applies per-module alpha and each pair's own rank"], ["ok", "applies them"], vllm) });
  }
  const doraFlag = cfg.use_dora === true;
  if (doraFlag || special.magnitude.length) {
    const what = `DoRA (${[doraFlag ? "use_dora in adapter_config.json" : "", special.magnitude.length ? `${special.magnitude.length} lora_magnitude_vector weight(s)` : ""].filter(Boolean).join(", ")})`;
    const peft: [Verdict, string] = doraFlag && special.magnitude.length ? ["ok", "applies it"] : doraFlag ? ["fail", "finds no magnitude weights and keeps freshly initialised ones, not the trained ones"] : ["fail", "drops the magnitude weights (use_dora is not set) and serves plain LoRA"];
    out.push({ cause: "dora", what, runtimes: say(["fail", "refuses DoRA adapters"], peft, ["fail", "refuses DoRA adapters"]) });
  }
  const targets = Array.isArray(cfg.target_modules) ? (cfg.target_modules as unknown[]).map(String) : typeof cfg.target_modules === "string" ? [cfg.target_modules] : [];
  if (special.embedding.length || targets.some((t) => /embed_tokens/.test(t))) {
    const what = `embedding LoRA (${special.embedding.length ? `${special.embedding.length} embed_tokens LoRA weight(s)` : "embed_tokens in target_modules"})`;
    out.push({ cause: "embedding", what, runtimes: say(["fail", "refuses it (t2s serve places LoRA on attention and MLP projections only)"], ["ok", "applies it"], ["warn", "places it only for model classes that declare embed_tokens LoRA support; check the server log for skipped modules"]) });
  }
  const biasMode = typeof cfg.bias === "string" ? cfg.bias : "none";
  if (special.bias.length || biasMode !== "none") {
    const what = `bias (${[biasMode !== "none" ? `bias: "${biasMode}" in adapter_config.json` : "", special.bias.length ? `${special.bias.length} bias weight(s)` : ""].filter(Boolean).join(", ")})`;
    out.push({ cause: "bias", what, runtimes: say(["fail", "refuses bias weights"], ["ok", "applies them"], ["fail", "refuses an adapter with bias unless the server enables LoRA bias (--enable-lora-bias, in the releases that have it)"]) });
  }
  const saved = Array.isArray(cfg.modules_to_save) ? (cfg.modules_to_save as unknown[]).map(String) : [];
  if (saved.length || special.saved.length) {
    const what = `modules_to_save (${[saved.length ? `${saved.join(", ")} in adapter_config.json` : "", special.saved.length ? `${special.saved.length} fully saved weight(s)` : ""].filter(Boolean).join(", ")})`;
    out.push({ cause: "modules_to_save", what, runtimes: say(["fail", "refuses fully saved modules"], ["ok", "replaces those modules with the saved copies"], ["fail", "refuses adapters with modules_to_save"]) });
  }
  return out;
}

/** The layout whose names every key would have to take to be placed under `target`'s rules, if one does. */
function suggestedLayout(keys: LoraKey[], base: BaseModules, target: CheckTarget): LoraLayout | null {
  const names = new Set([...base.modules.keys()].map((m) => (target === "vllm" ? vllmModuleName(m, base.multimodal) : m)));
  for (const layout of LORA_LAYOUTS) {
    const ok = keys.every((k) => {
      const renamed = parseLoraKey(keyInLayout(k, layout))!;
      return names.has(target === "vllm" ? vllmModuleName(renamed.module, base.multimodal) : renamed.module);
    });
    if (ok) return layout;
  }
  return null;
}

/** The layout `--to vllm` means for a base: vLLM's own names (the wrapper's for a multimodal base). */
export function vllmLayoutFor(baseDir: string): LoraLayout {
  return readBaseModules(resolve(baseDir)).multimodal ? "vllm-multimodal" : "peft";
}

/**
 * Writes a copy of an adapter folder whose weight names are rewritten in `layout` (same values, same
 * dtype), with its adapter_config.json; returns the number of renamed keys. Never writes over the source
 * or over an existing adapter.
 */
export function convertAdapter(adapterDir: string, layout: LoraLayout, outDir: string): { renamed: number; keys: number; file: string } {
  const src = resolve(adapterDir);
  const out = resolve(outDir);
  if (src === out) throw new T2sError("same_folder", `--out must differ from --adapter (${src}); the source is never overwritten`);
  const wFile = join(src, "adapter_model.safetensors");
  if (!existsSync(wFile)) throw new T2sError("missing_file", `${adapterDir} has no adapter_model.safetensors`);
  const target = join(out, "adapter_model.safetensors");
  if (existsSync(target)) throw new T2sError("exists", `${target} already exists; pick an empty --out folder`);
  const tensors = readSafetensors(wFile);
  const dtypes = new Set([...tensors.values()].map((t) => t.dtype));
  // one dtype in, the same out (widening to float32 and narrowing back is exact); mixed files go to F32
  const dtype: StDtype = dtypes.size === 1 ? [...dtypes][0] : "F32";
  const renamedMap = new Map<string, { shape: number[]; data: Float32Array }>();
  let renamed = 0;
  for (const [key, t] of tensors) {
    const k = parseLoraKey(key);
    const name = k ? keyInLayout(k, layout) : key;
    if (name !== key) renamed++;
    if (renamedMap.has(name)) throw new T2sError("key_collision", `${key} and another weight both become ${name} in the ${layout} layout`);
    renamedMap.set(name, { shape: t.shape, data: t.data });
  }
  mkdirSync(out, { recursive: true });
  // the base record travels with the weights: renaming keys does not change the base they were trained on
  const record = readSafetensorsMetadata(wFile)[BASE_RECORD_KEY];
  writeSafetensors(target, renamedMap, { dtype, metadata: { t2s_layout: layout, ...(record ? { [BASE_RECORD_KEY]: record } : {}) } });
  if (existsSync(join(src, "adapter_config.json"))) copyFileSync(join(src, "adapter_config.json"), join(out, "adapter_config.json"));
  return { renamed, keys: tensors.size, file: target };
}

/**
 * Writes the record of `baseDir` (base-record.ts) into an adapter that has none, or with `force` replaces
 * one of another base: for an adapter made by PEFT or an older kit and known to belong to this base, so
 * that every later load on another base is refused. The kit's loader must first place every pair on this
 * base; the tensors are rewritten unchanged (names, values, dtype) with the record in the metadata.
 */
export function recordAdapterBase(baseDir: string, adapterDir: string, opts: { force?: boolean } = {}): { file: string; record: BaseRecord; previous: BaseRecord | null } {
  const refusal = kitRefusal(baseDir, adapterDir);
  if (refusal) throw new T2sError(refusal.code ?? "adapter_mismatch", `no record written, the kit does not load this adapter on ${baseDir}: ${refusal.error}`);
  const wFile = join(resolve(adapterDir), "adapter_model.safetensors");
  const metadata = readSafetensorsMetadata(wFile);
  const previous = recordInMetadata(metadata);
  const record = readBaseRecord(resolve(baseDir));
  const differs = previous ? baseDifferences(previous, record) : [];
  if (differs.length && !opts.force) throw new T2sError("adapter_base_mismatch", `${wFile} already records base '${previous!.name}', which differs from ${baseDir} in ${differs.join(", ")}; --force replaces the record`);
  const tensors = readSafetensors(wFile);
  const dtypes = new Set([...tensors.values()].map((t) => t.dtype));
  const { format: _format, ...kept } = metadata;
  writeSafetensors(wFile, new Map([...tensors].map(([k, t]) => [k, { shape: t.shape, data: t.data }])), { dtype: dtypes.size === 1 ? [...dtypes][0] : "F32", metadata: { ...kept, ...recordMetadata(record) } });
  return { file: wFile, record, previous };
}
