import { test } from "node:test";
import assert from "node:assert/strict";
import { isT2sError } from "../../lib/core/errors.js";
import { html, plotlyBundleHtml, plotlyFigureHtml, scriptJson } from "../../lib/report/display.js";

test("plotlyFigureHtml makes a div and a newPlot call whose JSON cannot close the script element", () => {
  const out = plotlyFigureHtml({ data: [{ type: "bar", x: ["</script><b>"], y: [1] }], layout: { title: { text: "t" } } }, { height: "300px" });
  const id = /<div id="([^"]+)"/.exec(out)?.[1];
  assert.ok(id);
  assert.match(out, /height:300px/);
  assert.match(out, /Plotly\.newPlot\(el,\[\{"type":"bar","x":\["\\u003c\/script>\\u003cb>"\]/);
  assert.equal(out.match(/<\/script>/g)?.length, 1);
  assert.notEqual(plotlyFigureHtml({ data: [] }).match(/id="([^"]+)"/)?.[1], id, "every figure gets its own div id");
});

test("plotlyBundleHtml inlines the whole plotly.js bundle in one script element", () => {
  const b = plotlyBundleHtml();
  assert.ok(b.length > 1_000_000);
  assert.match(b.slice(0, 300), /plotly\.js v\d/);
  assert.equal(b.match(/<\/script/gi)?.length, 1);
  assert.equal(scriptJson("\u2028<"), '"\\u2028\\u003c"');
});

test("display helpers outside a notebook kernel fail with a clear error", () => {
  assert.throws(() => html("<b>x</b>"), (e) => isT2sError(e, "not_in_notebook"));
});
