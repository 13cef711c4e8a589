// Shutdown (issue 46, item 10b), on both servers as processes: the first SIGINT/SIGTERM is acknowledged at
// once and drains (env serve lets a grade in flight finish), a second one cuts what is left at once, even
// with thousands of rows queued. Assertions are on the order of events (acknowledgement lines, answers,
// exits); the drain timeouts are set an hour long, so only the second signal can end these servers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { fixtureDir } from "../model/fixtures.js";
import { t2sBin } from "../helpers.js";
import { postJson } from "./attack-helpers.js";

interface Served {
  child: ChildProcess;
  url: string;
  /** stderr so far. */
  stderr: () => string;
  /** Resolves when stderr has printed a line matching `re`. */
  printed: (re: RegExp) => Promise<void>;
  exited: Promise<number | null>;
}

/** Starts `t2s ...args` and resolves with the URL its banner prints. */
async function serve(args: string[]): Promise<Served> {
  const child = spawn(process.execPath, [t2sBin, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  const waiters: { re: RegExp; resolve: () => void }[] = [];
  child.stderr!.on("data", (d) => {
    err += d;
    for (const w of [...waiters]) if (w.re.test(err)) (waiters.splice(waiters.indexOf(w), 1), w.resolve());
  });
  const exited = once(child, "close").then(([code]) => code as number | null);
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /(http:\/\/[\d.:[\]]+)/.exec(out);
      if (m) resolve(m[1]);
    });
    void exited.then((code) => reject(new Error(`t2s ${args[0]} exited (${code}) before serving: ${err}`)));
  });
  return {
    child,
    url,
    stderr: () => err,
    printed: (re) => (re.test(err) ? Promise.resolve() : new Promise((resolve) => waiters.push({ re, resolve }))),
    exited,
  };
}

test("10b. t2s serve: SIGINT drains, a second SIGINT cuts at once with 4,096 rows queued", { timeout: 600_000 }, async () => {
  const s = await serve(["serve", "--model", fixtureDir("qwen2"), "--port", "0", "--backend", "cpu", "--max-model-len", "512", "--max-batch", "4", "--shutdown-timeout", "3600"]);
  try {
    // 64 prompts x n 64 of 400 tokens: hours of work on 4 rows at a time
    const long = postJson(`${s.url}/v1/completions`, { model: "qwen2", prompt: Array.from({ length: 64 }, (_, i) => [1 + i]), n: 64, max_tokens: 400, ignore_eos: true });
    for (;;) {
      const h = (await (await fetch(`${s.url}/health`)).json()) as { waiting: number };
      if (h.waiting > 4000) break;
    }
    s.child.kill("SIGINT");
    await s.printed(/SIGINT: no new requests; waiting up to 3600 s for 1 in flight/);
    // draining: a new request is refused
    assert.equal((await fetch(`${s.url}/v1/models`)).status, 503);
    s.child.kill("SIGINT");
    await s.printed(/SIGINT again: cutting 1 requests in flight now/);
    const res = await long;
    assert.equal(res.status, 503);
    assert.equal(await s.exited, 0);
  } finally {
    s.child.kill("SIGKILL");
  }
});

/** Sends a grade whose query runs long (a recursive count; the service's query timeout is lifted); `answer` is its response. */
async function slowGrade(url: string): Promise<{ answer: Promise<Response> }> {
  const tasks = (await (await fetch(`${url}/v1/tasks`)).json()) as { tasks: { task_id: string }[] };
  const pred = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000000) SELECT count(*) FROM c";
  return { answer: postJson(`${url}/v1/grade`, { items: [{ task_id: tasks.tasks[0].task_id, pred }] }) };
}

/** Resolves once env serve counts a request in flight besides the /metrics request asking. */
async function gradeInFlight(url: string): Promise<void> {
  for (;;) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const m = /^t2s_env_inflight_requests(?:\{[^}]*\})? (\d+)/m.exec(text);
    if (m && Number(m[1]) >= 1) return;
  }
}

test("10b. env serve: SIGTERM lets a grade in flight finish (no ECONNRESET), then exits", { timeout: 600_000 }, async () => {
  const s = await serve(["env", "serve", "--port", "0", "--workers", "1", "--timeout-ms", "3600000", "--shutdown-timeout", "3600"]);
  try {
    const grade = await slowGrade(s.url);
    await gradeInFlight(s.url);
    s.child.kill("SIGTERM");
    await s.printed(/SIGTERM: no new requests; waiting up to 3600 s for 1 in flight/);
    const res = await grade.answer;
    assert.equal(res.status, 200);
    const body = (await res.json()) as { results: { outcome: string }[] };
    assert.equal(body.results.length, 1);
    assert.equal(await s.exited, 0);
  } finally {
    s.child.kill("SIGKILL");
  }
});

test("10b. env serve: a second SIGTERM cuts a grade in flight at once", { timeout: 600_000 }, async () => {
  const s = await serve(["env", "serve", "--port", "0", "--workers", "1", "--timeout-ms", "3600000", "--shutdown-timeout", "3600"]);
  try {
    const grade = (await slowGrade(s.url)).answer.then((r) => r.status, (e: Error) => e.message);
    await gradeInFlight(s.url);
    s.child.kill("SIGTERM");
    await s.printed(/SIGTERM: no new requests/);
    s.child.kill("SIGTERM");
    await s.printed(/SIGTERM again: cutting 1 requests in flight now/);
    assert.equal(await s.exited, 0);
    // the grade never finished: its connection was cut
    assert.notEqual(await grade, 200);
  } finally {
    s.child.kill("SIGKILL");
  }
});
