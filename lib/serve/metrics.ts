/**
 * GET /metrics: the server's state in Prometheus text format. Engine gauges and counters keep vLLM's names
 * (`vllm:num_requests_running`, `vllm:prompt_tokens_total`, ...) so dashboards made for vLLM read them;
 * figures of the kit's own (tokens/s over the last seconds, mean batch size, engine steps) carry `t2s_`.
 */
import type { ChatEngine } from "../model/chat.js";

const LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320];

class Histogram {
  readonly counts: number[];
  sum = 0;
  n = 0;
  constructor(readonly buckets: number[] = LATENCY_BUCKETS) {
    this.counts = new Array<number>(buckets.length).fill(0);
  }
  observe(v: number): void {
    this.sum += v;
    this.n++;
    const i = this.buckets.findIndex((b) => v <= b);
    if (i >= 0) this.counts[i]++;
  }
}

/** How long a finished request took and how it ended. */
export interface RequestRecord {
  /** The served model (the base or an adapter). */
  model: string;
  seconds: number;
  /** Seconds to the first new token (every request that made one). */
  firstTokenSeconds?: number;
  /** New tokens over all choices. */
  outputTokens?: number;
  /** "stop", "length", "tool_calls" (per choice), "cancelled" or "error". */
  outcome: string[];
}

const TPOT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5];

