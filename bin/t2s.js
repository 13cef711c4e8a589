#!/usr/bin/env node
// Entry point of the `t2s` command: loads the TypeScript sources through tsx, so no build step is needed.
import { register } from "tsx/esm/api";
register();
const { main } = await import("../lib/cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
