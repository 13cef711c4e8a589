/** `t2s info`: what this installation is (version, Node, where the kit lives). */
import type { Command } from "commander";
import { kitRoot, kitVersion } from "../core/paths.js";
import { printJson } from "./options.js";

/** Facts about this installation of the kit. */
export function installationInfo(): { version: string; node: string; root: string; platform: string } {
  return { version: kitVersion(), node: process.version, root: kitRoot(), platform: `${process.platform}-${process.arch}` };
}

export function registerInfo(program: Command): void {
  program
    .command("info")
    .description("show the kit version, Node version and install location")
    .option("--json", "print JSON")
    .action((opts: { json?: boolean }) => {
      const info = installationInfo();
      if (opts.json) printJson(info);
      else for (const [k, v] of Object.entries(info)) process.stdout.write(`${k.padEnd(9)} ${v}\n`);
    });
}
