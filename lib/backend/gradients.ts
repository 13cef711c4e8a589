/**
 * Gradients for the tfjs kernels a decoder forward pass and the training losses use.
 *
 * Why this file exists: the CommonJS build of @tensorflow/tfjs-core (what Node and tslab load) registers
 * no gradient functions, and the package's ESM gradient files cannot be loaded by Node (extensionless
 * imports). So training registers its own, for the kernels it needs, and only where none is registered
 * yet (a gradient registered by someone else wins). Every rule here is checked against central finite
 * differences in test/backend/gradients.test.ts.
 */
import { tf } from "./tf.js";

type Grads = Record<string, () => tf.Tensor> | Array<() => tf.Tensor>;
type Rule = { kernelName: string; inputsToSave?: string[]; saveAllInputs?: boolean; outputsToSave?: boolean[]; gradFunc: (dy: tf.Tensor, saved: tf.Tensor[], attrs: any) => Grads };

function normAxes(axis: number | number[] | undefined | null, rank: number): number[] {
  if (axis === undefined || axis === null) return [...Array(rank).keys()];
  const list = Array.isArray(axis) ? axis : [axis];
  return list.map((a) => (a < 0 ? a + rank : a));
}

/** Sums a broadcast gradient back down to `shape` (the shape of the input that was broadcast). */
export function unbroadcast(g: tf.Tensor, shape: number[]): tf.Tensor {
  if (g.shape.length === shape.length && g.shape.every((d, i) => d === shape[i])) return g;
  const lead = g.rank - shape.length;
  const axes: number[] = [];
  for (let i = 0; i < g.rank; i++) {
    if (i < lead) axes.push(i);
    else if (shape[i - lead] === 1 && g.shape[i] !== 1) axes.push(i);
  }
  const summed = axes.length ? tf.sum(g, axes, true) : g;
  return tf.reshape(summed, shape);
}

/** Spreads a reduced gradient (reduction over `axes`, keepDims or not) back over the input shape. */
function expandReduced(dy: tf.Tensor, xShape: number[], axes: number[]): tf.Tensor {
  const kept = xShape.map((d, i) => (axes.includes(i) ? 1 : d));
  // broadcastTo stays on the device; tf.ones would build the whole shape on the CPU first (for the sum over
  // the vocabulary that is B x T x V floats every step)
  return tf.broadcastTo(tf.reshape(dy, kept), xShape);
}

const zeroOf = (x: tf.Tensor) => () => tf.cast(tf.zerosLike(x), "float32");

const unary = (name: string, f: (dy: tf.Tensor, x: tf.Tensor, y: tf.Tensor) => tf.Tensor, needsY = false): Rule => ({
  kernelName: name,
  inputsToSave: ["x"],
  outputsToSave: needsY ? [true] : undefined,
  gradFunc: (dy, saved) => ({ x: () => f(dy, saved[0], saved[1]) }),
});

const binary = (name: string, da: (dy: tf.Tensor, a: tf.Tensor, b: tf.Tensor) => tf.Tensor, db: (dy: tf.Tensor, a: tf.Tensor, b: tf.Tensor) => tf.Tensor): Rule => ({
  kernelName: name,
  inputsToSave: ["a", "b"],
  gradFunc: (dy, [a, b]) => ({ a: () => unbroadcast(da(dy, a, b), a.shape), b: () => unbroadcast(db(dy, a, b), b.shape) }),
});

const notDifferentiable = (name: string, inputs: string[]): Rule => ({
  kernelName: name,
  inputsToSave: inputs,
  gradFunc: (_dy, saved) => {
    const out: Record<string, () => tf.Tensor> = {};
    inputs.forEach((n, i) => (out[n] = zeroOf(saved[i])));
    return out;
  },
});

// C = op(A) op(B); dOp(A) = dC op(B)^T, dOp(B) = op(A)^T dC; undo the op by transposing back. Each side is
// computed only when asked for: the tape skips inputs that need no gradient (frozen weights under LoRA).
function matMulGradA(dy: tf.Tensor, a: tf.Tensor, b: tf.Tensor, ta: boolean, tb: boolean): tf.Tensor {
  const g = !ta ? tf.matMul(dy, b, false, !tb) : tf.matMul(b, dy, tb, true);
  return unbroadcast(g, a.shape);
}

function matMulGradB(dy: tf.Tensor, a: tf.Tensor, b: tf.Tensor, ta: boolean, tb: boolean): tf.Tensor {
  const g = !tb ? tf.matMul(a, dy, !ta, false) : tf.matMul(dy, a, true, ta);
  return unbroadcast(g, b.shape);
}

