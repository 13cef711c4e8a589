/**
 * Context padding: earlier tool turns put into an episode's opening, after the question, so the model
 * writes its answer further into its context than the prompt alone would place it. It isolates one
 * variable, the answer's position, for the long-context probe (docs/episodes.md): the same question, the
 * same system prompt, and in between only turns that carry nothing the question needs.
 *
 * Each turn is a call of the SQL tool in the model's own tool-conversation format (a native tool call,
 * then its `tool` result, which the chat template renders as the `<tool_call>` / `<tool_response>` bytes
 * of a real tool episode), its query really run on the task's database through the episode's read-only
 * tool, and its result rendered as an episode renders it (truncate.ts). A query is used only when it
 * cannot help: it reads tables and columns whose names the gold query never mentions, and neither it nor
 * its shown output holds a name the gold query mentions or one of the gold query's string literals.
 */
import { codeTokens } from "../db/sqltext.js";
import type { ExecOutcome } from "../db/types.js";
import { SeededRandom } from "../core/random.js";
import { T2sError } from "../core/errors.js";
import type { ChatMessage } from "../policy/types.js";
import { SQL_TOOL_NAME } from "./tools.js";
import { formatToolResult, TRUNCATION_MARK, type ToolOutputOptions } from "./truncate.js";

export interface PaddingOptions {
  /** Prompt tokens to reach at most: turns are added while the whole prompt stays within it. */
  tokens: number;
  /** Seed of the candidate order (the caller derives one per task, so tasks do not share a stream). */
  seed: number;
  /** How a tool result is shown (the run's --tool-rows / --tool-chars / --tool-truncate). */
  toolOutput?: ToolOutputOptions;
}

export interface PaddingDeps {
  /** Runs one query on the task's database (the episode's read-only tool). */
  runTool: (query: string) => Promise<ExecOutcome>;
  /** Prompt tokens of these messages as the policy's model would see them (its chat template and tokenizer). */
  countTokens: (messages: ChatMessage[]) => Promise<number>;
}

/** What padding one opening gave. */
export interface Padded {
  messages: ChatMessage[];
  /** Tool turns added. */
  calls: number;
  /** Prompt tokens of `messages`, counted as the model's template and tokenizer make them. */
  tokens: number;
}

/** Candidates that may not fit in a row before padding stops: by then the room left is smaller than a turn. */
const MISFITS_BEFORE_STOP = 12;

const word = (s: string) => s.toLowerCase();

/** The schema names (tables and columns of `columns`, lower case) that appear as identifiers in `gold`, aliases included. */
export function goldNames(gold: string, columns: Map<string, string[]>): Set<string> {
  const schema = new Set<string>();
  for (const [table, cols] of columns) {
    schema.add(word(table));
    for (const c of cols) schema.add(word(c));
  }
  const out = new Set<string>();
  for (const t of codeTokens(gold)) if ((t.type === "word" || t.type === "quoted") && schema.has(word(t.text))) out.add(word(t.text));
  return out;
}

