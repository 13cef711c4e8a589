/**
 * Runs one notebook headless on a fresh tslab kernel: cells in order, outputs collected, stop at the
 * first failing cell, then the executed .ipynb and its HTML rendering are stored (also after a failure),
 * loading plotly.js from one shared copy instead of inlining it (store.ts).
 */
import { mkdirSync } from "node:fs";
import { basename, resolve } from "node:path";
import { kitRoot } from "../core/paths.js";
import { TslabKernel, type ExecuteOutcome } from "./kernel.js";
import { joinSource, prepareForRun, readNotebook, type CodeCell, type ErrorOutput, type Notebook } from "./nbformat.js";
import { errorFromStderr, OutputCollector } from "./outputs.js";
import { declaresParameter, injectParameters, type Params } from "./params.js";
import { storeReport } from "./store.js";

export interface RunNotebookOptions {
  /** Parameters to inject (see params.ts); also exported to the kernel as T2S_PARAMS. */
  params?: Params;
  /**
   * Folder for the executed .ipynb and .html (created if missing), and for the figures and tables the
   * notebook saves: a notebook that declares `report_dir` gets this folder as it unless `params` sets one.
   */
  outDir: string;
  /**
   * Folder of the one copy of plotly.js the stored reports load (lib/notebooks/store.ts); default
   * `<outDir>/assets`. Reports stored with the same folder share it.
   */
  assetsDir?: string;
  /** Per-cell time limit in ms; 0 or undefined for none. */
  timeoutMs?: number;
  /** Kernel working directory (default: the kit root). */
  cwd?: string;
  /** Receives one progress line per event (the CLI sends them to stderr). */
  progress?: (line: string) => void;
}

export interface CellFailure {
  /** 1-based position of the failing cell among the notebook's own cells (0 for the injected parameters cell). */
  cell: number;
  cellId: string;
  ename: string;
  evalue: string;
  /** The error text (tslab's stderr for the cell, or the kernel's own message). */
  traceback: string;
}

export interface NotebookRunResult {
  name: string;
  input: string;
  ok: boolean;
  ipynb: string;
  html: string;
  /** Code cells in the notebook (including an injected parameters cell) and how many ran. */
  codeCells: number;
  executed: number;
  durationMs: number;
  failure?: CellFailure;
  warnings: string[];
  /** Whether the executed .ipynb was signed for the user's Jupyter (figures show on open). */
  signed: boolean;
  /** The shared plotly.js copy the stored report loads (absent when it shows no figure or kept it inline). */
  plotly?: string;
}

/**
 * The one error output a failed cell keeps. tslab reports failures as status "error" plus stderr text;
 * kernels that send an `error` message already left one in the outputs.
 */
function failureOutput(cell: CodeCell, outcome: ExecuteOutcome, timeoutMs: number, kernelLog: string): ErrorOutput {
  const existing = cell.outputs.find((o): o is ErrorOutput => o.output_type === "error");
  if (existing && !outcome.timedOut && !outcome.died) return existing;
  if (outcome.timedOut) {
    const what = `the cell did not finish within ${timeoutMs} ms`;
    const printed = errorFromStderr(cell, "").traceback.filter((l) => l !== "");
    return { output_type: "error", ename: "CellTimeoutError", evalue: what, traceback: [`CellTimeoutError: ${what}`, ...printed] };
  }
  if (outcome.died) {
    const what = `the kernel process ended (${outcome.died})`;
    const log = kernelLog.trim();
    return { output_type: "error", ename: "KernelDied", evalue: what, traceback: [`KernelDied: ${what}`, ...(log ? log.split("\n") : [])] };
  }
  const status = outcome.reply?.status;
  return errorFromStderr(cell, status === "error" ? "the cell failed without printing an error" : `the kernel answered status '${String(status)}'`);
}

/** The parameter the kit's notebooks save their figures and tables under (lib/report NotebookReport's dir). */
export const REPORT_DIR_PARAM = "report_dir";

