/**
 * A small Markdown to HTML renderer for notebook text cells in the HTML report: headings, paragraphs,
 * emphasis, code spans and fenced code, links and images, nested lists, block quotes, rules, pipe tables,
 * and raw HTML passed through (Jupyter renders it too). Not CommonMark-complete; enough for notebooks.
 */

/** HTML-escaped text. */
export function escapeHtml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function safeUrl(url: string): string {
  return /^\s*javascript:/i.test(url) ? "#" : url;
}

/** Inline Markdown (one paragraph's text) to HTML. */
export function renderInline(text: string): string {
  const slots: string[] = [];
  const keep = (html: string) => `\u0000${slots.push(html) - 1}\u0000`;
  let s = text
    .replace(/`([^`]+)`/g, (_, code: string) => keep(`<code>${escapeHtml(code)}</code>`))
    .replace(/<\/?[A-Za-z][^<>]*>/g, (tag) => keep(tag))
    .replace(/!\[([^\]]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g, (_, alt: string, src: string) => keep(`<img alt="${escapeHtml(alt)}" src="${escapeHtml(safeUrl(src))}">`))
    .replace(/\[([^\]]+)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g, (_, label: string, href: string) => keep(`<a href="${escapeHtml(safeUrl(href))}">`) + label + keep("</a>"))
    .replace(/<(https?:\/\/[^>\s]+)>/g, (_, url: string) => keep(`<a href="${escapeHtml(url)}">${escapeHtml(url)}</a>`));
  s = s.replace(/&(?![a-zA-Z]+;|#\d+;)/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  s = s
    .replace(/(\*\*|__)(?=\S)([\s\S]*?\S)\1/g, "<strong>$2</strong>")
    .replace(/(^|[^\w*])\*(?=\S)([^*]*?\S)\*(?!\*)/g, "$1<em>$2</em>")
    .replace(/(^|[^\w])_(?=\S)([^_]*?\S)_(?!\w)/g, "$1<em>$2</em>")
    .replace(/~~(?=\S)([\s\S]*?\S)~~/g, "<del>$1</del>")
    .replace(/ {2,}\n/g, "<br>\n");
  return s.replace(/\u0000(\d+)\u0000/g, (_, i: string) => slots[Number(i)]);
}

const LIST_ITEM = /^(\s*)([-*+]|\d+[.)])\s+(.*)$/;

function renderList(lines: string[]): string {
  const first = LIST_ITEM.exec(lines[0]);
  if (!first) return "";
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const items: string[][] = [];
  for (const line of lines) {
    const m = LIST_ITEM.exec(line);
    if (m && m[1].length <= indent) items.push([m[3]]);
    else if (items.length) items[items.length - 1].push(line.slice(Math.min(indent + 2, line.length - line.trimStart().length)));
  }
  const body = items.map((item) => {
    const nested = item.findIndex((l, i) => i > 0 && LIST_ITEM.test(l));
    const head = nested < 0 ? item : item.slice(0, nested);
    const rest = nested < 0 ? "" : renderMarkdown(item.slice(nested).join("\n"));
    return `<li>${renderInline(head.map((l) => l.trim()).join("\n"))}${rest}</li>`;
  });
  const start = ordered && parseInt(first[2], 10) !== 1 ? ` start="${parseInt(first[2], 10)}"` : "";
  return ordered ? `<ol${start}>${body.join("")}</ol>` : `<ul>${body.join("")}</ul>`;
}

function splitRow(line: string): string[] {
  return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
}

function renderTable(lines: string[]): string {
  const head = splitRow(lines[0]);
  const aligns = splitRow(lines[1]).map((c) => (c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : ""));
  const cell = (tag: string, c: string, i: number) => `<${tag}${aligns[i] ? ` style="text-align:${aligns[i]}"` : ""}>${renderInline(c)}</${tag}>`;
  const rows = lines.slice(2).map((l) => `<tr>${splitRow(l).map((c, i) => cell("td", c, i)).join("")}</tr>`);
  return `<table><thead><tr>${head.map((c, i) => cell("th", c, i)).join("")}</tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

/** A Markdown document to HTML. */
export function renderMarkdown(md: string): string {
  const lines = md.replace(/\r\n?/g, "\n").split("\n");
  const out: string[] = [];
  let i = 0;
  const isBlank = (l: string | undefined) => l === undefined || l.trim() === "";
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) {
      i++;
      continue;
    }
    const fence = /^\s*(```+|~~~+)\s*([\w+-]*)/.exec(line);
    if (fence) {
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      const cls = fence[2] ? ` class="language-${escapeHtml(fence[2])}"` : "";
      out.push(`<pre><code${cls}>${escapeHtml(body.join("\n"))}</code></pre>`);
      continue;
    }
    const h = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const id = h[2].toLowerCase().replace(/[^\w\s-]/g, "").trim().replace(/\s+/g, "-");
      out.push(`<h${h[1].length} id="${escapeHtml(id)}">${renderInline(h[2])}</h${h[1].length}>`);
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      out.push("<hr>");
      i++;
      continue;
    }
    if (/^\s*>/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*>\s?/, ""));
      out.push(`<blockquote>${renderMarkdown(body.join("\n"))}</blockquote>`);
      continue;
    }
    if (LIST_ITEM.test(line)) {
      // a top-level item with the other kind of marker (bullet vs number) starts a new list
      const kind = (l: string) => {
        const m = LIST_ITEM.exec(l);
        return m && m[1].length <= baseIndent ? (/\d/.test(m[2]) ? "ol" : "ul") : "nested";
      };
      const baseIndent = line.length - line.trimStart().length;
      const own = kind(line);
      const sameList = (l: string | undefined) => l !== undefined && LIST_ITEM.test(l) && kind(l) !== (own === "ol" ? "ul" : "ol");
      const body: string[] = [];
      while (i < lines.length && (sameList(lines[i]) || (!isBlank(lines[i]) && !LIST_ITEM.test(lines[i]) && /^\s+/.test(lines[i])) || (isBlank(lines[i]) && sameList(lines[i + 1])))) {
        if (!isBlank(lines[i])) body.push(lines[i]);
        i++;
      }
      out.push(renderList(body));
      continue;
    }
    if (line.includes("|") && /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/.test(lines[i + 1] ?? "")) {
      const body: string[] = [];
      while (i < lines.length && !isBlank(lines[i]) && lines[i].includes("|")) body.push(lines[i++]);
      out.push(renderTable(body));
      continue;
    }
    if (/^\s*<\/?[A-Za-z][\w-]*[\s>/]/.test(line)) {
      while (i < lines.length && !isBlank(lines[i])) out.push(lines[i++]);
      continue;
    }
    const para: string[] = [];
    while (i < lines.length && !isBlank(lines[i]) && !/^(#{1,6}\s|\s*(```|~~~)|\s*>)/.test(lines[i]) && !(para.length && LIST_ITEM.test(lines[i]))) para.push(lines[i++]);
    out.push(`<p>${renderInline(para.join("\n"))}</p>`);
  }
  return out.join("\n");
}
