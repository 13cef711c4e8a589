/**
 * Without a Vulkan loader Dawn prints a multi-line "Couldn't load Vulkan" warning with a stack location
 * on stderr: the kit does not start Dawn there, so `auto` moves on silently and an explicit `webgpu` is one
 * error line. The child processes run without LD_LIBRARY_PATH and VK_DRIVER_FILES, so a loader unpacked
 * into a private folder (CI's lavapipe) is out of their sight.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { NO_VULKAN_LOADER, softwareDriverOnly, useBackend, vulkanLoaderFound } from "../../lib/backend/select.js";
import { HANG_GUARD_MS, runCli } from "../helpers.js";
import { fixtureDir } from "../model/fixtures.js";

const noPrivateLoader = { LD_LIBRARY_PATH: "", VK_DRIVER_FILES: "" };
const systemLoader = vulkanLoaderFound({ ...process.env, ...noPrivateLoader });

test("the loader is looked for on LD_LIBRARY_PATH, in the linker's cache and the usual folders, on Linux only", () => {
  const fs = (files: string[], cache = "") => ({ exists: (p: string) => files.includes(p), read: () => cache });
  assert.equal(vulkanLoaderFound({ LD_LIBRARY_PATH: "/opt/lvp/lib:/x" }, "linux", fs(["/opt/lvp/lib/libvulkan.so.1"])), true);
  assert.equal(vulkanLoaderFound({}, "linux", fs(["/usr/lib/x86_64-linux-gnu/libvulkan.so.1"])), true);
  assert.equal(vulkanLoaderFound({}, "linux", fs([], "\u0000libvulkan.so.1\u0000/lib/x86_64-linux-gnu/libvulkan.so.1")), true);
  assert.equal(vulkanLoaderFound({ LD_LIBRARY_PATH: "/opt/lvp/lib" }, "linux", fs([], "\u0000libz.so.1\u0000")), false);
  assert.equal(vulkanLoaderFound({}, "linux", { exists: () => false, read: () => { throw new Error("no cache"); } }), false);
  assert.equal(vulkanLoaderFound({}, "darwin", fs([])), true);
});

test("auto does not start Dawn when VK_DRIVER_FILES names only a software driver", async () => {
  assert.equal(softwareDriverOnly({ VK_DRIVER_FILES: "/opt/lvp/lvp_icd.json" }), "/opt/lvp/lvp_icd.json");
  assert.equal(softwareDriverOnly({ VK_ICD_FILENAMES: "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json" }), "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json");
  assert.equal(softwareDriverOnly({ VK_DRIVER_FILES: "/opt/lvp/lvp_icd.json:/usr/share/vulkan/icd.d/nvidia_icd.json" }), null);
  assert.equal(softwareDriverOnly({}), null);
  const saved = process.env.VK_DRIVER_FILES;
  process.env.VK_DRIVER_FILES = "/nowhere/lvp_icd.json";
  try {
    const choice = await useBackend("auto");
    if (systemLoader || vulkanLoaderFound()) assert.match(choice.skipped.webgpu ?? "", /only a software Vulkan driver \(VK_DRIVER_FILES=\/nowhere\/lvp_icd\.json\)/);
    assert.notEqual(choice.backend, "webgpu");
  } finally {
    if (saved === undefined) delete process.env.VK_DRIVER_FILES;
    else process.env.VK_DRIVER_FILES = saved;
  }
});

test("probing for a GPU prints no Dawn warning; asking for webgpu without a loader is one error line", { timeout: HANG_GUARD_MS }, async () => {
  const auto = await runCli(["logits", "--model", fixtureDir("qwen2"), "--ids", "1,2,3", "--backend", "auto", "--json"], { env: noPrivateLoader });
  assert.equal(auto.code, 0, auto.stderr);
  assert.doesNotMatch(auto.stderr, /Couldn't load Vulkan|BackendVk/);
  const gpu = await runCli(["logits", "--model", fixtureDir("qwen2"), "--ids", "1,2,3", "--backend", "webgpu", "--json"], { env: noPrivateLoader });
  assert.doesNotMatch(gpu.stderr, /Couldn't load Vulkan|BackendVk/);
  if (!systemLoader) {
    assert.equal(gpu.code, 1);
    assert.equal(gpu.stderr.trim(), `error [backend_unavailable]: backend webgpu is not available: ${NO_VULKAN_LOADER}`);
  }
});
