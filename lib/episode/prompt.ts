/**
 * Prompt builders. System = instructions for the style + the schema DDL + the database NOTES; user = the
 * question (+ evidence). The templates are hashed into run metadata so two runs can be checked to have
 * asked the same way.
 */
import { createHash } from "node:crypto";
import type { ChatMessage } from "../policy/types.js";
import { SQL_TOOL_NAME, sqlToolSpec } from "./tools.js";
import { MAX_TOOL_CALLS, TOOL_ROWS } from "../core/defaults.js";

export type EpisodeStyle = "single" | "tool";
/** native: tools sent in the request, calls come back as `tool_calls`; hermes: tools described in the
 * system prompt, calls written as `<tool_call>` text and answered with `<tool_response>` text. */
export type ToolProtocol = "native" | "hermes";

export interface PromptConfig {
  style: EpisodeStyle;
  protocol?: ToolProtocol;
  /** Tool calls allowed per episode (tool style; default MAX_TOOL_CALLS). */
  maxToolCalls?: number;
  /** Rows a tool result shows at most (said to the model). */
  toolRows?: number;
}

/** Version of the wording below; bump when it changes so the prompt hash changes with it. */
const TEMPLATE_VERSION = "1";

function singleInstructions(): string {
  return [
    "You write SQLite queries that answer questions about the database described below.",
    "Reply with exactly one read-only query (SELECT or WITH) in a ```sql code block.",
    "Return only the columns the question asks for, in the order it asks for them.",
  ].join("\n");
}

function toolInstructions(cfg: PromptConfig): string {
  const n = cfg.maxToolCalls ?? MAX_TOOL_CALLS;
  return [
    "You write SQLite queries that answer questions about the database described below.",
    `You may run read-only queries with the tool ${SQL_TOOL_NAME}(query) to look at the data, at most ${n} times in total.`,
    `A tool result shows at most ${cfg.toolRows ?? TOOL_ROWS} rows, and long results are shortened.`,
    "When you are sure, give your final answer: exactly one read-only query (SELECT or WITH) inside <solution>...</solution>",
    "(or in a ```sql code block), and call no tool in that reply.",
    "Return only the columns the question asks for, in the order it asks for them.",
  ].join("\n");
}

/** The hermes tool block: the tool's JSON signature and how to write a call as text. */
export function hermesToolBlock(): string {
  return [
    "# Tools",
    "",
    "The function you can call is described by the JSON signature inside <tools></tools>:",
    "<tools>",
    JSON.stringify(sqlToolSpec()),
    "</tools>",
    "",
    "To call it, write a JSON object with the function name and its arguments between <tool_call></tool_call> tags:",
    "<tool_call>",
    `{"name": "${SQL_TOOL_NAME}", "arguments": {"query": "SELECT ..."}}`,
    "</tool_call>",
    "The result comes back between <tool_response></tool_response> tags.",
  ].join("\n");
}

/** The instructions part of the system prompt for a style (and, for tool style, protocol). */
export function instructions(cfg: PromptConfig): string {
  if (cfg.style === "single") return singleInstructions();
  const base = toolInstructions(cfg);
  return (cfg.protocol ?? "native") === "hermes" ? `${base}\n\n${hermesToolBlock()}` : base;
}

/** The full system prompt: instructions, schema DDL and (when there are any) the database notes. */
export function systemPrompt(cfg: PromptConfig, ddl: string, notes?: string): string {
  const parts = [instructions(cfg), "Database schema (SQLite):", ddl.trim()];
  if (notes && notes.trim()) parts.push(notes.trim());
  return parts.join("\n\n");
}

/** The user message: the question, then the evidence (external knowledge) when the task has some. */
export function userPrompt(question: string, evidence?: string | null): string {
  const q = question.trim();
  return evidence && evidence.trim() ? `${q}\n\nEvidence: ${evidence.trim()}` : q;
}

/** The opening messages of an episode. */
export function openingMessages(cfg: PromptConfig, ddl: string, notes: string | undefined, question: string, evidence?: string | null): ChatMessage[] {
  return [
    { role: "system", content: systemPrompt(cfg, ddl, notes) },
    { role: "user", content: userPrompt(question, evidence) },
  ];
}

/** A short sha256 of the prompt templates for this config (not of any task), for run metadata. */
export function promptTemplateHash(cfg: PromptConfig): string {
  const h = createHash("sha256");
  h.update(JSON.stringify({ v: TEMPLATE_VERSION, system: instructions(cfg), user: userPrompt("{question}", "{evidence}"), tool: cfg.style === "tool" ? sqlToolSpec() : null }));
  return h.digest("hex").slice(0, 16);
}
