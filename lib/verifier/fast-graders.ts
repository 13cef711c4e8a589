/**
 * The fast path of `t2s grade --jsonl`: a few grader processes (grade-worker.ts) that each grade whole
 * lines with their queries run in-process, fed in batches. Lines go to a grader by their (db, gold), so each
 * gold runs in one grader's cache. When a grader dies (a query passed its time limit or its memory
 * ceiling), the lines it had not answered are graded by `fallback` (the executor pool, which gives the exact
 * timeout / too_large / gold_failed answer) and a new grader takes its place. Used only when `t2s` runs
 * from the compiled dist/ (the graders then start in about 0.1 s); otherwise every line takes the pool path.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { spawnWorker } from "../db/spawn.js";
import type { GraderAnswers } from "./grade-worker.js";
import type { LineOptions } from "./line-grader.js";
import type { RequestDefaults } from "./request.js";

type Fallback = (raw: string, n: number) => Promise<string>;

interface Pending {
  raw: string;
  resolve: (answer: string) => void;
}

interface Grader {
  child: ChildProcess;
  sent: Map<number, Pending>;
  batch: Array<[number, string, Pending]>;
  dead: boolean;
}

/** Lines sent to a grader in one message at most. */
const BATCH = 64;
/** Grader deaths after which every further line takes the pool path. */
const MAX_RESTARTS = 8;
const MEMORY_LIMIT_MB = 1024;

/** The compiled grader entry, when `t2s` runs from an up-to-date dist/ (bin/t2s.js sets T2S_DIST). */
export function fastGraderEntry(): string | undefined {
  const dist = process.env.T2S_DIST;
  if (!dist) return undefined;
  const p = join(dist, "lib", "verifier", "grade-worker.js");
  return existsSync(p) ? p : undefined;
}

export class FastGraders {
  private readonly graders: Grader[] = [];
  private readonly env: Record<string, string>;
  private restarts = 0;
  private flushing = false;

  /** `env` is added to the graders' environment (T2S_WORKER_MODULE runs the TypeScript entry through worker-boot.cjs). */
  constructor(private readonly entry: string, count: number, defaults: RequestDefaults, options: LineOptions, private readonly fallback: Fallback, env: Record<string, string> = {}) {
    this.env = { ...env, T2S_GRADE_CONFIG: JSON.stringify({ defaults, options }) };
    this.count = count;
  }

  /** Graders wanted; they start with the first line, so empty input starts none. */
  private readonly count: number;

  private start(): Grader {
    const g: Grader = { child: spawnWorker(MEMORY_LIMIT_MB, this.entry, this.env), sent: new Map(), batch: [], dead: false };
    g.child.stderr?.resume();
    g.child.on("message", (m: GraderAnswers) => {
      if (!m || !Array.isArray(m.answers)) return;
      for (const [n, text] of m.answers) {
        const p = g.sent.get(n);
        if (!p) continue;
        g.sent.delete(n);
        p.resolve(text);
      }
    });
    const died = () => {
      if (g.dead) return;
      g.dead = true;
      this.restarts++;
      const lost = [...g.sent.entries(), ...g.batch.map(([n, , p]) => [n, p] as const)];
      g.sent.clear();
      g.batch = [];
      for (const [n, p] of lost) void this.fallback(p.raw, n).then(p.resolve);
      const i = this.graders.indexOf(g);
      if (i >= 0 && this.restarts <= MAX_RESTARTS) this.graders[i] = this.start();
    };
    g.child.on("exit", died);
    g.child.on("error", died);
    return g;
  }

  /** The answer line of input line `n`. */
  answer(raw: string, n: number): Promise<string> {
    if (this.restarts > MAX_RESTARTS) return this.fallback(raw, n);
    while (this.graders.length < this.count) this.graders.push(this.start());
    const g = this.graders[this.route(raw)];
    if (g.dead) return this.fallback(raw, n);
    return new Promise<string>((resolve) => {
      g.batch.push([n, raw, { raw, resolve }]);
      if (g.batch.length >= BATCH) this.send(g);
      else if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => {
          this.flushing = false;
          for (const x of this.graders) this.send(x);
        });
      }
    });
  }

  private send(g: Grader): void {
    if (g.dead || g.batch.length === 0) return;
    const batch = g.batch;
    g.batch = [];
    for (const [n, , p] of batch) g.sent.set(n, p);
    try {
      g.child.send({ lines: batch.map(([n, raw]) => [n, raw]) });
    } catch {
      // the grader is gone: its exit hands these lines to the fallback
    }
  }

  /** The grader of a line: by its (db, gold), so a gold is cached in one grader only. */
  private route(raw: string): number {
    let key = raw;
    try {
      const o = JSON.parse(raw) as { db?: unknown; gold?: unknown };
      key = `${String(o.db)}\u0000${String(o.gold)}`;
    } catch {
      // a malformed line: any grader answers it with the error
    }
    let h = 0;
    for (let i = 0; i < key.length; i++) h = (Math.imul(h, 31) + key.charCodeAt(i)) | 0;
    return Math.abs(h) % this.graders.length;
  }

  /** Stops the graders (after every answer is in). */
  async close(): Promise<void> {
    await Promise.all(
      this.graders.map(
        (g) =>
          new Promise<void>((done) => {
            g.dead = true;
            if (g.child.exitCode !== null || g.child.signalCode !== null) return done();
            g.child.once("exit", () => done());
            try {
              g.child.disconnect();
            } catch {
              g.child.kill("SIGKILL");
            }
          }),
      ),
    );
  }
}
