/**
 * The kit's BatchMatMul (lib/backend/webgpu/train/batch-matmul.ts) against tfjs-backend-webgpu's on the matrix
 * products of a training step: forward, input gradient (dX = dY W) and weight gradient (dW = dYᵀ X) of
 * each linear layer, the vocabulary head, attention and LoRA. The reference is tfjs's 32x32-tile program
 * (WEBGPU_MATMUL_PROGRAM_TYPE = MatMulPackedProgram): its split-K program gives wrong results for a
 * transposed right operand on some drivers. Each row also gives the kit's tile plan and both paths' TFLOP/s.
 */
import { tf } from "../../lib/backend/tf.js";
import { gemmShape, planGemm } from "../../lib/backend/webgpu/train/batch-matmul.js";
import { bothPaths, relativeError, timePath, type KernelCheck } from "./check.js";

/** tfjs's MatMulProgramType.MatMulPackedProgram. */
const PACKED = 3;

type Case = { name: string; a: number[]; b: number[]; ta: boolean; tb: boolean };

/** The products of one step of a decoder with hidden D, kv width Dkv, MLP width I, vocabulary V, N tokens (S scored), and attention batch x rows x keys. */
function stepCases(d: { D: number; Dkv: number; I: number; V: number; N: number; S: number; heads: number; kv: number; T: number; hd: number; r: number }): Case[] {
  const { D, Dkv, I, V, N, S, heads, kv, T, hd, r } = d;
  const G = heads / kv;
  const linear = (name: string, inDim: number, outDim: number, rows = N): Case[] => [
    { name: `${name} fwd`, a: [rows, inDim], b: [outDim, inDim], ta: false, tb: true },
    { name: `${name} dX`, a: [rows, outDim], b: [outDim, inDim], ta: false, tb: false },
    { name: `${name} dW`, a: [rows, outDim], b: [rows, inDim], ta: true, tb: false },
  ];
  const bk = 4 * kv;
  return [
    ...linear("q/o", D, D),
    ...linear("k/v", D, Dkv),
    ...linear("gate/up", D, I),
    ...linear("down", I, D),
    ...linear("head", D, V, S),
    { name: "attn QKᵀ", a: [bk, G * T, hd], b: [bk, T, hd], ta: false, tb: true },
    { name: "attn PV", a: [bk, G * T, T], b: [bk, T, hd], ta: false, tb: false },
    { name: "attn dV=PᵀdO", a: [bk, G * T, T], b: [bk, G * T, hd], ta: true, tb: false },
    { name: "attn dK=dSᵀQ", a: [bk, G * T, T], b: [bk, G * T, hd], ta: true, tb: false },
    { name: "lora A fwd", a: [N, D], b: [r, D], ta: false, tb: true },
    { name: "lora B fwd", a: [N, r], b: [D, r], ta: false, tb: true },
    { name: "lora dA", a: [N, r], b: [N, D], ta: true, tb: false },
  ];
}

/** With T2S_GEMM_SWEEP=1: ms per call of every forced tile and K split, to tune planGemm's rule. */
async function sweepPlans(product: () => tf.Tensor[]): Promise<string> {
  const parts: string[] = [];
  for (const [tile, slices] of [["large", 0], ["medium", 0], ["large", 2], ["large", 4], ["medium", 2], ["medium", 4], ["medium", 8]] as const) {
    process.env.T2S_GEMM_TILE = tile;
    process.env.T2S_GEMM_SLICES = String(slices);
    parts.push(`${tile}${slices ? `/${slices}` : ""} ${(await timePath(true, product, 5)).toFixed(2)}`);
  }
  delete process.env.T2S_GEMM_TILE;
  delete process.env.T2S_GEMM_SLICES;
  return `; sweep ms: ${parts.join(", ")}`;
}

export async function checks(big: boolean): Promise<KernelCheck[]> {
  const cases = big
    ? stepCases({ D: 896, Dkv: 128, I: 4864, V: 151936, N: 2048, S: 1024, heads: 14, kv: 2, T: 512, hd: 64, r: 16 })
    : stepCases({ D: 96, Dkv: 32, I: 200, V: 1000, N: 130, S: 65, heads: 4, kv: 2, T: 33, hd: 16, r: 4 });
  const out: KernelCheck[] = [];
  const packedBefore = tf.env().get("WEBGPU_MATMUL_PROGRAM_TYPE");
  for (const c of cases) {
    const a = tf.randomNormal(c.a, 0, 1, "float32", 1);
    const b = tf.randomNormal(c.b, 0, 1, "float32", 2);
    const product = () => [tf.matMul(a, b, c.ta, c.tb)];
    tf.env().set("WEBGPU_MATMUL_PROGRAM_TYPE", PACKED);
    const { fused, ops } = bothPaths(product);
    const fusedMs = await timePath(true, product, big ? 10 : 2);
    const packedMs = await timePath(false, product, big ? 10 : 2);
    tf.env().set("WEBGPU_MATMUL_PROGRAM_TYPE", packedBefore);
    // tfjs's own choice of program (split-K and small-output programs included), for the time column
    const opsMs = await timePath(false, product, big ? 10 : 2);
    const sweep = process.env.T2S_GEMM_SWEEP === "1" ? await sweepPlans(product) : "";
    const shape = gemmShape(a, b, c.ta, c.tb);
    const plan = shape ? planGemm(shape) : null;
    const flop = 2 * (shape ? shape.batch * shape.M * shape.N * shape.K : 0);
    const tflops = (ms: number) => (flop / (ms * 1e9)).toFixed(1);
    out.push({
      kernel: `matmul ${c.name}`,
      shape: `${c.a.join("x")}${c.ta ? "ᵀ" : ""} · ${c.b.join("x")}${c.tb ? "ᵀ" : ""}`,
      value_err: await relativeError(fused[0], ops[0]),
      grad_err: NaN,
      fused_ms: fusedMs,
      ops_ms: opsMs,
      note: `${plan ? `${plan.tile.name}${plan.slices > 1 ? ` /${plan.slices}` : ""}` : "tfjs"}; TFLOP/s kit ${tflops(fusedMs)}, tfjs ${tflops(opsMs)} (packed ${tflops(packedMs)})${sweep}`,
    });
    tf.dispose([a, b, ...fused, ...ops]);
  }
  return out;
}
