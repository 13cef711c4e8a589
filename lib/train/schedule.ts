/** Learning-rate schedules: linear warm-up, then cosine decay or constant. */
export type ScheduleKind = "cosine" | "constant";

export interface ScheduleOptions {
  /** Peak learning rate. */
  lr: number;
  schedule: ScheduleKind;
  warmupSteps: number;
  /** Total optimizer steps (the cosine reaches its floor here). */
  totalSteps: number;
  /** Floor of the cosine as a fraction of lr (default 0). */
  minLrRatio?: number;
}

/**
 * Returns the learning rate of optimizer step `step` (0-based). Warm-up is linear, (step + 1) / warmup,
 * so the first step already moves; the cosine then goes from lr to lr x minLrRatio at totalSteps.
 */
export function learningRate(step: number, o: ScheduleOptions): number {
  if (step < o.warmupSteps) return (o.lr * (step + 1)) / o.warmupSteps;
  if (o.schedule === "constant") return o.lr;
  const span = Math.max(1, o.totalSteps - o.warmupSteps);
  const progress = Math.min(1, (step - o.warmupSteps) / span);
  const floor = o.minLrRatio ?? 0;
  return o.lr * (floor + (1 - floor) * 0.5 * (1 + Math.cos(Math.PI * progress)));
}
