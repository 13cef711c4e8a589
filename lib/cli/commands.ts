/**
 * The list of command groups `t2s` offers. Each entry names the top-level commands it adds and loads its
 * lib/cli file only when asked, so `t2s grade` does not load the model, training or notebook code (start-up
 * time is what every scripted call pays). Keep one line per lib/cli file so the list reads as the table of
 * contents of the CLI; test/cli/main.test.ts checks that each entry adds exactly the names it lists.
 */
import type { Command } from "commander";

export type RegisterCommands = (program: Command) => void;

export interface CommandGroup {
  /** The top-level command names the group adds. */
  names: string[];
  load: () => Promise<RegisterCommands>;
}

export const commandGroups: CommandGroup[] = [
  { names: ["info"], load: async () => (await import("./info.js")).registerInfo },
  { names: ["exec"], load: async () => (await import("./exec.js")).registerExec },
  { names: ["db"], load: async () => (await import("./db.js")).registerDb },
  { names: ["report"], load: async () => (await import("./stats-report.js")).registerReport },
  { names: ["delta"], load: async () => (await import("./delta.js")).registerDelta },
  { names: ["notebooks"], load: async () => (await import("./notebooks.js")).registerNotebooks },
  { names: ["benchmark"], load: async () => (await import("./benchmark.js")).registerBenchmark },
  { names: ["probe"], load: async () => (await import("./probe.js")).registerProbe },
  { names: ["grade"], load: async () => (await import("./grade.js")).registerGrade },
  { names: ["logits", "generate"], load: async () => (await import("./model.js")).registerModel },
  { names: ["serve"], load: async () => (await import("./serve.js")).registerServe },
  { names: ["tasks"], load: async () => (await import("./tasks.js")).registerTasks },
  { names: ["train"], load: async () => (await import("./train.js")).registerTrain },
  { names: ["figures"], load: async () => (await import("./figures.js")).registerFigures },
  { names: ["recipe"], load: async () => (await import("./recipe.js")).registerRecipe },
  { names: ["env"], load: async () => (await import("./env.js")).registerEnv },
  { names: ["adapter"], load: async () => (await import("./adapter.js")).registerAdapter },
];

/**
 * The groups a command line needs: the one owning its first word when that names a command, none for
 * `--version`, else all of them (help, an unknown command's suggestions).
 */
export function groupsFor(argv: string[]): CommandGroup[] {
  const first = argv[0];
  if (argv.length === 1 && (first === "--version" || first === "-V")) return [];
  const owner = commandGroups.find((g) => first !== undefined && g.names.includes(first));
  return owner ? [owner] : commandGroups;
}
