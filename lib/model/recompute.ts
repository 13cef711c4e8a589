/**
 * Gradient checkpointing's one primitive: a function whose backward runs it again instead of keeping its
 * activations (lib/model/decoder.ts wraps each decoder layer in it when the trainer asks to recompute).
 */
import { tf } from "../backend/tf.js";

/**
 * f(inputs) whose backward recomputes f instead of keeping its activations: the tape holds the inputs
 * alone (a layer's input, and the past keys/values it attends to), and the gradients of the inputs and
 * `params` come from running f again under a tape of its own. (tfjs runs a custom gradient's forward
 * without recording it; the inner tape replaces the engine's active one while it runs, so the outer tape
 * is put back afterwards.) A custom gradient has one output, so f packs several into one tensor.
 */
export function recomputedInBackward<K extends object>(f: (inputs: tf.Tensor[], k: K) => tf.Tensor, inputs: tf.Tensor[], k: K, params: tf.Variable[]): tf.Tensor {
  // the step's constants are saved with the inputs: the step's scope frees its own before the backward runs
  const consts = k as Record<string, tf.Tensor | null>;
  const names = Object.keys(consts).filter((name) => consts[name] !== null);
  const n = inputs.length;
  const rebuild = (ts: tf.Tensor[]): K => {
    const out: Record<string, tf.Tensor | null> = { ...consts };
    names.forEach((name, i) => (out[name] = ts[i]));
    return out as K;
  };
  const run = tf.customGrad((...args: unknown[]) => {
    const save = args.pop() as (ts: tf.Tensor[]) => void;
    const ins = args.slice(0, n) as tf.Tensor[];
    save([...ins, ...names.map((name) => consts[name] as tf.Tensor)]);
    const value = tf.tidy(() => f(ins, k));
    const gradFunc = (dy: tf.Tensor, saved: tf.Tensor[]) => {
      const k2 = rebuild(saved.slice(n));
      const engine = tf.engine() as unknown as { state: { activeTape: unknown } } & { gradients: (f: () => tf.Tensor, xs: tf.Tensor[], dy: tf.Tensor, allowNoGradients: boolean) => { value: tf.Tensor; grads: (tf.Tensor | undefined)[] } };
      const outer = engine.state.activeTape;
      try {
        const xs = [...saved.slice(0, n), ...params];
        const r = engine.gradients(() => f(saved.slice(0, n), k2), xs, dy, true);
        r.value.dispose();
        // the output's gradient is read by this node alone: freed now, not with the whole backward (tfjs keeps
        // every gradient of its tape until the end, and for a recomputed decoder that is one [tokens, hidden]
        // tensor per layer, as much again as the layer inputs kept)
        if (!r.grads.includes(dy)) dy.dispose();
        return xs.map((t, i) => r.grads[i] ?? tf.zerosLike(t));
      } finally {
        engine.state.activeTape = outer;
      }
    };
    return { value, gradFunc };
  });
  return (run as unknown as (...ts: tf.Tensor[]) => tf.Tensor)(...inputs, ...params);
}

/** Tensors flattened into one (a custom gradient's single output), and split back to their shapes. */
export function packFlat(ts: tf.Tensor[]): tf.Tensor1D {
  return tf.concat(ts.map((t) => tf.reshape(t, [-1])), 0) as tf.Tensor1D;
}
export function unpackFlat(flat: tf.Tensor, shapes: number[][]): tf.Tensor[] {
  let at = 0;
  return shapes.map((shape) => {
    const size = shape.reduce((a, b) => a * b, 1);
    const t = tf.reshape(tf.slice(flat, [at], [size]), shape);
    at += size;
    return t;
  });
}
