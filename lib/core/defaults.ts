/**
 * Defaults shared by several commands and modules, stated once: the CLI's option defaults, the runners,
 * the env server, the notebook steps, the prompts and the docs all read them from here, so a prompt can
 * never promise a row count the tool does not show.
 */

/** Rows a tool result shows at most: the executor returns that many, the formatter renders them, the prompt says so. */
export const TOOL_ROWS = 20;

/** Time limit in ms of one SQL query run for a model or a grade (a tool call, a graded reply, a gold check). */
export const QUERY_TIMEOUT_MS = 5000;

/** Rows a query run for grading returns at most (the executors' cap when none is given; the spider dialect lifts it). */
export const RESULT_ROWS = 200;

/** Samples per task of a benchmark (the k of pass@k). */
export const SAMPLES_PER_TASK = 4;

/** Sampling temperature of a benchmark and of `t2s model generate`. */
export const SAMPLING_TEMPERATURE = 0.7;
