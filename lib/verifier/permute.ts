/**
 * Column matching: finds which candidate column plays the part of each gold column. Columns are first
 * paired by value signatures (the sorted values of the column within each block of rows), so a wrong
 * pairing is never tried; the remaining choices (columns with the same signature, e.g. duplicated or
 * tied columns) are searched depth-first, checking after each step that the rows projected on the columns
 * chosen so far still agree, and the last step is the full row comparison. Identical candidate columns
 * are interchangeable and tried once. This stays fast for wide results: with distinct signatures there
 * is a single candidate per column and no search at all.
 */

/** A table of canonical value keys: rows of equal length. */
export type KeyTable = string[][];

/**
 * How rows are compared:
 *  - "blocks": the candidate and gold have the same row count; rows are cut into consecutive blocks
 *    (the same positions in both) and each block must hold the same multiset of rows. One block of all
 *    rows is the unordered comparison; one block per row is the ordered one.
 *  - "within": every candidate row (as a set) must appear among the gold rows.
 */
export type RowRule = { kind: "blocks"; blocks: Array<[number, number]> } | { kind: "within" };

/**
 * Returns, for each gold column j, the candidate column mapped to it (a permutation), or null when no
 * column order makes the results agree under `rule`. `strict` allows only the identity order.
 */
export function matchColumns(gold: KeyTable, cand: KeyTable, ncols: number, rule: RowRule, strict = false): number[] | null {
  const options = columnOptions(gold, cand, ncols, rule, strict);
  if (options === null) return null;
  const order = [...Array(ncols).keys()].sort((a, b) => options[a].length - options[b].length || a - b);
  const classOf = columnClasses(cand, ncols);
  const used = new Array<boolean>(ncols).fill(false);
  const mapping = new Array<number>(ncols).fill(-1);
  let gPart: string[] = gold.map(() => "");
  let cPart: string[] = cand.map(() => "");

  const search = (depth: number): boolean => {
    if (depth === ncols) return true;
    const j = order[depth];
    const tried = new Set<number>();
    for (const k of options[j]) {
      if (used[k] || tried.has(classOf[k])) continue;
      tried.add(classOf[k]);
      const gPrev = gPart;
      const cPrev = cPart;
      gPart = gold.map((row, r) => gPrev[r] + JSON.stringify(row[j]) + ",");
      cPart = cand.map((row, r) => cPrev[r] + JSON.stringify(row[k]) + ",");
      if (rowsAgree(gPart, cPart, rule)) {
        used[k] = true;
        mapping[j] = k;
        if (search(depth + 1)) return true;
        used[k] = false;
        mapping[j] = -1;
      }
      gPart = gPrev;
      cPart = cPrev;
    }
    return false;
  };
  return search(0) ? mapping : null;
}

/** Candidate columns whose signature fits each gold column; null when some gold column has none. */
function columnOptions(gold: KeyTable, cand: KeyTable, ncols: number, rule: RowRule, strict: boolean): number[][] | null {
  const options: number[][] = [];
  if (rule.kind === "within") {
    const goldSets = [...Array(ncols).keys()].map((j) => new Set(gold.map((row) => row[j])));
    const candSets = [...Array(ncols).keys()].map((k) => new Set(cand.map((row) => row[k])));
    for (let j = 0; j < ncols; j++) {
      const fits = (k: number) => [...candSets[k]].every((v) => goldSets[j].has(v));
      const opts = strict ? (fits(j) ? [j] : []) : [...Array(ncols).keys()].filter(fits);
      if (opts.length === 0) return null;
      options.push(opts);
    }
    return options;
  }
  const sig = (t: KeyTable, c: number) =>
    rule.blocks.map(([s, e]) => (e - s === 1 ? JSON.stringify(t[s][c]) : JSON.stringify(t.slice(s, e).map((row) => row[c]).sort()))).join("|");
  const goldSig = [...Array(ncols).keys()].map((j) => sig(gold, j));
  const candSig = [...Array(ncols).keys()].map((k) => sig(cand, k));
  for (let j = 0; j < ncols; j++) {
    const opts = strict ? (candSig[j] === goldSig[j] ? [j] : []) : candSig.flatMap((s, k) => (s === goldSig[j] ? [k] : []));
    if (opts.length === 0) return null;
    options.push(opts);
  }
  // a quick necessary condition: the signatures must pair up one to one
  if (!strict && [...goldSig].sort().join("\n") !== [...candSig].sort().join("\n")) return null;
  return options;
}

/** Class ids of candidate columns: identical columns (same value in every row) share an id. */
function columnClasses(cand: KeyTable, ncols: number): number[] {
  const seen = new Map<string, number>();
  return [...Array(ncols).keys()].map((k) => {
    const content = JSON.stringify(cand.map((row) => row[k]));
    const id = seen.get(content);
    if (id !== undefined) return id;
    seen.set(content, k);
    return k;
  });
}

/** True when the projected rows agree under `rule`. */
export function rowsAgree(gold: string[], cand: string[], rule: RowRule): boolean {
  if (rule.kind === "within") {
    const g = new Set(gold);
    return cand.every((r) => g.has(r));
  }
  for (const [s, e] of rule.blocks) {
    if (e - s === 1) {
      if (gold[s] !== cand[s]) return false;
      continue;
    }
    const counts = new Map<string, number>();
    for (let r = s; r < e; r++) counts.set(gold[r], (counts.get(gold[r]) ?? 0) + 1);
    for (let r = s; r < e; r++) {
      const c = counts.get(cand[r]);
      if (!c) return false;
      counts.set(cand[r], c - 1);
    }
  }
  return true;
}