const rules: Rule[] = [
  unary("Neg", (dy) => tf.neg(dy)),
  unary("Identity", (dy) => dy.clone()),
  unary("Exp", (dy, _x, y) => tf.mul(dy, y), true),
  unary("Log", (dy, x) => tf.div(dy, x)),
  unary("Log1p", (dy, x) => tf.div(dy, tf.add(x, 1))),
  unary("Sqrt", (dy, _x, y) => tf.div(dy, tf.mul(y, 2)), true),
  unary("Rsqrt", (dy, x, y) => tf.mul(dy, tf.div(tf.mul(y, -0.5), x)), true),
  unary("Square", (dy, x) => tf.mul(dy, tf.mul(x, 2))),
  unary("Reciprocal", (dy, x) => tf.neg(tf.div(dy, tf.square(x)))),
  unary("Sigmoid", (dy, _x, y) => tf.mul(dy, tf.mul(y, tf.sub(1, y))), true),
  unary("Tanh", (dy, _x, y) => tf.mul(dy, tf.sub(1, tf.square(y))), true),
  unary("Relu", (dy, x) => tf.mul(dy, tf.cast(tf.greater(x, 0), dy.dtype))),
  unary("Abs", (dy, x) => tf.mul(dy, tf.sign(x))),
  unary("Sin", (dy, x) => tf.mul(dy, tf.cos(x))),
  unary("Cos", (dy, x) => tf.neg(tf.mul(dy, tf.sin(x)))),
  unary("Softplus", (dy, x) => tf.mul(dy, tf.sigmoid(x))),
  unary("Erf", (dy, x) => tf.mul(dy, tf.mul(2 / Math.sqrt(Math.PI), tf.exp(tf.neg(tf.square(x)))))),
  unary("Cast", (dy) => dy.clone()),
  unary("Reshape", (dy, x) => tf.reshape(dy, x.shape)),
  {
    kernelName: "ExpandDims",
    inputsToSave: ["input"],
    gradFunc: (dy, [x]) => ({ input: () => tf.reshape(dy, x.shape) }),
  },
  unary("ZerosLike", (dy) => tf.zerosLike(dy)),
  unary("OnesLike", (dy) => tf.zerosLike(dy)),
  binary("Add", (dy) => dy, (dy) => dy),
  binary("Sub", (dy) => dy, (dy) => tf.neg(dy)),
  binary("Multiply", (dy, _a, b) => tf.mul(dy, b), (dy, a) => tf.mul(dy, a)),
  binary("RealDiv", (dy, _a, b) => tf.div(dy, b), (dy, a, b) => tf.neg(tf.div(tf.mul(dy, a), tf.square(b)))),
  binary("SquaredDifference", (dy, a, b) => tf.mul(dy, tf.mul(tf.sub(a, b), 2)), (dy, a, b) => tf.mul(dy, tf.mul(tf.sub(b, a), 2))),
  binary("Maximum", (dy, a, b) => tf.mul(dy, tf.cast(tf.greaterEqual(a, b), dy.dtype)), (dy, a, b) => tf.mul(dy, tf.cast(tf.less(a, b), dy.dtype))),
  binary("Minimum", (dy, a, b) => tf.mul(dy, tf.cast(tf.lessEqual(a, b), dy.dtype)), (dy, a, b) => tf.mul(dy, tf.cast(tf.greater(a, b), dy.dtype))),
  binary(
    "Pow",
    (dy, a, b) => tf.mul(dy, tf.mul(b, tf.pow(a, tf.sub(b, 1)))),
    // d/db a^b = a^b ln a, defined as 0 where a <= 0 (the exponent is usually a constant there)
    (dy, a, b) => tf.mul(dy, tf.where(tf.greater(a, 0), tf.mul(tf.pow(a, b), tf.log(tf.maximum(a, 1e-30))), tf.zerosLike(a))),
  ),
  {
    kernelName: "AddN",
    saveAllInputs: true,
    gradFunc: (dy, saved) => saved.map(() => () => dy.clone()),
  },
  {
    kernelName: "BatchMatMul",
    inputsToSave: ["a", "b"],
    gradFunc: (dy, [a, b], attrs) => ({
      a: () => matMulGradA(dy, a, b, !!attrs.transposeA, !!attrs.transposeB),
      b: () => matMulGradB(dy, a, b, !!attrs.transposeA, !!attrs.transposeB),
    }),
  },
  {
    kernelName: "Sum",
    inputsToSave: ["x"],
    gradFunc: (dy, [x], attrs) => ({ x: () => expandReduced(dy, x.shape, normAxes(attrs.axis, x.rank)) }),
  },
  {
    kernelName: "Mean",
    inputsToSave: ["x"],
    gradFunc: (dy, [x], attrs) => {
      const axes = normAxes(attrs.axis, x.rank);
      const count = axes.reduce((n, a) => n * x.shape[a], 1);
      return { x: () => tf.div(expandReduced(dy, x.shape, axes), count) };
    },
  },
  ...(["Max", "Min"] as const).map((name): Rule => ({
    kernelName: name,
    inputsToSave: ["x"],
    outputsToSave: [true],
    gradFunc: (dy, [x, y], attrs) => {
      const axes = normAxes(name === "Max" ? attrs.reductionIndices : attrs.axis, x.rank);
      const kept = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
      const hit = tf.cast(tf.equal(x, tf.reshape(y, kept)), dy.dtype);
      return { x: () => tf.mul(expandReduced(dy, x.shape, axes), hit) };
    },
  })),
  {
    kernelName: "Softmax",
    outputsToSave: [true],
    gradFunc: (dy, [y], attrs) => ({
      logits: () => {
        const dim = attrs.dim < 0 ? attrs.dim + y.rank : attrs.dim;
        const dyy = tf.mul(dy, y);
        return tf.sub(dyy, tf.mul(tf.sum(dyy, dim, true), y));
      },
    }),
  },
  {
    kernelName: "LogSoftmax",
    outputsToSave: [true],
    gradFunc: (dy, [y], attrs) => ({
      logits: () => {
        const axis = attrs.axis < 0 ? attrs.axis + y.rank : attrs.axis;
        return tf.sub(dy, tf.mul(tf.sum(dy, axis, true), tf.exp(y)));
      },
    }),
  },
  {
    kernelName: "Transpose",
    gradFunc: (dy, _saved, attrs) => {
      const perm: number[] = attrs.perm;
      const inverse = new Array<number>(perm.length);
      perm.forEach((p, i) => (inverse[p] = i));
      return { x: () => tf.transpose(dy, inverse) };
    },
  },
  {
    kernelName: "Slice",
    inputsToSave: ["x"],
    gradFunc: (dy, [x], attrs) => {
      const begin: number[] = typeof attrs.begin === "number" ? [attrs.begin] : attrs.begin;
      const pads: Array<[number, number]> = x.shape.map((d, i) => [begin[i] ?? 0, d - (begin[i] ?? 0) - dy.shape[i]]);
      return { x: () => tf.pad(dy, pads) };
    },
  },
  {
    kernelName: "PadV2",
    inputsToSave: ["x"],
    gradFunc: (dy, [x], attrs) => {
      const begin = (attrs.paddings as Array<[number, number]>).map((p) => p[0]);
      return { x: () => tf.slice(dy, begin, x.shape) };
    },
  },
  {
    kernelName: "Concat",
    saveAllInputs: true,
    gradFunc: (dy, saved, attrs) => {
      const axis = attrs.axis < 0 ? attrs.axis + saved[0].rank : attrs.axis;
      const parts = tf.split(dy, saved.map((t) => t.shape[axis]), axis);
      return parts.map((p) => () => p);
    },
  },
  {
    kernelName: "Pack",
    saveAllInputs: true,
    gradFunc: (dy, _saved, attrs) => tf.unstack(dy, attrs.axis).map((p) => () => p),
  },
  {
    kernelName: "Unpack",
    gradFunc: (dy, _saved, attrs) => ({ value: () => tf.stack(dy as unknown as tf.Tensor[], attrs.axis) }),
  },
  {
    kernelName: "SplitV",
    gradFunc: (dy, _saved, attrs) => ({ x: () => tf.concat(dy as unknown as tf.Tensor[], attrs.axis) }),
  },
  {
    kernelName: "Tile",
    inputsToSave: ["x"],
    gradFunc: (dy, [x], attrs) => ({
      x: () => {
        // dy's axis i is [r_i, d_i] (repeats outermost): view dy as those factors and sum the repeat
        // factors; repeats of 1 are dropped and neighbouring kept factors merged, so the view's rank stays
        // low (WebGPU shaders handle rank 6 at most)
        const reps: number[] = attrs.reps;
        const view: number[] = [];
        const axes: number[] = [];
        let lastKept = false;
        x.shape.forEach((d, i) => {
          if (reps[i] > 1) {
            axes.push(view.length);
            view.push(reps[i]);
            lastKept = false;
          }
          if (lastKept) view[view.length - 1] *= d;
          else view.push(d);
          lastKept = true;
        });
        return tf.reshape(axes.length ? tf.sum(tf.reshape(dy, view), axes) : dy, x.shape);
      },
    }),
  },
  {
    kernelName: "BroadcastTo",
    gradFunc: (dy, _saved, attrs) => ({ x: () => unbroadcast(dy, attrs.inputShape) }),
  },
  {
    kernelName: "Select",
    inputsToSave: ["condition"],
    gradFunc: (dy, [c]) => ({
      condition: zeroOf(c),
      t: () => tf.mul(dy, tf.cast(c, dy.dtype)),
      e: () => tf.mul(dy, tf.cast(tf.logicalNot(c), dy.dtype)),
    }),
  },
  {
    kernelName: "ClipByValue",
    inputsToSave: ["x"],
    gradFunc: (dy, [x], attrs) => ({
      x: () => tf.mul(dy, tf.cast(tf.logicalAnd(tf.greaterEqual(x, attrs.clipValueMin), tf.lessEqual(x, attrs.clipValueMax)), dy.dtype)),
    }),
  },
  {
    kernelName: "GatherV2",
    inputsToSave: ["x", "indices"],
    gradFunc: (dy, [x, indices], attrs) => ({
      indices: zeroOf(indices),
      x: () => {
        if (attrs.batchDims) throw new Error("gradient of gather with batchDims is not supported; gather per row instead");
        const axis = attrs.axis < 0 ? attrs.axis + x.rank : attrs.axis;
        const outer = x.shape.slice(0, axis);
        const inner = x.shape.slice(axis + 1);
        const n = indices.size;
        // bring the gathered axis first, sum rows that share an index, then move it back
        const values = tf.reshape(dy, [...outer, n, ...inner]);
        const perm = [outer.length, ...outer.map((_, i) => i), ...inner.map((_, i) => outer.length + 1 + i)];
        const moved = tf.transpose(values, perm);
        const summed = segmentSum(moved, tf.reshape(indices, [n]) as tf.Tensor1D, x.shape[axis]);
        const inverse = new Array<number>(perm.length);
        perm.forEach((p, i) => (inverse[p] = i));
        return tf.transpose(summed, inverse);
      },
    }),
  },
  ...["Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd", "LogicalOr", "FloorDiv", "Mod"].map((n) => notDifferentiable(n, ["a", "b"])),
  ...["LogicalNot", "Floor", "Ceil", "Round", "Sign", "IsNan", "IsFinite", "IsInf", "Step"].map((n) => notDifferentiable(n, ["x"])),
  notDifferentiable("ArgMax", ["x"]),
  notDifferentiable("ArgMin", ["x"]),
  notDifferentiable("OneHot", ["indices"]),
];

