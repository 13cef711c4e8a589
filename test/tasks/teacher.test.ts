import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DirectExecutor } from "../../lib/db/direct-executor.js";
import { parsePairs } from "../../lib/tasks/teacher-prompt.js";
import { parseTeacherSpec, runTeacher } from "../../lib/tasks/teacher.js";
import { readTasks } from "../../lib/tasks/io.js";
import { SeededRandom } from "../../lib/core/random.js";
import { repoRoot, scratchDir } from "../helpers.js";

const shopDb = join(repoRoot, "data", "shop", "shop.sqlite");
const VOCAB = Array.from({ length: 300 }, (_, i) => `word${i}`);

interface FakeTeacher {
  url: string;
  requests: { model: string; user: string }[];
  close(): Promise<void>;
}

function body(req: IncomingMessage): Promise<string> {
  return new Promise((res) => {
    let s = "";
    req.on("data", (d) => (s += d));
    req.on("end", () => res(s));
  });
}

/** A chat-completions server: each request gets 2 fresh valid pairs, a SELECT * pair and an empty-result pair. */
async function fakeTeacher(opts: { failOn?: RegExp; start?: number } = {}): Promise<FakeTeacher> {
  const requests: { model: string; user: string }[] = [];
  let n = opts.start ?? 0;
  const rng = new SeededRandom(1 + (opts.start ?? 0));
  const server: Server = createServer(async (req, res) => {
    const payload = JSON.parse(await body(req));
    const user = payload.messages.find((m: { role: string }) => m.role === "user").content as string;
    requests.push({ model: payload.model, user });
    if (req.url !== "/v1/chat/completions" || (opts.failOn && opts.failOn.test(user))) {
      res.writeHead(500).end("boom");
      return;
    }
    const pairs = [0, 1].map(() => {
      n++;
      return { question: `Count orders with id at most ${n}: ${rng.sample(VOCAB, 10).join(" ")}.`, sql: `SELECT COUNT(*) AS c FROM orders WHERE order_id <= ${n}` };
    });
    pairs.push({ question: "Show me everything about every order in the shop please.", sql: "SELECT * FROM orders" });
    pairs.push({ question: `Orders with a negative id, which never exist ${n}?`, sql: `SELECT order_id FROM orders WHERE order_id < -${n}` });
    // wrap in prose and a fence, as chat models do
    const content = "Here you go:\n```json\n" + JSON.stringify(pairs, null, 1) + "\n```";
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: "x", object: "chat.completion", choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content } }] }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}/v1`, requests, close: () => new Promise((r) => server.close(() => r())) };
}

test("teacher spec parsing", () => {
  assert.deepEqual(parseTeacherSpec("openai:qwen@http://h:8000/v1"), { model: "qwen", url: "http://h:8000/v1/chat/completions" });
  assert.deepEqual(parseTeacherSpec("openai:m@http://h:8000"), { model: "m", url: "http://h:8000/v1/chat/completions" });
  assert.throws(() => parseTeacherSpec("m@http://h"), /openai:<model>@/);
});

test("a truncated reply array is salvaged up to its last complete object", () => {
  const pairs = parsePairs('[{"question": "a?", "sql": "select 1"}, {"question": "b?", "sql": "select 2"}, {"question": "c');
  assert.deepEqual(pairs.map((p) => p.sql), ["select 1", "select 2"]);
  assert.deepEqual(parsePairs("no json here"), []);
});

test("the teacher author verifies, de-duplicates, appends, and resumes after a failure", async () => {
  const out = join(scratchDir(), "teacher.jsonl");
  const ex = new DirectExecutor();
  const failing = await fakeTeacher({ failOn: /Archetype: GROUP BY with HAVING\.\nDifficulty: hard/ });
  const logs: string[] = [];
  try {
    const r1 = await runTeacher({ spec: `openai:tiny@${failing.url}`, dbPath: shopDb, out, rounds: 1, perBatch: 4, concurrency: 3, executor: ex, log: (l) => logs.push(l) });
    assert.equal(failing.requests.length, 30);
    assert.equal(failing.requests[0].model, "tiny");
    assert.equal(r1.jobs_failed, 1);
    assert.equal(r1.jobs_run, 29);
    assert.equal(r1.kept_now, 58);
    assert.equal(r1.dropped.bad_sql_shape, 29);
    assert.equal(r1.dropped.empty, 29);
    assert.ok(logs.some((l) => /request failed/.test(l)) && logs.some((l) => /\+2 kept/.test(l)));
  } finally {
    await failing.close();
  }
  const good = await fakeTeacher({ start: 1000 });
  try {
    const r2 = await runTeacher({ spec: `openai:tiny@${good.url}`, dbPath: shopDb, out, rounds: 1, perBatch: 4, concurrency: 3, executor: ex });
    assert.equal(good.requests.length, 1, "only the failed job is asked again");
    assert.match(good.requests[0].user, /GROUP BY with HAVING/);
    assert.equal(r2.jobs_skipped, 29);
    assert.equal(r2.total, 60);
    const r3 = await runTeacher({ spec: `openai:tiny@${good.url}`, dbPath: shopDb, out, rounds: 1, executor: ex });
    assert.equal(r3.jobs_run, 0);
    assert.equal(good.requests.length, 1);
  } finally {
    await good.close();
    await ex.close();
  }
  const tasks = readTasks(out);
  assert.equal(tasks.length, 60);
  assert.equal(new Set(tasks.map((t) => `${t.archetype}/${t.difficulty}`)).size, 30);
  assert.ok(tasks.every((t) => t.db_path === shopDb && t.source.startsWith("teacher:tiny:")));
  assert.equal(readFileSync(`${out}.done`, "utf8").trim().split("\n").length, 30);
  assert.ok(existsSync(out));
});
