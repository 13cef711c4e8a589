/**
 * One writer per rows file: a `<rows>.lock` file holding the writer's pid. Two runs appending to the same
 * file at once would both fill the same missing samples; a lock left by a killed process (its pid no
 * longer runs) is taken over.
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { T2sError } from "../core/errors.js";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Takes the lock of `rowsPath` and returns its release function; throws T2sError("busy") when a live process holds it. */
export function lockRows(rowsPath: string): () => void {
  const path = `${rowsPath}.lock`;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, "wx");
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          if (readFileSync(path, "utf8").trim() === String(process.pid)) unlinkSync(path);
        } catch {
          // already gone
        }
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      let holder = NaN;
      try {
        holder = Number(readFileSync(path, "utf8").trim());
      } catch {
        continue; // removed meanwhile: try again
      }
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) {
        throw new T2sError("busy", `${rowsPath} is being written by process ${holder}; wait for it or stop it (a lock left by a dead process is taken over)`);
      }
      try {
        unlinkSync(path); // stale: its writer is gone
      } catch {
        // someone else took it over first; the next attempt sees theirs
      }
    }
  }
  throw new T2sError("busy", `could not take the lock ${path}`);
}
