/**
 * Policy specs: "<kind>:<rest>" strings that name a policy on the command line. Kinds register a factory,
 * so backends living elsewhere (the in-process model adds "tfjs:") plug in without this file knowing them.
 */
import { resolve } from "node:path";
import { UsageError } from "../core/errors.js";
import { OpenAIPolicy, parseOpenAISpec, type OpenAIPolicyOptions } from "./openai.js";
import { readScript, scriptedPolicy } from "./scripted.js";
import type { Policy } from "./types.js";
import type { QuantizationName } from "../model/quantization.js";
import type { KvCacheDtypeName } from "../model/kv-cache-dtype.js";

/** Options every factory receives; each uses what applies to it. */
export interface PolicyOptions extends OpenAIPolicyOptions {
  /** In-process models: how the base's linear layers sample (lib/model/quantization.ts). */
  quantization?: QuantizationName;
  /** In-process models: how the sampler's KV cache is stored (lib/model/kv-cache-dtype.ts). */
  kvCacheDtype?: KvCacheDtypeName;
  /** tfjs: load an adapter recorded for another base (`--allow-base-mismatch`; default refused). */
  allowBaseMismatch?: boolean;
}

/** Makes a policy from the part after "<kind>:"; may be async (loading weights). */
export type PolicyFactory = (rest: string, opts: PolicyOptions) => Policy | Promise<Policy>;

const registry = new Map<string, PolicyFactory>();

/** Adds (or replaces) the factory for `kind` ("tfjs" makes "tfjs:<dir>" specs work). */
export function registerPolicyKind(kind: string, factory: PolicyFactory): void {
  registry.set(kind, factory);
}

/**
 * Kinds whose module (lib/policy/<kind>.ts) registers itself when loadPolicy first meets the kind, so they
 * are absent from the registry until then; named here so a message can offer them before they load.
 */
const LOADED_ON_USE = ["tfjs"];

/** The kinds loadPolicy accepts: those registered now and those whose module registers itself on use. */
export function policyKinds(): string[] {
  return [...new Set([...registry.keys(), ...LOADED_ON_USE])];
}

registerPolicyKind("openai", (rest, opts) => {
  const { model, baseUrls } = parseOpenAISpec(rest);
  return new OpenAIPolicy(model, baseUrls, opts);
});
registerPolicyKind("scripted", (rest) => scriptedPolicy(readScript(resolve(rest)), `scripted:${rest}`));

function splitSpec(spec: string): { kind: string; rest: string } {
  const i = spec.indexOf(":");
  return i > 0 ? { kind: spec.slice(0, i), rest: spec.slice(i + 1) } : { kind: "", rest: spec };
}

function unknownKind(spec: string): UsageError {
  return new UsageError(`unknown policy '${spec}': use one of ${policyKinds().map((k) => `${k}:...`).join(", ")} (e.g. openai:<model>@http://localhost:8000/v1, openai:<model>@<url1>,<url2> for a fleet, or tfjs:<model dir>[+<adapter dir>])`);
}

/**
 * Returns the Policy a spec names, for kinds whose factory is synchronous (openai, scripted). Throws a
 * UsageError for an unknown kind or a malformed spec.
 */
export function createPolicy(spec: string, opts: PolicyOptions = {}): Policy {
  const { kind, rest } = splitSpec(spec);
  const factory = registry.get(kind);
  if (!factory && LOADED_ON_USE.includes(kind)) throw new UsageError(`policy kind '${kind}' loads its module on first use: use loadPolicy('${spec}')`);
  if (!factory) throw unknownKind(spec);
  const p = factory(rest, opts);
  if (p instanceof Promise) throw new UsageError(`policy kind '${kind}' loads asynchronously: use loadPolicy('${spec}')`);
  return p;
}

/**
 * Returns the Policy a spec names, for every kind: a kind not registered yet is looked up as the module
 * lib/policy/<kind>.ts, which registers itself when imported (so heavy backends load only when named).
 */
export async function loadPolicy(spec: string, opts: PolicyOptions = {}): Promise<Policy> {
  const { kind, rest } = splitSpec(spec);
  if (!registry.has(kind) && /^[a-z][a-z0-9_-]*$/.test(kind)) {
    const modulePath = `./${kind}.js`;
    try {
      await import(modulePath);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      const missingItself = (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") && new RegExp(`[/\\\\]${kind}\\.(js|ts)`).test(String((e as Error).message));
      if (!missingItself) throw e;
    }
  }
  const factory = registry.get(kind);
  if (!factory) throw unknownKind(spec);
  return await factory(rest, opts);
}
