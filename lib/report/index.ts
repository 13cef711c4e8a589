/**
 * lib/report in one import, for notebooks and the REPL: rows, arquero tables, Plotly figure specs,
 * failure analysis verbs, the notebook report (show inline + save), figure store, and notebook steps.
 * Figure export (playwright) is in ./export.js, imported only by the CLI.
 */
export { html, text, plotly, ensurePlotly, plotlyFigureHtml, type PlotlyFigure, type FigureOptions } from "./display.js";
export { readRows, isCorrect, outcomeOf, isTruncated, groupOf, groupsIn, outcomesIn, OUTCOME_ORDER, type ReportRow } from "./rows.js";
export { headlineTable, groupTable, outcomeTable, rowsTable, summaryOf, failureRates, tableHtml, type Table, type TableOptions } from "./tables.js";
export {
  pass1ByGroupFigure, outcomeStackFigure, outcomeHeatmapFigure, passAtKCurveFigure, taskRateHistogramFigure, headroomFigure, OUTCOME_COLORS,
} from "./figures.js";
export { readTrainLog, trainingCurvesFigure, trainProgressLine, TRAIN_PANELS, type TrainRecord } from "./training.js";
export {
  analyzeDelta, deltaHeadlineTable, markerTable, runDeltaTable, groupDeltaTable, forestPlotFigure, passShiftFigure, deltaSummaryLines, type DeltaAnalysis,
} from "./delta.js";
export { behaviourProfile, behaviourTable, behaviourLines, toolQueries, toolErrors, BEHAVIOUR_FIELDS, type BehaviourProfile } from "./behaviour.js";
export { failures, where, countBy, sample, taskRows, showHtml, browseHtml, resultHtml, type ShowOptions } from "./failures.js";
export { NotebookReport, namedFigureHtml, type ReportOptions } from "./notebook-report.js";
export { saveFigure, saveTableCsv, listFigures, FIGURES_DIR, TABLES_DIR } from "./store.js";
export { checkTrainerAgreement, checkAdapterPlacement, readRewardLog, checkAdapterNotNoop, checkGradedTurn, checksTable, checksHtml, trainerTasks, servedTasks, describeServedTasks, type Check, type TrainerTasks, type ServedTasks } from "./serving.js";
export {
  benchmarkStep, failureSampleHtml, bandSelection, writeBand, trainConfigFacts, trainStep, holdoutCheckpoints, taskMap, policyModelDir, benchmarkBanner, servingStep,
  DEFAULT_MODEL_DIR, DEFAULT_POLICY, DEFAULT_TASKS, DEFAULT_BENCHMARK_ROWS, type BenchmarkStep, type BandSelection,
} from "./notebook-steps.js";
export { runT2s, startT2s, commandText } from "./commands.js";
export { liveOutput } from "./live.js";

import { showHtml, type ShowOptions } from "./failures.js";
import { html } from "./display.js";
import type { ReportRow } from "./rows.js";

/** Shows a row's transcript inline (see showHtml) and returns the HTML. */
export async function show(row: ReportRow, opts: ShowOptions = {}): Promise<string> {
  const markup = await showHtml(row, opts);
  html(markup);
  return markup;
}
