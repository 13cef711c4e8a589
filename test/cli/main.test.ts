import { test } from "node:test";
import assert from "node:assert/strict";
import { runCli } from "../helpers.js";

test("t2s --help lists the subcommands and exits 0", async () => {
  const r = await runCli(["--help"]);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /Commands:/);
  assert.match(r.stdout, /info/);
});

test("an unknown flag exits 2 with a message naming it", async () => {
  const r = await runCli(["info", "--bogus"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /unknown option '--bogus'/);
});

test("an unknown command exits 2", async () => {
  const r = await runCli(["no-such-command"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /unknown command/);
});

test("info --json prints the version", async () => {
  const r = await runCli(["info", "--json"]);
  assert.equal(r.code, 0);
  const info = JSON.parse(r.stdout);
  assert.equal(info.version, "0.1.0");
});
