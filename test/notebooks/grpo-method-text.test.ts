/** Notebook 03's method text says what its default config trains: a KL term only when that config's beta is above 0. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../helpers.js";
import { defaultOf } from "../../lib/train/settings.js";

test("notebook 03's method text matches its default config's KL setting", () => {
  const nb = JSON.parse(readFileSync(join(repoRoot, "notebooks/03-grpo-round.ipynb"), "utf8")) as { cells: Array<{ cell_type: string; source: string[] }> };
  const method = nb.cells.find((c) => c.cell_type === "markdown" && c.source.join("").includes("**Method.**"))!.source.join("").replace(/\s+/g, " ");
  const params = nb.cells.find((c) => c.cell_type === "code")!.source.join("");
  const configPath = /let config = "([^"]+)"/.exec(params)?.[1];
  assert.ok(configPath, "the parameters cell names a default config");
  const config = JSON.parse(readFileSync(join(repoRoot, configPath), "utf8")) as { beta?: number };
  const beta = config.beta ?? (defaultOf("beta", "grpo") as number);
  if (beta === 0) assert.match(method, /no KL term/, `${configPath} has beta 0, so the text may not promise a KL term`);
  else assert.doesNotMatch(method, /no KL term/, `${configPath} has beta ${beta}`);
  assert.doesNotMatch(method, /with a KL term to the reference model and/);
});