/** Executes the notebook at `path` and writes `<outDir>/<name>.ipynb` and `.html`; returns what happened. */
export async function runNotebook(path: string, opts: RunNotebookOptions): Promise<NotebookRunResult> {
  const input = resolve(path);
  const name = basename(input).replace(/\.ipynb$/i, "");
  const log = opts.progress ?? (() => {});
  const nb: Notebook = prepareForRun(readNotebook(input));
  // the figures and tables go where the report goes (the kernel runs in the kit root, so the path is absolute)
  const params: Params = { ...(declaresParameter(nb, REPORT_DIR_PARAM) ? { [REPORT_DIR_PARAM]: resolve(opts.outDir) } : {}), ...opts.params };
  const injection = injectParameters(nb, params);
  const warnings = injection.unknown.map((n) => `parameter '${n}' is not declared in the cell tagged 'parameters'`);
  for (const w of warnings) log(`${name}: warning: ${w}`);

  // cell numbers users see are positions in their own notebook, so the injected cell is not counted
  const position = new Map<CodeCell, number>();
  let pos = 0;
  nb.cells.forEach((c, i) => {
    if (i !== injection.index) pos += 1;
    if (c.cell_type === "code") position.set(c, i === injection.index ? 0 : pos);
  });
  const total = pos;
  const codeCells = nb.cells.filter((c): c is CodeCell => c.cell_type === "code");

  const started = Date.now();
  mkdirSync(opts.outDir, { recursive: true });
  let failure: CellFailure | undefined;
  let executed = 0;
  log(`${name}: starting kernel`);
  const kernel = await TslabKernel.start({
    cwd: opts.cwd ?? kitRoot(),
    env: { T2S_PARAMS: JSON.stringify(params), T2S_NOTEBOOK: input },
  });
  try {
    nb.metadata.language_info = kernel.kernelInfo.language_info ?? nb.metadata.language_info;
    const collector = new OutputCollector();
    for (const cell of codeCells) {
      const n = position.get(cell) ?? 0;
      const label = n === 0 ? "injected parameters cell" : `cell ${n}/${total}`;
      const code = joinSource(cell.source);
      if (code.trim() === "") continue; // as nbclient: an empty cell is not executed
      const t0 = Date.now();
      const startedAt = new Date().toISOString();
      const outcome = await kernel.execute(code, (m) => collector.handle(cell, m), opts.timeoutMs ?? 0);
      executed += 1;
      const count = outcome.reply?.execution_count;
      cell.execution_count = typeof count === "number" ? count : executed;
      cell.metadata.execution = { "iopub.status.busy": startedAt, "shell.execute_reply": new Date().toISOString() };
      const status = outcome.reply?.status;
      const secs = ((Date.now() - t0) / 1000).toFixed(2);
      if (status === "ok") {
        log(`${name}: ${label} ok ${secs}s`);
        continue;
      }
      const err = failureOutput(cell, outcome, opts.timeoutMs ?? 0, kernel.processOutput());
      if (!cell.outputs.includes(err)) cell.outputs.push(err);
      failure = { cell: n, cellId: cell.id, ename: err.ename, evalue: err.evalue, traceback: err.traceback.join("\n") };
      log(`${name}: ${label} FAILED ${secs}s`);
      break;
    }
  } finally {
    await kernel.shutdown();
  }
  const durationMs = Date.now() - started;
  nb.metadata.t2s = {
    params,
    status: failure ? "failed" : "ok",
    started_at: new Date(started).toISOString(),
    duration_ms: durationMs,
    ...(failure ? { failed_cell: failure.cell, failed_cell_id: failure.cellId } : {}),
  };
  const stored = storeReport(nb, { dir: opts.outDir, name, assetsDir: opts.assetsDir });
  if (stored.inlineReason) {
    warnings.push(`plotly.js kept inline: ${stored.inlineReason}`);
    log(`${name}: warning: plotly.js kept inline: ${stored.inlineReason}`);
  }
  const trust = stored.trust;
  if (trust.signed) log(`${name}: signed for Jupyter (opens trusted, figures shown)`);
  else {
    warnings.push(`not signed for Jupyter: ${trust.reason}`);
    log(`${name}: warning: not signed for Jupyter: ${trust.reason}`);
  }
  return { name, input, ok: !failure, ipynb: stored.ipynb, html: stored.html, codeCells: codeCells.length, executed, durationMs, failure, warnings, signed: trust.signed, plotly: stored.plotly.assets[0] };
}
