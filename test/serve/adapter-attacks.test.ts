// Runtime adapter loading under attack (issue 46, adapter files): every file an adapter load opens is a
// regular file inside --lora-root, capped in size; one message for every path outside the roots; no file
// content in a message; FIFOs and devices are refused without being opened; loading runs off the event
// loop (a /health poller answers throughout) and unloading releases the adapter's tensors. Each case runs
// against a real server on port 0.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tf } from "../../lib/backend/tf.js";
import { loadModel } from "../../lib/model/load.js";
import type { CausalLM } from "../../lib/model/model.js";
import { mergedModel } from "../../lib/model/lora.js";
import { ADAPTER_LIMITS } from "../../lib/model/lora-read.js";
import { readSafetensors, writeSafetensors } from "../../lib/model/safetensors.js";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import { runCli, scratchDir } from "../helpers.js";
import { fixtureDir } from "../model/fixtures.js";

const SECRET = "root:x:0:0:SECRET-CONTENT-7f3a";
/** Only a hang guard: a load that blocks (a FIFO in open()) must fail the test, never pass it by luck. */
const HANG_GUARD = { timeout: 10 * 60_000 };

let model: CausalLM;
/** A folder of adapters the servers confine to, and one outside it. */
let root: string;
let outside: string;

before(async () => {
  model = await loadModel(fixtureDir("qwen2"), { backend: "cpu", name: "tiny", contextLength: 256 });
  root = scratchDir("t2s-lora-root-");
  outside = scratchDir("t2s-lora-outside-");
  cpSync(fixtureDir("qwen2-lora"), join(outside, "adapter"), { recursive: true });
  writeFileSync(join(outside, "secret.txt"), `${SECRET}\n`);
});

after(() => model.dispose());

/** An adapter folder under the root: the fixture's files, then `change` applied to the folder. */
function adapterInRoot(name: string, change: (dir: string) => void = () => {}): string {
  const dir = join(root, name);
  mkdirSync(dir);
  for (const f of ["adapter_config.json", "adapter_model.safetensors"]) cpSync(join(fixtureDir("qwen2-lora"), f), join(dir, f));
  change(dir);
  return dir;
}

function replaceWithLink(file: string, target: string): void {
  execFileSync("rm", ["-f", file]);
  symlinkSync(target, file);
}

/** Polls GET /health back to back until stopped; `answered` counts the answers. */
function healthPoller(url: string): { answered: () => number; next: () => Promise<void>; stop: () => Promise<void> } {
  let answered = 0;
  let running = true;
  let waiters: (() => void)[] = [];
  const loop = (async () => {
    while (running) {
      const r = await fetch(`${url}/health`);
      assert.equal(r.status, 200);
      await r.arrayBuffer();
      answered++;
      for (const w of waiters.splice(0)) w();
    }
  })();
  return {
    answered: () => answered,
    next: () => new Promise<void>((resolve) => waiters.push(resolve)),
    stop: async () => {
      running = false;
      await loop;
      waiters = [];
    },
  };
}

interface Attempt {
  status: number;
  text: string;
}

/**
 * Posts a load while the poller runs; after the answer, waits for one more /health answer, so an attempt
 * that froze the server (a FIFO in open(), /dev/zero read to the end) never passes.
 */
