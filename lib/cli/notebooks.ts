/**
 * `t2s notebooks ...`: run notebooks headless on the tslab kernel, list them, register the kernel for
 * Jupyter, and slim stored reports (plotly.js shared instead of inlined).
 */
import { relative, resolve } from "node:path";
import type { Command } from "commander";
import { kitPath } from "../core/paths.js";
import { installKernel } from "../notebooks/kernelspec.js";
import { parseParams } from "../notebooks/params.js";
import { listNotebooks, resolveNotebook } from "../notebooks/resolve.js";
import { runNotebook, type NotebookRunResult } from "../notebooks/run.js";
import { slimStoredReport, storedNotebooks, type SlimResult } from "../notebooks/store.js";
import { collect, intOption, printJson } from "./options.js";

function show(path: string): string {
  const r = relative(process.cwd(), path);
  return r && !r.startsWith("..") ? r : path;
}

function indent(text: string): string {
  return text.split("\n").map((l) => `  ${l}`).join("\n");
}

export function registerNotebooks(program: Command): void {
  const nb = program.command("notebooks").description("run notebooks headless, list them, register the tslab kernel for Jupyter");

  nb.command("run")
    .description("execute notebooks on a fresh tslab kernel each; write the executed .ipynb and an .html report")
    .argument("[names...]", "notebook names (notebooks/<name>.ipynb, extension optional) or paths; default: all kit notebooks")
    .option("--param <name=value>", "set a parameter (repeatable); the value is JSON when it parses, else a string", collect, [])
    .option("--out <dir>", "report folder: the executed notebooks, the HTML reports, and the figures/ and tables/ they save", kitPath("reports"))
    .option("--assets <dir>", "folder of the one plotly.js copy the reports load (default <out>/assets); reports stored with the same folder share it")
    .option("--timeout-ms <n>", "time limit per cell in ms (0 = none)", intOption("--timeout-ms"), 600_000)
    .option("--json", "print the results as JSON")
    .action(async (names: string[], opts: { param: string[]; out: string; assets?: string; timeoutMs: number; json?: boolean }) => {
      const params = parseParams(opts.param);
      const paths = names.length ? names.map((n) => resolveNotebook(n)) : listNotebooks();
      const results: NotebookRunResult[] = [];
      // exiting fires each kernel's exit hook, which kills it: no kernel outlives an interrupted run
      const stop = (signal: string) => {
        process.stderr.write(`\ninterrupted (${signal}): kernel stopped, reports of unfinished notebooks not written\n`);
        process.exit(130);
      };
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      for (const path of paths) {
        const r = await runNotebook(path, {
          params,
          outDir: opts.out,
          assetsDir: opts.assets ? resolve(opts.assets) : undefined,
          timeoutMs: opts.timeoutMs,
          progress: (line) => process.stderr.write(line + "\n"),
        });
        results.push(r);
        if (r.failure) {
          const f = r.failure;
          const where = f.cell === 0 ? "the injected parameters cell" : `cell ${f.cell}`;
          process.stderr.write(`error: notebook ${r.name} failed at ${where} (id ${f.cellId}): ${f.ename}: ${f.evalue}\n${indent(f.traceback)}\n`);
        }
      }
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      if (opts.json) printJson(results);
      else {
        for (const r of results) {
          const state = r.ok ? "ok    " : "FAILED";
          process.stdout.write(`${state} ${r.name}  ${r.executed}/${r.codeCells} code cells  ${(r.durationMs / 1000).toFixed(1)}s  -> ${show(r.ipynb)}, ${show(r.html)}\n`);
        }
      }
      if (results.some((r) => !r.ok)) process.exitCode = 1;
    });

  nb.command("slim")
    .description("rewrite stored reports (.ipynb and .html) to load plotly.js from one shared copy instead of inlining it; nothing is re-run")
    .argument("<paths...>", "executed .ipynb files, or folders holding them")
    .option("--assets <dir>", "folder of the shared plotly.js copy (default: assets/ beside each notebook)")
    .option("--json", "print the results as JSON")
    .action((paths: string[], opts: { assets?: string; json?: boolean }) => {
      const assetsDir = opts.assets ? resolve(opts.assets) : undefined;
      const results: SlimResult[] = storedNotebooks(paths).map((p) => slimStoredReport(p, { assetsDir }));
      if (opts.json) return printJson(results);
      for (const r of results) {
        if (!r.changed) {
          process.stdout.write(`unchanged ${show(r.ipynb)}  (no inlined plotly.js)\n`);
          continue;
        }
        const mb = (r.plotly.removedChars / 1e6).toFixed(1);
        const trust = r.trust?.signed ? "signed for Jupyter" : `not signed for Jupyter: ${r.trust?.reason ?? ""}`;
        process.stdout.write(`slimmed   ${show(r.ipynb)}  -> ${r.plotly.assets.map(show).join(", ")}  (${mb} MB less in each of .ipynb and .html; ${trust})\n`);
      }
    });

  nb.command("list")
    .description("list the kit's notebooks")
    .option("--json", "print JSON")
    .action((opts: { json?: boolean }) => {
      const items = listNotebooks().map((p) => ({ name: p.replace(/^.*\//, "").replace(/\.ipynb$/, ""), path: p }));
      if (opts.json) printJson(items);
      else for (const i of items) process.stdout.write(`${i.name}\t${show(i.path)}\n`);
    });

  nb.command("install-kernel")
    .description("register the tslab TypeScript kernel with Jupyter (needs Python with jupyter_client)")
    .option("--prefix <dir>", "install under DIR/share/jupyter/kernels (then set JUPYTER_PATH=DIR/share/jupyter)")
    .option("--user", "install to the per-user Jupyter kernel folder")
    .option("--python <path>", "Python interpreter with jupyter_client (default /usr/bin/python3)")
    .option("--json", "print JSON")
    .action((opts: { prefix?: string; user?: boolean; python?: string; json?: boolean }) => {
      const r = installKernel({ prefix: opts.prefix, user: opts.user, python: opts.python });
      if (opts.json) printJson(r);
      else process.stdout.write(`installed kernels ${r.kernels.join(", ")} at ${r.location || "(Jupyter's default folder)"}\n  command: ${r.binary}\n  python:  ${r.python}\n`);
    });
}
