/**
 * A fast grader process of `t2s grade --jsonl` (fast-graders.ts starts them): it receives batches of
 * request lines, grades each in order with its queries run in this process (no round trip to an SQL
 * worker per query, results never copied between processes) and sends back the answers of each batch.
 * The watchdog thread kills this process the moment a query passes its time limit; the command then
 * grades that batch's unanswered lines again on the executor pool, which tells a slow gold from a slow
 * candidate exactly. Configuration comes in T2S_GRADE_CONFIG (JSON: request defaults and line options).
 */
import { DirectExecutor } from "../db/direct-executor.js";
import type { ExecOptions, ExecOutcome, Executor } from "../db/types.js";
import { startWatchdog } from "../db/watchdog.js";
import { gradeLine, type LineOptions } from "./line-grader.js";
import type { RequestDefaults } from "./request.js";
import { QUERY_TIMEOUT_MS } from "../core/defaults.js";

export interface GraderBatch {
  lines: Array<[number, string]>;
}

export interface GraderAnswers {
  answers: Array<[number, string]>;
}

/** Runs queries in this process (DirectExecutor); the watchdog ends the process when one passes its time limit. */
class WatchedExecutor implements Executor {
  private readonly direct = new DirectExecutor();
  constructor(private readonly deadline: Float64Array) {}

  async execute(dbPath: string, sql: string, options: ExecOptions = {}): Promise<ExecOutcome> {
    this.deadline[0] = Date.now() + (options.timeoutMs ?? QUERY_TIMEOUT_MS);
    try {
      return await this.direct.execute(dbPath, sql, options);
    } finally {
      this.deadline[0] = 0;
    }
  }

  close(): Promise<void> {
    return this.direct.close();
  }
}

function serve(send: (m: unknown) => boolean): void {
  const cfg = JSON.parse(process.env.T2S_GRADE_CONFIG ?? "{}") as { defaults: RequestDefaults; options: LineOptions };
  const executor = new WatchedExecutor(startWatchdog());
  const queue: GraderBatch[] = [];
  let running = false;
  const drain = async () => {
    if (running) return;
    running = true;
    for (let batch = queue.shift(); batch; batch = queue.shift()) {
      const answers: Array<[number, string]> = [];
      for (const [n, raw] of batch.lines) answers.push([n, await gradeLine(executor, raw, n, cfg.defaults, cfg.options)]);
      send({ answers } satisfies GraderAnswers);
    }
    running = false;
  };
  process.on("message", (m: unknown) => {
    const batch = m as GraderBatch;
    if (!batch || !Array.isArray(batch.lines)) return;
    queue.push(batch);
    void drain();
  });
  process.on("disconnect", () => process.exit(0));
  send({ ready: true });
}

if (typeof process.send === "function") serve(process.send.bind(process));
