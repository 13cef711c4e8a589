/**
 * Who may ask the environment service for what: the databases a request may name (the task set's own
 * files and the files under the `--db-root` folders, nothing else on the host), and the API key a request
 * must carry when one is set. A service on a non-loopback interface without a key is refused at start,
 * because any host that reaches it could otherwise read every database it allows.
 */
import { realpathSync, statSync } from "node:fs";
import { isAbsolute, relative, resolve, sep } from "node:path";
import { settingFromEnv } from "../core/defaults.js";
import { UsageError } from "../core/errors.js";
import { apiKeyOption, isLoopback, keyMatches } from "../serve/http-guard.js";
import { BadRequest } from "./errors.js";

/** Connections with no request in flight env serve keeps at most (the oldest idle ones are closed past it). */
export const MAX_IDLE_CONNECTIONS = 256;

/** The real path of `p`, or its absolute path when it does not exist (so a missing file is still judged by place). */
function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
}

/** The databases requests may name: exact task files plus everything under the root folders. */
export class DatabaseRoots {
  private readonly files = new Set<string>();
  private readonly roots: string[] = [];

  constructor(taskDbPaths: Iterable<string>, rootDirs: string[] = []) {
    for (const p of taskDbPaths) this.files.add(real(p));
    for (const d of rootDirs) {
      let isDir = false;
      try {
        isDir = statSync(d).isDirectory();
      } catch {
        isDir = false;
      }
      if (!isDir) throw new UsageError(`--db-root ${d} is not a folder`);
      this.roots.push(real(d));
    }
  }

  /** The resolved (real) path of `path`, the one that was checked and must be opened, or a 403 naming the allowed places when it lies outside them. */
  check(path: string): string {
    const abs = resolve(path);
    const r = real(abs);
    if (this.files.has(r)) return r;
    for (const root of this.roots) {
      const rel = relative(root, r);
      if (rel !== "" && !rel.startsWith(".." + sep) && rel !== ".." && !isAbsolute(rel)) return r;
    }
    const where = this.roots.length ? ` or under ${this.roots.join(", ")}` : "";
    throw new BadRequest(`database ${path} is not one the service serves: only the task set's databases${where} (start it with --db-root DIR to allow a folder)`, 403);
  }
}

/** True for the loopback names and addresses, where only this host can connect (the servers' one rule). */
export function isLoopbackHost(host: string): boolean {
  return isLoopback(host);
}

/** The key requests must carry: `--api-key`, else T2S_API_KEY; required off loopback; a blank one is a usage error. */
export function serviceApiKey(host: string, flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const key = flag !== undefined ? apiKeyOption(flag, "--api-key") : apiKeyOption(settingFromEnv("api_key", env) || undefined, "T2S_API_KEY");
  if (key === undefined && !isLoopbackHost(host)) {
    throw new UsageError(`--host ${host} is reachable from other machines: give --api-key KEY (or set T2S_API_KEY) so only clients with the key are answered`);
  }
  return key;
}

/** True when the request's `authorization: Bearer KEY` (or `x-api-key: KEY`) header carries `key`. */
export function hasKey(headers: Record<string, string | string[] | undefined>, key: string): boolean {
  const auth = typeof headers.authorization === "string" ? headers.authorization : "";
  const given = /^Bearer\s+(.+)$/i.exec(auth)?.[1] ?? (typeof headers["x-api-key"] === "string" ? headers["x-api-key"] : "");
  return keyMatches(given, key);
}
