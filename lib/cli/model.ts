/** `t2s logits` and `t2s generate`: the in-process model from the command line. */
import type { Command } from "commander";
import { UsageError } from "../core/errors.js";
import { intOption, numberOption, printJson } from "./options.js";
import { SAMPLING_TEMPERATURE, TOP_P } from "../core/defaults.js";
import { WEIGHTS_DTYPE_HELP, weightsDtypeOption, type WeightsDtype } from "../model/weights-dtype.js";
import type { ChatMessage } from "../core/messages.js";

interface ModelFlags {
  model: string;
  adapter?: string;
  allowBaseMismatch?: boolean;
  backend?: string;
  weightsDtype?: WeightsDtype;
  json?: boolean;
}

async function openModel(flags: ModelFlags) {
  const { describeLoad, loadModel } = await import("../model/load.js");
  const { attachAdapter } = await import("../model/lora.js");
  const model = await loadModel(flags.model, { backend: flags.backend, weightsDtype: flags.weightsDtype });
  const adapter = flags.adapter ? attachAdapter(model, flags.adapter, { name: "adapter", allowBaseMismatch: flags.allowBaseMismatch }).name : null;
  if (!flags.json) process.stderr.write(`${describeLoad(model)}; ${model.config.architecture}${adapter ? ` with adapter ${flags.adapter}` : ""}\n`);
  return { model, adapter };
}

function parseIds(s: string): number[] {
  const ids = s.split(",").map((x) => x.trim()).filter((x) => x !== "").map(Number);
  if (ids.length === 0 || ids.some((x) => !Number.isInteger(x) || x < 0)) throw new UsageError(`--ids must be comma-separated token ids, got '${s}'`);
  return ids;
}

export function registerModel(program: Command): void {
  program
    .command("logits")
    .description("print the next-token logits of the last position (full vector with --json)")
    .requiredOption("--model <dir>", "Hugging Face model folder (config.json, safetensors, tokenizer.json)")
    .option("--adapter <dir>", "PEFT LoRA adapter folder applied on top (unmerged)")
    .option("--allow-base-mismatch", "load an adapter recorded as trained on another base model (refused by default)")
    .option("--text <text>", "input text (tokenized without adding special tokens)")
    .option("--ids <ids>", "input token ids, comma-separated, e.g. 1,2,3", parseIds)
    .option("--top <k>", "how many top tokens to list", intOption("--top", 1), 10)
    .option("--backend <name>", "tfjs backend: auto, webgpu, tensorflow, wasm, cpu (default auto)")
    .option("--weights-dtype <d>", WEIGHTS_DTYPE_HELP, weightsDtypeOption)
    .option("--json", "print JSON with the full logits vector")
    .action(async (opts: ModelFlags & { text?: string; ids?: number[]; top: number }) => {
      if ((opts.text === undefined) === (opts.ids === undefined)) throw new UsageError("give exactly one of --text or --ids");
      const { model, adapter } = await openModel(opts);
      const ids = opts.ids ?? model.requireTokenizer().encode(opts.text!, { addSpecialTokens: false });
      const outside = ids.find((id) => id >= model.config.vocabSize);
      if (outside !== undefined) throw new UsageError(`--ids: token id ${outside} is outside the vocabulary of ${model.name} (ids 0 to ${model.config.vocabSize - 1})`);
      if (ids.length === 0) throw new UsageError("--text gives no tokens");
      const rows = await model.logitsOf(ids, { adapter });
      const last = Array.from(rows[rows.length - 1]);
      const order = last.map((v, i) => i).sort((a, b) => last[b] - last[a]).slice(0, opts.top);
      const tok = model.tokenizer;
      const top = order.map((i) => ({ id: i, token: tok ? tok.decode([i]) : null, logit: last[i] }));
      if (opts.json) printJson({ model: model.name, adapter: opts.adapter ?? null, backend: model.backend, ids, logits: last, top });
      else for (const t of top) process.stdout.write(`${String(t.id).padStart(7)} ${t.logit.toFixed(5).padStart(12)}  ${JSON.stringify(t.token)}\n`);
      model.dispose();
    });

  program
    .command("generate")
    .description("sample a completion from a local model (the chat template is applied when the model has one)")
    .requiredOption("--model <dir>", "Hugging Face model folder")
    .option("--adapter <dir>", "PEFT LoRA adapter folder applied on top")
    .option("--allow-base-mismatch", "load an adapter recorded as trained on another base model (refused by default)")
    .requiredOption("--prompt <text>", "the user message (or raw text with --raw)")
    .option("--system <text>", "a system message before the prompt")
    .option("--raw", "feed the prompt as plain text, without the chat template")
    .option("--max-tokens <n>", "new tokens at most", intOption("--max-tokens", 1), 128)
    .option("--temperature <t>", "sampling temperature (0 = greedy)", numberOption("--temperature", { min: 0 }), SAMPLING_TEMPERATURE)
    .option("--top-p <p>", "nucleus sampling mass", numberOption("--top-p", { gt: 0, max: 1 }), TOP_P)
    .option("--top-k <k>", "keep the k most likely tokens (0 = all)", intOption("--top-k"), 0)
    .option("--seed <n>", "random seed", intOption("--seed"), 0)
    .option("-n, --n <n>", "number of samples", intOption("--n", 1), 1)
    .option("--stop <text...>", "stop strings")
    .option("--backend <name>", "tfjs backend: auto, webgpu, tensorflow, wasm, cpu (default auto)")
    .option("--weights-dtype <d>", WEIGHTS_DTYPE_HELP, weightsDtypeOption)
    .option("--json", "print JSON (text, token ids, logprobs, finish reason per sample)")
    .action(async (opts: ModelFlags & { prompt: string; system?: string; raw?: boolean; maxTokens: number; temperature: number; topP: number; topK: number; seed: number; n: number; stop?: string[] }) => {
      const { model, adapter } = await openModel(opts);
      const { generate } = await import("../model/generate.js");
      const { renderChat } = await import("../model/chat.js");
      const tok = model.requireTokenizer();
      let text = opts.prompt;
      if (!opts.raw && tok.hasChatTemplate) {
        const messages: ChatMessage[] = [...(opts.system ? [{ role: "system" as const, content: opts.system }] : []), { role: "user", content: opts.prompt }];
        text = renderChat(tok, messages);
      }
      const ids = tok.encode(text, { addSpecialTokens: opts.raw ?? !tok.hasChatTemplate });
      const started = Date.now();
      const out = await generate(model, Array.from({ length: opts.n }, () => ids), { maxTokens: opts.maxTokens, temperature: opts.temperature, topP: opts.topP, topK: opts.topK, seed: opts.seed, stop: opts.stop, adapter });
      const seconds = (Date.now() - started) / 1000;
      if (opts.json) {
        printJson({ model: model.name, adapter: opts.adapter ?? null, backend: model.backend, prompt_tokens: ids.length, seconds, samples: out.map((g) => ({ text: g.text, ids: g.ids, logprobs: g.logprobs, finish_reason: g.finishReason })) });
      } else {
        out.forEach((g, i) => process.stdout.write(`${opts.n > 1 ? `--- sample ${i} (${g.finishReason})\n` : ""}${g.text}\n`));
        const newTokens = out.reduce((s, g) => s + g.ids.length, 0);
        process.stderr.write(`${newTokens} new tokens in ${seconds.toFixed(2)} s\n`);
      }
      model.dispose();
    });
}
