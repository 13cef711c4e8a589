// A worker thread of guided decoding (lib/model/guided-pool.ts) that owns one XGrammar WASM instance, so
// no grammar work ever runs on the thread that answers HTTP or steps the engine. Two roles:
//   sandbox: compiles a guide it was never shown before, checks that the grammar admits a first token, and
//            keeps nothing; an instance that fails (a trap, an abort) is thrown away by the pool.
//   host:    compiles guides the sandbox already passed and runs their matchers: a matcher's next-token
//            bitmask and its advance by a sampled token.
// Plain JavaScript so it starts without tsx and runs the same from the sources or dist/. XGrammar's package
// is a UMD file inside a "type": "module" package, which the ESM loader cannot run; it is evaluated here as
// the CommonJS script it is (it imports node's `module` dynamically, hence the loader option).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { constants as vmConstants, runInThisContext } from "node:vm";
import { parentPort, workerData } from "node:worker_threads";

function loadXgrammar(packageJson) {
  const file = createRequire(packageJson).resolve("@mlc-ai/web-xgrammar");
  const wrapped = runInThisContext(`(function (exports, require, module, __filename, __dirname) {${readFileSync(file, "utf8")}\n})`, { filename: file, importModuleDynamically: vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER });
  const module = { exports: {} };
  wrapped(module.exports, createRequire(file), module, file, dirname(file));
  return module.exports;
}

// XGrammar prints its FATAL checks and aborts; the request's error says enough, so the output is dropped
// here rather than sent to a parent that would have to read it (guided-pool.ts says why it does not)
const discard = (_chunk, encoding, callback) => {
  (typeof encoding === "function" ? encoding : callback)?.();
  return true;
};
process.stdout.write = discard;
process.stderr.write = discard;

const { role, packageJson, tokens, type: vocabType, vocabSize, eosIds, grammarsKept } = workerData;
const x = loadXgrammar(packageJson);
const info = await x.TokenizerInfo.createTokenizerInfo(tokens, vocabType, false, vocabSize, eosIds);
// XGrammar's own compile cache never forgets; the host keeps its grammars itself (least recently used out)
const compiler = await x.GrammarCompiler.createGrammarCompiler(info, false);

/** The grammar of a guide (see Guide in guided.ts): JSON, JSON of a schema, or tool calls as structural tags. */
function compile(guide) {
  // compact JSON (", " and ": " separators, no free whitespace): whitespace is no place for a reply to wander
  if (guide.kind === "json") return compiler.compileBuiltinJSONGrammar();
  if (guide.kind === "schema") return compiler.compileJSONSchema(JSON.stringify(guide.schema), false, -1, [", ", ": "], true);
  const items = guide.tools.map((t) => new x.StructuralTagItem(`${guide.begin}{"name": ${JSON.stringify(t.name)}, "arguments": `, JSON.stringify(t.parameters), `}${guide.end}`));
  return compiler.compileStructuralTag(items, [guide.begin]);
}

function anyBit(mask) {
  for (let i = 0; i < mask.length; i++) if (mask[i] !== 0) return true;
  return false;
}

/** Grammars the host compiled, least recently used first. */
const grammars = new Map();
const matchers = new Map();
let nextMatcher = 1;

async function grammarOf(key, guide) {
  let g = grammars.get(key);
  if (g) {
    grammars.delete(key);
  } else {
    g = await compile(guide);
    // a matcher holds its own reference to the grammar, so dropping the cache's is safe while it runs
    while (grammars.size >= grammarsKept) {
      const [oldest, old] = grammars.entries().next().value;
      grammars.delete(oldest);
      old.dispose();
    }
  }
  grammars.set(key, g);
  return g;
}

async function handle(m) {
  // a guide comes as its JSON text: copying a string to this thread is one memcpy, where the structured clone
  // of a wide schema object (20,000 properties: 33 ms) would hold the HTTP thread
  if (typeof m.guide === "string") m.guide = JSON.parse(m.guide);
  if (m.op === "check") {
    const started = performance.now();
    const g = await compile(m.guide);
    const matcher = await x.GrammarMatcher.createGrammarMatcher(g, eosIds, m.terminateAtEnd);
    const startsOk = anyBit(await matcher.getNextTokenBitmask());
    matcher.dispose();
    g.dispose();
    return { startsOk, ms: performance.now() - started };
  }
  if (m.op === "open") {
    const g = await grammarOf(m.key, m.guide);
    const matcher = await x.GrammarMatcher.createGrammarMatcher(g, eosIds, m.terminateAtEnd);
    const id = nextMatcher++;
    matchers.set(id, matcher);
    const terminated = matcher.isTerminated();
    return { matcher: id, terminated, mask: terminated ? null : await matcher.getNextTokenBitmask() };
  }
  if (m.op === "accept") {
    const matcher = matchers.get(m.matcher);
    if (!matcher) return { ok: false, terminated: false, mask: null };
    const ok = matcher.acceptToken(m.token);
    const terminated = ok && matcher.isTerminated();
    // the next mask goes back with the advance: one message per token
    return { ok, terminated, mask: ok && !terminated ? await matcher.getNextTokenBitmask() : null };
  }
  if (m.op === "close") {
    matchers.get(m.matcher)?.dispose();
    matchers.delete(m.matcher);
    return {};
  }
  throw new Error(`unknown operation ${m.op}`);
}

// one job at a time, in arrival order (a matcher's advances must not overtake each other)
let chain = Promise.resolve();
parentPort.on("message", (m) => {
  chain = chain.then(async () => {
    try {
      const out = await handle(m);
      parentPort.postMessage({ id: m.id, ...out }, out.mask ? [out.mask.buffer] : []);
    } catch (e) {
      // a trap or an abort may leave the instance broken: the pool replaces this worker
      parentPort.postMessage({ id: m.id, error: e instanceof Error ? e.message : String(e) });
    }
  });
});
parentPort.postMessage({ ready: true, role });
