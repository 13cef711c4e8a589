/**
 * The list of command groups `t2s` offers. Each entry adds its subcommands to the program; keep one line
 * per lib/cli file so the list reads as the table of contents of the CLI.
 */
import type { Command } from "commander";
import { registerInfo } from "./info.js";
import { registerExec } from "./exec.js";
import { registerDb } from "./db.js";
import { registerReport } from "./report.js";
import { registerDelta } from "./delta.js";
import { registerNotebooks } from "./notebooks.js";
import { registerBenchmark } from "./benchmark.js";
import { registerGrade } from "./grade.js";
import { registerModel } from "./model.js";
import { registerServe } from "./serve.js";
import { registerTasks } from "./tasks.js";
import { registerTrain } from "./train.js";
import { registerFigures } from "./figures.js";
import { registerRecipe } from "./recipe.js";
import { registerEnv } from "./env.js";
import { registerAdapter } from "./adapter.js";

export type RegisterCommands = (program: Command) => void;

export const commandGroups: RegisterCommands[] = [
  registerInfo,
  registerExec,
  registerDb,
  registerReport,
  registerDelta,
  registerNotebooks,
  registerBenchmark,
  registerGrade,
  registerModel,
  registerServe,
  registerTasks,
  registerTrain,
  registerFigures,
  registerRecipe,
  registerEnv,
  registerAdapter,
];
