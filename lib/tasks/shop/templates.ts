/**
 * Every shop question template, in a fixed order (the order is part of what a seed reproduces). Each file
 * is named by the archetypes it holds; the last one adds templates for the archetype x difficulty cells
 * the data makes hardest to fill (self-join and anti-join, hard metrics, a few more of every archetype).
 */
import { AGGREGATION_TOPN_JOIN_TEMPLATES } from "./templates-aggregation-topn-join.js";
import { MULTIJOIN_HAVING_NULL_TEMPLATES } from "./templates-multijoin-having-null.js";
import { SELFJOIN_DATES_ANTIJOIN_METRICS_TEMPLATES } from "./templates-selfjoin-dates-antijoin-metrics.js";
import { SPARSE_CELL_TEMPLATES } from "./templates-sparse-cells.js";
import type { Template } from "./template.js";

export const SHOP_TEMPLATES: Template[] = [
  ...AGGREGATION_TOPN_JOIN_TEMPLATES,
  ...MULTIJOIN_HAVING_NULL_TEMPLATES,
  ...SELFJOIN_DATES_ANTIJOIN_METRICS_TEMPLATES,
  ...SPARSE_CELL_TEMPLATES,
];
