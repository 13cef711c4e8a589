/**
 * A client for one tslab kernel process: it writes a connection file, starts `tslab kernel` directly
 * (no Jupyter, no Python), and talks to it over the five ZeroMQ channels — shell and control (DEALER),
 * iopub (SUB), stdin (DEALER, never asked for input), heartbeat (REQ).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Dealer, Request, Subscriber } from "zeromq";
import { T2sError } from "../core/errors.js";
import { kitPath } from "../core/paths.js";
import { decode, encode, newMessage, randomId, type JupyterMessage } from "./protocol.js";

export interface KernelStartOptions {
  /** Working directory of the kernel (imports like "./lib/x.js" resolve from here). */
  cwd: string;
  /** Extra environment variables for the kernel process. */
  env?: Record<string, string>;
  /** How long to wait for the kernel to answer kernel_info and the heartbeat (default KERNEL_START_TIMEOUT_MS). */
  startTimeoutMs?: number;
}

/**
 * A hang guard for a kernel's start: tslab answers within seconds on an idle machine, but compiling its
 * TypeScript service on a machine that shares one core among many processes takes minutes.
 */
export const KERNEL_START_TIMEOUT_MS = 600_000;

export interface ExecuteOutcome {
  /** The execute_reply content, or null when the kernel never replied (timeout, death). */
  reply: Record<string, unknown> | null;
  timedOut: boolean;
  /** Set when the kernel process exited while the cell ran. */
  died?: string;
}

interface Pending {
  reply?: Record<string, unknown>;
  idle: boolean;
  onIopub: (msg: JupyterMessage) => void;
  done: () => void;
}

const IP = "127.0.0.1";

async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: n }, () =>
      new Promise<import("node:net").Server>((resolve, reject) => {
        const s = createServer();
        s.once("error", reject);
        s.listen(0, IP, () => resolve(s));
      }),
    ),
  );
  const ports = servers.map((s) => {
    const a = s.address();
    return typeof a === "object" && a ? a.port : 0;
  });
  await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  return ports;
}

/** Resolves with p's value, or undefined after ms; the timer never outlives the race. */
async function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)));
  try {
    return await Promise.race([p, limit]);
  } finally {
    clearTimeout(timer);
  }
}

class PortTakenError extends Error {}

/** A running tslab kernel and the sockets connected to it. */
export class TslabKernel {
  readonly session = randomId();
  kernelInfo: Record<string, unknown> = {};
  private readonly key = randomId(32);
  private readonly shell = new Dealer({ routingId: `t2s-${this.session.slice(0, 12)}`, linger: 0 });
  private readonly control = new Dealer({ linger: 0 });
  private readonly stdin = new Dealer({ routingId: `t2s-${this.session.slice(0, 12)}`, linger: 0 });
  private readonly iopub = new Subscriber({ linger: 0 });
  private readonly hb = new Request({ linger: 0 });
  private readonly pending = new Map<string, Pending>();
  /** Output handlers of finished cells: output a cell's timers print later still belongs to that cell. */
  private readonly late = new Map<string, (msg: JupyterMessage) => void>();
  private readonly replies = new Map<string, (content: Record<string, unknown>) => void>();
  private child: ChildProcess | undefined;
  private exitInfo: string | undefined;
  private exited: Promise<void> = Promise.resolve();
  private processLog = "";
  private dir = "";
  private closed = false;
  private readonly killOnExit = () => {
    this.child?.kill("SIGKILL");
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  };
  private iopubSeen = false;

  private constructor() {}

  /** Starts a kernel and resolves once it answers on shell and iopub (throws T2sError otherwise). */
  static async start(opts: KernelStartOptions): Promise<TslabKernel> {
    for (let attempt = 1; ; attempt++) {
      const k = new TslabKernel();
      try {
        await k.launch(opts);
        return k;
      } catch (e) {
        await k.shutdown();
        // the free ports were picked before the kernel bound them; another process may have won one
        if (!(e instanceof PortTakenError) || attempt >= 3) throw e instanceof PortTakenError ? k.startError(e.message) : e;
      }
    }
  }

