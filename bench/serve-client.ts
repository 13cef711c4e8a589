/**
 * What bench:serve's tables share: the shop prompts, a `t2s serve` child process, one timed chat request
 * (streamed ones time their first token), percentiles and number formatting.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { Worker } from "node:worker_threads";
import { existsSync } from "node:fs";
import { schemaDdl } from "../lib/db/schema.js";
import { buildShopDatabase, defaultShopPath } from "../lib/db/shop/build.js";
import { openingMessages } from "../lib/episode/prompt.js";
import { kitPath } from "../lib/core/paths.js";
import { notesFor } from "../lib/db/notes.js";
import { readTasks } from "../lib/tasks/io.js";

const QUESTIONS = ["How many orders were delivered?", "How many customers are there per country?", "What is the average review rating?", "Which five products have the highest margin?"];

export type Message = { role: string; content: string };

/** The kit's opening messages (instructions, schema, notes, question) for up to 32 shop questions. */
export function shopPrompts(): Message[][] {
  const db = defaultShopPath();
  if (!existsSync(db)) buildShopDatabase(db);
  const file = kitPath("data", "shop", "tasks.jsonl");
  const questions = existsSync(file) ? readTasks(file).slice(0, 32).map((t) => t.question) : QUESTIONS;
  const ddl = schemaDdl(db);
  const notes = notesFor({ db_id: "shop", db_path: db });
  return questions.map((q) => openingMessages({ style: "single" }, ddl, notes, q) as Message[]);
}

/** `t2s serve` over `model` on a free port, with `extra` flags; resolves with its URL once it prints its banner. */
export async function startServe(model: string, backend: string, prefill: number | undefined, extra: string[] = []): Promise<{ url: string; child: ChildProcess }> {
  // a checkout runs bin/t2s.js; the GPU-host bundle (npm run bundle:gpu) has the command line as t2s.mjs
  const entry = existsSync(kitPath("bin", "t2s.js")) ? kitPath("bin", "t2s.js") : kitPath("t2s.mjs");
  const child = spawn(process.execPath, [entry, "serve", "--model", model, "--port", "0", "--backend", backend, "--max-batch", "64", ...(prefill === undefined ? [] : ["--max-num-batched-tokens", String(prefill)]), ...extra], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`t2s serve printed no banner in 120 s: ${out}`)), 120_000);
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /at (http:\/\/\S+)\/v1/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on("exit", (code) => reject(new Error(`t2s serve exited ${code}: ${out}`)));
  });
  return { url, child };
}

export interface Outcome {
  seconds: number;
  firstToken?: number;
  tokens: number;
  error?: string;
}

/** One chat request; streaming requests time their first content chunk. */
export async function ask(url: string, body: Record<string, unknown>, signal?: AbortSignal, onToken?: () => void): Promise<Outcome> {
  const t0 = performance.now();
  const s = () => (performance.now() - t0) / 1000;
  try {
    const res = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal });
    if (!res.ok) return { seconds: s(), tokens: 0, error: `${res.status} ${await res.text()}` };
    if (!body.stream) {
      const j = (await res.json()) as { usage: { completion_tokens: number } };
      return { seconds: s(), tokens: j.usage.completion_tokens };
    }
    let firstToken: number | undefined;
    let tokens = 0;
    let buf = "";
    const decoder = new TextDecoder();
    for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(piece, { stream: true });
      const events = buf.split("\n\n");
      buf = events.pop()!;
      for (const ev of events) {
        if (!ev.startsWith("data: {")) continue;
        const j = JSON.parse(ev.slice(6)) as { choices: { delta?: { content?: string } }[]; usage?: { completion_tokens: number } };
        if (j.usage) tokens = j.usage.completion_tokens;
        if (j.choices[0]?.delta?.content) {
          firstToken ??= s();
          onToken?.();
        }
      }
    }
    return { seconds: s(), firstToken, tokens };
  } catch (e) {
    return { seconds: s(), tokens: 0, error: (e as Error).message };
  }
}

/**
 * The /health poller, as plain JavaScript for a worker thread of its own: the load this bench generates
 * (hundreds of SSE streams parsed in this process) must not delay the probe's own event loop, or the figure
 * would be the client's latency, not the server's.
 */
const HEALTH_PROBE_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { url, gapMs, limitMs } = workerData;
const ms = [];
let failed = 0, stopped = false;
parentPort.on("message", () => (stopped = true));
(async () => {
  // the first request of a fresh thread sets up its HTTP client and connection: not a server figure
  await fetch(url + "/health").then((r) => r.arrayBuffer()).catch(() => undefined);
  parentPort.postMessage("ready");
  while (!stopped) {
    const t0 = performance.now();
    try {
      const res = await fetch(url + "/health", { signal: AbortSignal.timeout(limitMs) });
      await res.arrayBuffer();
      if (res.ok) ms.push(performance.now() - t0); else failed++;
    } catch { failed++; await new Promise((r) => setTimeout(r, 10)); }
    if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
  }
  parentPort.postMessage({ ms, failed });
})();
`;

/**
 * Polls `url`/health from a worker thread, `gapMs` apart (0: back to back), each answer allowed `limitMs`,
 * until stopped: the latencies in ms of the answers that came, and how many failed. `ready` resolves once
 * the thread's untimed first request is answered: start the load after it.
 */
export function healthProbe(url: string, gapMs: number, limitMs = 120_000): { ready: Promise<void>; stop: () => Promise<{ ms: number[]; failed: number }> } {
  const worker = new Worker(HEALTH_PROBE_SOURCE, { eval: true, workerData: { url, gapMs, limitMs } });
  let ready!: () => void;
  let done!: (r: { ms: number[]; failed: number }) => void;
  const result = new Promise<{ ms: number[]; failed: number }>((resolve, reject) => {
    done = resolve;
    worker.once("error", reject);
  });
  worker.on("message", (m: "ready" | { ms: number[]; failed: number }) => (m === "ready" ? ready() : done(m)));
  return {
    ready: new Promise<void>((r) => (ready = r)),
    stop: async () => {
      worker.postMessage("stop");
      const r = await result;
      await worker.terminate();
      return r;
    },
  };
}

export function pct(xs: number[], p: number): number {
  if (!xs.length) return NaN;
  const v = [...xs].sort((a, b) => a - b);
  return v[Math.min(v.length - 1, Math.floor((p / 100) * v.length))];
}

export const f = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : "-");
