/**
 * `npm run bench:serve-attack`: GET /health latency of `t2s serve` and `t2s env serve` (each its own process,
 * over loopback) while they are attacked as a security review did: hostile guided-decoding schemas (nested 55
 * deep, self-referencing, 20,000 properties, one that compiles past the time limit, a stream of fresh
 * schemas), amplification (20,000 prompts x n 64; 65,536 queued rows whose client leaves) and sockets that
 * trickle their request bodies. For each attack: what the attacker got, how long it ran, and /health
 * p50 / p95 / max over the answers polled back to back while it ran, from a thread of its own (a failed
 * /health counts as failed).
 * Options:
 *   --model <dir>      model folder for t2s serve (default data/models/shop-sql-4m: a 4k vocabulary)
 *   --backend <name>   tfjs backend of t2s serve (default cpu)
 *   --sockets <n>      trickling sockets per connection attack (default 2000)
 *   --engine-thread <where>  worker (default) or main: where t2s serve runs its engine
 *   --t2s <file>       the t2s entry to run (default this checkout's bin/t2s.js), to measure another build
 *                      (flags its `t2s serve --help` does not list are left out)
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { connect, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { kitPath } from "../lib/core/paths.js";
import { flag, intFlag, printTable } from "./args.js";
import { healthProbe } from "./serve-client.js";

const MODEL = flag("--model") ?? kitPath("data", "models", "shop-sql-4m");
const BACKEND = flag("--backend") ?? "cpu";
const SOCKETS = intFlag("--sockets", 2000);
const ENGINE_THREAD = flag("--engine-thread") ?? "worker";
const T2S = flag("--t2s") ?? kitPath("bin", "t2s.js");
/** The most an attack is given before the bench records it as still running and moves on. */
const ATTACK_LIMIT_MS = 120_000;

async function start(args: string[]): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [T2S, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  child.stderr!.resume();
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /(http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on("exit", (code) => reject(new Error(`t2s ${args[0]} exited ${code}: ${out}`)));
  });
  return { url, child };
}

function pct(xs: number[], p: number): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

const rows: string[][] = [];

/** Runs one attack under the poller and records a row. */
async function measure(server: string, name: string, url: string, attack: () => Promise<string>): Promise<void> {
  const p = healthProbe(url, 0, ATTACK_LIMIT_MS);
  await p.ready;
  const t0 = performance.now();
  let outcome: string;
  try {
    outcome = await Promise.race([attack(), sleep(ATTACK_LIMIT_MS).then(() => `still running after ${ATTACK_LIMIT_MS / 1000} s`)]);
  } catch (e) {
    outcome = `error: ${(e as Error).message.slice(0, 60)}`;
  }
  const seconds = (performance.now() - t0) / 1000;
  const { ms, failed } = await p.stop();
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "-");
  rows.push([server, name, outcome, seconds.toFixed(1), String(ms.length), String(failed), f(pct(ms, 50)), f(pct(ms, 95)), f(ms.length ? Math.max(...ms) : NaN)]);
  process.stderr.write(`${server} ${name}: ${outcome} (${seconds.toFixed(1)} s)\n`);
}

async function post(url: string, body: unknown, signal?: AbortSignal): Promise<string> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal });
  const text = await res.text();
  const code = /"code":"([^"]+)"/.exec(text)?.[1];
  return `${res.status}${code ? ` ${code}` : ""}`;
}

function nested(depth: number): unknown {
  let s: unknown = { type: "string" };
  for (let i = 0; i < depth; i++) s = { type: "object", properties: { a: s }, required: ["a"] };
  return s;
}

function wide(n: number, prefix: string): unknown {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) properties[`${prefix}${i}`] = { type: "string", description: "a field of a very wide object" };
  return { type: "object", properties };
}

const chatWith = (name: string, schema: unknown) => ({ model: name, messages: [{ role: "user", content: "How many orders?" }], response_format: { type: "json_schema", json_schema: { name: "x", schema } }, max_tokens: 24 });