  private async launch(opts: KernelStartOptions): Promise<void> {
    const ports = await freePorts(5);
    const conn = {
      transport: "tcp", ip: IP, signature_scheme: "hmac-sha256", key: this.key, kernel_name: "tslab",
      shell_port: ports[0], iopub_port: ports[1], stdin_port: ports[2], control_port: ports[3], hb_port: ports[4],
    };
    this.dir = mkdtempSync(join(tmpdir(), "t2s-kernel-"));
    const connFile = join(this.dir, "connection.json");
    writeFileSync(connFile, JSON.stringify(conn), { mode: 0o600 });

    const child = spawn(process.execPath, [kitPath("node_modules", "tslab", "bin", "tslab"), "kernel", "--config-path", connFile], {
      cwd: opts.cwd,
      env: { ...process.env, ...opts.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    process.on("exit", this.killOnExit);
    const keep = (d: Buffer) => (this.processLog = (this.processLog + d.toString()).slice(-8000));
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        this.exitInfo = signal ? `signal ${signal}` : `exit code ${code}`;
        process.off("exit", this.killOnExit);
        for (const p of this.pending.values()) p.done();
        resolve();
      });
      child.once("error", (e) => {
        this.exitInfo = `could not start: ${e.message}`;
        resolve();
      });
    });

    const url = (port: number) => `tcp://${IP}:${port}`;
    this.shell.connect(url(conn.shell_port));
    this.control.connect(url(conn.control_port));
    this.stdin.connect(url(conn.stdin_port));
    this.iopub.connect(url(conn.iopub_port));
    this.iopub.subscribe();
    this.hb.connect(url(conn.hb_port));
    void this.readLoop(this.shell);
    void this.readLoop(this.control);
    void this.iopubLoop();

