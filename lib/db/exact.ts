/**
 * Opening exactly the file that was checked. A service that allows only databases under some folders
 * resolves a requested path (symbolic links included) and checks where it lands; if the file were then
 * opened by the requested path, or even by the resolved one, whoever can write in an allowed folder could
 * swap a link (or a folder for a link) between the check and the open and have a file outside read. So a
 * checked path is marked exact here: it is already resolved, and every open of it in this process (the
 * schema reader) and in the executor pool's workers (the pool passes the mark with each query) is verified
 * after the fact, on Linux through /proc/self/fd: every file SQLite opened for it (the database, its -wal and
 * -shm) must be that very path, with no link anywhere in it; otherwise the connection is closed and refused.
 * Elsewhere the resolved path is compared before and after the open.
 */
import { readdirSync, readlinkSync, realpathSync } from "node:fs";
import { basename } from "node:path";

/** Paths marked exact in this process (real paths of files that exist). */
const exactPaths = new Set<string>();
/** Marks kept at most; past it the oldest are dropped (a dropped path is checked again by the service when asked for). */
const MAX_EXACT_PATHS = 100_000;

/** Marks `realPath` (an already resolved path that passed a check) to be opened exactly, in this process and its pool's workers. */
export function markExact(realPath: string): void {
  exactPaths.delete(realPath);
  exactPaths.add(realPath);
  if (exactPaths.size > MAX_EXACT_PATHS) exactPaths.delete(exactPaths.values().next().value as string);
}

/** Whether `path` must be opened exactly. */
export function isExact(path: string): boolean {
  return exactPaths.has(path);
}

/** What the file descriptor `fd` of this process points at now (the kernel's path, no link in it), or null once closed. */
function target(fd: string): string | null {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return null;
  }
}

/**
 * The descriptors open in this process now, each with what it points at, or null where /proc/self/fd is not
 * available. (Listing the folder opens a descriptor of its own, closed again at once; its number may be the
 * next one SQLite gets, which is why what a descriptor points at is kept, not only its number.)
 */
export function openDescriptors(): Map<string, string | null> | null {
  let fds: string[];
  try {
    fds = readdirSync("/proc/self/fd");
  } catch {
    return null;
  }
  return new Map(fds.map((fd) => [fd, target(fd)]));
}

/**
 * Why the files opened since `before` (openDescriptors() taken just before SQLite opened `path`) are not
 * exactly `path` and its -wal and -shm, or null when they are. Without /proc, whether `path` still resolves
 * to itself.
 */
export function notOpenedExactly(path: string, before: Map<string, string | null> | null): string | null {
  if (before === null) {
    let real: string;
    try {
      real = realpathSync(path);
    } catch (e) {
      return (e as Error).message;
    }
    return real === path ? null : `it now resolves to ${real}`;
  }
  const now = openDescriptors() ?? new Map<string, string | null>();
  const mine = new Set([path, `${path}-wal`, `${path}-shm`]);
  const stem = basename(path);
  let found = false;
  for (const [fd, to] of now) {
    // unchanged since before the open (not SQLite's), or closed again meanwhile (not a file SQLite keeps)
    if (to === null || before.get(fd) === to) continue;
    if (to === path) found = true;
    else if (!mine.has(to) && basename(to).startsWith(stem)) return "a file it opened is not at the path that was checked";
  }
  return found ? null : "the file it opened is not at the path that was checked";
}
