/**
 * Every shared default is written as a literal in one lib file only: lib/core/defaults.ts for the settings
 * several layers share, lib/train/settings.ts for the GRPO ones. The scan looks for each setting's literal
 * in a default position (`?? 5`, `= 256`, `: 2048,`, a commander default `, 8)`) on a code line that names
 * the setting, so a second copy (a flag, a loop, a prompt, a metadata writer with its own `?? 5`) fails it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { repoRoot as ROOT } from "../helpers.js";
import { SHARED_SETTINGS, settingFromEnv, sharedSettingsMarkdown } from "../../lib/core/defaults.js";
import { serviceApiKey } from "../../lib/envserve/access.js";
import { defaultOf } from "../../lib/train/settings.js";

const LIB = join(ROOT, "lib");

interface Rule {
  what: string;
  /** The one file allowed to hold the literal. */
  home: string;
  /** A code line that names the setting. */
  names: RegExp;
  /** The literal in a default position on such a line. */
  literal: RegExp;
  /** Only files whose path matches (default: all of lib/). */
  scope?: RegExp;
  /** The home states the value another way (a table entry): no site of the literal form anywhere. */
  nowhere?: boolean;
}

/** `lit` after `??`, `||`, `=`, `:` or `,` (not `==`, `=>`, `<=`), not followed by more of a number or name. */
const inDefaultPosition = (lit: string): RegExp => new RegExp(`(?:\\?\\?|\\|\\||(?<![=!<>])=(?![=>])|:|,)\\s*${lit.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![\\w.])`);

const CORE = "lib/core/defaults.ts";
const TRAIN = "lib/train/settings.ts";
const shared = (what: keyof typeof SHARED_SETTINGS, names: RegExp): Rule => ({ what, home: CORE, names, literal: inDefaultPosition(String(SHARED_SETTINGS[what].default)) });

const RULES: Rule[] = [
  shared("max_tool_calls", /tool.?calls/i),
  shared("tool_chars", /chars/i),
  shared("max_tokens", /max.?tokens/i),
  shared("engine_max_tokens", /max.?tokens/i),
  shared("k", /\bk\s*\?\?|["']--k\b|samples/i),
  shared("temperature", /temperature/i),
  shared("concurrency", /concurren/i),
  shared("tool_rows", /tool.?rows|maxRows/i),
  { what: "max_tensor_elements", home: CORE, names: /./, literal: /2 \*\* 28|268435456/ },
  { what: "backend fallback", home: CORE, names: /T2S_BACKEND/, literal: /T2S_BACKEND\s*\?\?\s*["'`]/, nowhere: true },
  { what: "loss_type", home: TRAIN, names: /loss.?type/i, literal: new RegExp(`(\\?\\?|=|default:)\\s*"${defaultOf("loss_type", "grpo")}"`) },
  { what: "epsilon_low", home: TRAIN, names: /epsilon.?low/i, literal: inDefaultPosition(String(defaultOf("epsilon_low", "grpo"))) },
  { what: "epsilon_high", home: TRAIN, names: /epsilon.?high|cispo/i, literal: /\b0\.28\b/ },
  { what: "scale_rewards", home: TRAIN, names: /scale/i, literal: new RegExp(`(\\?\\?|:\\s*\\w+\\s*=|default:)\\s*"${defaultOf("scale_rewards", "grpo")}"`) },
  { what: "mu", home: TRAIN, names: /\bmu\b/, literal: /\bmu\s*\?\?\s*\d/ },
  { what: "GRPO sampling temperature", home: TRAIN, names: /temperature/i, literal: /temperature\s*\?\?\s*\d|temperature: \d+(?:\.\d+)?\s*[,}]/, scope: /^lib\/train\/(grpo|run|episode-sampler|config)\.ts$/ },
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).sort().flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return /\.(ts|mts|cts)$/.test(name) ? [p] : [];
  });
}

