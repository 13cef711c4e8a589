/**
 * A real concurrent writer of a WAL-mode SQLite database, in its own process, for the tests of reading live
 * databases. It keeps the database open (so its -wal and -shm files exist, as with any live writer) and
 * takes commands on stdin, one per line, answering each on stdout:
 *   add N       one transaction of N rows, all of one batch; answers "done <rows now>"
 *   churn B     keeps committing: each transaction adds a batch of B rows and deletes the oldest batch
 *               beyond `keep`, so every committed state has a multiple of B rows, in whole batches; answers
 *               "churning" at once
 *   stop        ends the churn; answers "stopped <transactions>"
 * Table t(batch INTEGER, pad BLOB): the pads make pages turn over, so checkpoints run while readers read.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { kitPath } from "../../lib/core/paths.js";

const SCRIPT = `
const Database = require(process.env.BS3);
const db = new Database(process.env.DB);
db.pragma("journal_mode = WAL");
db.pragma("wal_autocheckpoint = " + Number(process.env.CHECKPOINT));
db.exec("CREATE TABLE IF NOT EXISTS t (batch INTEGER, pad BLOB)");
const pad = Number(process.env.PAD);
const insert = db.prepare("INSERT INTO t VALUES (?, randomblob(?))");
let batch = db.prepare("SELECT coalesce(max(batch), 0) FROM t").pluck().get();
const add = db.transaction((n) => { batch++; for (let i = 0; i < n; i++) insert.run(batch, pad); });
const keep = Number(process.env.KEEP);
const churn = db.transaction((n) => { add(n); db.prepare("DELETE FROM t WHERE batch <= ?").run(batch - keep); });
let churning = false, txs = 0;
const loop = (n) => { if (!churning) return; churn(n); txs++; setImmediate(loop, n); };
require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const [cmd, arg] = line.trim().split(" ");
  if (cmd === "add") { add(Number(arg)); console.log("done " + db.prepare("SELECT count(*) FROM t").pluck().get()); }
  else if (cmd === "churn") { churning = true; txs = 0; console.log("churning"); setImmediate(loop, Number(arg)); }
  else if (cmd === "stop") { churning = false; console.log("stopped " + txs); }
});
process.stdin.on("end", () => { db.close(); process.exit(0); });
`;

export interface WalWriter {
  child: ChildProcess;
  /** Sends one command and resolves with its answer line. */
  send(command: string): Promise<string>;
  /** Closes the database (a clean close checkpoints and removes -wal and -shm) and waits for the exit. */
  close(): Promise<void>;
}

export interface WalWriterOptions {
  /** Keep every commit in the -wal file (no automatic checkpoint). */
  noCheckpoint?: boolean;
  /** Pages in the -wal file that start an automatic checkpoint (SQLite's default 1000). */
  checkpointPages?: number;
  /** Bytes of random padding per row. */
  padBytes?: number;
  /** Batches a churn keeps (default 20). */
  keep?: number;
}

/** Starts a writer on `path` (created when missing). */
export function startWalWriter(path: string, opts: WalWriterOptions = {}): WalWriter {
  const child = spawn(process.execPath, ["-e", SCRIPT], {
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, BS3: kitPath("node_modules", "better-sqlite3"), DB: path, CHECKPOINT: String(opts.noCheckpoint ? 0 : opts.checkpointPages ?? 1000), PAD: String(opts.padBytes ?? 0), KEEP: String(opts.keep ?? 20) },
  });
  const lines = createInterface({ input: child.stdout! });
  const waiting: Array<(line: string) => void> = [];
  lines.on("line", (line) => waiting.shift()?.(line));
  return {
    child,
    send(command) {
      return new Promise((resolve) => {
        waiting.push(resolve);
        child.stdin!.write(command + "\n");
      });
    },
    close() {
      return new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.stdin!.end();
      });
    },
  };
}
