/**
 * A self-contained HTML page for an executed notebook: markdown cells rendered, code with its execution
 * count, and outputs in the richest MIME type the page can show. HTML outputs are inserted as they are, so
 * the script that loads plotly.js (the stored report's shared copy, or a bundle inlined in the output) and
 * the figures after it work offline, as in a trusted Jupyter notebook.
 */
import { escapeHtml, renderMarkdown } from "./markdown.js";
import { joinSource, type Cell, type Notebook, type Output } from "./nbformat.js";

const ANSI = /\u001b\[[0-9;?]*[A-Za-z]/g;

function text(v: unknown): string {
  return Array.isArray(v) || typeof v === "string" ? joinSource(v as string | string[]) : JSON.stringify(v, null, 2);
}

function pre(s: string, cls: string): string {
  return `<pre class="${cls}">${escapeHtml(s.replace(ANSI, ""))}</pre>`;
}

function richOutput(data: Record<string, unknown>): string {
  const v = (mime: string) => text(data[mime]);
  if ("text/html" in data) return `<div class="html">${v("text/html")}</div>`;
  if ("image/svg+xml" in data) return `<div class="svg">${v("image/svg+xml")}</div>`;
  for (const img of ["image/png", "image/jpeg", "image/gif"]) {
    if (img in data) return `<img class="img" alt="output" src="data:${img};base64,${v(img).replace(/\s+/g, "")}">`;
  }
  if ("text/markdown" in data) return `<div class="md">${renderMarkdown(v("text/markdown"))}</div>`;
  if ("text/latex" in data) return pre(v("text/latex"), "latex");
  for (const js of ["application/javascript", "text/javascript"]) {
    if (js in data) return `<script>${v(js).replace(/<\/script/gi, "<\\/script")}</script>`;
  }
  if ("application/json" in data) return pre(v("application/json"), "plain");
  if ("text/plain" in data) return pre(v("text/plain"), "plain");
  const first = Object.keys(data)[0];
  return first ? pre(`[${first} output]`, "plain") : "";
}

function renderOutput(o: Output): string {
  switch (o.output_type) {
    case "stream":
      return pre(joinSource(o.text), o.name === "stderr" ? "stderr" : "stdout");
    case "display_data":
      return richOutput(o.data);
    case "execute_result":
      return `<div class="result"><span class="prompt out">Out[${o.execution_count ?? " "}]:</span>${richOutput(o.data)}</div>`;
    case "error":
      return pre(o.traceback.length ? o.traceback.join("\n") : `${o.ename}: ${o.evalue}`, "error");
  }
}

function renderCell(cell: Cell, failedId: string | undefined): string {
  const src = joinSource(cell.source);
  if (cell.cell_type === "markdown") return `<section class="cell markdown">${renderMarkdown(src)}</section>`;
  if (cell.cell_type !== "code") return `<section class="cell raw">${pre(src, "raw")}</section>`;
  const tags = Array.isArray(cell.metadata.tags) ? (cell.metadata.tags as unknown[]).map(String) : [];
  const cls = ["cell", "code", cell.id === failedId ? "failed" : "", cell.execution_count === null ? "not-run" : "", ...tags.map((t) => `tag-${t.replace(/[^\w-]/g, "")}`)];
  const prompt = `<span class="prompt">In [${cell.execution_count ?? " "}]:</span>`;
  const tagNote = tags.length ? `<span class="tags">${tags.map(escapeHtml).join(", ")}</span>` : "";
  return `<section class="${cls.filter(Boolean).join(" ")}" id="cell-${escapeHtml(cell.id)}">
<div class="input">${prompt}${tagNote}<pre class="source"><code>${escapeHtml(src)}</code></pre></div>
<div class="outputs">${cell.outputs.map(renderOutput).join("\n")}</div>
</section>`;
}

const STYLE = `
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
header.run{border-bottom:1px solid #ddd;margin-bottom:1.5em;padding-bottom:.5em;color:#555;font-size:.9em}
header.run .ok{color:#1a7f37;font-weight:600} header.run .failed{color:#cf222e;font-weight:600}
.cell{margin:1em 0} .cell.code .input{position:relative}
.prompt{display:block;color:#888;font:12px monospace;margin-bottom:2px} .prompt.out{color:#b35900}
.tags{position:absolute;right:0;top:0;font:11px monospace;color:#888;background:#f3f3f3;padding:0 4px;border-radius:3px}
pre{margin:0;padding:.6em .8em;overflow-x:auto;font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;white-space:pre-wrap;word-break:break-word}
pre.source{background:#f6f8fa;border:1px solid #e1e4e8;border-radius:4px}
.outputs{margin-left:.5em} .outputs>*{margin-top:.4em}
pre.stderr{background:#fff5f5} pre.error{background:#ffebe9;color:#82071e;border-left:3px solid #cf222e}
.cell.failed pre.source{border-color:#cf222e} .cell.not-run{opacity:.55}
.html table,.md table,.markdown table{border-collapse:collapse} .markdown th,.markdown td,.html th,.html td,.md th,.md td{border:1px solid #ddd;padding:3px 8px}
.markdown code{background:#f3f3f3;padding:0 3px;border-radius:3px} .markdown pre code{background:none}
.markdown pre{background:#f6f8fa} img.img{max-width:100%} blockquote{border-left:3px solid #ddd;margin-left:0;padding-left:1em;color:#555}
`;

/** The notebook as one HTML page (standalone but for the plotly.js copy a stored report loads by a relative URL). */
export function renderNotebookHtml(nb: Notebook, opts: { title: string }): string {
  const meta = (nb.metadata.t2s ?? {}) as { status?: string; params?: Record<string, unknown>; duration_ms?: number; failed_cell?: number; failed_cell_id?: string; started_at?: string };
  const status = meta.status
    ? `<span class="${meta.status === "ok" ? "ok" : "failed"}">${meta.status === "ok" ? "ran without errors" : `failed at cell ${meta.failed_cell}`}</span>`
    : "";
  const facts = [
    status,
    meta.started_at ? `started ${escapeHtml(meta.started_at)}` : "",
    typeof meta.duration_ms === "number" ? `${(meta.duration_ms / 1000).toFixed(1)} s` : "",
    meta.params && Object.keys(meta.params).length ? `params <code>${escapeHtml(JSON.stringify(meta.params))}</code>` : "",
  ].filter(Boolean);
  const cells = nb.cells.map((c) => renderCell(c, meta.failed_cell_id)).join("\n");
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(opts.title)}</title>
<style>${STYLE}</style>
</head>
<body>
<header class="run"><strong>${escapeHtml(opts.title)}</strong>${facts.length ? " · " + facts.join(" · ") : ""}</header>
<main>
${cells}
</main>
</body>
</html>
`;
}
