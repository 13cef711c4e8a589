/**
 * Turns the iopub messages of a run into nbformat outputs: streams merged the way Jupyter shows them,
 * rich outputs kept with all their MIME types, update_display_data applied in place to every output
 * that carries the display id (in any earlier cell), clear_output honoured.
 */
import type { CodeCell, DisplayDataOutput, ErrorOutput, ExecuteResultOutput, Output, StreamOutput } from "./nbformat.js";
import { joinSource } from "./nbformat.js";
import type { JupyterMessage } from "./protocol.js";

type RichOutput = DisplayDataOutput | ExecuteResultOutput;

function displayId(content: Record<string, unknown>): string | undefined {
  const t = content.transient as { display_id?: unknown } | undefined;
  return typeof t?.display_id === "string" && t.display_id ? t.display_id : undefined;
}

function asObject(v: unknown): Record<string, unknown> {
  return v && typeof v === "object" ? { ...(v as Record<string, unknown>) } : {};
}

/** Collects outputs for the cells of one notebook run. */
export class OutputCollector {
  private readonly displays = new Map<string, RichOutput[]>();
  private clearOnNext = false;

  /** Applies one iopub message to the cell that is running. */
  handle(cell: CodeCell, msg: JupyterMessage): void {
    const c = msg.content;
    switch (msg.header.msg_type) {
      case "stream":
        this.add(cell, { output_type: "stream", name: c.name === "stderr" ? "stderr" : "stdout", text: String(c.text ?? "") });
        break;
      case "display_data":
      case "execute_result": {
        const out: RichOutput =
          msg.header.msg_type === "execute_result"
            ? { output_type: "execute_result", execution_count: typeof c.execution_count === "number" ? c.execution_count : null, data: asObject(c.data), metadata: asObject(c.metadata) }
            : { output_type: "display_data", data: asObject(c.data), metadata: asObject(c.metadata) };
        this.add(cell, out);
        const id = displayId(c);
        if (id) this.displays.set(id, [...(this.displays.get(id) ?? []), out]);
        break;
      }
      case "update_display_data": {
        const id = displayId(c);
        for (const out of (id && this.displays.get(id)) || []) {
          out.data = asObject(c.data);
          out.metadata = asObject(c.metadata);
        }
        break;
      }
      case "error":
        this.add(cell, {
          output_type: "error",
          ename: String(c.ename ?? "Error"),
          evalue: String(c.evalue ?? ""),
          traceback: Array.isArray(c.traceback) ? c.traceback.map(String) : [],
        });
        break;
      case "clear_output":
        if (c.wait) this.clearOnNext = true;
        else this.clear(cell);
        break;
      default:
        break; // execute_input, status, comm messages: nothing to store
    }
  }

  private clear(cell: CodeCell): void {
    cell.outputs = [];
    this.clearOnNext = false;
  }

  private add(cell: CodeCell, out: Output): void {
    if (this.clearOnNext) this.clear(cell);
    const last = cell.outputs[cell.outputs.length - 1];
    if (out.output_type === "stream" && last?.output_type === "stream" && last.name === out.name) {
      last.text = joinSource(last.text) + joinSource(out.text);
      return;
    }
    cell.outputs.push(out);
  }
}

/**
 * Turns the stderr a failed cell printed into one error output (tslab reports a failure only as
 * status "error" plus text on stderr: TypeScript diagnostics "line:col - message", or the thrown error's
 * stack). The stderr stream outputs of that cell are folded into the traceback so the text is not shown twice.
 */
export function errorFromStderr(cell: CodeCell, fallback: string): ErrorOutput {
  const text = cell.outputs
    .filter((o): o is StreamOutput => o.output_type === "stream" && o.name === "stderr")
    .map((o) => joinSource(o.text))
    .join("")
    .trimEnd();
  cell.outputs = cell.outputs.filter((o) => !(o.output_type === "stream" && o.name === "stderr"));
  const lines = text ? text.split("\n") : [fallback];
  const diag = lines.find((l) => /^(\S+ )?\d+:\d+ - /.test(l));
  const thrown = lines.map((l) => /^(?:Uncaught )?([A-Za-z_$][\w$]*(?:Error|Exception)|Error)(?: \[[^\]]*\])?: (.*)$/.exec(l)).find(Boolean);
  const ename = diag ? "TypeScriptError" : thrown ? thrown[1] : "CellError";
  const evalue = diag ? diag.replace(/^(\S+ )?\d+:\d+ - /, "") : thrown ? thrown[2] : lines[0];
  return { output_type: "error", ename, evalue, traceback: lines };
}
