/**
 * Reading JSON files that hold one array of records (Spider's and BIRD's .json files) so that every
 * record knows the line it starts on, and a malformed record is reported as file:line.
 */
import { existsSync, readFileSync } from "node:fs";
import { T2sError } from "../core/errors.js";

export interface LocatedRecord {
  /** 1-based line where the record starts. */
  line: number;
  value: unknown;
}

function lineAt(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** Parses JSON, also accepting bare NaN (as written by pandas), which becomes null. */
export function parseLenient(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    const fixed = replaceNaN(text);
    if (fixed === text) throw e;
    return JSON.parse(fixed);
  }
}

function replaceNaN(text: string): string {
  let out = "";
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === "\\") out += text[++i] ?? "";
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (text.startsWith("NaN", i)) {
      out += "null";
      i += 2;
    } else out += c;
  }
  return out;
}

/**
 * The records of a file holding a JSON array, each with its starting line. Throws T2sError("bad_json")
 * naming file:line of the record that does not parse, or "not_found".
 */
export function readJsonArray(path: string): LocatedRecord[] {
  if (!existsSync(path)) throw new T2sError("not_found", `no such file: ${path}`);
  const text = readFileSync(path, "utf8");
  const start = text.search(/\S/);
  if (start < 0 || text[start] !== "[") {
    throw new T2sError("bad_json", `${path}:${start < 0 ? 1 : lineAt(text, start)}: expected a JSON array of records`);
  }
  const out: LocatedRecord[] = [];
  let depth = 0;
  let inString = false;
  let recStart = -1;
  let recLine = 0;
  let line = lineAt(text, start);
  const begin = (i: number) => {
    recStart = i;
    recLine = line;
  };
  const finish = (end: number) => {
    const slice = text.slice(recStart, end);
    try {
      out.push({ line: recLine, value: parseLenient(slice) });
    } catch (e) {
      throw new T2sError("bad_json", `${path}:${recLine}: record ${out.length + 1} is malformed JSON (${(e as Error).message})`);
    }
    recStart = -1;
  };
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (c === "\n") line++;
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') {
      inString = true;
      if (depth === 1 && recStart < 0) begin(i);
    } else if (c === "[" || c === "{") {
      if (depth === 1 && recStart < 0) begin(i);
      depth++;
    } else if (c === "]" || c === "}") {
      depth--;
      if (depth === 0) {
        if (recStart >= 0) finish(i);
        const rest = text.slice(i + 1).search(/\S/);
        if (rest >= 0) throw new T2sError("bad_json", `${path}:${lineAt(text, i + 1 + rest)}: unexpected text after the closing ]`);
        return out;
      }
      if (depth < 0) throw new T2sError("bad_json", `${path}:${line}: unbalanced '${c}'`);
    } else if (c === "," && depth === 1) {
      if (recStart < 0) throw new T2sError("bad_json", `${path}:${line}: empty record before ','`);
      finish(i);
    } else if (depth === 1 && recStart < 0 && !/\s/.test(c)) begin(i);
  }
  throw new T2sError("bad_json", `${path}:${lineAt(text, text.length)}: the array is not closed (file cut off?)`);
}
