import type { Command } from "commander";
export function registerAdapter(program: Command): void { void program; }
