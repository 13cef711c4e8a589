/** `t2s adapter check|convert`: will a server place this LoRA adapter on this base, and rename it if not. */
import type { Command } from "commander";
import { UsageError } from "../core/errors.js";
import { CHECK_TARGETS, checkAdapter, convertAdapter, recordAdapterBase, vllmLayoutFor, type AdapterCheck, type CheckTarget } from "../model/adapter-check.js";
import { LORA_LAYOUTS, type LoraLayout } from "../model/lora-layout.js";
import { oneOf, printJson } from "./options.js";

/** Adds `t2s adapter` to the program. */
export function registerAdapter(program: Command): void {
  const adapter = program.command("adapter").description("LoRA adapters: check their weight names against a base, convert between layouts");
  adapter
    .command("check")
    .description("check that every LoRA weight maps to a module of the base under PEFT's and vLLM's names, shapes fit, the adapter is not a no-op, and what the kit, PEFT and vLLM do with adapter_config.json (exit 1 when a runtime would serve something else)")
    .requiredOption("--base <dir>", "base model folder (config.json + model.safetensors or shards)")
    .requiredOption("--adapter <dir>", "PEFT adapter folder (adapter_model.safetensors)")
    .option("--for <runtime>", "runtimes to check for: kit, peft, vllm, both (peft and vllm) or all", "all")
    .option("--allow-base-mismatch", "an adapter recorded as trained on another base is a warning, not a failure")
    .option("--json", "print the check as one JSON object")
    .action((f: { base: string; adapter: string; for: string; allowBaseMismatch?: boolean; json?: boolean }) => {
      const which = oneOf("--for", f.for, ["kit", "peft", "vllm", "both", "all"] as const);
      const targets: CheckTarget[] = which === "all" ? [...CHECK_TARGETS] : which === "both" ? ["peft", "vllm"] : [which];
      const r = checkAdapter(f.base, f.adapter, targets, { allowBaseMismatch: f.allowBaseMismatch });
      if (f.json) printJson({ ...r, ok: r.failures.length === 0 });
      else {
        const lines = [
          `base ${r.base}${r.multimodal ? " (multimodal wrapper: decoder under model.language_model)" : ""}`,
          `adapter ${r.adapter}: ${r.keys} weights, ${r.pairs} LoRA pairs; layouts ${Object.entries(r.layouts).map(([k, v]) => `${k} ${v}`).join(", ") || "none"}`,
          `PEFT places ${r.peft.matched} of ${r.keys}; vLLM places ${r.vllm.matched} of ${r.keys}${r.kit ? `; the kit's loader ${r.kit.ok ? "places every pair" : "refuses it"}` : ""}`,
          baseLine(r),
          ...(r.zeroKeys.length && !r.failures.some((x) => x.includes("no-op")) ? [`note: ${r.zeroKeys.length} all-zero matrices (those modules are unchanged)`] : []),
          ...r.warnings.map((x) => `WARN ${x}`),
          ...r.failures.map((x) => `FAIL ${x}`),
          r.failures.length ? `FAIL: ${r.failures.length} problem(s)` : `PASS: every weight maps to a module of the base and ${targets.join(", ")} serve${targets.length === 1 ? "s" : ""} the adapter as trained${r.warnings.length ? ` (${r.warnings.length} warning(s))` : ""}`,
        ];
        process.stdout.write(lines.join("\n") + "\n");
      }
      if (r.failures.length) process.exitCode = 1;
    });
  adapter
    .command("record")
    .description("write this base's record into an adapter that belongs to it (made by PEFT or an older kit), so that every later load on another base is refused")
    .requiredOption("--base <dir>", "the base model folder the adapter was trained on")
    .requiredOption("--adapter <dir>", "PEFT adapter folder (its adapter_model.safetensors is rewritten with the same tensors)")
    .option("--force", "replace a record of another base")
    .option("--json", "print the result as JSON")
    .action((f: { base: string; adapter: string; force?: boolean; json?: boolean }) => {
      const r = recordAdapterBase(f.base, f.adapter, { force: f.force });
      if (f.json) printJson(r);
      else process.stdout.write(`wrote the record of base '${r.record.name}' into ${r.file}${r.previous ? ` (it recorded '${r.previous.name}')` : ""}\n`);
    });
  adapter
    .command("convert")
    .description("write a copy of an adapter with its weight names in another layout (same values and dtype)")
    .requiredOption("--adapter <dir>", "PEFT adapter folder to convert")
    .requiredOption("--to <layout>", `${LORA_LAYOUTS.join(", ")}, or vllm (vLLM's own names for --base)`)
    .requiredOption("--out <dir>", "folder for the converted adapter (must not hold one already)")
    .option("--base <dir>", "base model folder (needed by --to vllm: its names depend on the base)")
    .option("--json", "print the result as JSON")
    .action((f: { adapter: string; to: string; out: string; base?: string; json?: boolean }) => {
      let layout: LoraLayout;
      if (f.to === "vllm") {
        if (!f.base) throw new UsageError("--to vllm needs --base (a text base keeps the PEFT names; a multimodal one takes language_model.model.*)");
        layout = vllmLayoutFor(f.base);
      } else layout = oneOf("--to", f.to, LORA_LAYOUTS);
      const r = convertAdapter(f.adapter, layout, f.out);
      if (f.json) printJson({ ...r, layout });
      else process.stdout.write(`wrote ${r.file}: ${r.renamed} of ${r.keys} weight names rewritten in the ${layout} layout\n`);
    });
}

/** One line on the base the adapter records, against the base checked. */
function baseLine(r: AdapterCheck): string {
  const b = r.baseRecord;
  if (!b.recorded) return "base record: none (an adapter from PEFT or an older kit): names and shapes checked only; t2s adapter record adds one";
  if (!b.actual) return `base record: trained on '${b.recorded.name}' (this base's record could not be read)`;
  return b.differs.length ? `base record: trained on '${b.recorded.name}'; this base differs in ${b.differs.join(", ")}` : `base record: trained on '${b.recorded.name}', this base (same config.json, weight names, shapes and values)`;
}
