/**
 * Server-sent events for the streaming routes, and the signal that cancels a generation when its client
 * goes away (streaming or not): the engine frees the row's slot at its next step.
 */
import type { FastifyReply } from "fastify";

/** Aborts when the client closes the connection before the response was finished. */
export function disconnectSignal(reply: FastifyReply): AbortSignal {
  const abort = new AbortController();
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) abort.abort();
  });
  return abort.signal;
}

/** An SSE response written straight to the socket, one `data:` event per chunk, each sent at once. */
export class EventStream {
  private readonly res: FastifyReply["raw"];

  constructor(reply: FastifyReply) {
    reply.hijack();
    this.res = reply.raw;
    this.res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" });
  }

  send(obj: unknown): void {
    if (!this.res.destroyed) this.res.write(`data: ${JSON.stringify(obj)}\n\n`);
  }

  /** Ends the stream the OpenAI way (`data: [DONE]`). */
  end(): void {
    if (!this.res.destroyed) this.res.end("data: [DONE]\n\n");
  }
}
