/**
 * A byte-level BPE tokenizer trainer that writes Hugging Face `tokenizer.json`. Texts are cut into
 * pre-tokens by one regex (lines by default, so merges may span words: a domain model over one schema
 * gains far shorter prompts from multi-word tokens), each pre-token is mapped to the GPT-2 byte alphabet,
 * and the most frequent adjacent pair is merged until the vocabulary is full. Pair counts are updated
 * incrementally, only in the pre-tokens that hold the merged pair.
 */
import { T2sError } from "../core/errors.js";

/**
 * Pre-tokenizer regex: each quote and each digit alone, newlines alone, and the runs of other text between
 * them (with a trailing newline). Merges may span words, but a quoted literal or a number is cut the same
 * way in a question and in the SQL that copies it. Valid in JS and Rust regex.
 */
export const TEXT_PRETOKENIZER = "'|[0-9]|[^'0-9\\n]+\\n?|\\n";

export interface BpeOptions {
  /** Final vocabulary size, special and added tokens included. */
  vocabSize: number;
  /** Special tokens, given the first ids in this order (e.g. <|endoftext|>, <|im_start|>, <|im_end|>). */
  specialTokens: string[];
  /** Added non-special tokens, given the last ids (e.g. <tool_call>). */
  addedTokens?: string[];
  /** A merge is only made when its pair occurs at least this often (default 2). */
  minFrequency?: number;
  /** No token longer than this many bytes (default 24). */
  maxTokenBytes?: number;
  /** Counts of one distinct pre-token are capped here, so a text repeated in every example (a system prompt) cannot take the whole vocabulary (default 32; 0 = no cap). */
  countCap?: number;
  /** Pre-tokenizer regex (default TEXT_PRETOKENIZER). */
  pattern?: string;
}

export interface BpeModel {
  /** Token string (byte alphabet) -> id, specials and added tokens included. */
  vocab: Map<string, number>;
  merges: [string, string][];
  specialTokens: string[];
  addedTokens: string[];
  pattern: string;
}

/** Returns GPT-2's byte -> printable character table (the ByteLevel pre-tokenizer's alphabet). */
export function byteAlphabet(): string[] {
  const table: string[] = new Array(256);
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (printable(b)) table[b] = String.fromCharCode(b);
    else table[b] = String.fromCharCode(256 + n++);
  }
  return table;
}

/** Returns the distinct pre-tokens of `texts` with their (weighted) counts. */
export function pretokenCounts(texts: { text: string; weight?: number }[], pattern = TEXT_PRETOKENIZER): Map<string, number> {
  const counts = new Map<string, number>();
  for (const { text, weight } of texts) {
    const re = new RegExp(pattern, "gu");
    for (const m of text.matchAll(re)) {
      if (m[0].length === 0) continue;
      counts.set(m[0], (counts.get(m[0]) ?? 0) + (weight ?? 1));
    }
  }
  return counts;
}

interface Word {
  syms: number[];
  count: number;
}

const PAIR = 1 << 16;

/** Trains merges on weighted texts; returns the vocabulary and merges (deterministic: ties go to the smaller pair ids). */
export function trainBpe(texts: { text: string; weight?: number }[], opts: BpeOptions): BpeModel {
  const added = opts.addedTokens ?? [];
  const pattern = opts.pattern ?? TEXT_PRETOKENIZER;
  const minFreq = opts.minFrequency ?? 2;
  const maxBytes = opts.maxTokenBytes ?? 24;
  const cap = opts.countCap ?? 32;
  const base = opts.specialTokens.length + 256;
  if (opts.vocabSize < base + added.length) throw new T2sError("bad_value", `vocabSize ${opts.vocabSize} is below the ${base + added.length} special, byte and added tokens`);
  if (opts.vocabSize + 1 > PAIR) throw new T2sError("bad_value", `vocabSize must stay below ${PAIR}`);
  const alphabet = byteAlphabet();
  const tokens: string[] = [...opts.specialTokens, ...alphabet];
  const tokenBytes: number[] = tokens.map((_, i) => (i < opts.specialTokens.length ? 0 : 1));
  const words: Word[] = [];
  const enc = new TextEncoder();
  for (const [text, n] of [...pretokenCounts(texts, pattern)].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))) {
    const count = cap > 0 ? Math.min(cap, n) : n;
    words.push({ syms: [...enc.encode(text)].map((b) => opts.specialTokens.length + b), count });
  }
  const pairCount = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();
  const addPairs = (w: number, sign: number) => {
    const { syms, count } = words[w];
    for (let i = 0; i + 1 < syms.length; i++) {
      const key = syms[i] * PAIR + syms[i + 1];
      const c = (pairCount.get(key) ?? 0) + sign * count;
      if (c > 0) pairCount.set(key, c);
      else pairCount.delete(key);
      if (sign > 0) {
        let s = pairWords.get(key);
        if (!s) pairWords.set(key, (s = new Set()));
        s.add(w);
      }
    }
  };
  words.forEach((_, w) => addPairs(w, 1));
  const merges: [number, number][] = [];
  const target = opts.vocabSize - added.length;
  while (tokens.length < target) {
    let best = -1;
    let bestCount = 0;
    for (const [key, c] of pairCount) {
      if (c < minFreq || c < bestCount) continue;
      if (c === bestCount && key > best) continue;
      if (tokenBytes[Math.floor(key / PAIR)] + tokenBytes[key % PAIR] > maxBytes) continue;
      best = key;
      bestCount = c;
    }
    if (best < 0) break;
    const a = Math.floor(best / PAIR);
    const b = best % PAIR;
    const id = tokens.length;
    tokens.push(tokens[a] + tokens[b]);
    tokenBytes.push(tokenBytes[a] + tokenBytes[b]);
    merges.push([a, b]);
    const touched = [...(pairWords.get(best) ?? [])].sort((x, y) => x - y);
    for (const w of touched) {
      addPairs(w, -1);
      const syms = words[w].syms;
      const out: number[] = [];
      for (let i = 0; i < syms.length; i++) {
        if (i + 1 < syms.length && syms[i] === a && syms[i + 1] === b) {
          out.push(id);
          i++;
        } else out.push(syms[i]);
      }
      words[w].syms = out;
      addPairs(w, 1);
    }
    pairWords.delete(best);
    pairCount.delete(best);
  }
  const vocab = new Map<string, number>();
  tokens.forEach((t, i) => vocab.set(t, i));
  added.forEach((t) => vocab.set(t, vocab.size));
  return { vocab, merges: merges.map(([a, b]) => [tokens[a], tokens[b]]), specialTokens: opts.specialTokens, addedTokens: added, pattern };
}

/** Returns the `tokenizer.json` object of a trained model (NFC, Split + ByteLevel pre-tokenizer, BPE, ByteLevel decoder). */
export function tokenizerJson(m: BpeModel): Record<string, unknown> {
  const addedEntry = (content: string, special: boolean) => ({ id: m.vocab.get(content), content, single_word: false, lstrip: false, rstrip: false, normalized: false, special });
  const bpeVocab: Record<string, number> = {};
  for (const [t, i] of m.vocab) if (!m.specialTokens.includes(t) && !m.addedTokens.includes(t)) bpeVocab[t] = i;
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [...m.specialTokens.map((t) => addedEntry(t, true)), ...m.addedTokens.map((t) => addedEntry(t, false))],
    normalizer: { type: "NFC" },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: m.pattern }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: bpeVocab,
      merges: m.merges.map(([a, b]) => [a, b]),
    },
  };
}
