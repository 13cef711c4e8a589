// The runner signs executed notebooks for the user's Jupyter, so their figures show on open. That a run's
// notebook is trusted is checked in run.test.ts, on the 00-smoke run the tests there share.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { scratchDir } from "../helpers.js";
import { signForJupyter } from "../../lib/notebooks/trust.js";

test("without jupyter-trust the run still succeeds and says how to trust the notebook", () => {
  const before = process.env.T2S_JUPYTER_TRUST;
  process.env.T2S_JUPYTER_TRUST = "/no/such/jupyter-trust";
  try {
    const r = signForJupyter(join(scratchDir(), "x.ipynb"));
    assert.equal(r.signed, false);
    assert.match(r.reason, /not found.*jupyter trust .*jupyter-nbformat/);
  } finally {
    if (before === undefined) delete process.env.T2S_JUPYTER_TRUST;
    else process.env.T2S_JUPYTER_TRUST = before;
  }
});
