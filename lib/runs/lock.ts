/**
 * One writer per file or folder: a lock file naming its holder by pid, the process's start time and the
 * machine's boot id. Two runs appending to one rows file would both fill the same missing samples; two
 * trainers in one output folder would interleave their logs and overwrite each other's checkpoints.
 *
 * A lock is stale when its holder no longer runs: its pid is gone, or the pid now belongs to another
 * process (a different start time, or the machine rebooted since). A stale lock is taken over atomically:
 * it is renamed aside and only the process whose rename moved that very file (same inode) removes it, so
 * two processes taking over one dead holder's lock never both end up holding it. A lock file is created
 * with its content in place (written to a temp file, then hard-linked), so it is never seen empty.
 */
import { closeSync, linkSync, openSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { randomBytes } from "node:crypto";
import { T2sError } from "../core/errors.js";

/** Who holds a lock. `start` and `boot` are null where /proc does not tell them (not Linux). */
export interface LockHolder {
  pid: number;
  start: string | null;
  boot: string | null;
}

function readProc(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

/** The boot id of this machine (Linux), so a lock from before a reboot is never mistaken for a live one. */
function bootId(): string | null {
  return readProc("/proc/sys/kernel/random/boot_id")?.trim() || null;
}

/** A process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or null when unknown. */
export function processStart(pid: number): string | null {
  const stat = readProc(`/proc/${pid}/stat`);
  if (!stat) return null;
  // the command name (field 2) is in parentheses and may hold spaces: count fields after its closing one
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return fields[19] ?? null;
}

function pidRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** This process as a lock holder. */
export function currentHolder(): LockHolder {
  return { pid: process.pid, start: processStart(process.pid), boot: bootId() };
}

/** Parses a lock file's text: JSON {pid, start, boot}, or a bare pid (older locks); null when unreadable. */
function parseHolder(text: string): LockHolder | null {
  const t = text.trim();
  if (/^\d+$/.test(t)) return { pid: Number(t), start: null, boot: null };
  try {
    const v = JSON.parse(t) as Partial<LockHolder>;
    if (typeof v.pid === "number" && Number.isInteger(v.pid) && v.pid > 0) {
      return { pid: v.pid, start: typeof v.start === "string" ? v.start : null, boot: typeof v.boot === "string" ? v.boot : null };
    }
  } catch {
    // not a lock this kit wrote
  }
  return null;
}

/** Whether `holder` is a process running now (not a reused pid, not a previous boot). */
export function holderAlive(holder: LockHolder): boolean {
  if (holder.boot && bootId() && holder.boot !== bootId()) return false;
  if (!pidRuns(holder.pid)) return false;
  if (holder.start) {
    const now = processStart(holder.pid);
    if (now !== null && now !== holder.start) return false;
  }
  return true;
}

/** Creates `path` holding `content`, failing with EEXIST when it exists; never leaves it empty or half-written. */
function createWithContent(path: string, content: string): void {
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  const fd = openSync(tmp, "wx");
  try {
    writeSync(fd, content);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(tmp, path);
  } finally {
    unlinkSync(tmp);
  }
}

/**
 * Removes `path` only if it is still the file that was judged stale (same inode and same content, since a
 * freed inode is soon reused): renamed aside first, so a fresh lock another process created meanwhile is
 * put back untouched.
 */
function removeIfSame(path: string, ino: number, text: string): void {
  const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    renameSync(path, aside);
  } catch {
    return; // gone already: another process took it over first
  }
  if (statSync(aside).ino === ino && readFileSync(aside, "utf8") === text) {
    unlinkSync(aside);
    return;
  }
  try {
    linkSync(aside, path); // someone's fresh lock: restore it
  } catch {
    // a third process created one in the instant it was aside; theirs stands
  }
  unlinkSync(aside);
}

/**
 * Removes the temp files killed processes left beside `path`: `<path>.tmp-PID` (atomic writes, such as a
 * rows file's sidecar) and `<path>.tmp-PID-*` / `<path>.stale-PID-*` (lock takers), each only when its pid
 * no longer runs, so a write in progress is never touched.
 */
export function removeDeadTemps(path: string): void {
  const dir = dirname(path);
  const base = basename(path);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const n of names) {
    const m = n.startsWith(base) ? /^\.(?:tmp|stale)-(\d+)(?:-[0-9a-f]+)?$/.exec(n.slice(base.length)) : null;
    if (m && !pidRuns(Number(m[1]))) {
      try {
        unlinkSync(join(dir, n));
      } catch {
        // removed by another process
      }
    }
  }
}

/**
 * Takes the lock file `lockPath` for this process and returns its release function; throws
 * T2sError("busy") naming `what` when a live process holds it.
 */
export function takeLock(lockPath: string, what: string): () => void {
  removeDeadTemps(lockPath);
  const me = currentHolder();
  const content = JSON.stringify(me) + "\n";
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      createWithContent(lockPath, content);
      return () => {
        try {
          const h = parseHolder(readFileSync(lockPath, "utf8"));
          if (h && h.pid === me.pid && h.start === me.start) unlinkSync(lockPath);
        } catch {
          // already gone
        }
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    let text: string;
    let ino: number;
    try {
      ino = statSync(lockPath).ino;
      text = readFileSync(lockPath, "utf8");
    } catch {
      continue; // removed meanwhile: try again
    }
    const holder = parseHolder(text);
    if (holder && holderAlive(holder)) {
      const who = holder.pid === me.pid ? "this process" : `process ${holder.pid}`;
      throw new T2sError("busy", `${what} is in use by ${who} (lock ${lockPath}); wait for it or stop it (a lock left by a process that no longer runs is taken over)`);
    }
    removeIfSame(lockPath, ino, text); // stale (dead holder, reused pid, empty or foreign content)
  }
  throw new T2sError("busy", `could not take the lock ${lockPath}; another process keeps taking it`);
}

/** Takes the lock of `rowsPath` (`<rows>.lock`) and returns its release function. */
export function lockRows(rowsPath: string): () => void {
  return takeLock(`${rowsPath}.lock`, rowsPath);
}
