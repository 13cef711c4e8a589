/** `t2s env serve`: the verifier, the SQL tool and task prompts as an HTTP service for outside trainers. */
import type { Command } from "commander";
import { cpus } from "node:os";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { UsageError } from "../core/errors.js";
import { kitPath } from "../core/paths.js";
import type { Task } from "../tasks/types.js";
import { addGradingOptions, defaultsFrom } from "./grade.js";
import { collect, intOption, numberOption, oneOf } from "./options.js";
import { MAX_IDLE_CONNECTIONS } from "../envserve/access.js";
import { CONNECTION_LIMITS } from "../serve/http-guard.js";
import { SHUTDOWN_TIMEOUT_S } from "../serve/shutdown.js";
import { MAX_GRADE_ITEMS } from "../envserve/limits.js";
import { MAX_TOOL_CALLS, QUERY_TIMEOUT_MS, TOOL_CHARS, TOOL_ROWS } from "../core/defaults.js";

interface EnvServeFlags {
  port: number;
  host: string;
  apiKey?: string;
  tasks: string[];
  dbRoot: string[];
  preset: string;
  dialect: string;
  distinct: string;
  order?: string;
  round?: string;
  text?: string;
  suiteDir?: string;
  numericText?: boolean;
  neighbors: number;
  neighborSeed: number;
  timeoutMs: number;
  maxRows?: number;
  workers?: number;
  toolWorkers: number;
  maxIdleConnections: number;
  maxConnections: number;
  requestTimeout: number;
  allowedHost: string[];
  shutdownTimeout: number;
  concurrency?: number;
  maxItems: number;
  style: string;
  protocol: string;
  maxToolCalls: number;
  toolRows: number;
  toolChars: number;
  toolTruncate: string;
  toolTimeoutMs: number;
}

