/**
 * Notebook documents (nbformat 4.5): reading, normalising for a run (cell ids, cleared outputs),
 * writing, and a structural check of the keys the format requires.
 */
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { T2sError } from "../core/errors.js";

export type MultilineString = string | string[];

export interface StreamOutput { output_type: "stream"; name: "stdout" | "stderr"; text: MultilineString }
export interface DisplayDataOutput { output_type: "display_data"; data: Record<string, unknown>; metadata: Record<string, unknown> }
export interface ExecuteResultOutput {
  output_type: "execute_result"; execution_count: number | null; data: Record<string, unknown>; metadata: Record<string, unknown>;
}
export interface ErrorOutput { output_type: "error"; ename: string; evalue: string; traceback: string[] }
export type Output = StreamOutput | DisplayDataOutput | ExecuteResultOutput | ErrorOutput;

export interface CodeCell {
  cell_type: "code"; id: string; metadata: Record<string, unknown>; source: MultilineString;
  execution_count: number | null; outputs: Output[];
}
export interface TextCell {
  cell_type: "markdown" | "raw"; id: string; metadata: Record<string, unknown>; source: MultilineString;
  attachments?: Record<string, unknown>;
}
export type Cell = CodeCell | TextCell;

export interface Notebook {
  nbformat: 4;
  nbformat_minor: number;
  metadata: Record<string, unknown>;
  cells: Cell[];
}

export const TSLAB_KERNELSPEC = { name: "tslab", display_name: "TypeScript", language: "typescript" };

/** The text of a multiline string field. */
export function joinSource(s: MultilineString | undefined): string {
  return Array.isArray(s) ? s.join("") : (s ?? "");
}

/** Text split the way Jupyter stores it: lines that keep their "\n". */
export function splitLines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** A new random cell id (nbformat 4.5: 1-64 chars of [a-zA-Z0-9-_]). */
export function newCellId(): string {
  return randomBytes(6).toString("hex");
}

const ID_RE = /^[a-zA-Z0-9-_]{1,64}$/;

/** Reads a notebook file; throws T2sError naming the file when it is not an nbformat 4 notebook. */
export function readNotebook(path: string): Notebook {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new T2sError("bad_notebook", `${path}: not a readable JSON notebook (${(e as Error).message})`);
  }
  const nb = raw as Partial<Notebook>;
  if (!nb || typeof nb !== "object" || nb.nbformat !== 4 || !Array.isArray(nb.cells)) {
    throw new T2sError("bad_notebook", `${path}: not an nbformat 4 notebook (needs "nbformat": 4 and a "cells" array)`);
  }
  for (const [i, c] of nb.cells.entries()) {
    if (!c || !["code", "markdown", "raw"].includes((c as Cell).cell_type)) {
      throw new T2sError("bad_notebook", `${path}: cell ${i + 1} has no valid cell_type`);
    }
  }
  return nb as Notebook;
}

/**
 * A copy ready to run and save as nbformat 4.5: every cell has a unique valid id, code cells have no
 * outputs and no execution count (so nothing from an earlier run looks as if it ran now).
 */
export function prepareForRun(nb: Notebook): Notebook {
  const seen = new Set<string>();
  const cells = nb.cells.map((c): Cell => {
    let id = typeof c.id === "string" && ID_RE.test(c.id) && !seen.has(c.id) ? c.id : newCellId();
    while (seen.has(id)) id = newCellId();
    seen.add(id);
    const metadata = { ...(c.metadata ?? {}) };
    if (c.cell_type === "code") return { cell_type: "code", id, metadata, source: c.source ?? "", execution_count: null, outputs: [] };
    const t: TextCell = { cell_type: c.cell_type, id, metadata, source: c.source ?? "" };
    if (c.attachments) t.attachments = c.attachments;
    return t;
  });
  const metadata = { ...nb.metadata };
  metadata.kernelspec = { ...TSLAB_KERNELSPEC };
  return { nbformat: 4, nbformat_minor: 5, metadata, cells };
}

/** The notebook as Jupyter writes it (one-space indent, trailing newline). */
export function serializeNotebook(nb: Notebook): string {
  return JSON.stringify(nb, null, 1) + "\n";
}

function isMultiline(v: unknown): boolean {
  return typeof v === "string" || (Array.isArray(v) && v.every((x) => typeof x === "string"));
}

/** Problems with the structure nbformat 4.5 requires (empty when valid). */
export function validateNotebook(nb: unknown): string[] {
  const errs: string[] = [];
  const n = nb as Record<string, unknown>;
  if (!n || typeof n !== "object") return ["not an object"];
  if (n.nbformat !== 4) errs.push("nbformat must be 4");
  if (typeof n.nbformat_minor !== "number" || n.nbformat_minor < 5) errs.push("nbformat_minor must be >= 5 (cell ids)");
  if (!n.metadata || typeof n.metadata !== "object") errs.push("metadata must be an object");
  if (!Array.isArray(n.cells)) return [...errs, "cells must be an array"];
  const ids = new Set<string>();
  (n.cells as Record<string, unknown>[]).forEach((c, i) => {
    const at = `cell ${i + 1}`;
    if (typeof c.id !== "string" || !ID_RE.test(c.id)) errs.push(`${at}: id missing or invalid`);
    else if (ids.has(c.id)) errs.push(`${at}: duplicate id ${c.id}`);
    else ids.add(c.id);
    if (!c.metadata || typeof c.metadata !== "object") errs.push(`${at}: metadata must be an object`);
    if (!isMultiline(c.source)) errs.push(`${at}: source must be a string or list of strings`);
    if (c.cell_type === "code") {
      if (!(c.execution_count === null || Number.isInteger(c.execution_count))) errs.push(`${at}: execution_count must be an integer or null`);
      if (!Array.isArray(c.outputs)) errs.push(`${at}: outputs must be an array`);
      else (c.outputs as Record<string, unknown>[]).forEach((o, j) => errs.push(...validateOutput(o).map((e) => `${at} output ${j + 1}: ${e}`)));
    } else if (c.cell_type !== "markdown" && c.cell_type !== "raw") {
      errs.push(`${at}: unknown cell_type ${String(c.cell_type)}`);
    } else if ("outputs" in c || "execution_count" in c) {
      errs.push(`${at}: a ${c.cell_type} cell cannot have outputs or execution_count`);
    }
  });
  return errs;
}

function validateOutput(o: Record<string, unknown>): string[] {
  switch (o.output_type) {
    case "stream":
      return [
        ...(o.name === "stdout" || o.name === "stderr" ? [] : ["stream name must be stdout or stderr"]),
        ...(isMultiline(o.text) ? [] : ["stream text must be a string or list of strings"]),
      ];
    case "display_data":
    case "execute_result": {
      const e: string[] = [];
      if (!o.data || typeof o.data !== "object") e.push("data must be an object");
      if (!o.metadata || typeof o.metadata !== "object") e.push("metadata must be an object");
      if (o.output_type === "execute_result" && !("execution_count" in o)) e.push("execute_result needs execution_count");
      if ("transient" in o) e.push("transient must not be stored");
      return e;
    }
    case "error":
      return typeof o.ename === "string" && typeof o.evalue === "string" && Array.isArray(o.traceback)
        ? []
        : ["error needs ename, evalue and a traceback list"];
    default:
      return [`unknown output_type ${String(o.output_type)}`];
  }
}
