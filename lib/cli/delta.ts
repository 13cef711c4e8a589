/** `t2s delta`: the paired comparison of two rows files (before -> after) with a conservative verdict. */
import type { Command } from "commander";
import { DEFAULT_B, DEFAULT_SEED } from "../stats/bootstrap.js";
import { compareGroups, compareRows, pairedDelta, type DeltaDetail } from "../stats/delta.js";
import { fmt, fmtCI, fmtP, fmtSigned, formatTable } from "../stats/format.js";
import { DEFAULT_PERMUTATIONS } from "../stats/permutation.js";
import { taskCounts, type StatRow } from "../stats/rows.js";
import { collect, intOption, printJson } from "./options.js";
import { findMeta, setupDifferences } from "../runs/meta.js";
import { checkByFields, duplicatesLine, loadRowsForStats } from "./stats-report.js";

interface DeltaFlags {
  a: string;
  b: string;
  by: string[];
  marker: string[];
  B: number;
  seed: number;
  permutations: number;
  skipBad?: boolean;
  json?: boolean;
}

function replicated(d: DeltaDetail): string {
  const runs = d.stats.run_deltas;
  const above = runs.filter((x) => x !== null && x > 0).length;
  return `${above}/${runs.length} above zero`;
}

/** Returns the readable lines of one comparison (headline, verdict, noise, runs, power). */
export function formatComparison(d: DeltaDetail, permutations: number): string {
  const s = d.stats;
  const lines: string[] = [];
  const how = d.p_exact ? "exact" : `${permutations} sign flips`;
  lines.push(`pass@1    ${fmt(d.a)} -> ${fmt(d.b)}  ${fmtSigned(s.delta)}  95% CI ${fmtCI(s.ci, 3, true)}  p ${fmtP(s.p)} (${how})`);
  lines.push(`verdict   ${s.verdict}`);
  if (d.noise) {
    const n = d.noise;
    lines.push(`noise     band ±${fmt(n.band)} = t ${n.q.toFixed(3)} (df ${n.df}) x run sd ${fmt(n.run_sd, 4)} x sqrt(1/${n.runs_a} + 1/${n.runs_b})`);
  } else {
    lines.push(`noise     no band: needs >= 2 eval runs a side (a has ${s.runs_a}, b has ${s.runs_b}); a gain here is unreplicated`);
  }
  if (s.run_deltas.length >= 2) {
    const pairs = s.run_deltas.map((x, i) => `${d.run_ids_a[i]}->${d.run_ids_b[i]} ${fmtSigned(x)}`).join(", ");
    lines.push(`runs      replicated ${replicated(d)} (${pairs})`);
  }
  const needed = s.tasks_needed === null ? "-" : String(s.tasks_needed);
  lines.push(
    `power     detectable effect ${fmt(s.detectable_effect)} with ${s.n_paired} tasks (80% power, 95% confidence); ` +
      `tasks needed for ${fmtSigned(s.delta)}: ${needed}`,
  );
  return lines.join("\n") + "\n";
}

/** Returns the readable text of a delta report. */
export function formatDelta(flags: DeltaFlags, a: readonly StatRow[], b: readonly StatRow[], overall: DeltaDetail, groups: Record<string, Record<string, DeltaDetail>>): string {
  const ta = new Set(taskCounts(a).map((t) => t.task_id));
  const tb = new Set(taskCounts(b).map((t) => t.task_id));
  const s = overall.stats;
  let out = `a: ${flags.a} (${a.length} rows, ${ta.size} tasks)\nb: ${flags.b} (${b.length} rows, ${tb.size} tasks)\n`;
  out += `paired tasks ${s.n_paired} (only in a: ${ta.size - s.n_paired}, only in b: ${tb.size - s.n_paired}); ` +
    `bootstrap B = ${flags.B}, seed ${flags.seed}\n\n`;
  out += formatComparison(overall, flags.permutations);
  const markers = Object.entries(s.markers);
  if (markers.length) {
    const rows = markers.map(([field, m]) => [field, String(m.n_paired), fmt(m.a), fmt(m.b), fmtSigned(m.delta), fmtCI(m.ci, 3, true), fmtP(m.p)]);
    out += "\nmarkers\n" + formatTable(["marker", "tasks", "a", "b", "delta", "95% CI", "p"], rows, ["marker", "95% CI"]);
  }
  for (const [field, byValue] of Object.entries(groups)) {
    const rows = Object.entries(byValue).map(([value, g]) => [
      value,
      String(g.stats.n_paired),
      fmt(g.a),
      fmt(g.b),
      fmtSigned(g.stats.delta),
      fmtCI(g.stats.ci, 3, true),
      fmtP(g.stats.p),
      g.stats.verdict,
      g.stats.run_deltas.length > 1 ? replicated(g) : "-",
    ]);
    out += `\nby ${field}\n` + formatTable([field, "tasks", "a", "b", "delta", "95% CI", "p", "verdict", "runs"], rows, [field, "95% CI", "verdict", "runs"]);
  }
  return out;
}

export function registerDelta(program: Command): void {
  program
    .command("delta")
    .description("paired comparison of two rows files on their shared tasks: delta, 95% bootstrap interval, sign-flip p, verdict, power")
    .requiredOption("--a <file>", "rows file of the baseline (before)")
    .requiredOption("--b <file>", "rows file of the candidate (after)")
    .option("--by <field>", "also compare per value of this row field (repeatable)", collect, [])
    .option("--marker <field>", "0/1 field to compare besides correct (repeatable; default: every boolean field both files have)", collect, [])
    .option("--B <n>", "bootstrap resamples", intOption("--B", 1), DEFAULT_B)
    .option("--seed <n>", "seed of the bootstrap and of the Monte Carlo sign-flip test", intOption("--seed", 0), DEFAULT_SEED)
    .option("--permutations <n>", "random sign flips when the exact test is too large (more than 32 non-zero differences)", intOption("--permutations", 1), DEFAULT_PERMUTATIONS)
    .option("--skip-bad", "skip malformed lines and rows without task_id/correct (default: stop at the first, naming file:line)")
    .option("--json", "print JSON: n_paired, delta, ci, p, verdict, runs_a, runs_b, run_deltas, detectable_effect, tasks_needed, markers, by")
    .action((flags: DeltaFlags) => {
      const fileA = loadRowsForStats(flags.a, flags.skipBad);
      const fileB = loadRowsForStats(flags.b, flags.skipBad);
      const a = fileA.rows;
      const b = fileB.rows;
      const setup = setupDifferences({ path: flags.a, meta: findMeta(flags.a) }, { path: flags.b, meta: findMeta(flags.b) });
      for (const d of setup) process.stderr.write(`warning: not like for like: ${d}\n`);
      checkByFields([...a, ...b], flags.by);
      const opts = { by: flags.by, B: flags.B, seed: flags.seed, permutations: flags.permutations, markers: flags.marker.length ? flags.marker : undefined };
      if (flags.json) {
        const report = pairedDelta(a, b, opts);
        printJson({ ...report, duplicates_dropped: { a: fileA.duplicates.count, b: fileB.duplicates.count }, setup_errors_left_out: { a: fileA.setupErrors.count, b: fileB.setupErrors.count }, setup_differences: setup });
        return;
      }
      process.stdout.write(duplicatesLine(flags.a, fileA) + duplicatesLine(flags.b, fileB));
      const overall = compareRows(a, b, opts);
      if (overall.stats.n_paired === 0) process.stderr.write("warning: the two files have no task in common\n");
      process.stdout.write(formatDelta(flags, a, b, overall, compareGroups(a, b, opts)));
    });
}
