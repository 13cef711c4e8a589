/** Writing a file so that a reader (or a crash) never sees half of it: a temp file beside it, renamed over it. */
import { renameSync, writeFileSync } from "node:fs";

/** Writes `data` to `path` atomically (the temp file is `<path>.tmp-<pid>`, so two processes never share one). */
export function writeFileAtomic(path: string, data: string | NodeJS.ArrayBufferView): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, data);
  renameSync(tmp, path);
}
