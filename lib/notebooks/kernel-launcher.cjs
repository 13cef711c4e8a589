#!/usr/bin/env node
// The command a registered Jupyter kernelspec runs: tslab's own entry point, except that when Jupyter
// starts the kernel inside this kit (for example in notebooks/), the working directory becomes the kit
// root first. Then a notebook's `import ... from "./lib/..."` and relative data paths mean the same under
// Jupyter, nbclient and `t2s notebooks run`. Kernels started elsewhere keep Jupyter's directory.
"use strict";
const path = require("path");
const root = path.resolve(__dirname, "..", "..");
const cwd = process.cwd();
if (cwd === root || cwd.startsWith(root + path.sep)) {
  process.env.T2S_NOTEBOOK_DIR = process.env.T2S_NOTEBOOK_DIR || cwd;
  process.chdir(root);
}
require(path.join(root, "node_modules", "tslab", "dist", "main.js")).main();
