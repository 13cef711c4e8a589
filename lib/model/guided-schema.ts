/**
 * What a guide's schemas may be before the grammar engine sees them. XGrammar's converter recurses on the
 * schema's nesting: at 50-64 nested objects (fewer through $ref) its WASM stack overflows ("memory access
 * out of bounds") and the instance stays broken; a dangling $ref aborts it; a $ref cycle compiles to a
 * grammar with no first token. So nesting (a $ref hop counted as a level), size and references are checked
 * here, in the caller's thread and in time linear in the schema, and each limit refused names itself.
 */
import { T2sError } from "../core/errors.js";

export interface GuidedLimits {
  /** UTF-8 bytes of a guide's schemas, as JSON, at most. */
  maxSchemaBytes: number;
  /** Levels of nested subschemas at most; a $ref hop and a group of a `pattern` each count as one. */
  maxDepth: number;
  /** Milliseconds a guide never seen before may take to compile (in a worker, which is replaced past it). */
  compileTimeoutMs: number;
}

/**
 * The defaults: 64 KiB holds any tool set an episode offers many times over (the kit's SQL tool is 0.3 KB);
 * 32 levels stay well under the 48-64 where XGrammar 0.1.27's converter overflows; 10 s is 20-100 times
 * what an ordinary schema takes at a 152k vocabulary on a loaded 2-core machine (docs/model.md, Security).
 */
export const GUIDED_LIMITS: Readonly<GuidedLimits> = { maxSchemaBytes: 64 * 1024, maxDepth: 32, compileTimeoutMs: 10_000 };

/** The flag of `t2s serve` that raises each limit, named in its error. */
const LIMIT_FLAGS: Record<keyof GuidedLimits, string> = { maxSchemaBytes: "--guided-max-schema-bytes", maxDepth: "--guided-max-depth", compileTimeoutMs: "--guided-compile-timeout" };

/** A guide refused by one of the limits (a 400 that names it). */
export function limitError(limit: keyof GuidedLimits, message: string): T2sError {
  return new T2sError("guided_limit", `${message} (the server's limit; t2s serve ${LIMIT_FLAGS[limit]} raises it)`);
}

/** A schema the grammar engine must not be given (a 400). */
function refused(message: string): T2sError {
  return new T2sError("usage", `the schema cannot be used for guided decoding: ${message}`);
}

const TYPES = new Set(["object", "array", "string", "number", "integer", "boolean", "null"]);
/** Keywords whose value is an object of subschemas. */
const SCHEMA_MAPS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
/** Keywords whose value is one subschema (`items` may also be a list, as in drafts 4-7). */
const SCHEMA_ONE = ["items", "additionalItems", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "not", "contains", "propertyNames", "if", "then", "else"];
/** Keywords whose value is a list of subschemas. */
const SCHEMA_LISTS = ["anyOf", "oneOf", "allOf", "prefixItems"];

/** Deepest nesting of groups in a regular expression (escapes and character classes skipped). */
function groupDepth(pattern: string): number {
  let depth = 0;
  let most = 0;
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") i++;
    else if (inClass) inClass = c !== "]";
    else if (c === "[") inClass = true;
    else if (c === "(") most = Math.max(most, ++depth);
    else if (c === ")") depth = Math.max(0, depth - 1);
  }
  return most;
}

/** One walk over a schema: levels below each node, $ref targets measured once. */
class SchemaWalk {
  /** Levels of each $ref target measured so far (a target reached again is not walked again). */
  private readonly heights = new Map<object, number>();
  /** $ref targets being measured now: reaching one again is a cycle. */
  private readonly resolving = new Set<object>();

  constructor(private readonly root: unknown, private readonly maxDepth: number) {}

  private tooDeep(at: string): never {
    throw limitError("maxDepth", `the schema nests more than ${this.maxDepth} levels deep at ${at} (a $ref and a pattern group count as a level each); guided decoding takes at most ${this.maxDepth}`);
  }