/** Adds `t2s env serve` to the program. */
export function registerEnv(program: Command): void {
  const env = program.command("env").description("the kit's environment (verifier, SQL tool, prompts) as a service for other trainers");
  const serve = env
    .command("serve")
    .description("serve batch grading, the read-only SQL tool and task prompts over HTTP (see docs/integrations.md)")
    .option("--port <n>", "port to listen on (0 = any free port)", intOption("--port", 0, 65535), 8100)
    .option("--host <host>", "interface to listen on (off loopback --api-key is required)", "127.0.0.1")
    .option("--api-key <key>", "answer only requests with 'Authorization: Bearer KEY' (default: $T2S_API_KEY; an empty key is refused)")
    .option("--allowed-host <name>", "without a key, also answer requests whose Host header names this (repeatable; '*' = any); by default only localhost, 127.0.0.1 and [::1], against DNS rebinding", collect, [])
    .option("--tasks <file>", "task file whose ids requests may name (repeatable; default data/shop/tasks.jsonl)", collect, [])
    .option("--db-root <dir>", "a folder whose SQLite files requests may name by path (repeatable; default: only the tasks' databases)", collect, []);
  // the grading flags of `t2s grade` (an item's own fields override them)
  addGradingOptions(serve)
    .option("--workers <n>", "SQL worker processes (default: number of CPUs, at most 4)", intOption("--workers", 1))
    .option("--tool-workers <n>", "SQL worker processes of tool queries, apart from grading's", intOption("--tool-workers", 1), 1)
    .option("--max-idle-connections <n>", "open connections with no request in flight kept at most; the oldest idle ones are closed past it", intOption("--max-idle-connections", 1), MAX_IDLE_CONNECTIONS)
    .option("--max-connections <n>", "open connections at most, busy ones included; past it the one doing no work for the longest (idle, or still sending its request) is closed, else the new one gets a 503", intOption("--max-connections", 1), CONNECTION_LIMITS.maxConnections)
    .option("--request-timeout <s>", "seconds a request's body may take to arrive after its headers (a slow body is cut like slow headers)", numberOption("--request-timeout", { gt: 0 }), CONNECTION_LIMITS.requestMs / 1000)
    .option("--shutdown-timeout <s>", "on SIGTERM/SIGINT, seconds requests in flight (grades) may take to finish before they are cut; a second signal cuts at once", intOption("--shutdown-timeout", 0), SHUTDOWN_TIMEOUT_S)
    .option("--concurrency <n>", "grades in flight at once, shared among clients in turn (default 8 per worker)", intOption("--concurrency", 1))
    .option("--max-items <n>", "grade items one request may carry (a larger batch is a 400 naming this limit)", intOption("--max-items", 1), MAX_GRADE_ITEMS)
    .option("--style <style>", "prompt the service renders: single or tool", "single")
    .option("--protocol <p>", "tool style: native (OpenAI tool_calls) or hermes (<tool_call> text)", "native")
    .option("--max-tool-calls <n>", "tool calls per episode said in the tool prompt", intOption("--max-tool-calls", 0), MAX_TOOL_CALLS)
    .option("--tool-rows <n>", "rows a tool result shows at most", intOption("--tool-rows", 1), TOOL_ROWS)
    .option("--tool-chars <n>", "characters of a tool result kept when cut in the middle", intOption("--tool-chars", 16), TOOL_CHARS)
    .option("--tool-truncate <mode>", "middle (head ...(truncated)... tail) or rows (whole rows only)", "middle")
    .option("--tool-timeout-ms <n>", "stop a tool query after this many milliseconds", intOption("--tool-timeout-ms", 1), QUERY_TIMEOUT_MS)
    .action(async (f: EnvServeFlags) => {
      const defaults = defaultsFrom(f);
      const { serviceApiKey } = await import("../envserve/access.js");
      const apiKey = serviceApiKey(f.host, f.apiKey);
      const style = oneOf("--style", f.style, ["single", "tool"] as const);
      const protocol = oneOf("--protocol", f.protocol, ["native", "hermes"] as const);
      const mode = oneOf("--tool-truncate", f.toolTruncate, ["middle", "rows"] as const);
      const files = f.tasks.length ? f.tasks.map((p) => resolve(p)) : [kitPath("data", "shop", "tasks.jsonl")];
      for (const file of files) if (!existsSync(file)) throw new UsageError(`--tasks ${file} does not exist`);
      const { loadTasks } = await import("../tasks/loaders.js");
      const tasks: Task[] = files.flatMap((file) => loadTasks(file));
      const { ExecutorPool } = await import("../db/pool.js");
      const { EnvService } = await import("../envserve/service.js");
      const { startEnvServer } = await import("../envserve/server.js");
      const pool = new ExecutorPool({ workers: f.workers ?? Math.min(4, Math.max(1, cpus().length)) });
      // tool queries get workers of their own: runaway tool queries wait on each other, never on grading
      const toolPool = new ExecutorPool({ workers: f.toolWorkers, startOnDemand: true });
      try {
        const service = new EnvService({
          executor: pool, toolExecutor: toolPool, tasks, dbRoots: f.dbRoot, defaults, concurrency: f.concurrency, maxItems: f.maxItems,
          line: { timeoutMs: f.timeoutMs, maxRows: f.maxRows, neighborSeed: f.neighborSeed, suiteDir: f.suiteDir },
          prompt: { style, protocol, maxToolCalls: f.maxToolCalls },
          toolOutput: { maxRows: f.toolRows, maxChars: f.toolChars, mode }, toolTimeoutMs: f.toolTimeoutMs,
        });
        const server = await startEnvServer({
          service, port: f.port, host: f.host, maxIdleConnections: f.maxIdleConnections, allowedHosts: f.allowedHost, shutdownTimeoutMs: f.shutdownTimeout * 1000,
          connections: { maxConnections: f.maxConnections, requestMs: f.requestTimeout * 1000 }, ...(apiKey !== undefined ? { apiKey } : {}),
        });
        process.stdout.write(`env service at ${server.url} (${tasks.length} tasks, ${pool.size} SQL workers + ${toolPool.size} for tools, preset ${defaults.preset}, ${style} prompts${apiKey !== undefined ? ", API key required" : ""})\n`);
        const { serveUntilSignal } = await import("../serve/shutdown.js");
        await serveUntilSignal(server, { timeoutSeconds: f.shutdownTimeout });
      } finally {
        await Promise.all([pool.close(), toolPool.close()]);
      }
    });
}
