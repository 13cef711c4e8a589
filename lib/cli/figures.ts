/** `t2s figures ...`: list and export the figures notebooks saved in a report folder (SVG, PNG, PDF via Chromium). */
import { relative } from "node:path";
import type { Command } from "commander";
import { exportFigures, parseFormats } from "../report/export.js";
import { listFigures, noFiguresError } from "../report/store.js";
import { intOption, printJson } from "./options.js";

function show(path: string): string {
  const r = relative(process.cwd(), path);
  return r && !r.startsWith("..") ? r : path;
}

export function registerFigures(program: Command): void {
  const fig = program.command("figures").description("list and export the figures saved in a report folder (<report>/figures/*.json)");

  fig.command("list")
    .description("list the figures saved in a report folder")
    .requiredOption("--report <dir>", "report folder (the one notebooks ran with; figures are in <dir>/figures)")
    .option("--json", "print JSON")
    .action((opts: { report: string; json?: boolean }) => {
      const figures = listFigures(opts.report);
      if (figures.length === 0) throw noFiguresError(opts.report);
      if (opts.json) printJson(figures.map((f) => ({ name: f.name, path: f.path, traces: f.figure.data.length })));
      else for (const f of figures) process.stdout.write(`${f.name}  (${f.figure.data.length} traces)  ${show(f.path)}\n`);
    });

  fig.command("export")
    .description("render every saved figure to SVG, PNG and/or PDF beside its JSON, in the system Chromium (offline)")
    .requiredOption("--report <dir>", "report folder (figures are read from and written to <dir>/figures)")
    .option("--format <list>", "comma-separated formats: svg, png, pdf", "svg,png,pdf")
    .option("--browser <path>", "Chromium/Chrome executable (default: T2S_CHROMIUM, else /usr/bin/chromium and other usual places)")
    .option("--width <px>", "width for figures whose layout sets none", intOption("--width", 100), 900)
    .option("--height <px>", "height for figures whose layout sets none", intOption("--height", 100), 500)
    .option("--scale <n>", "PNG pixel ratio", intOption("--scale", 1), 2)
    .option("--only <text>", "only figures whose name contains this text")
    .option("--json", "print JSON [{name, files}]")
    .action(async (opts: { report: string; format: string; browser?: string; width: number; height: number; scale: number; only?: string; json?: boolean }) => {
      const formats = parseFormats(opts.format);
      const done = await exportFigures(opts.report, {
        formats, browser: opts.browser, width: opts.width, height: opts.height, scale: opts.scale, only: opts.only,
        progress: opts.json ? undefined : (line) => process.stderr.write(line + "\n"),
      });
      if (opts.json) printJson(done);
      else process.stdout.write(`exported ${done.length} figure(s) x ${formats.join(",")} to ${show(`${opts.report}/figures`)}\n`);
    });
}
