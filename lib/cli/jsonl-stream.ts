/** Answering a JSONL stream on stdin line by line, concurrently but in input order. */
import { createInterface } from "node:readline";

/**
 * Reads stdin line by line and writes one answer line per input line, in input order, so output line N
 * always answers input line N (a blank line gets `blank(lineNo)`, an error line). Up to `window` lines
 * are answered concurrently; the window bounds memory on long streams. `answer` gets the raw line and its
 * 1-based number and must not throw (a bad line becomes that line's answer).
 */
export async function answerJsonlStream(answer: (raw: string, lineNo: number) => Promise<string>, window: number, blank: (lineNo: number) => string): Promise<void> {
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  const pending: Promise<string>[] = [];
  let lineNo = 0;
  for await (const raw of rl) {
    lineNo++;
    pending.push(raw.trim() === "" ? Promise.resolve(blank(lineNo)) : answer(raw, lineNo));
    while (pending.length >= window) process.stdout.write((await pending.shift()) + "\n");
  }
  while (pending.length) process.stdout.write((await pending.shift()) + "\n");
}
