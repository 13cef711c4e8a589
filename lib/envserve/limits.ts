/** Limits of the environment service's grading work, each declared once with its default (the CLI flags read them). */

/** Grade items one request may carry at most by default (`--max-items` raises it): one request cannot hold grading for long. */
export const MAX_GRADE_ITEMS = 256;
