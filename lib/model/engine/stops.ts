/**
 * Stop strings and streamed text for one sequence. A piece of text is released to a listener only when it
 * can no longer turn out to be the start of a stop string or an unfinished UTF-8 character, so streamed
 * pieces always concatenate to the final text.
 *
 * Streamed text is decoded incrementally: each step decodes only the few tokens since the last complete
 * piece (with the tokens before them as context, for decoders whose output depends on a token's
 * neighbours), so a stream costs time in proportion to its length, not its square.
 */
import type { ChatTokenizer } from "../tokenizer.js";

export class StopWatcher {
  private readonly ids: number[] = [];
  private readonly longest: number;
  /** Text of ids[0, readOffset), decoded piece by piece. */
  private decoded = "";
  private prefixOffset = 0;
  private readOffset = 0;
  /** What listeners have received so far. */
  private emitted = "";
  /** The final text when a stop string ended the sequence (cut before it). */
  private cut: string | null = null;

  constructor(private readonly tok: ChatTokenizer | null, private readonly stops: string[], private readonly streaming: boolean, private readonly skipSpecial = true, private readonly keepStop = false) {
    this.stops = stops.filter((s) => s.length > 0);
    this.longest = this.stops.length ? Math.max(...this.stops.map((s) => s.length)) : 0;
  }

  private decode(ids: number[]): string {
    return this.tok && ids.length ? this.tok.decode(ids, { skipSpecialTokens: this.skipSpecial }) : "";
  }

  /** Extends `decoded` by the tokens since the last complete piece (none while a character is unfinished). */
  private catchUp(): void {
    const before = this.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const after = this.decode(this.ids.slice(this.prefixOffset));
    if (after.length <= before.length || after.endsWith("\uFFFD") || !after.startsWith(before)) return;
    this.decoded += after.slice(before.length);
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
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
    // include_stop_str_in_output: the text ends with the stop string instead of before it
    this.cut = full.slice(0, at) + (this.keepStop ? by : "");
    return { stop: by, delta: this.release(this.cut) };
  }

  /** New text that is safe to show now ("" when nobody listens). */
  safeDelta(): string {
    if (!this.streaming) return "";
    this.catchUp();
    const safe = this.decoded.length - Math.max(0, this.longest - 1);
    return safe > this.emitted.length ? this.release(this.decoded.slice(0, safe)) : "";
  }

  /** The rest of the text at the end of the sequence, without the last token when it was an end id. */
  flush(dropLast: boolean): string {
    if (!this.streaming) return "";
    return this.release(this.text(dropLast ? this.ids.slice(0, -1) : this.ids));
  }

  /** The final text of `ids` (the sequence's tokens, without an end id), cut before a stop string. */
  text(ids: number[]): string {
    if (this.cut !== null) return this.cut;
    const full = this.decode(ids);
    // streamed pieces are final: in the rare case a whole decode reads differently, the stream's text stands
    return this.streaming && !full.startsWith(this.emitted) ? this.emitted + full.slice(this.emitted.length) : full;
  }

  /** Sends what `text` adds to the emitted text (text extends it). */
  private release(text: string): string {
    if (!text.startsWith(this.emitted)) return "";
    const piece = text.slice(this.emitted.length);
    this.emitted = text;
    return piece;
  }
}