    // A SUB socket misses what was published before it joined, so keep asking for kernel_info until both
    // the reply (shell) and a status message (iopub) have arrived: from then on no output is lost.
    const startTimeoutMs = opts.startTimeoutMs ?? KERNEL_START_TIMEOUT_MS;
    const deadline = Date.now() + startTimeoutMs;
    let info: Record<string, unknown> | undefined;
    while (!info || !this.iopubSeen) {
      if (/EADDRINUSE|Address already in use/i.test(this.processLog)) throw new PortTakenError("a port in the connection file was already in use");
      if (this.exitInfo) throw this.startError(`the kernel process ended (${this.exitInfo})`);
      if (Date.now() > deadline) throw this.startError(`the kernel did not answer within ${startTimeoutMs} ms`);
      const got = await this.request(this.shell, "kernel_info_request", {}, 500);
      if (got) info = got;
    }
    this.kernelInfo = info;
    if (!(await this.heartbeat(startTimeoutMs))) throw this.startError("the kernel did not answer on the heartbeat channel");
  }

  private startError(why: string): T2sError {
    const log = this.processLog.trim();
    return new T2sError("kernel_start", `could not start the tslab kernel: ${why}${log ? `\nkernel output:\n${log}` : ""}`);
  }

  private async readLoop(sock: Dealer): Promise<void> {
    try {
      for await (const frames of sock) {
        const msg = this.safeDecode(frames);
        const parent = msg?.parent_header.msg_id;
        if (!msg || !parent) continue;
        const waiter = this.replies.get(parent);
        if (waiter) {
          this.replies.delete(parent);
          waiter(msg.content);
        }
        const p = this.pending.get(parent);
        if (p && msg.header.msg_type === "execute_reply") {
          p.reply = msg.content;
          if (p.idle) p.done();
        }
      }
    } catch {
      // the socket was closed
    }
  }

  private async iopubLoop(): Promise<void> {
    try {
      for await (const frames of this.iopub) {
        const msg = this.safeDecode(frames);
        if (!msg) continue;
        this.iopubSeen = true;
        const parent = msg.parent_header.msg_id ?? "";
        const p = this.pending.get(parent);
        if (!p) {
          if (msg.header.msg_type !== "status") this.late.get(parent)?.(msg);
          continue;
        }
        if (msg.header.msg_type === "status" && msg.content.execution_state === "idle") {
          p.idle = true;
          if (p.reply) p.done();
        } else {
          p.onIopub(msg);
        }
      }
    } catch {
      // the socket was closed
    }
  }

  private safeDecode(frames: Buffer[]): JupyterMessage | null {
    try {
      return decode(this.key, frames);
    } catch (e) {
      this.processLog += `\n[t2s] dropped a kernel message: ${(e as Error).message}`;
      return null;
    }
  }

  /** Sends a request and waits up to timeoutMs for its reply content (null on timeout). */
  private async request(sock: Dealer, type: string, content: Record<string, unknown>, timeoutMs: number): Promise<Record<string, unknown> | null> {
    const msg = newMessage(this.session, type, content);
    const answer = new Promise<Record<string, unknown> | null>((resolve) => {
      const timer = setTimeout(() => {
        this.replies.delete(msg.header.msg_id);
        resolve(null);
      }, timeoutMs);
      this.replies.set(msg.header.msg_id, (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    await sock.send(encode(this.key, msg));
    return answer;
  }

  private async heartbeat(timeoutMs: number): Promise<boolean> {
    const ping = Buffer.from(randomId(8));
    await this.hb.send(ping);
    const echo = await within(this.hb.receive().then((f) => f[0]), timeoutMs);
    return echo !== undefined && echo.equals(ping);
  }

  /**
   * Runs one cell: every iopub message for it goes to onIopub, in order. Resolves when the kernel has both
   * replied and gone idle, when timeoutMs passes (the kernel is interrupted first), or when it dies.
   */
  async execute(code: string, onIopub: (msg: JupyterMessage) => void, timeoutMs = 0): Promise<ExecuteOutcome> {
    if (this.exitInfo) return { reply: null, timedOut: false, died: this.exitInfo };
    const msg = newMessage(this.session, "execute_request", {
      code, silent: false, store_history: true, user_expressions: {}, allow_stdin: false, stop_on_error: true,
    });
    let finish: () => void = () => {};
    const finished = new Promise<void>((r) => (finish = r));
    const p: Pending = { idle: false, onIopub, done: () => finish() };
    this.pending.set(msg.header.msg_id, p);
    await this.shell.send(encode(this.key, msg));
    let timedOut = false;
    if (timeoutMs > 0) {
      await within(finished, timeoutMs);
      if (!p.reply || !p.idle) {
        timedOut = !this.exitInfo;
        // tslab turns SIGINT into a rejected promise (async cells) or a break (sync loops)
        if (timedOut) this.child?.kill("SIGINT");
        await within(finished, 3000);
      }
    } else {
      await finished;
    }
    this.pending.delete(msg.header.msg_id);
    this.late.set(msg.header.msg_id, onIopub);
    const died = p.reply ? undefined : this.exitInfo;
    return { reply: p.reply ?? null, timedOut, died };
  }

  /** The last few kB the kernel process wrote outside any cell (start-up problems, crashes). */
  processOutput(): string {
    return this.processLog;
  }

  /** Asks the kernel to shut down (control channel), then kills it if it lingers; closes sockets. Never throws. */
  async shutdown(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.child && !this.exitInfo) {
      try {
        await this.request(this.control, "shutdown_request", { restart: false }, 2000);
      } catch {
        // the kernel may already be gone
      }
      await within(this.exited, 1000);
      if (!this.exitInfo) {
        // user code can keep the event loop alive (timers, servers) after tslab closes its sockets
        this.child.kill("SIGKILL");
        await within(this.exited, 2000);
      }
    }
    process.off("exit", this.killOnExit);
    for (const s of [this.shell, this.control, this.stdin, this.iopub, this.hb]) {
      try {
        s.close();
      } catch {
        // already closed
      }
    }
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}
