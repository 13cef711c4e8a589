/**
 * Task ids and the train/holdout split. The id is a hash of the normalised question and the database id,
 * and the split is a pure function of the id, so adding tasks never moves an existing task between splits.
 *
 *   normalise(q) = q.trim().toLowerCase() with every run of whitespace collapsed to one space
 *   id           = "t2s_" + sha256_hex(normalise(q) + "\n" + db_id).slice(0, 12)
 *   holdout      ⇔ parseInt(sha256_hex(id).slice(0, 8), 16) / 2^32 < 0.2
 */
import { createHash } from "node:crypto";

/** Share of the hash space that is held out. */
export const HOLDOUT_FRACTION = 0.2;

function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** The question as the id sees it: trimmed, lower-cased, whitespace collapsed. */
export function normalizeQuestion(question: string): string {
  return question.trim().toLowerCase().replace(/\s+/g, " ");
}

/** The stable id of a question over a database: "t2s_" and 12 hex digits. */
export function taskId(question: string, dbId: string): string {
  return "t2s_" + sha256Hex(normalizeQuestion(question) + "\n" + dbId).slice(0, 12);
}

/** Where the id falls in the hash space, in [0, 1). */
export function splitPoint(id: string): number {
  return parseInt(sha256Hex(id).slice(0, 8), 16) / 2 ** 32;
}

/** "holdout" for ids whose hash is in the lowest 20% of the space, else "train". */
export function splitFor(id: string): "train" | "holdout" {
  return splitPoint(id) < HOLDOUT_FRACTION ? "holdout" : "train";
}
