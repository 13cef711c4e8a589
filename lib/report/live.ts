/**
 * An output that updates in place (tslab's newDisplay), for progress lines and training curves that
 * redraw while a child process runs. Outside a tslab kernel it falls back to writing lines to stderr.
 */
import { createRequire } from "node:module";
import { kitPath } from "../core/paths.js";

export interface LiveOutput {
  html(markup: string): void;
  text(line: string): void;
}

interface TslabDisplayHandle {
  html(s: string): void;
  text(s: string): void;
}

/** Returns a display that replaces its own content on each call (in a notebook), or a stderr writer (elsewhere). */
export function liveOutput(): LiveOutput {
  try {
    const tslab = createRequire(kitPath("package.json"))("tslab") as { newDisplay(): TslabDisplayHandle };
    const handle = tslab.newDisplay();
    // probe: outside a kernel tslab throws "Not ready" on first use
    handle.text("…");
    return { html: (m) => handle.html(m), text: (t) => handle.text(t) };
  } catch {
    return { html: () => undefined, text: (t) => void process.stderr.write(t + "\n") };
  }
}