/** Request-level counters and histograms, plus a rolling rate of generated tokens. */
export class ServeMetrics {
  private readonly e2e = new Histogram();
  private readonly ttft = new Histogram();
  private readonly tpot = new Histogram(TPOT_BUCKETS);
  private readonly outcomes = new Map<string, number>();
  /** Finished requests by the one reason each is counted under (vLLM counts requests, not choices). */
  private readonly requests = new Map<string, number>();
  /** Requests per served adapter. */
  private readonly loraRequests = new Map<string, number>();
  /** (ms, generated tokens) once a second over the last 10 s, for tokens/s. */
  private readonly samples: [number, number][] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly chat: ChatEngine) {
    this.sample();
    this.timer = setInterval(() => this.sample(), 1000);
    this.timer.unref();
  }

  private sample(): void {
    this.samples.push([Date.now(), this.chat.metrics().generatedTokens]);
    if (this.samples.length > 11) this.samples.shift();
  }

  record(r: RequestRecord): void {
    this.e2e.observe(r.seconds);
    if (r.firstTokenSeconds !== undefined) this.ttft.observe(r.firstTokenSeconds);
    if (r.firstTokenSeconds !== undefined && (r.outputTokens ?? 0) > 1) this.tpot.observe((r.seconds - r.firstTokenSeconds) / (r.outputTokens! - 1));
    for (const o of r.outcome) this.outcomes.set(o, (this.outcomes.get(o) ?? 0) + 1);
    // a request is counted once: cut if any choice was cut, else as its first choice ended
    const one = r.outcome.includes("length") ? "length" : r.outcome[0] ?? "error";
    this.requests.set(one, (this.requests.get(one) ?? 0) + 1);
    if (r.model !== this.chat.baseName) this.loraRequests.set(r.model, (this.loraRequests.get(r.model) ?? 0) + 1);
  }

  /** New tokens per second over the last (up to) 10 s. */
  tokensPerSecond(): number {
    const [t0, n0] = this.samples[0];
    const now = Date.now();
    const n = this.chat.metrics().generatedTokens;
    return now > t0 ? ((n - n0) * 1000) / (now - t0) : 0;
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** The Prometheus text exposition. */
  text(): string {
    const m = this.chat.metrics();
    const label = `model_name="${this.chat.baseName.replace(/["\\\n]/g, "_")}"`;
    const out: string[] = [];
    const metric = (name: string, type: string, help: string, lines: string[]) => out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...lines);
    const one = (name: string, type: string, help: string, v: number) => metric(name, type, help, [`${name}{${label}} ${Number.isFinite(v) ? v : 0}`]);
    one("vllm:num_requests_running", "gauge", "Sequences decoding now.", m.running);
    one("vllm:num_requests_waiting", "gauge", "Sequences waiting for a slot.", m.waiting);
    one("vllm:prompt_tokens_total", "counter", "Prompt tokens prefilled.", m.promptTokens);
    one("vllm:generation_tokens_total", "counter", "Tokens generated.", m.generatedTokens);
    const byOutcome = (keep: (o: string) => boolean, key: string) => [...this.outcomes].filter(([o]) => keep(o)).map(([o, n]) => `{${label},${key}="${o}"} ${n}`);
    const byRequest = [...this.requests].filter(([o]) => o !== "cancelled" && o !== "error").map(([o, n]) => `vllm:request_success_total{${label},finished_reason="${o}"} ${n}`);
    metric("vllm:request_success_total", "counter", "Finished requests by finish reason (a request with a cut choice counts as length).", byRequest);
    metric("t2s_choices_finished_total", "counter", "Finished choices by finish reason.", byOutcome((o) => o !== "cancelled" && o !== "error", "finished_reason").map((l) => `t2s_choices_finished_total${l}`));
    one("vllm:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache (0 with caching off).", m.prefixCacheQueries);
    one("vllm:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache, whose keys and values were copied instead of computed.", m.prefixCacheHits);
    one("vllm:kv_cache_usage_perc", "gauge", "Fraction of the KV-cache token slots of the running engines in use (1 = full).", this.chat.cacheUsage());
    const q = m.queueSeconds;
    metric("vllm:request_queue_time_seconds", "summary", "Seconds sequences waited for a slot.", [`vllm:request_queue_time_seconds_sum{${label}} ${q.sum}`, `vllm:request_queue_time_seconds_count{${label}} ${q.count}`]);
    const loras = [...this.chat.models.keys()].filter((n) => n !== this.chat.baseName);
    metric("vllm:lora_requests_info", "gauge", "Adapters served now (running_lora_adapters) and the cap.", [`vllm:lora_requests_info{${label},running_lora_adapters="${loras.join(",").replace(/["\\\n]/g, "_")}",waiting_lora_adapters=""} ${loras.length}`]);
    metric("t2s_lora_requests_total", "counter", "Requests answered by each adapter.", [...this.loraRequests].map(([n, c]) => `t2s_lora_requests_total{${label},lora_name="${n.replace(/["\\\n]/g, "_")}"} ${c}`));
    const hist = (name: string, help: string, h: Histogram) => {
      let cum = 0;
      const lines = h.buckets.map((b, i) => `${name}_bucket{${label},le="${b}"} ${(cum += h.counts[i])}`);
      lines.push(`${name}_bucket{${label},le="+Inf"} ${h.n}`, `${name}_sum{${label}} ${h.sum}`, `${name}_count{${label}} ${h.n}`);
      metric(name, "histogram", help, lines);
    };
    hist("vllm:e2e_request_latency_seconds", "Request latency, arrival to last byte.", this.e2e);
    hist("vllm:time_to_first_token_seconds", "Time to the first new token, every request.", this.ttft);
    hist("vllm:time_per_output_token_seconds", "Seconds per new token after the first, per request.", this.tpot);
    one("t2s_generation_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.", this.tokensPerSecond());
    one("t2s_mean_batch_size", "gauge", "Rows per decode step since the start.", m.steps ? m.batchRows / m.steps : 0);
    one("t2s_engine_steps_total", "counter", "Decode steps run.", m.steps);
    one("t2s_sequences_finished_total", "counter", "Sequences that finished.", m.finished);
    one("t2s_sequences_cancelled_total", "counter", "Sequences cancelled (client gone, model unloaded).", m.cancelled);
    one("t2s_requests_failed_total", "counter", "Requests that ended in an error.", this.outcomes.get("error") ?? 0);
    return `${out.join("\n")}\n`;
  }
}
