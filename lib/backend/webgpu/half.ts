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

/** The WGSL expression widening both halves of the u32 `word` to a vec2<f32> (low half first). */
export function widen2Wgsl(dtype: Half, word: string): string {
  return dtype === "bf16" ? `vec2<f32>(bitcast<f32>(${word} << 16u), bitcast<f32>(${word} & 0xffff0000u))` : `unpack2x16float(${word})`;
}

/** Largest finite f16: values past it are clamped to it rather than left to pack2x16float, whose result there is undefined. */
const F16_MAX = 65504;

/**
 * A WGSL function `name(lo : f32, hi : f32) -> u32` narrowing two f32 values into one word, rounding to
 * nearest (bf16: ties to even on the bits, as safetensors.ts writes bf16; f16: pack2x16float, with values
 * clamped to f16's finite range).
 */
export function narrowFnWgsl(dtype: Half, name: string): string {
  if (dtype === "f16") return `fn ${name}(lo : f32, hi : f32) -> u32 { return pack2x16float(clamp(vec2<f32>(lo, hi), vec2<f32>(-${F16_MAX}.0), vec2<f32>(${F16_MAX}.0))); }`;
  return `fn ${name}(lo : f32, hi : f32) -> u32 {
  let a = bitcast<u32>(lo);
  let b = bitcast<u32>(hi);
  return ((a + 0x7fffu + ((a >> 16u) & 1u)) >> 16u) | (((b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u) << 16u);
}`;
}