/** `n` sockets that send their headers and then one byte of the body a second, for `seconds`. */
async function trickle(url: string, path: string, n: number, seconds: number): Promise<string> {
  const { port } = new URL(url);
  const sockets: Socket[] = [];
  let closedByServer = 0;
  for (let b = 0; b < n; b += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, n - b) }, () => new Promise<void>((resolve) => {
        const s = connect(Number(port), "127.0.0.1");
        s.on("error", () => {});
        s.once("close", () => closedByServer++);
        s.once("connect", () => {
          s.write(`POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{`);
          resolve();
        });
        sockets.push(s);
      })),
    );
  }
  for (let t = 0; t < seconds; t++) {
    await sleep(1000);
    for (const s of sockets) if (!s.destroyed) s.write(" ");
  }
  const closed = closedByServer;
  for (const s of sockets) s.destroy();
  return `${closed} of ${n} closed by the server`;
}

/** The flags (with values) that this build's `t2s serve` knows. */
function supported(pairs: [string, string][]): string[] {
  const help = execFileSync(process.execPath, [T2S, "serve", "--help"], { encoding: "utf8" });
  return pairs.filter(([f]) => help.includes(f)).flat();
}

async function main(): Promise<void> {
  // the amplification row queues 65,536 rows and the compile row sends a 718 KB schema: their caps are raised
  const raised = supported([["--max-request-sequences", "65536"], ["--guided-max-schema-bytes", "4194304"], ["--engine-thread", ENGINE_THREAD]]);
  const serve = await start(["serve", "--model", MODEL, "--name", "m", "--port", "0", "--backend", BACKEND, ...raised]);
  try {
    const chat = `${serve.url}/v1/chat/completions`;
    await measure("serve", "idle (5 s)", serve.url, async () => (await sleep(5000), "-"));
    await measure("serve", "schema nested 55 deep x5", serve.url, async () => (await Promise.all(Array.from({ length: 5 }, () => post(chat, chatWith("m", nested(55)))))).join(", "));
    await measure("serve", "self-referencing $ref", serve.url, () => post(chat, chatWith("m", { $defs: { n: { $ref: "#/$defs/n" } }, $ref: "#/$defs/n" })));
    await measure("serve", "20,000 properties (past 10 s compile)", serve.url, () => post(chat, chatWith("m", wide(20_000, "p"))));
    await measure("serve", "20 fresh small schemas", serve.url, async () => {
      const codes = await Promise.all(Array.from({ length: 20 }, (_, i) => post(chat, chatWith("m", { type: "object", properties: { [`f${i}`]: { type: "string" } }, required: [`f${i}`] }))));
      return `${codes.filter((c) => c.startsWith("200")).length}/20 answered 200`;
    });
    await measure("serve", "20,000 prompts x n 64", serve.url, () => post(`${serve.url}/v1/completions`, { model: "m", prompt: Array.from({ length: 20_000 }, (_, i) => [1 + (i % 1000)]), n: 64, max_tokens: 16 }));
    await measure("serve", "65,536 rows queued, client leaves", serve.url, async () => {
      const client = new AbortController();
      const sent = post(`${serve.url}/v1/completions`, { model: "m", prompt: Array.from({ length: 1024 }, (_, i) => [1 + (i % 1000)]), n: 64, max_tokens: 64 }, client.signal).catch(() => "left");
      for (;;) {
        const h = (await (await fetch(`${serve.url}/health`)).json()) as { waiting: number };
        if (h.waiting > 60_000) break;
      }
      client.abort();
      await sent;
      const t0 = performance.now();
      for (;;) {
        const h = (await (await fetch(`${serve.url}/health`)).json()) as { waiting: number; running: number };
        if (h.waiting === 0 && h.running === 0) break;
      }
      return `line empty ${((performance.now() - t0) / 1000).toFixed(1)} s after it left`;
    });
    await measure("serve", `${SOCKETS} trickling bodies (15 s)`, serve.url, () => trickle(serve.url, "/v1/chat/completions", SOCKETS, 15));
  } finally {
    serve.child.kill("SIGKILL");
  }
  const env = await start(["env", "serve", "--port", "0", "--workers", "1"]);
  try {
    await measure("env serve", "idle (5 s)", env.url, async () => (await sleep(5000), "-"));
    await measure("env serve", `${SOCKETS} trickling bodies (15 s)`, env.url, () => trickle(env.url, "/v1/grade", SOCKETS, 15));
  } finally {
    env.child.kill("SIGKILL");
  }
  printTable(["server", "attack", "attacker got", "s", "/health n", "failed", "p50 ms", "p95 ms", "max ms"], rows);
}

await main();
