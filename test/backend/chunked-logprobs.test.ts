/**
 * Chunked log-probs (logit_chunk_tokens) on WebGPU, where the fused log-prob, LoRA linear and attention
 * kernels run: loss, entropies and gradients equal the whole projection's (LoRA on float32 and 16-bit
 * bases, every weight), for chunk sizes that do not divide the scored positions, and no logits tensor larger
 * than one chunk's exists. test/train/chunked-logprobs.test.ts checks the CPU and wasm backends.
 *
 * It needs a WebGPU adapter; without a GPU, Mesa's software Vulkan driver provides one:
 *   bash scripts/lavapipe.sh run node scripts/run-tests.mjs test/backend/chunked-logprobs.test.ts
 * When no adapter can be created the tests are skipped with the reason.
 */
import { before, test } from "node:test";
import { startWebgpu } from "./kernel-support.js";
import { checkChunkedMatchesWhole } from "../train/chunked-support.js";

let reason: string | null = null;

before(async () => {
  reason = await startWebgpu();
});

for (const mode of ["lora", "lora-bf16", "full"] as const) {
  test(`webgpu: chunked log-probs give the whole projection's loss and ${mode} gradients`, async (t) => {
    if (reason) return t.skip(reason);
    await checkChunkedMatchesWhole(mode);
  });
}
