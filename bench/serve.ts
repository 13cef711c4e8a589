/**
 * `npm run bench:serve`: a bounded load test of `t2s serve` on loopback. It starts the server as its own
 * process over a model folder, sends realistic shop prompts (the kit's episode prompts: instructions, schema,
 * notes, question) and prints, for 1/16/64 concurrent clients, streaming and not: p50/p95 latency, time to
 * first token, tokens/s, errors and /health latency under that load (polled every 50 ms from a thread of its
 * own, so the bench's own SSE parsing does not delay it). Then a fairness probe (a short request
 * sent while a request with a huge max_tokens runs, against the short one alone), the first-token share of a
 * 100-token stream, the HTTP framework's own cost (fastify against bare node:http, same handler), and
 * guided decoding's cost per token at batch 1 and 64 (XGrammar's mask, the matcher's advance, the mask
 * applied to a row of logits on the CPU and packed for the WebGPU sampler), at the kit's 4k vocabulary and a
 * 152k one (CPU figures: the mask is computed on the host whatever the runner). Last, prefix caching on
 * against --no-enable-prefix-caching under the same streaming load (bench/serve-prefix.ts): TTFT p50/p95,
 * tokens/s and the share of prompt tokens found in the cache.
 * Options:
 *   --model <dir>        model folder (default data/models/shop-sql-4m)
 *   --backend <name>     tfjs backend for the server (default auto)
 *   --max-tokens <n>     new tokens per load request at most (default 64)
 *   --rounds <n>         requests per client per load configuration (default 2)
 *   --max-num-batched-tokens <n>  the server's prefill budget per step (default: t2s serve's)
 *   --engine-thread <where>  worker (default) or main: where t2s serve runs its engine (main = as before
 *                        the engine thread, on the HTTP thread: the baseline of the /health figures)
 *   --clients <list>     concurrent clients of the load table (default 1,16,64; the GPU host adds 256)
 *   --max-batch <rows>   the server's --max-batch (default 64)
 *   --warmup <n>         untimed streaming passes at the largest client count before the table (default 1)
 *   --guided-only        only the guided-decoding table
 *   --load-only          only the load table (with its warm-up)
 *   --prefix-caching-only  only the prefix-caching table
 *   --prefix-clients <n> streaming clients of the prefix-caching table (default 64)
 *   --prefix-repeats <n> measurements of each setting, alternating on and off (default 1)
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { cpus } from "node:os";
import Fastify from "fastify";
import { kitPath } from "../lib/core/paths.js";
import { flag, intFlag } from "./args.js";
import { guideConstraint } from "../lib/model/guided.js";
import { maskedLogits } from "../lib/model/sampler.js";
import { loadTokenizer, type ChatTokenizer } from "../lib/model/tokenizer.js";
import { mulberry32 } from "../lib/core/random.js";
import { ask, f, healthProbe, pct, shopPrompts, startServe, type Message, type Outcome } from "./serve-client.js";
import { prefixCachingTable } from "./serve-prefix.js";

/** The served model's name (read from GET /v1/models once the server is up). */
let served = "";

async function load(url: string, prompts: Message[][], clients: number, stream: boolean, rounds: number, maxTokens: number): Promise<string> {
  const total = clients * rounds;
  let next = 0;
  const outcomes: Outcome[] = [];
  const probe = healthProbe(url, 50);
  await probe.ready;
  const t0 = performance.now();
  const work = Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < total) {
        const i = next++;
        const body = { model: served, messages: prompts[i % prompts.length], max_tokens: maxTokens, temperature: 0.7, seed: i, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) };
        outcomes.push(await ask(url, body));
      }
    }),
  );
  await work;
  const health = (await probe.stop()).ms;
  const wall = (performance.now() - t0) / 1000;
  const ok = outcomes.filter((o) => !o.error);
  const lat = ok.map((o) => o.seconds);
  const ttft = ok.flatMap((o) => (o.firstToken === undefined ? [] : [o.firstToken]));
  const tokens = ok.reduce((s, o) => s + o.tokens, 0);
  const p50 = pct(lat, 50);
  const p95 = pct(lat, 95);
  return `| ${stream ? "stream" : "plain "} | ${String(clients).padStart(7)} | ${String(total).padStart(8)} | ${outcomes.length - ok.length} | ${f(p50)} | ${f(p95)} | ${f(p95 / p50)} | ${stream ? f(pct(ttft, 50)) : "-"} | ${f(tokens / wall, 0)} | ${f(pct(health, 50), 0)} / ${f(pct(health, 95), 0)} / ${f(Math.max(...health), 0)} |`;
}

