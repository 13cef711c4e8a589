/**
 * The HTTP thread's view of what the engine thread holds: a served model (its name, config and tokenizer,
 * read from the folder here; the weights are the engine thread's) and its generation engine (rows go over
 * by message; load and counters are read from the last snapshot the engine thread posted, never waited for).
 */
import type { EngineMetrics } from "../../model/engine/types.js";
import type { Generation, SequenceRequest } from "../../model/engine/types.js";
import type { ModelConfig } from "../../model/config.js";
import type { SequenceEngine, ServedModel } from "../../model/served-model.js";
import type { ChatTokenizer } from "../../model/tokenizer.js";
import { T2sError } from "../../core/errors.js";
import type { EngineCall, EngineSnapshot } from "./protocol.js";

/** What a remote model and engine need of the thread that talks to the engine thread. */
export interface EngineLink {
  call(c: EngineCall): Promise<unknown>;
  /** Posts a call whose answer nobody waits for (its failure is dropped). */
  tell(c: EngineCall): void;
  submit(model: string, req: SequenceRequest): Promise<Generation>;
  /** The engine's last posted snapshot (undefined before its first). */
  snapshotOf(model: string): EngineSnapshot | undefined;
  readonly backend: string;
}

/** A served model whose weights are in the engine thread. */
export class RemoteModel implements ServedModel {
  constructor(
    private readonly link: EngineLink,
    readonly name: string,
    readonly config: ModelConfig,
    readonly tokenizer: ChatTokenizer | null,
    readonly dir: string | null,
  ) {}

  get backend(): string {
    return this.link.backend;
  }

  requireTokenizer(): ChatTokenizer {
    if (!this.tokenizer) throw new T2sError("no_tokenizer", `model ${this.name} has no tokenizer.json`);
    return this.tokenizer;
  }

  async logitsOf(ids: number[]): Promise<Float32Array[]> {
    return (await this.link.call({ op: "logits", model: this.name, ids })) as Float32Array[];
  }

  /** Frees the weights in the engine thread (a merged adapter's; the base's are freed when the thread stops). */
  dispose(): void {
    this.link.tell({ op: "dispose", model: this.name });
  }
}

/** A served model's engine in the engine thread. */
export class RemoteEngine implements SequenceEngine {
  /** The snapshot the engine's close returned: its final counters. */
  private final: EngineSnapshot | null = null;

  constructor(private readonly link: EngineLink, private readonly name: string, private readonly first: EngineSnapshot) {}

  private get state(): EngineSnapshot {
    return this.final ?? this.link.snapshotOf(this.name) ?? this.first;
  }

  submit(req: SequenceRequest): Promise<Generation> {
    if (this.final) return Promise.reject(new T2sError("engine_closed", "the generation engine was closed"));
    return this.link.submit(this.name, req);
  }

  get load(): { running: number; waiting: number } {
    return this.state.load;
  }

  get metrics(): EngineMetrics {
    return this.state.metrics;
  }

  cacheUsage(): number {
    return this.state.cacheUsage;
  }

  weightsChanged(): void {
    this.link.tell({ op: "weightsChanged", model: this.name });
  }

  async close(): Promise<void> {
    if (this.final) return;
    const last = this.state;
    try {
      this.final = ((await this.link.call({ op: "closeEngine", model: this.name })) as EngineSnapshot | undefined) ?? { ...last, load: { running: 0, waiting: 0 }, cacheUsage: 0 };
    } catch {
      // a failed engine thread has nothing left to close; its last counters stand
      this.final = { ...last, load: { running: 0, waiting: 0 }, cacheUsage: 0 };
    }
  }
}
