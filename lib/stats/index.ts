/**
 * lib/stats in one import, for notebooks and scripts: estimators, intervals, summaries, paired deltas,
 * verdicts, power, and the helpers behind them (per-task rates, pass@k curves, t and normal quantiles).
 */
export { passAt1, passAtK, passPowK, mean, sampleSd } from "./estimators.js";
export { bootstrapCI, bootstrapMeans, percentileIndices, DEFAULT_B, DEFAULT_SEED, MIN_BOOTSTRAP_N, type Interval, type BootstrapOptions } from "./bootstrap.js";
export {
  summarize,
  summarizeTasks,
  defaultK,
  taskPass1,
  taskPassK,
  taskPassPowK,
  taskPassRates,
  passAtKCurve,
  type Summary,
  type SummaryStats,
  type SummaryOptions,
  type PassAtKPoint,
  type TaskRate,
} from "./summary.js";
export {
  pairedDelta,
  compareRows,
  compareGroups,
  pairTasks,
  markerDelta,
  detectMarkers,
  type DeltaReport,
  type DeltaStats,
  type DeltaDetail,
  type DeltaOptions,
  type MarkerDelta,
  type PairedTask,
} from "./delta.js";
export { verdictFor, noiseBand, MIN_PAIRED_TASKS, type Verdict, type NoiseBand, type VerdictInput } from "./verdict.js";
export { detectableEffect, tasksNeeded, pairedPower, powerMultiplier } from "./power.js";
export { signFlipTest, type SignFlipResult } from "./permutation.js";
export { studentTQuantile, studentTCdf, normalQuantile, normalCdf, logGamma, regularizedBeta } from "./distributions.js";
export {
  readStatRows,
  loadStatRows,
  readingNotes,
  validateRows,
  taskCounts,
  evalRuns,
  splitByGroup,
  compareRunIds,
  isSetupError,
  withoutSetupErrors,
  SETUP_ERROR,
  type SetupErrors,
  type StatRow,
  type TaskCounts,
  type RowsFile,
} from "./rows.js";
export { SeededRandom, mulberry32, type Uniform } from "../core/random.js";
export { formatTable, fmt, fmtCI, fmtP, fmtSigned } from "./format.js";