/** A short request alone, then the same request while one with a huge max_tokens is running. */
async function fairness(url: string, prompts: Message[][]): Promise<string[]> {
  const short = { model: served, messages: prompts[1 % prompts.length], max_tokens: 24, ignore_eos: true, temperature: 0.7, seed: 5 };
  const solo: number[] = [];
  for (let i = 0; i < 3; i++) solo.push((await ask(url, short)).seconds);
  const tok = (await (await fetch(`${url}/tokenize`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: served, messages: prompts[0] }) })).json()) as { count: number; max_model_len: number };
  const abort = new AbortController();
  let started!: () => void;
  const first = new Promise<void>((r) => (started = r));
  const long = ask(url, { model: served, messages: prompts[0], max_tokens: tok.max_model_len - tok.count, ignore_eos: true, stream: true, temperature: 0.7, seed: 1 }, abort.signal, () => started());
  await first;
  const behind = await ask(url, short);
  abort.abort();
  await long;
  const soloS = pct(solo, 50);
  return [`| short request alone (median of 3) | ${f(soloS)} s |`, `| same, sent while a ${tok.max_model_len - tok.count}-token request runs | ${f(behind.seconds)} s (${f(behind.seconds / soloS)}x alone; target <= 2x) |`];
}

/** The first token's share of a 100-token stream's total time, alone and among 15 others. */
async function firstTokenShare(url: string, prompts: Message[][]): Promise<string[]> {
  const rows: string[] = [];
  for (const clients of [1, 16]) {
    const outs = await Promise.all(Array.from({ length: clients }, (_, i) => ask(url, { model: served, messages: prompts[i % prompts.length], max_tokens: 100, ignore_eos: true, stream: true, temperature: 0.7, seed: i })));
    const share = outs.map((o) => (o.firstToken ?? o.seconds) / o.seconds);
    rows.push(`| 100-token stream, ${clients} client(s) | first token at ${f(pct(outs.map((o) => o.firstToken ?? NaN), 50))} s of ${f(pct(outs.map((o) => o.seconds), 50))} s: ${f(100 * pct(share, 50), 0)}% (max ${f(100 * Math.max(...share), 0)}%; target <= 20%) |`);
  }
  return rows;
}

/** The same tiny JSON answer from bare node:http and from fastify: per-request latency at 16 clients. */
async function frameworkCost(): Promise<string[]> {
  const body = { status: "ok", running: 0, waiting: 0 };
  const bare = createServer((_req, res) => {
    const text = JSON.stringify(body);
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  });
  await new Promise<void>((r) => bare.listen(0, "127.0.0.1", () => r()));
  const fast = Fastify({ logger: false });
  fast.get("/health", async () => body);
  await fast.listen({ port: 0, host: "127.0.0.1" });
  const measure = async (url: string) => {
    const times: number[] = [];
    let left = 3000;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (left-- > 0) {
          const t0 = performance.now();
          await (await fetch(url)).json();
          times.push(performance.now() - t0);
        }
      }),
    );
    return times.slice(500);
  };
  const rows: string[] = [];
  const urls = { "node:http": `http://127.0.0.1:${(bare.address() as AddressInfo).port}/health`, fastify: `http://127.0.0.1:${(fast.server.address() as AddressInfo).port}/health` };
  // alternate twice so neither gets the warmer machine
  const res: Record<string, number[]> = { "node:http": [], fastify: [] };
  for (let k = 0; k < 2; k++) for (const [name, url] of Object.entries(urls)) res[name].push(...(await measure(url)));
  for (const [name, t] of Object.entries(res)) rows.push(`| ${name} | ${f(pct(t, 50), 3)} ms | ${f(pct(t, 95), 3)} ms |`);
  bare.close();
  await fast.close();
  return rows;
}

