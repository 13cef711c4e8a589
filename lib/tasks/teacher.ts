/**
 * The teacher author: asks an OpenAI-compatible chat model for (question, SQL) pairs per archetype x
 * difficulty x round (style rotating), verifies and de-duplicates them like the programmatic author, and
 * appends kept tasks to the output at once. Finished jobs are listed in <out>.done, so a rerun skips them.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { basename, dirname } from "node:path";
import { SAMPLING_TEMPERATURE } from "../core/defaults.js";
import { T2sError, UsageError } from "../core/errors.js";
import { schemaDdl } from "../db/schema.js";
import { notesFor } from "../db/notes.js";
import type { Executor } from "../db/types.js";
import { parseJsonl } from "../core/jsonl.js";
import { DedupIndex } from "./dedup.js";
import { portable, toTask, writeTasks } from "./io.js";
import { STYLES } from "./shop/style.js";
import { ARCHETYPES, DIFFICULTIES, type Archetype, type Level } from "./shop/template.js";
import { splitFor, taskId } from "./split.js";
import { dataInventory, parsePairs, teacherSystemPrompt, teacherUserPrompt } from "./teacher-prompt.js";
import type { Task } from "./types.js";
import { mapLimit, verifyTask } from "./verify.js";

export interface TeacherOptions {
  /** openai:<model>@<base-url>, e.g. openai:gpt-4o@http://localhost:8000/v1 */
  spec: string;
  dbPath: string;
  dbId?: string;
  out: string;
  rounds?: number;
  perBatch?: number;
  concurrency?: number;
  executor: Executor;
  notes?: string;
  apiKey?: string;
  timeoutMs?: number;
  log?: (line: string) => void;
}

export interface TeacherReport {
  out: string;
  total: number;
  kept_now: number;
  jobs_run: number;
  jobs_skipped: number;
  jobs_failed: number;
  dropped: Record<string, number>;
}

/** Model and endpoint of an "openai:<model>@<url>" spec. */
export function parseTeacherSpec(spec: string): { model: string; url: string } {
  const m = /^openai:(.+)@(https?:\/\/.+)$/.exec(spec);
  if (!m) throw new UsageError(`--teacher must look like openai:<model>@<http(s)://host/v1>, got '${spec}'`);
  const base = m[2].replace(/\/+$/, "");
  const url = base.endsWith("/chat/completions") ? base : base.endsWith("/v1") ? `${base}/chat/completions` : `${base}/v1/chat/completions`;
  return { model: m[1], url };
}

async function chat(url: string, model: string, system: string, user: string, apiKey: string | undefined, timeoutMs: number): Promise<string> {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
      body: JSON.stringify({ model, temperature: SAMPLING_TEMPERATURE, max_tokens: 6000, messages: [{ role: "system", content: system }, { role: "user", content: user }] }),
      signal: ctl.signal,
    });
    const text = await res.text();
    if (!res.ok) throw new T2sError("teacher_http", `${url} answered ${res.status}: ${text.slice(0, 200)}`);
    const body = JSON.parse(text) as { choices?: { message?: { content?: string | null } }[] };
    return body.choices?.[0]?.message?.content ?? "";
  } finally {
    clearTimeout(timer);
  }
}

function readExisting(out: string): Task[] {
  if (!existsSync(out)) return [];
  const content = parseJsonl<unknown>(readFileSync(out, "utf8"), out);
  const tasks = content.records.map((r, i) => toTask(r, `${out}:record ${i + 1}`));
  if (content.tornTail) writeTasks(out, tasks); // drop the cut-off line so appends start on a fresh line
  return tasks;
}

