/**
 * bench:serve's prefix-caching table: the same streaming load of shop prompts (every prompt starts with the
 * same instructions, schema and notes) against `t2s serve` with prefix caching on and with
 * --no-enable-prefix-caching, each on a fresh server: time to first token p50/p95, latency p50, new tokens
 * per second, and the share of prompt tokens found in the cache (from /metrics).
 */
import { ask, f, pct, startServe, type Message, type Outcome } from "./serve-client.js";

export interface PrefixCachingLoad {
  model: string;
  backend: string;
  /** The server's --max-num-batched-tokens (undefined: its default). */
  prefill: number | undefined;
  prompts: Message[][];
  clients: number;
  /** Requests each client sends, one after the other. */
  rounds: number;
  maxTokens: number;
  /** Times each setting is measured, alternating on and off (a shared machine's load drifts). */
  repeats: number;
  /** More `t2s serve` flags for both settings (the engine thread, the batch). */
  extra?: string[];
}

/** The prefix-cache counters of a server's /metrics. */
async function cacheCounters(url: string): Promise<{ queries: number; hits: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(text)?.[1] ?? NaN);
  return { queries: value("vllm:prefix_cache_queries_total"), hits: value("vllm:prefix_cache_hits_total") };
}

/** One row of the table: a fresh server with caching on or off under the load. */
async function measure(o: PrefixCachingLoad, on: boolean): Promise<string> {
  const { url, child } = await startServe(o.model, o.backend, o.prefill, [...(o.extra ?? []), ...(on ? [] : ["--no-enable-prefix-caching"])]);
  const exited = new Promise((r) => child.once("exit", r));
  try {
    const served = ((await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] }).data[0].id;
    // engine creation and first-call compilation stay out of the figures (both settings get the same request)
    await ask(url, { model: served, messages: o.prompts[0], max_tokens: 4 });
    const before = await cacheCounters(url);
    const total = o.clients * o.rounds;
    let next = 0;
    const outcomes: Outcome[] = [];
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: o.clients }, async () => {
        while (next < total) {
          const i = next++;
          const body = { model: served, messages: o.prompts[i % o.prompts.length], max_tokens: o.maxTokens, temperature: 0.7, seed: i, stream: true, stream_options: { include_usage: true } };
          outcomes.push(await ask(url, body));
        }
      }),
    );
    const wall = (performance.now() - t0) / 1000;
    const after = await cacheCounters(url);
    const ok = outcomes.filter((x) => !x.error);
    const ttft = ok.flatMap((x) => (x.firstToken === undefined ? [] : [x.firstToken]));
    const tokens = ok.reduce((s, x) => s + x.tokens, 0);
    const queried = after.queries - before.queries;
    const rate = queried > 0 ? `${f((100 * (after.hits - before.hits)) / queried, 1)}% (${after.hits - before.hits} / ${queried})` : "- (off)";
    return `| ${on ? "on " : "off"} | ${o.clients} | ${total} | ${outcomes.length - ok.length} | ${f(pct(ttft, 50))} | ${f(pct(ttft, 95))} | ${f(pct(ok.map((x) => x.seconds), 50))} | ${f(tokens / wall, 0)} | ${rate} |`;
  } finally {
    child.kill("SIGINT");
    await exited;
  }
}

/** Prints the table: caching on, then off, under the same load (`repeats` times, alternating). */
export async function prefixCachingTable(o: PrefixCachingLoad): Promise<void> {
  process.stdout.write(`\nprefix caching, ${o.clients} streaming clients x ${o.rounds} requests, max_tokens ${o.maxTokens}, a fresh server each\n`);
  process.stdout.write("| prefix caching | clients | requests | errors | TTFT p50 s | TTFT p95 s | latency p50 s | tokens/s | prompt tokens found in the cache |\n|---|---|---|---|---|---|---|---|---|\n");
  const ratios: number[] = [];
  for (let k = 0; k < o.repeats; k++) {
    const p50: number[] = [];
    for (const on of [true, false]) {
      const row = await measure(o, on);
      p50.push(Number(row.split("|")[5]));
      process.stdout.write(`${row}\n`);
    }
    ratios.push(p50[1] / p50[0]);
  }
  process.stdout.write(`TTFT p50, off / on: ${ratios.map((r) => `${f(r)}x`).join(", ")} (median ${f(pct(ratios, 50))}x)\n`);
}