/** A stand-in tokenizer with a 152k byte-level vocabulary of random pieces (guided decoding's cost at Qwen's size). */
function bigVocabTokenizer(V: number): ChatTokenizer {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) (bs.push(b), cs.push(256 + n++));
  const map = new Map(bs.map((b, i) => [b, String.fromCodePoint(cs[i])]));
  const tokens = Array.from({ length: 256 }, (_, b) => map.get(b)!);
  const alpha = ' abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789{}[]":,._-';
  const rand = mulberry32(7);
  const seen = new Set(tokens);
  while (tokens.length < V - 1) {
    let piece = "";
    for (let i = 0, len = 2 + Math.floor(rand() * 7); i < len; i++) piece += alpha[Math.floor(rand() * alpha.length)];
    const enc = [...Buffer.from(piece)].map((b) => map.get(b)!).join("");
    if (!seen.has(enc)) (seen.add(enc), tokens.push(enc));
  }
  tokens.push("<|im_end|>");
  const text = (ids: number[]) => Buffer.from(ids.flatMap((id) => (id >= V - 1 ? [] : [...tokens[id]].map((c) => bs[cs.indexOf(c.codePointAt(0)!)])))).toString("utf8");
  const single = new Map(tokens.map((t, i) => [t, i]));
  return {
    encode: (t) => [...Buffer.from(t)].map((b) => single.get(map.get(b)!)!),
    decode: (ids) => text(ids),
    applyChatTemplate: () => "",
    eosIds: [V - 1],
    padId: null,
    vocabSize: V,
    hasChatTemplate: false,
    rawVocab: () => ({ tokens, type: "byte_level" }),
  };
}

/** Guided decoding's host cost per decode step at batch B: mask, advance, the mask applied to logits (CPU) and packed (WebGPU). */
async function guidedCost(tok: ChatTokenizer, V: number, label: string): Promise<string[]> {
  const schema = { type: "object", properties: { sql: { type: "string" }, limit: { type: "integer" }, mode: { enum: ["ro", "rw"] } }, required: ["sql", "limit", "mode"] };
  const t0 = performance.now();
  await guideConstraint(tok, V, { kind: "schema", schema });
  const setup = performance.now() - t0;
  const rows: string[] = [];
  const logits = new Float32Array(V).map((_, i) => Math.sin(i));
  for (const B of [1, 64]) {
    const cs = await Promise.all(Array.from({ length: B }, () => guideConstraint(tok, V, { kind: "schema", schema })));
    const rand = mulberry32(B);
    let steps = 0;
    let tokens = 0;
    let maskMs = 0;
    let applyMs = 0;
    let acceptMs = 0;
    for (let s = 0; s < 48; s++) {
      const live = cs.filter((c) => !c.finished());
      if (!live.length) break;
      const m0 = performance.now();
      const masks = await Promise.all(live.map((c) => c.nextMask(1000)));
      maskMs += performance.now() - m0;
      const a0 = performance.now();
      const rowsOut = masks.map((m) => maskedLogits(logits, m));
      applyMs += performance.now() - a0;
      // the pick stands in for the sampler and is not timed
      const picks = rowsOut.map((row) => {
        const allowed: number[] = [];
        for (let id = 0; id < V; id++) if (row[id] !== -Infinity) allowed.push(id);
        return allowed[Math.floor(rand() * allowed.length)];
      });
      const c0 = performance.now();
      // the advance runs in the grammar host worker and brings the next mask back
      await Promise.all(live.map((c, r) => c.accept(picks[r])));
      acceptMs += performance.now() - c0;
      steps++;
      tokens += live.length;
    }
    cs.forEach((c) => c.dispose());
    const total = maskMs + applyMs + acceptMs;
    rows.push(`| ${label}, batch ${B} | ${f(total / steps, 2)} ms | ${f((1000 * total) / tokens, 0)} us (mask ${f((1000 * maskMs) / tokens, 0)}, CPU mask apply ${f((1000 * applyMs) / tokens, 0)}, advance ${f((1000 * acceptMs) / tokens, 0)}) | first schema compiled in ${f(setup, 0)} ms |`);
  }
  return rows;
}

