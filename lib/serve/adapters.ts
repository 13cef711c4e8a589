/**
 * vLLM's runtime adapter routes, POST /v1/load_lora_adapter and /v1/unload_lora_adapter: an adapter is
 * merged into a copy of the base weights and served by name. They exist only when runtime updating is
 * enabled (`--enable-lora-updating` or VLLM_ALLOW_RUNTIME_LORA_UPDATING, as in vLLM): unloading cancels the
 * adapter's in-flight requests, and each adapter is a whole copy of the weights. A path must be a folder
 * holding adapter_config.json (under one of `roots` when roots are given), and at most `maxAdapters` are
 * served at once. Errors name the path as the client gave it, never the server's resolved one, and never
 * a file's content. Every file the load opens is confined to the roots and capped in size (lib/model's
 * lora-read.ts and adapter-files.ts), and loading runs off the event loop, so /health keeps answering.
 */
import { realpath, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { FastifyInstance } from "fastify";
import type { ChatEngine } from "../model/chat.js";
import { isInside } from "../model/adapter-files.js";
import { ADAPTER_LIMITS, type AdapterLimits } from "../model/lora-read.js";
import type { ServedModel } from "../model/served-model.js";
import { bad, RequestError } from "./params.js";

/** How a server loads adapter files, at start-up and at runtime alike. */
export interface ServerAdapterOptions {
  /** Caps on adapter files (a field left out keeps ADAPTER_LIMITS' default). */
  limits?: Partial<AdapterLimits>;
  /** Serve adapters recorded for another base (`--allow-base-mismatch`; default refused). */
  allowBaseMismatch?: boolean;
}

/** The caps and base rule a server applies, its options filled from ADAPTER_LIMITS. */
export function adapterLoading(opts: { adapterLoading?: ServerAdapterOptions }): { limits: AdapterLimits; allowBaseMismatch: boolean } {
  return { limits: { ...ADAPTER_LIMITS, ...(opts.adapterLoading?.limits ?? {}) }, allowBaseMismatch: opts.adapterLoading?.allowBaseMismatch === true };
}

/**
 * Merges an adapter folder into a copy of the base's weights, served as `name` (the engine host's merge:
 * in this thread, or in the engine thread).
 */
export type MergeAdapter = (dir: string, name: string, spec: { roots?: string[]; limits: AdapterLimits; allowBaseMismatch: boolean }) => Promise<ServedModel>;

/** The start-up adapters (name -> folder) merged one after another; on a failure the merged ones are released. */
export async function mergeAdapters(merge: MergeAdapter, adapters: Record<string, string>, load: { limits: AdapterLimits; allowBaseMismatch: boolean }): Promise<ServedModel[]> {
  const out: ServedModel[] = [];
  try {
    for (const [name, dir] of Object.entries(adapters)) out.push(await merge(dir, name, load));
  } catch (e) {
    for (const m of out) m.dispose();
    throw e;
  }
  return out;
}

export interface AdapterRouteOptions {
  /** Adapters served at once at most, startup ones included (vLLM's --max-loras; default 8). */
  maxAdapters?: number;
  /** Folders an adapter path must lie under (none: any folder holding adapter_config.json). */
  roots?: string[];
  /** Caps on adapter files (default ADAPTER_LIMITS). */
  limits?: AdapterLimits;
  /** Serve adapters recorded for another base. */
  allowBaseMismatch?: boolean;
}

/** Whether vLLM's environment variable enables runtime adapter updates. */
export function runtimeLoraFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  return /^(1|true|yes|on)$/i.test(env.VLLM_ALLOW_RUNTIME_LORA_UPDATING ?? "");
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;

/**
 * The adapter folder a client named, checked: a real folder with adapter_config.json, under a root if any.
 * With roots, a path that is missing, outside them or not a folder gets one and the same message, so a
 * client cannot probe what exists elsewhere on the machine.
 */
export async function adapterFolder(path: string, roots: string[] = []): Promise<string> {
  // eslint-disable-next-line no-control-regex
  if (path.length > 4096 || /[\u0000-\u001f]/.test(path)) throw bad("lora_path", "'lora_path' must be a plain folder path");
  const confined = roots.length > 0;
  const notHere = () => bad("lora_path", `'${path}' is not an adapter folder under the server's adapter folders (--lora-root)`);
  let real: string;
  try {
    real = await realpath(resolve(path));
  } catch {
    throw confined ? notHere() : bad("lora_path", `no adapter folder at '${path}'`);
  }
  if (confined) {
    const realRoots = await Promise.all(roots.map((r) => realpath(resolve(r)).catch(() => null)));
    if (!realRoots.some((r) => r !== null && isInside(real, r))) throw notHere();
  }
  const st = await stat(real).catch(() => null);
  if (!st?.isDirectory()) throw confined ? notHere() : bad("lora_path", `'${path}' is not a folder`);
  if (!(await stat(join(real, "adapter_config.json")).catch(() => null))) throw bad("lora_path", `'${path}' holds no adapter_config.json (a PEFT adapter folder is expected)`);
  return real;
}

export function registerAdapterRoutes(app: FastifyInstance, chat: ChatEngine, merge: MergeAdapter, opts: AdapterRouteOptions = {}): void {
  const loading = new Set<string>();
  const cap = opts.maxAdapters ?? 8;
  const limits = opts.limits ?? ADAPTER_LIMITS;
  app.post("/v1/load_lora_adapter", async (req, reply) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const name = body.lora_name;
    const path = body.lora_path;
    if (typeof name !== "string" || name === "") throw bad("lora_name", "'lora_name' is required");
    if (!NAME.test(name)) throw bad("lora_name", "'lora_name' must be 1-128 letters, digits and ._:/- (starting with a letter or digit)");
    if (typeof path !== "string" || path === "") throw bad("lora_path", "'lora_path' is required (a PEFT adapter folder)");
    if (chat.models.has(name) || loading.has(name)) throw new RequestError(400, `The lora adapter '${name}' has already been loaded.`, { param: "lora_name" });
    if (chat.models.size - 1 + loading.size >= cap) throw new RequestError(400, `this server serves at most ${cap} adapters at once (--max-loras); unload one first`, { param: "lora_name", code: "too_many_adapters" });
    loading.add(name);
    try {
      const dir = await adapterFolder(path, opts.roots);
      let merged: ServedModel;
      try {
        merged = await merge(dir, name, { roots: opts.roots, limits, allowBaseMismatch: opts.allowBaseMismatch === true });
      } catch (e) {
        // the loader's messages carry the resolved folder; the client gets its own path back
        const msg = e instanceof Error ? e.message.split(dir).join(path) : String(e);
        throw new RequestError(400, `cannot load the adapter '${name}': ${msg}`, { param: "lora_path", code: (e as { code?: string }).code });
      }
      chat.addModel(merged);
    } finally {
      loading.delete(name);
    }
    return reply.type("text/plain; charset=utf-8").send(`Success: LoRA adapter '${name}' added successfully.`);
  });
  app.post("/v1/unload_lora_adapter", async (req, reply) => {
    const name = ((req.body ?? {}) as Record<string, unknown>).lora_name;
    if (typeof name !== "string" || name === "") throw bad("lora_name", "'lora_name' is required");
    if (name === chat.baseName) throw bad("lora_name", `'${name}' is the base model, not an adapter`);
    if (!chat.models.has(name)) throw new RequestError(404, `The lora adapter '${name}' cannot be found.`, { param: "lora_name", code: "model_not_found" });
    (await chat.removeModel(name)).dispose();
    return reply.type("text/plain; charset=utf-8").send(`Success: LoRA adapter '${name}' removed successfully.`);
  });
}
