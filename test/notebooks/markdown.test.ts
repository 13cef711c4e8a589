import { test } from "node:test";
import assert from "node:assert/strict";
import { renderInline, renderMarkdown } from "../../lib/notebooks/markdown.js";

test("headings, paragraphs, emphasis, code spans and links", () => {
  const html = renderMarkdown("# Title here\n\nSome **bold**, *it*, `a<b` and [link](https://x.org).\nsame para");
  assert.match(html, /<h1 id="title-here">Title here<\/h1>/);
  assert.match(html, /<p>Some <strong>bold<\/strong>, <em>it<\/em>, <code>a&lt;b<\/code> and <a href="https:\/\/x.org">link<\/a>.\nsame para<\/p>/);
});

test("fenced code is escaped and keeps its language", () => {
  const html = renderMarkdown("```ts\nconst a = 1 < 2;\n```");
  assert.equal(html, '<pre><code class="language-ts">const a = 1 &lt; 2;</code></pre>');
});

test("nested lists, ordered lists with a start, quotes and rules", () => {
  const html = renderMarkdown("- a\n- b\n  - b1\n- c\n\n3. x\n4. y\n\n> quoted\n\n---");
  assert.match(html, /<ul><li>a<\/li><li>b<ul><li>b1<\/li><\/ul><\/li><li>c<\/li><\/ul>/);
  assert.match(html, /<ol start="3"><li>x<\/li><li>y<\/li><\/ol>/);
  assert.match(html, /<blockquote><p>quoted<\/p><\/blockquote>/);
  assert.match(html, /<hr>/);
});

test("pipe tables with alignment", () => {
  const html = renderMarkdown("| k | v |\n|---|--:|\n| a | 1 |");
  assert.match(html, /<table><thead><tr><th>k<\/th><th style="text-align:right">v<\/th><\/tr><\/thead><tbody><tr><td>a<\/td><td style="text-align:right">1<\/td><\/tr><\/tbody><\/table>/);
});

test("text is escaped but inline HTML tags pass through; javascript: links are neutralised", () => {
  assert.equal(renderInline("a < b & <b>c</b>"), "a &lt; b &amp; <b>c</b>");
  assert.match(renderInline("[x](javascript:alert(1))"), /href="#"/);
  assert.equal(renderInline("snake_case_name"), "snake_case_name");
});