/** The code lines of a source: comments (line and block) blanked, so a default said in prose is no copy. */
function codeLines(text: string): string[] {
  const noBlocks = text.replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, " "));
  return noBlocks.split("\n").map((l) => l.replace(/(^|[^:"'`])\/\/.*$/, "$1"));
}

/** Where `rule`'s literal stands in a default position in `files`, as "path:line". */
function sites(rule: Rule, files: Array<{ path: string; text: string }>): string[] {
  const out: string[] = [];
  for (const f of files) {
    if (rule.scope && !rule.scope.test(f.path)) continue;
    codeLines(f.text).forEach((line, i) => {
      if (rule.names.test(line) && rule.literal.test(line)) out.push(`${f.path}:${i + 1}`);
    });
  }
  return out;
}

const LIB_FILES = sourceFiles(LIB).map((p) => ({ path: relative(ROOT, p), text: readFileSync(p, "utf8") }));

for (const rule of RULES) {
  test(`the default of ${rule.what} is written in ${rule.home} only`, () => {
    const found = sites(rule, LIB_FILES);
    const elsewhere = rule.nowhere ? found : found.filter((s) => !s.startsWith(rule.home + ":"));
    assert.deepEqual(elsewhere, [], `a second copy of the ${rule.what} default: read it from ${rule.home}`);
    // a default the scan cannot see in its home is one a change to the table would miss here
    if (rule.home === CORE && !rule.nowhere) assert.ok(found.length >= 1, `the scan finds ${rule.what}'s default in ${CORE}`);
  });
}

test("the scan sees the copies this table replaced, and no prose", () => {
  const probe = (text: string, path = "lib/x.ts") => RULES.flatMap((r) => sites(r, [{ path, text }]).map(() => r.what));
  assert.deepEqual(probe("  const maxCalls = opts.maxToolCalls ?? 5;"), ["max_tool_calls"]);
  assert.deepEqual(probe('    .option("--tool-chars <n>", "characters", intOption("--tool-chars", 16), 256)'), ["tool_chars"]);
  assert.deepEqual(probe("export function truncateMiddle(text: string, maxChars = 256): string {"), ["tool_chars"]);
  assert.deepEqual(probe("  const maxTokens = opts.maxTokens ?? 2048;"), ["max_tokens"]);
  assert.deepEqual(probe("        maxTokens: Math.max(0, Math.min(req.maxTokens ?? 256, room)),"), ["engine_max_tokens"]);
  assert.deepEqual(probe("    this.limiter = new Limiter(opts.concurrency ?? 8);"), ["concurrency"]);
  assert.deepEqual(probe('body: JSON.stringify({ model, temperature: 0.7, max_tokens: 6000 })'), ["temperature"]);
  assert.deepEqual(probe("export const DEFAULT_MAX_TENSOR_ELEMENTS = 2 ** 28;"), ["max_tensor_elements"]);
  assert.deepEqual(probe('await useBackend(opts.backend ?? process.env.T2S_BACKEND ?? "auto");'), ["backend fallback"]);
  assert.deepEqual(probe("      epsilonHigh: opts.epsilonHigh ?? (lossType === \"cispo\" ? 5 : 0.28),"), ["epsilon_high"]);
  assert.deepEqual(probe('    const lossType = opts.lossType ?? "dapo";'), ["loss_type"]);
  assert.deepEqual(probe("    const temperature = o.temperature ?? 1;", "lib/train/grpo.ts"), ["GRPO sampling temperature"]);
  assert.deepEqual(probe("export function groupAdvantages(rewards: number[], groupSize: number, scale: AdvantageScale = \"group\", eps = 1e-4) {"), ["scale_rewards"]);
  assert.deepEqual(probe("    const k = opts.k ?? 4;"), ["k"]);
  assert.deepEqual(probe("    const mu = o.mu ?? 1;"), ["mu"]);
  assert.deepEqual(probe("  /** Tool calls per episode (default 5). */\n  // maxToolCalls ?? 5"), []);
  assert.deepEqual(probe("  if (a.maxToolCalls == 5) return;"), []);
});

test("T2S_API_KEY is read through the settings table only (policy and env serve alike)", () => {
  // a read of the variable: process.env.T2S_API_KEY, env.T2S_API_KEY, env["T2S_API_KEY"]; its name in a message is no read
  const read: Rule = { what: "T2S_API_KEY", home: CORE, names: /T2S_API_KEY/, literal: /\.T2S_API_KEY\b|\[\s*["'`]T2S_API_KEY["'`]\s*\]/, nowhere: true };
  assert.deepEqual(sites(read, LIB_FILES), [], "read it with settingFromEnv(\"api_key\") (lib/core/defaults.ts)");
  assert.equal(SHARED_SETTINGS.api_key.env, "T2S_API_KEY");
  assert.equal(settingFromEnv("api_key", { T2S_API_KEY: "k1", OPENAI_API_KEY: "k2" }), "k1");
  assert.equal(settingFromEnv("api_key", {}), undefined);
  assert.equal(serviceApiKey("127.0.0.1", undefined, { T2S_API_KEY: "k1" }), "k1", "env serve requires the table's variable");
  assert.throws(() => serviceApiKey("0.0.0.0", undefined, { OPENAI_API_KEY: "k2" }), /--api-key/, "and not a client's OpenAI key");
  const probe = (text: string) => sites(read, [{ path: "lib/x.ts", text }]).length;
  assert.equal(probe("    this.apiKey = opts.apiKey ?? process.env.T2S_API_KEY ?? process.env.OPENAI_API_KEY;"), 1);
  assert.equal(probe("  const key = flag ?? (env.T2S_API_KEY || undefined);"), 1);
  assert.equal(probe('    throw new UsageError("give --api-key KEY (or set T2S_API_KEY)");'), 0);
});

test("docs/architecture.md's shared-settings table is the table's", () => {
  const doc = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");
  for (const line of sharedSettingsMarkdown()) assert.ok(doc.includes(line + "\n"), `docs/architecture.md lacks the row: ${line}`);
});
