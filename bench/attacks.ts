/**
 * `npm run bench:attacks`: how `t2s serve` answers GET /health while clients attack its runtime adapter
 * route. The server runs as its own process (`--enable-lora-updating --lora-root ROOT`) over a model
 * folder; for each case a client sends the load `--rounds` times in a row while a poller sends /health back
 * to back, and the table gives the load's answer, its time, /health p50/p95/max over the case and the
 * server's peak RSS during it and RSS after it (a load that hangs is reported as a timeout after 300 s). The cases are issue 46's adapter-file attacks (symlinked weights and config,
 * paths outside the root, /dev/zero, FIFOs, a 512 MB file), then real adapters: one at rank 256 (the
 * default --max-lora-rank) loaded and unloaded, and one of about 512 MB (rank 7168), refused by the rank
 * cap and then, on a second server started with --max-lora-rank 8192, loaded and unloaded.
 * Options:
 *   --model <dir>     base model folder (default data/models/shop-sql-4m)
 *   --backend <name>  the server's tfjs backend (default wasm)
 *   --rounds <n>      attempts per case (default 10; the 512 MB load runs 2)
 *   --cases <ids>     only these cases, comma-separated (default all): idle, weights-link, config-link,
 *                     outside-file, outside-folder, outside-missing, zero-config, fifo-weights, fifo-config,
 *                     sparse, r256, big, big-raised
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { closeSync, cpSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { kitPath } from "../lib/core/paths.js";
import { readConfig, expectedShapes } from "../lib/model/config.js";
import { loraKey } from "../lib/model/lora.js";
import { flag, intFlag, printTable } from "./args.js";

const model = flag("--model") ?? kitPath("data", "models", "shop-sql-4m");
const backend = flag("--backend") ?? "wasm";
const rounds = intFlag("--rounds", 10);
const cases = flag("--cases")?.split(",");
const want = (id: string) => !cases || cases.includes(id);
const MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

async function startServe(args: string[]): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [kitPath("bin", "t2s.js"), "serve", "--model", model, "--port", "0", "--backend", backend, "--enable-lora-updating", ...args], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /at (http:\/\/\S+)\/v1/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on("exit", (code) => reject(new Error(`t2s serve exited ${code}: ${out}`)));
  });
  return { url, child };
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Writes a PEFT adapter of rank `r` on every module of the base, streaming tensor by tensor (small values). */
function writeAdapter(dir: string, r: number): number {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "adapter_config.json"), JSON.stringify({ peft_type: "LORA", r, lora_alpha: r, target_modules: MODULES }));
  const c = readConfig(model);
  const shapes = expectedShapes(c);
  const entries: [string, number[]][] = [];
  for (let l = 0; l < c.numLayers; l++) {
    for (const m of MODULES) {
      const [out, inp] = shapes.get(`model.layers.${l}.${m === "gate_proj" || m === "up_proj" || m === "down_proj" ? "mlp" : "self_attn"}.${m}.weight`)!;
      entries.push([loraKey(l, m, "A"), [r, inp]], [loraKey(l, m, "B"), [out, r]]);
    }
  }
  entries.sort(([a], [b]) => (a < b ? -1 : 1));
  const header: Record<string, unknown> = {};
  let offset = 0;
  for (const [k, shape] of entries) {
    const bytes = shape[0] * shape[1] * 4;
    header[k] = { dtype: "F32", shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += " ";
  const fd = openSync(join(dir, "adapter_model.safetensors"), "w");
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeSync(fd, len);
  writeSync(fd, json);
  for (const [, shape] of entries) writeSync(fd, Buffer.from(new Float32Array(shape[0] * shape[1]).fill(1e-4).buffer));
  closeSync(fd);
  return 8 + json.length + offset;
}

function pct(xs: number[], p: number): number {
  const v = [...xs].sort((a, b) => a - b);
  return v.length ? v[Math.min(v.length - 1, Math.floor((p / 100) * v.length))] : NaN;
}

/** Polls /health back to back, keeping each latency in ms, until stopped. */
function poller(url: string, pid: number): { take: () => number[]; peakRss: () => number; stop: () => Promise<void> } {
  let running = true;
  let lat: number[] = [];
  let peak = 0;
  const loop = (async () => {
    while (running) {
      const t0 = performance.now();
      try {
        const r = await fetch(`${url}/health`);
        await r.arrayBuffer();
      } catch {
        // no answer within undici's 300 s: the time it waited counts, and polling goes on
      }
      lat.push(performance.now() - t0);
      peak = Math.max(peak, rssMb(pid));
    }
  })();
  return {
    take: () => {
      const out = lat;
      lat = [];
      return out;
    },
    peakRss: () => {
      const p = peak;
      peak = 0;
      return p;
    },
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

/** A load that takes longer than this is reported as a timeout (the server is then stuck, e.g. in open()). */
const LOAD_TIMEOUT_MS = 300_000;

async function post(url: string, path: string, body: unknown): Promise<{ status: number | "timeout"; code: string; ms: number }> {
  const t0 = performance.now();
  try {
    const r = await fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: AbortSignal.timeout(LOAD_TIMEOUT_MS) });
    const text = await r.text();
    let code = r.status === 200 ? "ok" : "";
    try {
      const e = (JSON.parse(text) as { error: { code?: string; param?: string } }).error;
      code ||= e.code ?? e.param ?? "";
    } catch {
      code ||= text.slice(0, 20);
    }
    return { status: r.status, code, ms: performance.now() - t0 };
  } catch {
    return { status: "timeout", code: "", ms: performance.now() - t0 };
  }
}

const rows: string[][] = [];

/** Sends the load `n` times (an adapter that loads is unloaded again) and adds the case's row. */
async function runCase(server: { url: string; child: ChildProcess }, poll: ReturnType<typeof poller>, name: string, path: string, n: number): Promise<void> {
  poll.take();
  poll.peakRss();
  const times: number[] = [];
  let answer = "";
  for (let i = 0; i < n; i++) {
    const r = await post(server.url, "/v1/load_lora_adapter", { lora_name: "a", lora_path: path });
    times.push(r.ms);
    answer = `${r.status} ${r.code}`;
    if (r.status === 200) await post(server.url, "/v1/unload_lora_adapter", { lora_name: "a" });
  }
  const lat = poll.take();
  rows.push([name, answer, String(n), pct(times, 50).toFixed(0), lat.length ? pct(lat, 50).toFixed(1) : "-", lat.length ? pct(lat, 95).toFixed(1) : "-", lat.length ? Math.max(...lat).toFixed(1) : "-", String(lat.length), poll.peakRss().toFixed(0), rssMb(server.child.pid!).toFixed(0)]);
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), "t2s-bench-root-"));
  const outside = mkdtempSync(join(tmpdir(), "t2s-bench-outside-"));
  try {
    const r256 = writeAdapter(join(root, "r256"), 256);
    const big = writeAdapter(join(root, "big"), 7168);
    const link = (name: string, file: string, target: string) => {
      cpSync(join(root, "r256"), join(root, name), { recursive: true });
      rmSync(join(root, name, file));
      symlinkSync(target, join(root, name, file));
    };
    writeFileSync(join(outside, "secret.txt"), "root:x:0:0:secret\n");
    cpSync(join(root, "r256"), join(outside, "adapter"), { recursive: true });
    link("weights-link", "adapter_model.safetensors", join(outside, "adapter", "adapter_model.safetensors"));
    link("config-link", "adapter_config.json", join(outside, "secret.txt"));
    link("zero-config", "adapter_config.json", "/dev/zero");
    for (const [name, file] of [["fifo-weights", "adapter_model.safetensors"], ["fifo-config", "adapter_config.json"]]) {
      cpSync(join(root, "r256"), join(root, name), { recursive: true });
      rmSync(join(root, name, file));
      execFileSync("mkfifo", [join(root, name, file)]);
    }
    mkdirSync(join(root, "sparse"));
    writeFileSync(join(root, "sparse", "adapter_config.json"), readFileSync(join(root, "r256", "adapter_config.json")));
    execFileSync("truncate", ["-s", "512M", join(root, "sparse", "adapter_model.safetensors")]);

    const server = await startServe(["--lora-root", root]);
    const poll = poller(server.url, server.child.pid!);
    try {
      poll.take();
      await new Promise((r) => setTimeout(r, 2000));
      const idle = poll.take();
      if (want("idle")) rows.push(["none (2 s of /health alone)", "", "0", "-", pct(idle, 50).toFixed(1), pct(idle, 95).toFixed(1), Math.max(...idle).toFixed(1), String(idle.length), poll.peakRss().toFixed(0), rssMb(server.child.pid!).toFixed(0)]);
      if (want("weights-link")) await runCase(server, poll, "weights symlinked outside", join(root, "weights-link"), rounds);
      if (want("config-link")) await runCase(server, poll, "config symlinked to a secret", join(root, "config-link"), rounds);
      if (want("outside-file")) await runCase(server, poll, "outside: a file", "/etc/passwd", rounds);
      if (want("outside-folder")) await runCase(server, poll, "outside: a folder (an adapter)", join(outside, "adapter"), rounds);
      if (want("outside-missing")) await runCase(server, poll, "outside: nothing", "/no/such/path", rounds);
      if (want("zero-config")) await runCase(server, poll, "config -> /dev/zero", join(root, "zero-config"), rounds);
      if (want("fifo-weights")) await runCase(server, poll, "weights a FIFO", join(root, "fifo-weights"), rounds);
      if (want("fifo-config")) await runCase(server, poll, "config a FIFO", join(root, "fifo-config"), rounds);
      if (want("sparse")) await runCase(server, poll, "512 MB file, not safetensors", join(root, "sparse"), rounds);
      if (want("r256")) await runCase(server, poll, `rank 256 adapter (${(r256 / 2 ** 20).toFixed(0)} MB), load+unload`, join(root, "r256"), rounds);
      if (want("big")) await runCase(server, poll, `rank 7168 adapter (${(big / 2 ** 20).toFixed(0)} MB), default caps`, join(root, "big"), rounds);
    } finally {
      await poll.stop();
      server.child.kill("SIGTERM");
    }
    if (!want("big-raised")) return report();
    const raised = await startServe(["--lora-root", root, "--max-lora-rank", "8192"]);
    const poll2 = poller(raised.url, raised.child.pid!);
    try {
      await runCase(raised, poll2, `rank 7168 adapter, --max-lora-rank 8192, load+unload`, join(root, "big"), Math.min(rounds, 2));
      await new Promise((r) => setTimeout(r, 3000));
      rows.push(["  (3 s after the last unload)", "", "", "", "", "", "", "", "", rssMb(raised.child.pid!).toFixed(0)]);
    } finally {
      await poll2.stop();
      raised.child.kill("SIGTERM");
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  }
  report();
}

function report(): void {
  process.stdout.write(`t2s serve over ${model} (backend ${backend}), --lora-root; each case ${rounds} loads in a row while GET /health is polled back to back\n\n`);
  printTable(["case", "answer", "loads", "load p50 ms", "/health p50 ms", "p95 ms", "max ms", "/health answers", "peak RSS MB", "RSS after MB"], rows);
}

await main();
