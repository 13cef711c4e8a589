/**
 * The register-blocked tile of a matrix multiply as WGSL pieces, shared by the training kernel
 * (train/batch-matmul.ts, tfjs programs) and the step runner's linear layers (step/gemm.ts, raw dispatches).
 *
 * A workgroup of (BM/TM)·(BN/TN) threads computes a BM x BN output tile; each thread a TM x TN block held in
 * vec4 registers along N. Tiles of A and B are staged K-major in workgroup memory (As[k][m], Bs[k][n], as
 * vec4 along M and N) whatever the operands' layout, so one K step reads TM/4 + TN/4 vec4 from workgroup
 * memory for TM·TN multiply-adds. A thread's rows and columns are strided by the thread grid (row groups
 * ty, ty + WY, ...), so neighbouring threads read neighbouring words. The next K slice is loaded into
 * registers while the current one is multiplied. The caller supplies how an element of A and B is read
 * (bounds, layout, widening, a fused input) and what happens to each finished accumulator.
 */

/** One tile shape: the output block of a workgroup (BM x BN), of a thread (TM x TN), and the K slice. */
export interface GemmTile {
  name: string;
  BM: number;
  BN: number;
  TM: number;
  TN: number;
  BK: number;
}

/** The code of one tile; `tid`, `tx`, `ty`, `m0`, `n0`, `k0` and `kEnd` are the caller's names. */
export interface TileCode {
  /** Threads per workgroup, and the thread grid's width (tx = tid % WX, ty = tid / WX). */
  threads: number;
  WX: number;
  /** Module-scope declarations: the workgroup tiles. */
  shared: string;
  /** Function-scope declarations: accumulators and the prefetch registers. */
  locals: string;
  /** Loads the K slice at k0 into the prefetch registers. */
  load: string;
  /** Writes the prefetch registers into the workgroup tiles (between barriers). */
  stage: string;
  /** One K step (kk) of the multiply over the staged tiles. */
  step: string;
  /** The finished accumulators: `acc` a vec4 of columns n..n+3 of row m. */
  outputs: { m: string; n: string; acc: string }[];
}

/**
 * `a(m, k)` and `b(k, n)` are WGSL expressions of one element (0 outside the matrix or past kEnd); `aFast`
 * / `bFast` say which coordinate is contiguous in memory, so a tile load walks it across threads.
 */
export function registerTile(t: GemmTile, a: (m: string, k: string) => string, b: (k: string, n: string) => string, aFast: "m" | "k", bFast: "n" | "k"): TileCode {
  const { BM, BN, TM, TN, BK } = t;
  const WX = BN / TN;
  const WY = BM / TM;
  const NT = WX * WY;
  const PA = (BK * BM) / 4 / NT;
  const PB = (BK * BN) / 4 / NT;
  // the (k, vec4 group) a thread's p-th load covers, walking the fast coordinate across threads
  const slot = (p: number, fastIsK: boolean, width: number): [string, string] => {
    const e = `(tid + ${NT * p}u)`;
    return fastIsK ? [`${e} % ${BK}u`, `${e} / ${BK}u`] : [`${e} / ${width / 4}u`, `${e} % ${width / 4}u`];
  };
  const locals: string[] = [];
  const load: string[] = [];
  const stage: string[] = [];
  for (let p = 0; p < PA; p++) {
    const [k, g] = slot(p, aFast === "k", BM);
    locals.push(`var ra${p} : vec4<f32>;`);
    load.push(`{ let k = k0 + ${k}; let m = m0 + 4u * (${g}); ra${p} = vec4<f32>(${a("m", "k")}, ${a("m + 1u", "k")}, ${a("m + 2u", "k")}, ${a("m + 3u", "k")}); }`);
    stage.push(`As[(${k}) * ${BM / 4}u + ${g}] = ra${p};`);
  }
  for (let p = 0; p < PB; p++) {
    const [k, g] = slot(p, bFast === "k", BN);
    locals.push(`var rb${p} : vec4<f32>;`);
    load.push(`{ let k = k0 + ${k}; let n = n0 + 4u * (${g}); rb${p} = vec4<f32>(${b("k", "n")}, ${b("k", "n + 1u")}, ${b("k", "n + 2u")}, ${b("k", "n + 3u")}); }`);
    stage.push(`Bs[(${k}) * ${BN / 4}u + ${g}] = rb${p};`);
  }
  const GI = TM / 4;
  const GJ = TN / 4;
  for (let r = 0; r < TM; r++) for (let j = 0; j < GJ; j++) locals.push(`var c${r}_${j} = vec4<f32>(0.0);`);
  const step: string[] = [];
  for (let i = 0; i < GI; i++) step.push(`let a${i} = As[kk * ${BM / 4}u + ty + ${WY * i}u];`);
  for (let j = 0; j < GJ; j++) step.push(`let b${j} = Bs[kk * ${BN / 4}u + tx + ${WX * j}u];`);
  const outputs: TileCode["outputs"] = [];
  for (let i = 0; i < GI; i++) {
    for (let c = 0; c < 4; c++) {
      const r = 4 * i + c;
      for (let j = 0; j < GJ; j++) {
        step.push(`c${r}_${j} = fma(vec4<f32>(a${i}[${c}]), b${j}, c${r}_${j});`);
        outputs.push({ m: `m0 + 4u * (ty + ${WY * i}u) + ${c}u`, n: `n0 + 4u * (tx + ${WX * j}u)`, acc: `c${r}_${j}` });
      }
    }
  }
  return {
    threads: NT,
    WX,
    shared: `var<workgroup> As : array<vec4<f32>, ${(BK * BM) / 4}>;\nvar<workgroup> Bs : array<vec4<f32>, ${(BK * BN) / 4}>;`,
    locals: locals.join("\n"),
    load: load.join("\n"),
    stage: stage.join("\n"),
    step: step.join("\n"),
    outputs,
  };
}
