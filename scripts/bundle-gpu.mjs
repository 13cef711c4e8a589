#!/usr/bin/env node
// `npm run bundle:gpu [-- --out DIR] [--node] [--pack] [--no-data]`: a self-contained folder that runs `t2s train|benchmark|serve`
// and the generate/train benches on an offline Linux x64 NVIDIA host with no npm:
//   t2s.mjs, bench-{generate,train,optimizer,decode-gpu,kernels,grpo-update,serve}.mjs   the kit bundled by esbuild (ESM, platform node)
//   lib/serve/engine-thread/worker.mjs              t2s serve's engine thread, bundled
//   lib/db/worker-boot.cjs                          the SQL worker, bundled (replaces the tsx shim)
//   node_modules/                                   the native and dynamically imported packages, pruned
//   lib/db/shop/, data/                             files the kit reads at run time
//   node.xz (with --node)                           this machine's node binary, xz-compressed
//   run.sh                                          sets up Vulkan + node there, then runs a command
// With --pack it also writes <out>.tar.xz, the one file to copy to the host.
// See environment.md, "GPU host".
import { build } from "esbuild";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { execFileSync } from "node:child_process";

const root = process.cwd();
const args = process.argv.slice(2);
const outArg = args.indexOf("--out");
const out = outArg >= 0 ? args[outArg + 1] : join(root, "out", "gpu-bundle");
const withNode = args.includes("--node");
const pack = args.includes("--pack");
// --no-data: leave data/ out (about 23 MiB); link the checkout's data/ beside the entries on the host instead
const withData = !args.includes("--no-data");

// Packages kept outside the bundle: native modules, and tfjs, whose backends are imported by name at run
// time and must share one tfjs-core instance with the kit.
const EXTERNAL = ["better-sqlite3", "webgpu", "@tensorflow/tfjs-core", "@tensorflow/tfjs-backend-cpu", "@tensorflow/tfjs-backend-wasm", "@tensorflow/tfjs-backend-webgpu", "@tensorflow/tfjs-node", "@tensorflow/tfjs-node-gpu", "playwright-core"];

// What of each external package travels: its package.json plus these paths.
const KEEP = {
  "better-sqlite3": ["lib", "build/Release/better_sqlite3.node"],
  bindings: ["bindings.js"],
  "file-uri-to-path": ["index.js"],
  webgpu: ["index.js", "dist/index.js", "dist/linux-x64/dawn.node"],
  "@tensorflow/tfjs-core": ["dist/tf-core.node.js"],
  "@tensorflow/tfjs-backend-cpu": ["dist/tf-backend-cpu.node.js"],
  "@tensorflow/tfjs-backend-wasm": ["dist/tf-backend-wasm.node.js", "dist/tfjs-backend-wasm.wasm", "dist/tfjs-backend-wasm-simd.wasm", "dist/tfjs-backend-wasm-threaded-simd.wasm"],
  "@tensorflow/tfjs-backend-webgpu": ["dist/tf-backend-webgpu.node.js"],
  seedrandom: ["."],
  long: ["."],
  "node-fetch": ["."],
  "whatwg-url": ["."],
  tr46: ["."],
  "webidl-conversions": ["."],
};

const banner = [
  'import { createRequire as __t2sCreateRequire } from "node:module";',
  'import { fileURLToPath as __t2sFileURLToPath } from "node:url";',
  "const require = __t2sCreateRequire(import.meta.url);",
  "const __filename = __t2sFileURLToPath(import.meta.url);",
  'const __dirname = __t2sFileURLToPath(new URL(".", import.meta.url));',
].join("\n");

const zeromqAbsent = {
  name: "zeromq-absent",
  setup(b) {
    b.onResolve({ filter: /^zeromq$/ }, () => ({ path: join(root, "scripts/bundle/zeromq-absent.cjs") }));
  },
};

function copyPackage(name, paths) {
  const from = join(root, "node_modules", name);
  if (!existsSync(from)) throw new Error(`bundle:gpu: node_modules/${name} is missing; run npm ci first`);
  const to = join(out, "node_modules", name);
  mkdirSync(to, { recursive: true });
  cpSync(join(from, "package.json"), join(to, "package.json"));
  for (const p of paths) {
    if (!existsSync(join(from, p))) continue; // optional files (e.g. webgpu's dist/index.js)
    mkdirSync(dirname(join(to, p)), { recursive: true });
    cpSync(join(from, p), join(to, p), { recursive: true });
  }
}

function folderBytes(dir) {
  let n = 0;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const s = statSync(p);
    n += s.isDirectory() ? folderBytes(p) : s.size;
  }
  return n;
}

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

