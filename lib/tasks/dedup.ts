/**
 * Near-duplicate detection for task sets. Two tasks are duplicates when
 *  - their gold SQL is equal after sqlDuplicateKey (lower-cased, comments removed, whitespace collapsed,
 *    spaces around punctuation removed, trailing semicolons removed), or
 *  - their questions overlap by more than 0.75, where overlap is the Jaccard index of the sets of
 *    [a-z0-9]+ words of the lower-cased questions: |A ∩ B| / |A ∪ B|.
 * The question check uses prefix filtering (Chaudhuri et al. 2006) so that a set of thousands of
 * questions is checked without comparing every pair.
 */

export const MAX_QUESTION_OVERLAP = 0.75;

/**
 * Gold SQL in the form used to spot duplicate queries: a text-level key (a `--` inside a string literal is
 * cut like a comment), not a statement; lib/verifier/extract.ts's normalizeSql is the token-level
 * normaliser of a committed query.
 */
export function sqlDuplicateKey(sql: string): string {
  return sql
    .replace(/--[^\n]*/g, " ")
    .replace(/\/\*[\s\S]*?\*\//g, " ")
    .toLowerCase()
    .replace(/\s+/g, " ")
    .replace(/\s*([(),;=<>+*/|-])\s*/g, "$1")
    .replace(/;+$/, "")
    .trim();
}

/** The distinct [a-z0-9]+ words of a question, lower-cased. */
export function questionWords(question: string): string[] {
  return [...new Set(question.toLowerCase().match(/[a-z0-9]+/g) ?? [])];
}

/** Jaccard index of the word sets of two questions (1 when both are empty). */
export function questionOverlap(a: string, b: string): number {
  return jaccard(questionWords(a), questionWords(b));
}

function jaccard(a: readonly string[], b: readonly string[]): number {
  if (a.length === 0 && b.length === 0) return 1;
  const sa = new Set(a);
  let inter = 0;
  for (const w of b) if (sa.has(w)) inter++;
  return inter / (a.length + b.length - inter);
}

export interface DuplicateHit {
  kind: "sql" | "question";
  /** Key of the entry already in the index that this one duplicates. */
  other: string;
  overlap: number;
}

interface Entry {
  key: string;
  words: string[];
}

/** FNV-1a of a word: the default global word order for prefix filtering. */
function wordHash(w: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < w.length; i++) h = Math.imul(h ^ w.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/**
 * An incremental index of questions and gold queries that answers "is this new task a near-duplicate of
 * one already added?". `rank` fixes the global word order (rarest first makes the filter sharpest); any
 * fixed order gives the same answers, only speed differs.
 */
export class DedupIndex {
  private readonly sqls = new Map<string, string>();
  private readonly entries: Entry[] = [];
  private readonly postings = new Map<string, number[]>();
  private readonly rank: (w: string) => number;

  private readonly tokenize: (question: string) => string[];

  /** `tokenize` replaces the [a-z0-9]+ word split (it must return distinct words). */
  constructor(opts: { threshold?: number; rank?: (word: string) => number; tokenize?: (question: string) => string[] } = {}) {
    this.threshold = opts.threshold ?? MAX_QUESTION_OVERLAP;
    this.rank = opts.rank ?? wordHash;
    this.tokenize = opts.tokenize ?? questionWords;
  }

  readonly threshold: number;

  get size(): number {
    return this.entries.length;
  }

  private ordered(question: string): string[] {
    return this.tokenize(question).sort((x, y) => this.rank(x) - this.rank(y) || (x < y ? -1 : x > y ? 1 : 0));
  }

  /** Length of the prefix that must share a word with any set overlapping more than the threshold. */
  private prefixLength(n: number): number {
    return n === 0 ? 0 : Math.min(n, n - Math.floor(this.threshold * n));
  }

  /** The first entry this (question, sql) duplicates, or null. */
  check(question: string, sql?: string): DuplicateHit | null {
    if (sql !== undefined) {
      const other = this.sqls.get(sqlDuplicateKey(sql));
      if (other !== undefined) return { kind: "sql", other, overlap: 1 };
    }
    return this.checkWords(this.ordered(question));
  }

  private checkWords(words: string[]): DuplicateHit | null {
    for (const hit of this.hits(words)) return hit;
    return null;
  }

  /** Every entry the question overlaps by more than the threshold (SQL not considered). */
  allHits(question: string): DuplicateHit[] {
    return [...this.hits(this.ordered(question))];
  }

  private *hits(words: string[]): Generator<DuplicateHit> {
    const n = words.length;
    if (n === 0) {
      for (const e of this.entries) if (e.words.length === 0) yield { kind: "question", other: e.key, overlap: 1 };
      return;
    }
    const seen = new Set<number>();
    const p = this.prefixLength(n);
    for (let i = 0; i < p; i++) {
      for (const idx of this.postings.get(words[i]) ?? []) {
        if (seen.has(idx)) continue;
        seen.add(idx);
        const e = this.entries[idx];
        const m = e.words.length;
        if (m <= this.threshold * n || n <= this.threshold * m) continue; // sizes too different to overlap enough
        const ov = jaccard(words, e.words);
        if (ov > this.threshold) yield { kind: "question", other: e.key, overlap: ov };
      }
    }
  }

  /** Adds an entry without checking it. */
  add(key: string, question: string, sql?: string): void {
    if (sql !== undefined) {
      const ns = sqlDuplicateKey(sql);
      if (!this.sqls.has(ns)) this.sqls.set(ns, key);
    }
    const words = this.ordered(question);
    const idx = this.entries.length;
    this.entries.push({ key, words });
    for (let i = 0; i < this.prefixLength(words.length); i++) {
      const list = this.postings.get(words[i]);
      if (list) list.push(idx);
      else this.postings.set(words[i], [idx]);
    }
  }

  /** Adds the entry unless it duplicates one already present; returns the hit that blocked it, or null. */
  tryAdd(key: string, question: string, sql?: string): DuplicateHit | null {
    const hit = this.check(question, sql);
    if (!hit) this.add(key, question, sql);
    return hit;
  }
}

export interface DuplicatePair {
  kind: "sql" | "question";
  a: string;
  b: string;
  overlap: number;
}

/**
 * Every duplicate pair in a set (keys are task ids): the same normalised gold SQL, or question overlap
 * above the threshold. Returns an empty list for a clean set.
 */
export function findDuplicates(tasks: { id: string; question: string; gold_sql: string }[], threshold = MAX_QUESTION_OVERLAP): DuplicatePair[] {
  const pairs: DuplicatePair[] = [];
  const bySql = new Map<string, string>();
  for (const t of tasks) {
    const ns = sqlDuplicateKey(t.gold_sql);
    const other = bySql.get(ns);
    if (other !== undefined) pairs.push({ kind: "sql", a: other, b: t.id, overlap: 1 });
    else bySql.set(ns, t.id);
  }
  const df = documentFrequency(tasks.map((t) => t.question));
  const index = new DedupIndex({ threshold, rank: (w) => df.get(w) ?? 0 });
  for (const t of tasks) {
    for (const hit of index.allHits(t.question)) pairs.push({ kind: "question", a: hit.other, b: t.id, overlap: hit.overlap });
    index.add(t.id, t.question);
  }
  return pairs;
}

/**
 * Other common ways to split a question into words (\w+ runs; whitespace-separated; whitespace-separated
 * with edge punctuation stripped). A set kept clean under all of them stays clean whichever split a
 * reviewer uses.
 */
export const ALTERNATIVE_TOKENIZERS: ((question: string) => string[])[] = [
  (q) => [...new Set(q.toLowerCase().match(/\w+/g) ?? [])],
  (q) => [...new Set(q.toLowerCase().split(/\s+/).filter(Boolean))],
  (q) => [...new Set(q.toLowerCase().split(/\s+/).map((w) => w.replace(/^[^\w]+|[^\w]+$/g, "")).filter(Boolean))],
];

/** How many questions contain each word: a rank for DedupIndex that puts rare words first. */
export function documentFrequency(questions: string[]): Map<string, number> {
  const df = new Map<string, number>();
  for (const q of questions) for (const w of questionWords(q)) df.set(w, (df.get(w) ?? 0) + 1);
  return df;
}
