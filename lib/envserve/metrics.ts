/**
 * Counters of the environment service, rendered in the Prometheus text exposition format (version 0.0.4)
 * for /metrics: requests by route and status, request seconds, grades by outcome, tool calls, gold cache.
 */

type Labels = Record<string, string>;

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

/** A counter family keyed by its label values. */
class Family {
  private readonly values = new Map<string, { labels: Labels; value: number }>();
  constructor(readonly name: string, readonly help: string, readonly type: "counter" | "gauge" = "counter") {}
  add(labels: Labels, by = 1): void {
    const key = labelText(labels);
    const v = this.values.get(key);
    if (v) v.value += by;
    else this.values.set(key, { labels, value: by });
  }
  lines(): string[] {
    const out = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${this.type}`];
    for (const { labels, value } of this.values.values()) out.push(`${this.name}${labelText(labels)} ${value}`);
    return out;
  }
}

/** The service's counters; `render` adds the gauges read at scrape time. */
export class EnvMetrics {
  private readonly requests = new Family("t2s_env_requests_total", "HTTP requests answered, by route and status code");
  private readonly seconds = new Family("t2s_env_request_seconds_total", "Seconds spent answering requests, by route");
  private readonly grades = new Family("t2s_env_grades_total", "Grade items answered, by outcome (error: the item could not be graded; infra_error: the service failed to grade it, no verdict on the item; cancelled: its client went away)");
  private readonly tools = new Family("t2s_env_tool_calls_total", "Tool calls answered, by whether an episode would count them invalid");

  request(route: string, status: number, seconds: number): void {
    this.requests.add({ route, code: String(status) });
    this.seconds.add({ route }, seconds);
  }
  graded(outcome: string): void {
    this.grades.add({ outcome });
  }
  /** An item answered with an error: "infra_error" when the service failed (no verdict), "cancelled" when its client went away, else "error" (the item's own fault). */
  gradeError(kind: "error" | "infra_error" | "cancelled" = "error"): void {
    this.grades.add({ outcome: kind });
  }
  toolCall(invalid: boolean): void {
    this.tools.add({ invalid: String(invalid) });
  }

  /** The exposition text, with the in-flight and gold-cache gauges given by the caller. */
  render(gauges: { inflight: number; goldHits: number; goldMisses: number; goldSize: number }): string {
    const gauge = (name: string, help: string, v: number, type = "gauge") => [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name} ${v}`];
    return [
      ...this.requests.lines(),
      ...this.seconds.lines(),
      ...this.grades.lines(),
      ...this.tools.lines(),
      ...gauge("t2s_env_inflight_requests", "Requests being answered now", gauges.inflight),
      ...gauge("t2s_env_gold_cache_hits_total", "Gold results served from the cache", gauges.goldHits, "counter"),
      ...gauge("t2s_env_gold_cache_misses_total", "Gold queries run", gauges.goldMisses, "counter"),
      ...gauge("t2s_env_gold_cache_entries", "Gold results held in the cache", gauges.goldSize),
    ].join("\n") + "\n";
  }
}