await build({
  entryPoints: { t2s: "scripts/bundle/entry-t2s.ts", "bench-generate": "bench/generate.ts", "bench-train": "bench/train.ts", "bench-optimizer": "bench/optimizer.ts", "bench-decode-gpu": "bench/decode-gpu.ts", "bench-kernels": "bench/kernels.ts", "bench-gemm": "bench/gemm-int8.ts", "bench-grpo-update": "bench/grpo-update.ts", "bench-serve": "bench/serve.ts",
    // t2s serve's engine thread: the same path as the source tree's shim (lib/serve/engine-thread/worker.mjs),
    // which the bundled worker replaces
    "lib/serve/engine-thread/worker": "lib/serve/engine-thread/worker-main.ts", "bench-update-memory": "bench/update-memory.ts" },
  outdir: out,
  outExtension: { ".js": ".mjs" },
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  external: EXTERNAL,
  plugins: [zeromqAbsent],
  banner: { js: banner },
  logLevel: "warning",
});
// the SQL worker runs as its own process; bundled as CommonJS it needs no tsx hook
await build({
  entryPoints: ["lib/db/worker.ts"],
  outfile: join(out, "lib/db/worker-boot.cjs"),
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20",
  external: EXTERNAL,
  logLevel: "warning",
});

for (const [name, paths] of Object.entries(KEEP)) copyPackage(name, paths);
cpSync(join(root, "lib/db/shop"), join(out, "lib/db/shop"), { recursive: true, filter: (p) => !p.endsWith(".ts") });
if (withData) cpSync(join(root, "data"), join(out, "data"), { recursive: true });
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
writeFileSync(join(out, "package.json"), JSON.stringify({ name: pkg.name, version: pkg.version, type: "module", private: true }, null, 2) + "\n");

writeFileSync(
  join(out, "run.sh"),
  `#!/usr/bin/env bash
# Runs a bundled entry on an offline Linux NVIDIA host: unpacks the Vulkan loader debs given in
# T2S_DEBS (a folder) if libvulkan is missing, points the loader at the NVIDIA driver, unpacks node.xz.
#   bash run.sh t2s.mjs train grpo --config cfg.json
#   bash run.sh bench-generate.mjs --qwen05b --backend webgpu
# T2S_NODE_ARGS is passed to node first (e.g. "--cpu-prof --cpu-prof-dir=prof" for a V8 CPU profile).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! ldconfig -p 2>/dev/null | grep -q libvulkan.so.1 && [ -n "\${T2S_DEBS:-}" ]; then
  for f in "$T2S_DEBS"/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
if [ -z "\${VK_DRIVER_FILES:-}" ]; then
  for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    if [ -f "$icd" ]; then export VK_DRIVER_FILES="$icd"; break; fi
  done
fi
node_bin="$(command -v node || true)"
if [ -z "$node_bin" ]; then
  node_bin="\${TMPDIR:-/tmp}/t2s-node"
  # unpacked once, under a name of its own then renamed: several commands may start at once
  if [ ! -x "$node_bin" ]; then
    xz -dc "$here/node.xz" > "$node_bin.$$" && chmod +x "$node_bin.$$" && mv -f "$node_bin.$$" "$node_bin"
  fi
fi
export T2S_ROOT="$here"
entry="$1"; shift
exec "$node_bin" \${T2S_NODE_ARGS:-} "$here/$entry" "$@"
`,
);

if (withNode) {
  const xz = join(root, "out", "node.xz");
  // compressing node takes a minute or two; reuse it while the binary is unchanged
  if (!existsSync(xz) || statSync(xz).mtimeMs < statSync(process.execPath).mtimeMs) {
    mkdirSync(dirname(xz), { recursive: true });
    writeFileSync(xz, execFileSync("xz", ["-T0", "-6", "-c", process.execPath], { maxBuffer: 512 * 1024 * 1024 }));
  }
  cpSync(xz, join(out, "node.xz"));
}

const mb = (folderBytes(out) / (1024 * 1024)).toFixed(1);
process.stdout.write(`bundle:gpu: wrote ${out} (${mb} MiB${withNode ? ", node included" : ""})\n`);
if (pack) {
  execFileSync("tar", ["-C", dirname(out), "-cJf", `${out}.tar.xz`, "--", out.split("/").pop()]);
  process.stdout.write(`bundle:gpu: packed ${out}.tar.xz (${(statSync(`${out}.tar.xz`).size / (1024 * 1024)).toFixed(1)} MiB)\n`);
}