/** Runs (or resumes) teacher authoring into `opts.out`; returns what it did. */
export async function runTeacher(opts: TeacherOptions): Promise<TeacherReport> {
  const { model, url } = parseTeacherSpec(opts.spec);
  const log = opts.log ?? (() => undefined);
  const dbId = opts.dbId ?? basename(opts.dbPath).replace(/\.(sqlite3?|db)$/, "");
  const notes = opts.notes ?? notesFor({ db_id: dbId, db_path: opts.dbPath });
  const system = teacherSystemPrompt(schemaDdl(opts.dbPath), notes, dataInventory(opts.dbPath));
  const doneFile = `${opts.out}.done`;
  const done = new Set(existsSync(doneFile) ? readFileSync(doneFile, "utf8").split("\n").filter(Boolean) : []);
  const existing = readExisting(opts.out);
  const index = new DedupIndex();
  for (const t of existing) index.add(t.id, t.question, t.gold_sql);
  const recent = new Map<string, string[]>();
  for (const t of existing) (recent.get(t.archetype) ?? recent.set(t.archetype, []).get(t.archetype))!.push(t.question);

  const jobs: { key: string; archetype: Archetype; difficulty: Level; style: (typeof STYLES)[number] }[] = [];
  for (let r = 0; r < (opts.rounds ?? 2); r++) {
    ARCHETYPES.forEach((a, ai) => DIFFICULTIES.forEach((d, di) => jobs.push({ key: `r${r}/${a}/${d}`, archetype: a, difficulty: d, style: STYLES[(ai + di + r) % STYLES.length] })));
  }
  const todo = jobs.filter((j) => !done.has(j.key));
  const dropped: Record<string, number> = {};
  const drop = (k: string) => (dropped[k] = (dropped[k] ?? 0) + 1);
  let keptNow = 0;
  let failed = 0;
  let finished = 0;
  const base = dirname(opts.out);
  await mapLimit(todo, opts.concurrency ?? 4, async (job) => {
    const avoid = (recent.get(job.archetype) ?? []).slice(-40);
    let reply: string;
    try {
      reply = await chat(url, model, system, teacherUserPrompt(opts.perBatch ?? 8, job.archetype, job.difficulty, job.style, avoid), opts.apiKey ?? process.env.T2S_TEACHER_API_KEY ?? process.env.OPENAI_API_KEY, opts.timeoutMs ?? 300_000);
    } catch (e) {
      failed++;
      log(`[teacher] ${job.key}: request failed: ${(e as Error).message}`);
      return;
    }
    let kept = 0;
    for (const pair of parsePairs(reply)) {
      const q = pair.question.trim();
      const sql = pair.sql.trim();
      if (q.length < 20 || q.length > 700) { drop("question_length"); continue; }
      if (/select\s+\*/i.test(sql) || sql.length > 4000) { drop("bad_sql_shape"); continue; }
      const id = taskId(q, dbId);
      const task: Task = { id, db_id: dbId, db_path: opts.dbPath, question: q, gold_sql: sql, difficulty: job.difficulty, archetype: job.archetype, style: job.style, split: splitFor(id), source: `teacher:${model}:${job.key}` };
      if (index.check(q, sql)) { drop("duplicate"); continue; }
      const verdict = await verifyTask(task, opts.executor);
      if (verdict) { drop(verdict.reason); continue; }
      // re-check after the await: another job may have added a near-duplicate meanwhile
      const hit = index.tryAdd(id, q, sql);
      if (hit) { drop("duplicate"); continue; }
      appendFileSync(opts.out, JSON.stringify(portable(task, base)) + "\n");
      (recent.get(job.archetype) ?? recent.set(job.archetype, []).get(job.archetype))!.push(q);
      kept++;
    }
    keptNow += kept;
    appendFileSync(doneFile, job.key + "\n");
    log(`[teacher] ${++finished}/${todo.length} ${job.key} (${job.style}): +${kept} kept, ${existing.length + keptNow} total`);
  });
  return { out: opts.out, total: existing.length + keptNow, kept_now: keptNow, jobs_run: todo.length - failed, jobs_skipped: jobs.length - todo.length, jobs_failed: failed, dropped };
}
