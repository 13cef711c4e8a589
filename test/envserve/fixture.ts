/** Starting a real `t2s env serve` child on loopback for the tests, and the shop tasks they use. */
import { spawn, type ChildProcess } from "node:child_process";
import { after } from "node:test";
import { ExecutorPool } from "../../lib/db/pool.js";
import { EnvService } from "../../lib/envserve/service.js";
import { startEnvServer, type RunningEnvServer } from "../../lib/envserve/server.js";
import { HANG_GUARD_MS, t2sBin } from "../helpers.js";
import { kitPath } from "../../lib/core/paths.js";
import { readTasks } from "../../lib/tasks/io.js";
import type { Task } from "../../lib/tasks/types.js";

export const shopTasksFile = kitPath("data", "shop", "tasks.jsonl");

/** The shipped shop tasks (db_path absolute). */
export function shopTasks(): Task[] {
  return readTasks(shopTasksFile);
}

export interface EnvChild {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Spawns `t2s env serve --port 0 ...args` and resolves once it prints its URL. */
export function startEnvChild(args: string[] = [], timeoutMs = HANG_GUARD_MS): Promise<EnvChild> {
  // a T2S_API_KEY of the calling shell would make the service ask the tests for it
  const child = spawn(process.execPath, [t2sBin, "env", "serve", "--port", "0", ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, T2S_API_KEY: "" } });
  let out = "";
  let err = "";
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
    });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`t2s env serve did not start within ${timeoutMs} ms: ${err}`));
    }, timeoutMs);
    child.stderr!.on("data", (d) => (err += d));
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /env service at (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ url: m[1], child, stop });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`t2s env serve exited with ${code}: ${err}`));
    });
  });
}

/** POSTs (or GETs, without a body) JSON and returns the status and parsed body. */
export async function call(url: string, path: string, body?: unknown, raw?: string): Promise<{ status: number; json: any; text: string }> {
  const res = await fetch(url + path, body === undefined && raw === undefined ? {} : { method: "POST", body: raw ?? JSON.stringify(body), headers: { "content-type": "application/json" } });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, json, text };
}

/**
 * An in-process env server with no tasks over `dbRoots` (`workers` SQL workers and one spare), started on
 * first use and closed after the file's tests. Returns its URL getter.
 */
export function lazyEnvServer(dbRoots: string[], workers: number): () => Promise<string> {
  const pool = new ExecutorPool({ workers, spareWorkers: 1 });
  const service = new EnvService({ executor: pool, tasks: [], dbRoots });
  let server: RunningEnvServer | undefined;
  after(async () => {
    await server?.close();
    await pool.close();
  });
  return async () => (server ??= await startEnvServer({ service, port: 0 })).url;
}