async function guidedTable(): Promise<void> {
  process.stdout.write("\n| guided decoding (host side, CPU) | per step | per token | setup |\n|---|---|---|---|\n");
  for (const row of await guidedCost(loadTokenizer(kitPath("data", "models", "shop-sql-4m")), 4096, "shop-sql-4m vocab 4,096")) process.stdout.write(`${row}\n`);
  for (const row of await guidedCost(bigVocabTokenizer(151936), 151936, "byte-level vocab 151,936")) process.stdout.write(`${row}\n`);
}

async function main(): Promise<void> {
  if (process.argv.includes("--guided-only")) return guidedTable();
  const model = flag("--model") ?? kitPath("data", "models", "shop-sql-4m");
  const backend = flag("--backend") ?? "auto";
  const maxTokens = intFlag("--max-tokens", 64);
  const rounds = intFlag("--rounds", 2);
  const prompts = shopPrompts();
  const prefillFlag = flag("--max-num-batched-tokens");
  const prefill = prefillFlag === undefined ? undefined : Number(prefillFlag);
  const engineThread = flag("--engine-thread") ?? "worker";
  const clientCounts = (flag("--clients") ?? "1,16,64").split(",").map(Number);
  // the server's flags for every run of this bench (a later --max-batch overrides startServe's 64)
  const serveFlags = ["--engine-thread", engineThread, "--max-batch", String(intFlag("--max-batch", 64))];
  const prefixLoad = { model, backend, prefill, prompts, clients: intFlag("--prefix-clients", 64), rounds, maxTokens, repeats: intFlag("--prefix-repeats", 1), extra: serveFlags };
  if (process.argv.includes("--prefix-caching-only")) return prefixCachingTable(prefixLoad);
  const loadOnly = process.argv.includes("--load-only");
  const framework = loadOnly ? [] : await frameworkCost();
  const { url, child } = await startServe(model, backend, prefill, serveFlags);
  try {
    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
    served = models.data[0].id;
    const health = (await (await fetch(`${url}/health`)).json()) as { backend: string; engine_thread?: string };
    process.stdout.write(`t2s serve over ${model} (backend ${health.backend}, engine thread ${health.engine_thread ?? "main"}), ${cpus().length} CPUs, ${prompts.length} shop prompts, max_tokens ${maxTokens}, ${rounds} requests per client, --max-num-batched-tokens ${prefill ?? "default"}\n\n`);
    // one request first, so engine creation and first-call compilation are not in the figures; then, untimed,
    // --warmup passes at the largest client count, so the batch sizes the table reaches have run once
    await ask(url, { model: served, messages: prompts[0], max_tokens: 4 });
    for (let i = 0; i < intFlag("--warmup", 1, 0); i++) await load(url, prompts, Math.max(...clientCounts), true, 1, maxTokens);
    process.stdout.write("| mode   | clients | requests | errors | p50 s | p95 s | p95/p50 | TTFT p50 s | tokens/s | /health p50 / p95 / max ms |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (const clients of clientCounts) for (const stream of [false, true]) process.stdout.write(`${await load(url, prompts, clients, stream, rounds, maxTokens)}\n`);
    if (loadOnly) return;
    process.stdout.write("\n| probe | result |\n|---|---|\n");
    for (const row of [...(await fairness(url, prompts)), ...(await firstTokenShare(url, prompts))]) process.stdout.write(`${row}\n`);
    process.stdout.write("\n| HTTP layer, GET /health at 16 clients | p50 | p95 |\n|---|---|---|\n");
    for (const row of framework) process.stdout.write(`${row}\n`);
    // the GPU bundle carries no grammar worker: the load tables above stand without this one
    await guidedTable().catch((e: unknown) => process.stdout.write(`\nguided decoding table skipped: ${(e as Error).message}\n`));
  } finally {
    child.kill("SIGINT");
  }
  if (!loadOnly) await prefixCachingTable(prefixLoad);
}

main().catch((e) => {
  process.stderr.write(`bench:serve failed: ${(e as Error).message}\n`);
  process.exit(1);
});
