/**
 * The code blocks of the project's markdown, for test/docs/examples.test.ts. Each fenced block has a
 * language: `sh`/`bash` (commands), `ts`, `json`, `python`, or `text` (output, listings, formulas: never
 * run). A block is run unless the line before its fence holds a marker:
 *
 *   <!-- example: check: needs a GPU -->      not run; each `t2s` command is parsed with its flags, each
 *                                             `npm run` script and `bash scripts/...` file must exist, a
 *                                             ts block must compile and its imports resolve
 *   <!-- example: synopsis -->                usage lines: every `t2s` command and --flag named must exist
 *
 * json blocks are always parsed and python blocks syntax-checked, never run.
 */
import { readFileSync } from "node:fs";

export type BlockMode = "run" | "check" | "synopsis" | "text";

export interface DocBlock {
  /** File relative to the repository root, and the 1-based line of the opening fence. */
  file: string;
  line: number;
  lang: string;
  code: string;
  mode: BlockMode;
  /** Why a block is only checked (the marker's text after "check:"). */
  reason: string;
}

const FENCE = /^(\s*)(`{3,})\s*([\w-]*)\s*$/;
const MARKER = /^<!--\s*example:\s*(check|synopsis)\s*(?::\s*(.*?))?\s*-->$/;

/** Every fenced block of one markdown file, with the mode its language and marker give it. */
export function extractBlocks(file: string, text = readFileSync(file, "utf8")): DocBlock[] {
  const lines = text.split("\n");
  const out: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]);
    if (!open) continue;
    const [, indent, ticks, lang] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !new RegExp(`^\\s*${ticks}\\s*$`).test(lines[j]); j++) body.push(lines[j].startsWith(indent) ? lines[j].slice(indent.length) : lines[j]);
    let k = i - 1;
    while (k >= 0 && lines[k].trim() === "") k--;
    const marker = k >= 0 ? MARKER.exec(lines[k].trim()) : null;
    const mode: BlockMode = (marker?.[1] as BlockMode | undefined) ?? (lang === "text" || lang === "" ? "text" : "run");
    out.push({ file, line: i + 1, lang, code: body.join("\n") + "\n", mode, reason: marker?.[2] ?? "" });
    i = j;
  }
  return out;
}

/** A shell command line's words (quotes removed), split into simple commands at |, &&, ||, ;, & and newlines. */
export function shellCommands(code: string): string[][] {
  const text = code.replace(/\\\n/g, " ");
  const commands: string[][] = [];
  let words: string[] = [];
  let word: string | null = null;
  const endWord = () => {
    if (word !== null) words.push(word);
    word = null;
  };
  const endCommand = () => {
    endWord();
    if (words.length) commands.push(words);
    words = [];
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "'" || c === '"') {
      const close = text.indexOf(c, i + 1);
      word = (word ?? "") + text.slice(i + 1, close < 0 ? text.length : close);
      i = close < 0 ? text.length : close;
    } else if (c === "#" && word === null) {
      while (i < text.length && text[i] !== "\n") i++;
      endCommand();
    } else if (c === "\n" || c === ";" || c === "|" || c === "&") {
      if ((c === "|" || c === "&") && text[i + 1] === c) i++;
      if (c === "&" && word !== null && /\d?>$/.test(word)) {
        word += c; // 2>&1
        continue;
      }
      endCommand();
    } else if (c === " " || c === "\t") endWord();
    else word = (word ?? "") + c;
  }
  endCommand();
  // redirections and their targets are not arguments
  return commands.map((ws) => ws.filter((w, n) => !/^\d?[<>]/.test(w) && !/^\d?[<>]+$/.test(ws[n - 1] ?? "")));
}

/** The arguments of a `t2s` invocation (t2s, npx t2s, node bin/t2s.js, the GPU bundle's run.sh t2s.mjs), or null. */
export function t2sArgs(words: string[]): string[] | null {
  const w = words;
  let i = 0;
  while (i < w.length && /^[A-Z_][A-Z0-9_]*=/.test(w[i])) i++; // VAR=value before the command
  const rest = w.slice(i);
  if (rest[0] === "t2s") return rest.slice(1);
  if (rest[0] === "npx" && rest[1] === "t2s") return rest.slice(2);
  if (rest[0] === "node" && /(^|\/)bin\/t2s\.js$/.test(rest[1] ?? "")) return rest.slice(2);
  if (rest[0] === "bash" && /run\.sh$/.test(rest[1] ?? "") && rest[2] === "t2s.mjs") return rest.slice(3);
  return null;
}

/** The synopsis lines of a usage block: each `t2s` line with its indented continuation lines joined. */
export function synopsisLines(code: string): string[] {
  const out: string[] = [];
  for (const line of code.replace(/\\\n/g, " ").split("\n")) {
    const t = line.replace(/\s+#.*$/, "").trim();
    if (!t) continue;
    if (/^(npx )?t2s\s/.test(t)) out.push(t.replace(/^npx /, ""));
    else if (/^\s/.test(line) && out.length) out[out.length - 1] += ` ${t}`;
  }
  return out;
}
