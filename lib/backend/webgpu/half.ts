/**
 * 16-bit values in 32-bit words, as both kernel families read them: element 2j in the low half of word j,
 * element 2j+1 in the high half (a little-endian checkpoint's bytes as they are). bf16 to f32 is a 16-bit
 * shift and f16 goes through WGSL's unpack2x16float: both exact, neither needs the shader-f16 feature.
 */
export type Half = "bf16" | "f16";

/** The WGSL expression widening half `which` (0 low, 1 high) of the u32 `word` to f32. */
export function widenWgsl(dtype: Half, word: string, which: string): string {
  return dtype === "bf16"
    ? `bitcast<f32>(select(${word} << 16u, ${word} & 0xffff0000u, ${which} == 1u))`
    : `select(unpack2x16float(${word}).x, unpack2x16float(${word}).y, ${which} == 1u)`;
}