/**
 * Sums rows of `values` [n, ...] that share an index into [segments, ...]: the embedding gradient. GPU
 * backends use their UnsortedSegmentSum kernel; wasm has none, and the CPU one loops over segments (45 s
 * for a 2048-token vocabulary), so there it is a one-hot matmul, in chunks of rows so the one-hot matrix
 * stays small.
 */
function segmentSum(values: tf.Tensor, ids: tf.Tensor1D, segments: number): tf.Tensor {
  const backend = tf.getBackend();
  if (backend !== "cpu" && tf.getKernel("UnsortedSegmentSum", backend)) return tf.unsortedSegmentSum(values, ids, segments);
  const n = values.shape[0];
  const rest = values.shape.slice(1);
  const flat = tf.reshape(values, [n, -1]);
  const chunk = Math.max(1, Math.floor(2 ** 24 / Math.max(1, segments)));
  let acc: tf.Tensor | null = null;
  for (let start = 0; start < n; start += chunk) {
    const size = Math.min(chunk, n - start);
    const oneHot = tf.oneHot(tf.cast(tf.slice(ids, [start], [size]), "int32"), segments);
    const part = tf.matMul(oneHot, tf.slice(flat, [start, 0], [size, -1]), true, false);
    acc = acc ? tf.add(acc, part) : part;
  }
  return tf.reshape(acc!, [segments, ...rest]);
}

let registered = false;

/** Registers the gradient rules above for every kernel that has none yet; returns the kernels it filled. */
export function ensureGradients(): string[] {
  if (registered) return [];
  registered = true;
  const added: string[] = [];
  for (const r of rules) {
    if (tf.getGradient(r.kernelName) != null) continue;
    tf.registerGradient(r as unknown as tf.GradConfig);
    added.push(r.kernelName);
  }
  return added;
}
