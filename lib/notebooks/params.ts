/**
 * Notebook parameters, papermill style: `--param k=v` values become a code cell tagged
 * `injected-parameters`, placed right after the cell tagged `parameters` (so it overrides the defaults
 * there) or first when the notebook has no such cell. The same values reach the kernel as T2S_PARAMS.
 */
import { UsageError } from "../core/errors.js";
import { newCellId, splitLines, joinSource, type CodeCell, type Notebook } from "./nbformat.js";

export type Params = Record<string, unknown>;

const IDENT = /^[A-Za-z_$][\w$]*$/;

/** Parses `k=v` strings; a value is JSON when it parses as JSON, else the literal string. */
export function parseParams(items: string[]): Params {
  const out: Params = {};
  for (const item of items) {
    const eq = item.indexOf("=");
    if (eq <= 0) throw new UsageError(`--param must look like name=value, got '${item}'`);
    const key = item.slice(0, eq).trim();
    if (!IDENT.test(key)) throw new UsageError(`--param name '${key}' is not a valid TypeScript identifier`);
    const raw = item.slice(eq + 1);
    let value: unknown = raw;
    try {
      value = JSON.parse(raw);
    } catch {
      // not JSON: keep the text as given
    }
    out[key] = value;
  }
  return out;
}

function tags(cell: { metadata: Record<string, unknown> }): string[] {
  const t = cell.metadata.tags;
  return Array.isArray(t) ? t.map(String) : [];
}

/** The TypeScript source that declares the parameters (`let` so a notebook may still reassign them). */
export function parametersSource(params: Params): string {
  const lines = ["// Injected parameters (t2s notebooks run --param)"];
  for (const [k, v] of Object.entries(params)) lines.push(`let ${k} = ${JSON.stringify(v) ?? "undefined"};`);
  return lines.join("\n");
}

/** The source of the notebook's cell tagged `parameters` ("" when it has none). */
function parametersCellSource(nb: Notebook): string {
  const cell = nb.cells.find((c) => c.cell_type === "code" && tags(c).includes("parameters"));
  return cell ? joinSource(cell.source) : "";
}

/** True when the notebook's `parameters` cell declares `name` (let, const or var). */
export function declaresParameter(nb: Notebook, name: string): boolean {
  return new RegExp(`\\b(let|const|var)\\s+${name.replace(/\$/g, "\\$")}\\b`).test(parametersCellSource(nb));
}

export interface Injection {
  /** Index of the injected cell in the notebook's cells, or -1 when nothing was injected. */
  index: number;
  /** Parameter names that the `parameters` cell does not declare (likely typos). */
  unknown: string[];
}

/**
 * Inserts the injected-parameters cell into nb (in place) when params is non-empty, replacing one from an
 * earlier run. Returns where it went and which names the parameters cell does not mention.
 */
export function injectParameters(nb: Notebook, params: Params): Injection {
  nb.cells = nb.cells.filter((c) => !tags(c).includes("injected-parameters"));
  const names = Object.keys(params);
  if (names.length === 0) return { index: -1, unknown: [] };
  const at = nb.cells.findIndex((c) => c.cell_type === "code" && tags(c).includes("parameters"));
  const unknown = at >= 0 ? names.filter((n) => !declaresParameter(nb, n)) : [];
  const cell: CodeCell = {
    cell_type: "code",
    id: newCellId(),
    metadata: { tags: ["injected-parameters"] },
    source: splitLines(parametersSource(params)),
    execution_count: null,
    outputs: [],
  };
  const index = at + 1;
  nb.cells.splice(index, 0, cell);
  return { index, unknown };
}
