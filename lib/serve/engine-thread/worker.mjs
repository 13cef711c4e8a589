// Entry of `t2s serve`'s engine thread (thread.ts starts it). Plain JavaScript so it starts the same from
// the sources, dist/ and the GPU bundle: it runs the compiled worker-main.js when `t2s` runs from dist/
// (bin/t2s.js sets T2S_DIST), else worker-main.ts through tsx's scoped loader (tsImport: a worker does not
// inherit the loader hooks its parent registered). The GPU bundle replaces this file with the bundled worker.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const dist = process.env.T2S_DIST;
const compiled = dist ? join(dist, "lib", "serve", "engine-thread", "worker-main.js") : null;
if (compiled && existsSync(compiled)) {
  await import(pathToFileURL(compiled).href);
} else {
  const { tsImport } = await import("tsx/esm/api");
  await tsImport("./worker-main.ts", import.meta.url);
}
