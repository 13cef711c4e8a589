/**
 * Rotary position embeddings in the Hugging Face half-split layout: frequencies are laid out as
 * concat(freqs, freqs) over the head dimension and the rotation pairs dimension j with j + d/2, not
 * neighbouring dimensions. Angles are rounded to float32 the way transformers computes them.
 */
import type { RopeScaling } from "./config.js";

/** Returns the d/2 inverse frequencies theta^(-2j/d), adjusted for linear or llama3 scaling. */
export function inverseFrequencies(headDim: number, theta: number, scaling: RopeScaling): Float32Array {
  const half = headDim / 2;
  const inv = new Float32Array(half);
  for (let j = 0; j < half; j++) inv[j] = 1 / Math.pow(theta, Math.fround((2 * j) / headDim));
  if (scaling.type === "linear") for (let j = 0; j < half; j++) inv[j] = inv[j] / scaling.factor!;
  if (scaling.type === "llama3") {
    const factor = scaling.factor!;
    const low = scaling.lowFreqFactor!;
    const high = scaling.highFreqFactor!;
    const old = scaling.originalMaxPositions!;
    const lowWavelen = old / low;
    const highWavelen = old / high;
    for (let j = 0; j < half; j++) {
      const f = inv[j];
      const wavelen = (2 * Math.PI) / f;
      if (wavelen > lowWavelen) inv[j] = f / factor;
      else if (wavelen >= highWavelen) {
        const smooth = (old / wavelen - low) / (high - low);
        inv[j] = (1 - smooth) * (f / factor) + smooth * f;
      }
    }
  }
  return inv;
}

/**
 * Returns cos and sin tables of shape [positions.length, headDim] (flattened) for the given absolute
 * positions, in the half-split layout.
 */
export function rotaryTables(positions: ArrayLike<number>, invFreq: Float32Array): { cos: Float32Array; sin: Float32Array } {
  const half = invFreq.length;
  const d = half * 2;
  const cos = new Float32Array(positions.length * d);
  const sin = new Float32Array(positions.length * d);
  for (let i = 0; i < positions.length; i++) {
    const p = positions[i];
    for (let j = 0; j < half; j++) {
      const angle = Math.fround(p * invFreq[j]);
      const c = Math.cos(angle);
      const s = Math.sin(angle);
      cos[i * d + j] = c;
      cos[i * d + j + half] = c;
      sin[i * d + j] = s;
      sin[i * d + j + half] = s;
    }
  }
  return { cos, sin };
}
