/**
 * Tensors made resident on the device at once. tfjs-backend-webgpu keeps a new tensor's values in host
 * memory until a kernel first reads it, so a model loaded tensor by tensor would otherwise sit whole in
 * host memory (and its staging buffers whole in device memory) until the first step. Uploading and
 * submitting per tensor keeps host memory near the largest tensor while loading.
 */
import { tf } from "./tf.js";

interface WebgpuUploader {
  uploadToGPU(dataId: object): void;
  submitQueue(): void;
  commandEncoder: unknown;
}

/** Returns `t` with its data on the device now (a no-op on other backends). */
export function uploadNow<T extends tf.Tensor>(t: T): T {
  if (tf.getBackend() !== "webgpu") return t;
  const gpu = tf.backend() as unknown as WebgpuUploader;
  gpu.uploadToGPU(t.dataId);
  // the staging buffer goes with the submit
  if (gpu.commandEncoder) gpu.submitQueue();
  return t;
}
