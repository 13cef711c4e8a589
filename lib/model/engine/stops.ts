/**
 * Stop strings and streamed text for one sequence. Text is decoded from the ids generated so far; a piece
 * is released to a listener only when it can no longer turn out to be the start of a stop string or an
 * unfinished UTF-8 character, so streamed pieces always concatenate to the final text.
 */
import type { ChatTokenizer } from "../tokenizer.js";

export class StopWatcher {
  private readonly ids: number[] = [];
  private readonly longest: number;
  private emitted = 0;
  /** The final text when a stop string ended the sequence (cut before it). */
  private cut: string | null = null;

  constructor(private readonly tok: ChatTokenizer | null, private readonly stops: string[], private readonly streaming: boolean) {
    this.stops = stops.filter((s) => s.length > 0);
    this.longest = this.stops.length ? Math.max(...this.stops.map((s) => s.length)) : 0;
  }

  private decode(ids: number[]): string {
    return this.tok && ids.length ? this.tok.decode(ids, { skipSpecialTokens: true }) : "";
  }

  /** Adds a token; returns the stop string and the last piece of text when the text now contains one. */
  push(id: number): { stop: string; delta: string } | null {
    this.ids.push(id);
    if (!this.stops.length) return null;
    // only the tail can hold a stop string that was not there one token ago
    const tail = this.decode(this.ids.slice(-(2 * this.longest + 4)));
    if (!this.stops.some((s) => tail.includes(s))) return null;
    const full = this.decode(this.ids);
    let at = -1;
    let by = "";
    for (const s of this.stops) {
      const i = full.indexOf(s);
      if (i >= 0 && (at < 0 || i < at)) {
        at = i;
        by = s;
      }
    }
    if (at < 0) return null;
    this.cut = full.slice(0, at);
    const delta = this.streaming ? this.cut.slice(this.emitted) : "";
    this.emitted = this.cut.length;
    return { stop: by, delta };
  }

  /** New text that is safe to show now ("" when nobody listens). */
  safeDelta(): string {
    if (!this.streaming) return "";
    let text = this.decode(this.ids);
    while (text.endsWith("\uFFFD")) text = text.slice(0, -1);
    const safe = text.length - Math.max(0, this.longest - 1);
    if (safe <= this.emitted) return "";
    const piece = text.slice(this.emitted, safe);
    this.emitted = safe;
    return piece;
  }

  /** The rest of the text at the end of the sequence, without the last token when it was an end id. */
  flush(dropLast: boolean): string {
    if (!this.streaming) return "";
    const text = this.decode(dropLast ? this.ids.slice(0, -1) : this.ids);
    const piece = text.slice(this.emitted);
    this.emitted = text.length;
    return piece;
  }

  /** The final text of `ids` (the sequence's tokens, without an end id), cut before a stop string. */
  text(ids: number[]): string {
    return this.cut ?? this.decode(ids);
  }
}
