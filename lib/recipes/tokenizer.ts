/**
 * The tokenizer of the kit's own model: byte-level BPE trained on what the model reads and writes in the
 * kit's single-turn episodes — the system prompts (instructions, schema DDL, notes), the train split's
 * questions and its gold queries in the reply format. Holdout tasks are never read.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { instructions, systemPrompt, userPrompt, type PromptConfig } from "../episode/prompt.js";
import type { Task } from "../tasks/types.js";
import { T2sError } from "../core/errors.js";
import { tokenizerJson, trainBpe, type BpeModel } from "./bpe.js";
import { CHAT_ADDED_TOKENS, CHAT_SPECIAL_TOKENS, tokenizerConfig } from "./chat-template.js";

/** The reply the SFT target and the extractor use for a query. */
export function replyText(sql: string): string {
  return "```sql\n" + sql.trim() + "\n```";
}

/** Returns the weighted training texts: system prompts once per train task, and each train task's question and reply. */
export function tokenizerCorpus(tasks: Task[], ddl: string, notes: string | undefined): { text: string; weight: number }[] {
  const train = tasks.filter((t) => t.split === "train");
  if (train.length === 0) throw new T2sError("no_tasks", "the tokenizer corpus needs train-split tasks; none were given");
  const n = train.length;
  const styles: PromptConfig[] = [{ style: "single" }, { style: "tool", protocol: "native" }, { style: "tool", protocol: "hermes" }];
  const texts: { text: string; weight: number }[] = [];
  texts.push({ text: systemPrompt(styles[0], ddl, notes), weight: n });
  for (const s of styles.slice(1)) texts.push({ text: instructions(s), weight: 1 });
  for (const role of ["system\n", "user\n", "assistant\n"]) texts.push({ text: role, weight: n });
  for (const t of train) {
    texts.push({ text: userPrompt(t.question, t.evidence), weight: 1 });
    texts.push({ text: replyText(t.gold_sql), weight: 1 });
  }
  return texts;
}

export interface TokenizerBuild {
  vocabSize: number;
  maxTokenBytes?: number;
  countCap?: number;
  /** model_max_length written to tokenizer_config.json. */
  maxLength?: number;
}

/** Trains the BPE on the corpus and writes tokenizer.json + tokenizer_config.json into `dir`; returns the model. */
export function buildTokenizer(dir: string, corpus: { text: string; weight: number }[], opts: TokenizerBuild): BpeModel {
  const m = trainBpe(corpus, {
    vocabSize: opts.vocabSize,
    specialTokens: CHAT_SPECIAL_TOKENS,
    addedTokens: CHAT_ADDED_TOKENS,
    maxTokenBytes: opts.maxTokenBytes,
    countCap: opts.countCap,
  });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tokenizerJson(m), null, 1) + "\n");
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(tokenizerConfig(opts.maxLength ?? 2048), null, 2) + "\n");
  return m;
}