/** The pieces of the gold query's string literals an output could show (LIKE wildcards split them; pieces under 2 characters say nothing). */
export function goldLiterals(gold: string): string[] {
  const out = new Set<string>();
  for (const t of codeTokens(gold)) {
    if (t.type !== "string") continue;
    for (const piece of t.text.split(/[%_]/)) if (piece.trim().length >= 2) out.add(word(piece.trim()));
  }
  return [...out];
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * True when `text` (a padding query, or the output shown for it) could help answer the gold query: it
 * holds one of `names` as a whole word, or one of `literals` not run into other letters or digits.
 */
export function couldHelp(text: string, names: Set<string>, literals: string[]): boolean {
  const lower = text.toLowerCase();
  for (const w of lower.split(/[^a-z0-9_$\u0080-\uffff]+/)) if (w && names.has(w)) return true;
  return literals.some((l) => new RegExp(`(^|[^a-z0-9])${escapeRe(l)}($|[^a-z0-9])`).test(lower));
}

/**
 * Every candidate padding query for a gold query, in the order `seed` shuffles them: looks an analyst
 * takes at tables the gold query does not name (a few rows of some columns, a column's distinct values,
 * its range, its most common values, a row count), over columns the gold query does not name either.
 */
export function paddingQueries(gold: string, columns: Map<string, string[]>, seed: number): string[] {
  const names = goldNames(gold, columns);
  const rng = new SeededRandom(seed);
  const out: string[] = [];
  for (const [table, cols] of columns) {
    if (names.has(word(table))) continue;
    const free = cols.filter((c) => !names.has(word(c)));
    if (free.length === 0) continue;
    out.push(`SELECT COUNT(*) FROM ${table}`);
    for (const c of free) {
      out.push(`SELECT DISTINCT ${c} FROM ${table} ORDER BY ${c} LIMIT ${rng.between(3, 10)}`);
      out.push(`SELECT MIN(${c}), MAX(${c}) FROM ${table}`);
      out.push(`SELECT ${c}, COUNT(*) FROM ${table} GROUP BY ${c} ORDER BY COUNT(*) DESC LIMIT ${rng.between(3, 6)}`);
    }
    for (let i = 0; i < Math.min(4, free.length); i++) {
      const picked = rng.sample(free, rng.between(1, Math.min(3, free.length)));
      out.push(`SELECT ${picked.join(", ")} FROM ${table} LIMIT ${rng.between(2, 5)}`);
    }
  }
  return rng.shuffle([...new Set(out)]);
}

/** The two messages of one padding call: the assistant's native tool call and the tool's result. */
export function paddingTurn(query: string, result: string, n: number): ChatMessage[] {
  const id = `pad_${n}`;
  return [
    { role: "assistant", content: "", tool_calls: [{ id, type: "function", function: { name: SQL_TOOL_NAME, arguments: JSON.stringify({ query }) } }] },
    { role: "tool", tool_call_id: id, name: SQL_TOOL_NAME, content: result },
  ];
}

/**
 * Pads `opening` (system prompt, question) up to `opts.tokens` prompt tokens with tool turns that cannot
 * help answer `gold`. Candidates are tried in the seeded order; a query that fails, returns no rows or
 * returns more than the tool's caps show is skipped, and a turn that would pass the target is skipped for a
 * smaller one, until the candidates run out or MISFITS_BEFORE_STOP in a row do not fit. An opening already
 * at or past the target is returned as it is. Deterministic for a given seed, database and model.
 */
export async function padOpening(opening: ChatMessage[], gold: string, columns: Map<string, string[]>, deps: PaddingDeps, opts: PaddingOptions): Promise<Padded> {
  if (opening.length === 0 || opening[opening.length - 1].role !== "user") throw new T2sError("usage", "padding goes after the question: the opening must end with a user message");
  const names = goldNames(gold, columns);
  const literals = goldLiterals(gold);
  let messages = [...opening];
  let tokens = await deps.countTokens(messages);
  let calls = 0;
  let misfits = 0;
  for (const query of paddingQueries(gold, columns, opts.seed)) {
    if (tokens >= opts.tokens || misfits >= MISFITS_BEFORE_STOP) break;
    const outcome = await deps.runTool(query);
    if (outcome.ok === false || outcome.rows.length === 0 || outcome.truncated) continue;
    const shown = formatToolResult(outcome, opts.toolOutput);
    // the whole result must fit the tool's output caps: a shortened one would show less than the query returned
    if (shown.includes(TRUNCATION_MARK)) continue;
    if (couldHelp(query, names, literals) || couldHelp(shown, names, literals)) continue;
    const next = [...messages, ...paddingTurn(query, shown, calls + 1)];
    const count = await deps.countTokens(next);
    if (count > opts.tokens) {
      misfits++;
      continue;
    }
    messages = next;
    tokens = count;
    calls++;
    misfits = 0;
  }
  return { messages, calls, tokens };
}
