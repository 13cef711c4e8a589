/**
 * GET /metrics: the server's state in Prometheus text format. Engine gauges and counters keep vLLM's names
 * (`vllm:num_requests_running`, `vllm:prompt_tokens_total`, ...) so dashboards made for vLLM read them;
 * figures of the kit's own (tokens/s over the last seconds, mean batch size, engine steps) carry `t2s_`.
 */
import type { ChatEngine } from "../model/chat.js";

const LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320];

class Histogram {
  readonly counts = new Array<number>(LATENCY_BUCKETS.length).fill(0);
  sum = 0;
  n = 0;
  observe(v: number): void {
    this.sum += v;
    this.n++;
    const i = LATENCY_BUCKETS.findIndex((b) => v <= b);
    if (i >= 0) this.counts[i]++;
  }
}

/** How long a finished request took and how it ended. */
export interface RequestRecord {
  seconds: number;
  /** Seconds to the first streamed token (streaming requests). */
  firstTokenSeconds?: number;
  /** "stop", "length", "tool_calls" (per choice), "cancelled" or "error". */
  outcome: string[];
}

/** Request-level counters and histograms, plus a rolling rate of generated tokens. */
export class ServeMetrics {
  private readonly e2e = new Histogram();
  private readonly ttft = new Histogram();
  private readonly outcomes = new Map<string, number>();
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
    for (const o of r.outcome) this.outcomes.set(o, (this.outcomes.get(o) ?? 0) + 1);
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
    metric("vllm:request_success_total", "counter", "Finished choices by finish reason.", byOutcome((o) => o !== "cancelled" && o !== "error", "finished_reason").map((l) => `vllm:request_success_total${l}`));
    const hist = (name: string, help: string, h: Histogram) => {
      let cum = 0;
      const lines = LATENCY_BUCKETS.map((b, i) => `${name}_bucket{${label},le="${b}"} ${(cum += h.counts[i])}`);
      lines.push(`${name}_bucket{${label},le="+Inf"} ${h.n}`, `${name}_sum{${label}} ${h.sum}`, `${name}_count{${label}} ${h.n}`);
      metric(name, "histogram", help, lines);
    };
    hist("vllm:e2e_request_latency_seconds", "Request latency, arrival to last byte.", this.e2e);
    hist("vllm:time_to_first_token_seconds", "Time to the first streamed token.", this.ttft);
    one("t2s_generation_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.", this.tokensPerSecond());
    one("t2s_mean_batch_size", "gauge", "Rows per decode step since the start.", m.steps ? m.batchRows / m.steps : 0);
    one("t2s_engine_steps_total", "counter", "Decode steps run.", m.steps);
    one("t2s_sequences_finished_total", "counter", "Sequences that finished.", m.finished);
    one("t2s_sequences_cancelled_total", "counter", "Sequences cancelled (client gone, model unloaded).", m.cancelled);
    one("t2s_requests_failed_total", "counter", "Requests that ended in an error.", this.outcomes.get("error") ?? 0);
    return `${out.join("\n")}\n`;
  }
}
