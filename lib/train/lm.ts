/**
 * What the trainer needs from a language model: its trainable variables and causal logits. The
 * implementation over lib/model lives in lib/train/trainable-model.ts; tests use a tiny model defined in
 * test/train.
 */
import { tf } from "../backend/tf.js";
import type { WeightMatrix } from "../model/packed.js";

export interface NamedVariable {
  /** Unique, stable name; for LoRA the PEFT key (`base_model.model....lora_A.weight`). */
  name: string;
  variable: tf.Variable;
}

export interface TrainableLM {
  readonly vocabSize: number;
  /** The variables the optimizer updates, in a stable order. */
  trainableParams(): NamedVariable[];
  /**
   * Causal logits [B, T, V] for B rows of T token ids. Rows are right-padded, so no attention mask is
   * needed: a position never sees the padding after it. Differentiable with respect to
   * `trainableParams()`. With `reference: true`, the logits of the reference policy (the base with the
   * adapter disabled). Ids come as plain arrays so no backend has to read a tensor back to build inputs.
   * With `from`, only positions from..T-1 ([B, T - from, V]): prompt positions need no vocabulary
   * projection, which is most of the logits' memory and a large share of the compute.
   */
  logits(ids: number[][], opts?: { reference?: boolean; from?: number }): tf.Tensor3D;
  /** Whether `logits(..., { reference: true })` is available (needed when beta > 0). */
  readonly hasReference: boolean;
  /**
   * Optional: the final hidden states [B, T - from, D] of the positions `logits` would return and the
   * matrix [V, D] projecting them onto the vocabulary. With it and a `logitChunk()` above 0,
   * sequenceLogprobs projects that many positions at a time (lib/train/chunked-logprobs.ts) and never calls
   * `logits`.
   */
  hidden?(ids: number[][], opts?: { reference?: boolean; from?: number }): { hidden: tf.Tensor3D; head: WeightMatrix };
  /** Positions projected onto the vocabulary at once by sequenceLogprobs (0: all at once, through `logits`). */
  logitChunk?(): number;
  /** D of `hidden`'s states (what a scored position holds whole when projected in chunks). */
  readonly hiddenSize?: number;
}