  /** The node a local reference points at, or a 400 for a reference that points nowhere or off the document. */
  private target(ref: unknown, at: string): unknown {
    if (typeof ref !== "string") throw refused(`${at}.$ref must be a string`);
    if (ref !== "#" && !ref.startsWith("#/")) throw refused(`${at}.$ref ${JSON.stringify(ref.slice(0, 200))} is not a reference inside the schema ('#' or '#/...'); other documents are never fetched`);
    let node: unknown = this.root;
    for (const raw of ref === "#" ? [] : ref.slice(2).split("/")) {
      let key: string;
      try {
        key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
      } catch {
        key = raw;
      }
      if (!node || typeof node !== "object" || !Object.hasOwn(node, key)) throw refused(`${at}.$ref ${JSON.stringify(ref.slice(0, 200))} points at nothing in the schema (a dangling reference)`);
      node = (node as Record<string, unknown>)[key];
    }
    return node;
  }

  /** Levels of `node` and everything below it (a leaf is 1); `depth` is its own level (the root is 1). */
  height(node: unknown, depth: number, at: string): number {
    if (depth > this.maxDepth) this.tooDeep(at);
    if (typeof node === "boolean") return 1;
    if (!node || typeof node !== "object" || Array.isArray(node)) throw refused(`${at} is not a schema (an object)`);
    const o = node as Record<string, unknown>;
    const types = Array.isArray(o.type) ? o.type : o.type === undefined ? [] : [o.type];
    for (const t of types) if (typeof t !== "string" || !TYPES.has(t)) throw refused(`${at}.type ${JSON.stringify(t)} is not a JSON Schema type`);
    let below = 0;
    const child = (x: unknown, path: string) => (below = Math.max(below, this.height(x, depth + 1, path)));
    for (const key of SCHEMA_MAPS) {
      const v = o[key];
      if (v === undefined) continue;
      if (!v || typeof v !== "object" || Array.isArray(v)) throw refused(`${at}.${key} must be an object`);
      for (const [k, x] of Object.entries(v)) {
        child(x, `${at}.${key}.${k}`);
        if (key === "patternProperties" && depth + groupDepth(k) > this.maxDepth) this.tooDeep(`${at}.${key}`);
      }
    }
    for (const key of SCHEMA_ONE) {
      const v = o[key];
      if (v === undefined) continue;
      if (key === "items" && Array.isArray(v)) v.forEach((x, i) => child(x, `${at}.items[${i}]`));
      else child(v, `${at}.${key}`);
    }
    for (const key of SCHEMA_LISTS) {
      const v = o[key];
      if (v === undefined) continue;
      if (!Array.isArray(v)) throw refused(`${at}.${key} must be an array`);
      v.forEach((x, i) => child(x, `${at}.${key}[${i}]`));
    }
    if (typeof o.pattern === "string") below = Math.max(below, groupDepth(o.pattern));
    if (depth + below > this.maxDepth) this.tooDeep(at);
    if (o.$ref !== undefined) {
      const target = this.target(o.$ref, at);
      if (target && typeof target === "object") {
        if (this.resolving.has(target)) throw refused(`${at}.$ref ${JSON.stringify(String(o.$ref).slice(0, 200))} refers back to a schema that contains it (a recursive reference); guided decoding takes schemas without recursion`);
        let h = this.heights.get(target);
        if (h === undefined) {
          this.resolving.add(target);
          h = this.height(target, depth + 1, `${at}.$ref`);
          this.resolving.delete(target);
          this.heights.set(target, h);
        } else if (depth + h > this.maxDepth) this.tooDeep(`${at}.$ref`);
        below = Math.max(below, h);
      } else below = Math.max(below, this.height(target, depth + 1, `${at}.$ref`));
    }
    return 1 + below;
  }
}

/** Throws a 400-worthy error unless every schema of a guide is within the limits and safe to compile. */
export function checkSchemas(schemas: { schema: unknown; at: string }[], limits: GuidedLimits): void {
  const bytes = schemas.reduce((n, s) => n + Buffer.byteLength(JSON.stringify(s.schema) ?? ""), 0);
  if (bytes > limits.maxSchemaBytes) throw limitError("maxSchemaBytes", `the schema is ${bytes} bytes of JSON; guided decoding takes at most ${limits.maxSchemaBytes}`);
  for (const s of schemas) new SchemaWalk(s.schema, limits.maxDepth).height(s.schema, 1, s.at);
}
