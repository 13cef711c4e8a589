/**
 * Shared by the attack tests (issue 46): a /health poller that runs while an attack is under way and records
 * when each answer came, so a test can assert by ordering (answers arrived while the attack was in
 * progress), never by latency; and a small JSON Schema check for the guided answers.
 */
import { setImmediate as turn } from "node:timers/promises";

/** GET /health back to back (each request after the previous answer) until stopped. */
export class HealthPoller {
  /** performance.now() when each request was sent and answered, and its status. */
  readonly answers: { sent: number; got: number; status: number }[] = [];
  readonly failures: string[] = [];
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(private readonly url: string, private readonly headers: Record<string, string> = {}) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const sent = performance.now();
      try {
        const res = await fetch(`${this.url}/health`, { headers: this.headers });
        await res.arrayBuffer();
        this.answers.push({ sent, got: performance.now(), status: res.status });
      } catch (e) {
        this.failures.push(`${(e as Error).message} ${String((e as { cause?: unknown }).cause ?? "")}`);
        await turn();
      }
    }
  }

  /** Answers (status 200) to requests sent after `from` and answered before `to`. */
  within(from: number, to: number): number {
    return this.answers.filter((a) => a.status === 200 && a.sent >= from && a.got <= to).length;
  }

  /** Resolves once at least `n` answers have come after `from` (the poller is running). */
  async waitForAnswers(from: number, n: number): Promise<void> {
    while (this.answers.filter((a) => a.sent >= from).length < n) await turn();
  }

  /** Stops polling; returns what failed (an empty list when every request was answered). */
  async stop(): Promise<string[]> {
    this.stopped = true;
    await this.loop;
    const bad = this.answers.filter((a) => a.status !== 200).map((a) => `status ${a.status}`);
    return [...this.failures, ...bad];
  }
}

/** A JSON Schema check for the subset the tests use (type, properties, required, additionalProperties, enum, const, items, anyOf). */
export function validates(v: unknown, s: any): boolean {
  if (s.anyOf) return s.anyOf.some((x: unknown) => validates(v, x));
  if ("const" in s) return JSON.stringify(v) === JSON.stringify(s.const);
  if (s.enum) return s.enum.some((e: unknown) => JSON.stringify(e) === JSON.stringify(v));
  switch (s.type) {
    case "object": {
      if (!v || typeof v !== "object" || Array.isArray(v)) return false;
      const o = v as Record<string, unknown>;
      if ((s.required ?? []).some((k: string) => !(k in o))) return false;
      for (const [k, x] of Object.entries(o)) {
        if (s.properties?.[k]) {
          if (!validates(x, s.properties[k])) return false;
        } else if (s.additionalProperties === false) return false;
      }
      return true;
    }
    case "array":
      return Array.isArray(v) && (!s.items || v.every((x) => validates(x, s.items)));
    case "string":
      return typeof v === "string";
    case "integer":
      return Number.isInteger(v);
    case "number":
      return typeof v === "number";
    case "boolean":
      return typeof v === "boolean";
    default:
      return true;
  }
}

/** POST a JSON body. */
export function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
}