async function attempt(server: RunningServer, poller: ReturnType<typeof healthPoller>, body: Record<string, unknown>): Promise<Attempt> {
  const r = await fetch(`${server.url}/v1/load_lora_adapter`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const text = await r.text();
  await poller.next();
  return { status: r.status, text };
}

async function withServer(opts: Parameters<typeof startServer>[0], run: (server: RunningServer, poller: ReturnType<typeof healthPoller>) => Promise<void>): Promise<void> {
  const server = await startServer(opts);
  const poller = healthPoller(server.url);
  try {
    await run(server, poller);
  } finally {
    await poller.stop();
    await server.close();
  }
}

test("a symlinked adapter_model.safetensors pointing outside the root is refused, naming no target", HANG_GUARD, async () => {
  const dir = adapterInRoot("weights-link", (d) => replaceWithLink(join(d, "adapter_model.safetensors"), join(outside, "adapter", "adapter_model.safetensors")));
  await withServer({ model, port: 0, allowRuntimeLora: true, loraRoots: [root] }, async (server, poller) => {
    const r = await attempt(server, poller, { lora_name: "x", lora_path: dir });
    assert.equal(r.status, 400, r.text);
    assert.equal(JSON.parse(r.text).error.code, "outside_roots");
    assert.match(r.text, /adapter_model\.safetensors resolves outside the server's adapter folders/);
    assert.ok(!r.text.includes(outside), "the link's target is not named");
    assert.equal((await fetch(`${server.url}/v1/models`).then((x) => x.json()) as { data: unknown[] }).data.length, 1);
  });
});

test("a symlinked adapter_config.json pointing at a secret outside the root: refused, no byte of it in the message", HANG_GUARD, async () => {
  const linked = adapterInRoot("config-link", (d) => replaceWithLink(join(d, "adapter_config.json"), join(outside, "secret.txt")));
  // inside the root, a file that is not JSON is named, but its content is not quoted
  const garbled = adapterInRoot("config-garbled", (d) => writeFileSync(join(d, "adapter_config.json"), `${SECRET}\n`));
  const headerGarbled = adapterInRoot("weights-garbled", (d) => writeFileSync(join(d, "adapter_model.safetensors"), `${SECRET}${"x".repeat(64)}`));
  await withServer({ model, port: 0, allowRuntimeLora: true, loraRoots: [root] }, async (server, poller) => {
    const r = await attempt(server, poller, { lora_name: "x", lora_path: linked });
    assert.equal(r.status, 400);
    assert.equal(JSON.parse(r.text).error.code, "outside_roots");
    const g = await attempt(server, poller, { lora_name: "x", lora_path: garbled });
    assert.equal(g.status, 400);
    assert.match(g.text, /adapter_config\.json: not valid JSON/);
    const h = await attempt(server, poller, { lora_name: "x", lora_path: headerGarbled });
    assert.equal(h.status, 400);
    assert.match(h.text, /adapter_model\.safetensors/);
    for (const [what, text] of [["linked", r.text], ["garbled", g.text], ["garbled header", h.text]]) {
      for (const piece of ["root:x", "SECRET", "7f3a", '"r', "Unexpected token"]) assert.ok(!text.includes(piece), `${what}: '${piece}' in ${text}`);
      // the 8 bytes read as the header length are content too
      assert.ok(!text.includes(String(Buffer.from(SECRET).readBigUInt64LE(0))), `${what}: header length quoted`);
    }
  });
});

test("outside the roots a file, a folder (even a real adapter) and nothing all get one message", HANG_GUARD, async () => {
  await withServer({ model, port: 0, allowRuntimeLora: true, loraRoots: [root] }, async (server, poller) => {
    const paths = [join(outside, "secret.txt"), join(outside, "adapter"), outside, join(outside, "no-such-thing"), "/no/such/folder", "/etc", "/etc/passwd", join(root, "no-such-adapter"), join(root, "..", "x")];
    const messages = new Set<string>();
    for (const path of paths) {
      const r = await attempt(server, poller, { lora_name: "x", lora_path: path });
      assert.equal(r.status, 400, path);
      messages.add(JSON.parse(r.text).error.message.split(path).join("<path>"));
    }
    assert.deepEqual([...messages], ["'<path>' is not an adapter folder under the server's adapter folders (--lora-root)"]);
  });
});

test("FIFOs and devices are refused at once, never opened: adapter files that are a FIFO, a config that is /dev/zero", HANG_GUARD, async () => {
  const fifoWeights = adapterInRoot("fifo-weights", (d) => {
    execFileSync("rm", ["-f", join(d, "adapter_model.safetensors")]);
    execFileSync("mkfifo", [join(d, "adapter_model.safetensors")]);
  });
  const fifoConfig = adapterInRoot("fifo-config", (d) => {
    execFileSync("rm", ["-f", join(d, "adapter_config.json")]);
    execFileSync("mkfifo", [join(d, "adapter_config.json")]);
  });
  const zeroConfig = adapterInRoot("zero-config", (d) => replaceWithLink(join(d, "adapter_config.json"), "/dev/zero"));
  // a FIFO named as the folder itself
  execFileSync("mkfifo", [join(root, "fifo-folder")]);
  for (const roots of [[root], undefined]) {
    await withServer({ model, port: 0, allowRuntimeLora: true, loraRoots: roots }, async (server, poller) => {
      for (const [dir, code] of [[fifoWeights, "not_regular_file"], [fifoConfig, "not_regular_file"], [zeroConfig, roots ? "outside_roots" : "not_regular_file"]] as const) {
        const r = await attempt(server, poller, { lora_name: "x", lora_path: dir });
        assert.equal(r.status, 400, `${dir}: ${r.text}`);
        assert.equal(JSON.parse(r.text).error.code, code, `${dir} (roots ${roots ?? "none"}): ${r.text}`);
      }
      const f = await attempt(server, poller, { lora_name: "x", lora_path: join(root, "fifo-folder") });
      assert.equal(f.status, 400);
    });
  }
});

test("sizes past the caps are refused before they are read: weights, config, rank", HANG_GUARD, async () => {
  const ok = adapterInRoot("ok");
  const weightsBytes = readFileSync(join(ok, "adapter_model.safetensors")).length;
  const configBytes = readFileSync(join(ok, "adapter_config.json")).length;
  const rank = (readSafetensors(join(ok, "adapter_model.safetensors")).values().next().value as { shape: number[] }).shape;
  const r = Math.min(...rank);
  for (const [limits, code] of [[{ weightsBytes: weightsBytes - 1 }, "file_too_large"], [{ configBytes: configBytes - 1 }, "file_too_large"], [{ rank: r - 1 }, "rank_too_large"]] as const) {
    await withServer({ model, port: 0, allowRuntimeLora: true, loraRoots: [root], adapterLoading: { limits } }, async (server, poller) => {
      const a = await attempt(server, poller, { lora_name: "x", lora_path: ok });
      assert.equal(a.status, 400, a.text);
      assert.equal(JSON.parse(a.text).error.code, code, a.text);
      assert.match(a.text, /--max-lora-(bytes|config-bytes|rank) raises it/);
    });
  }
  // at the caps it loads
  await withServer({ model, port: 0, allowRuntimeLora: true, loraRoots: [root], adapterLoading: { limits: { weightsBytes, configBytes, rank: r } } }, async (server, poller) => {
    assert.equal((await attempt(server, poller, { lora_name: "x", lora_path: ok })).status, 200);
  });
});

test("a large adapter loads off the event loop (/health answers between its pairs) and unloading releases its tensors", HANG_GUARD, async () => {
  // rank 2048 on every module of the fixture: 28 tensors, about 14 MB, read one pair at a time
  const big = adapterInRoot("big", (d) => {
    const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
    for (const [k, t] of readSafetensors(join(d, "adapter_model.safetensors"))) {
      const shape = k.includes("lora_A") ? [2048, t.shape[1]] : [t.shape[0], 2048];
      tensors.set(k, { shape, data: new Float32Array(shape[0] * shape[1]).fill(1e-4) });
    }
    writeSafetensors(join(d, "adapter_model.safetensors"), tensors);
  });
  await withServer({ model, port: 0, allowRuntimeLora: true, loraRoots: [root], adapterLoading: { limits: { rank: 2048 } } }, async (server, poller) => {
    const before = tf.memory();
    const r = await attempt(server, poller, { lora_name: "big", lora_path: big });
    assert.equal(r.status, 200, r.text);
    assert.ok(tf.memory().numTensors > before.numTensors);
    const u = await fetch(`${server.url}/v1/unload_lora_adapter`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ lora_name: "big" }) });
    assert.equal(u.status, 200);
    assert.equal(tf.memory().numTensors, before.numTensors, "the merged copy's tensors are released");
    assert.equal(tf.memory().numBytes, before.numBytes);
    // the same load as the route runs it, watched pair by pair: the server's /health answers in between
    const events: string[] = [];
    const answered = poller.answered();
    const merged = await mergedModel(model, big, { name: "big", roots: [root], limits: { ...ADAPTER_LIMITS, rank: 2048 }, onProgress: (done, total) => events.push(`pair ${done}/${total} health ${poller.answered() - answered}`) });
    merged.dispose();
    assert.ok(events.length >= 2, "the load reports each pair");
    const healthBetween = Number(events[events.length - 1].split(" health ")[1]) - Number(events[0].split(" health ")[1]);
    assert.ok(healthBetween >= 1, `no /health answer between the first and the last pair: ${events.join(", ")}`);
  });
});

test("t2s serve's caps reach its adapters: an adapter over --max-lora-rank or --max-lora-bytes stops the start with one error line", HANG_GUARD, async () => {
  const args = ["serve", "--model", fixtureDir("qwen2"), "--adapter", `sql=${fixtureDir("qwen2-lora")}`, "--port", "0", "--backend", "cpu"];
  const rank = await runCli([...args, "--max-lora-rank", "1"]);
  assert.equal(rank.code, 1);
  assert.match(rank.stderr, /^error \[rank_too_large\]: .*--max-lora-rank raises it/m);
  const bytes = await runCli([...args, "--max-lora-bytes", "1000"]);
  assert.equal(bytes.code, 1);
  assert.match(bytes.stderr, /^error \[file_too_large\]: .*adapter_model\.safetensors is \d+ bytes, over the limit of 1000 \(--max-lora-bytes raises it\)/m);
  const config = await runCli([...args, "--max-lora-config-bytes", "10"]);
  assert.equal(config.code, 1);
  assert.match(config.stderr, /^error \[file_too_large\]: .*adapter_config\.json is \d+ bytes, over the limit of 10 \(--max-lora-config-bytes raises it\)/m);
});
