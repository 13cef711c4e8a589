/** How a failure anywhere in a request reaches the client: an OpenAI-style error with the right status. */
import { isT2sError } from "../core/errors.js";
import { RequestError } from "./params.js";

/** An absolute file path inside a message (a model folder, a tokenizer file). */
const SERVER_PATH = /(^|[\s'"(])\/(?:[^\s'"():]+\/)*[^\s'"():]*/g;

/** A kit error's message without the server's file paths (the client named none of them). */
function scrub(message: string): string {
  return message.replace(SERVER_PATH, "$1<server path>");
}

/** Maps any failure to the RequestError the client sees (messages of the kit's own errors lose server paths). */
export function asRequestError(e: unknown): RequestError {
  if (e instanceof RequestError) return e;
  if (isT2sError(e)) e.message = scrub(e.message);
  if (isT2sError(e, "model_not_found")) return new RequestError(404, e.message, { param: "model", code: "model_not_found" });
  if (isT2sError(e, "context_length_exceeded")) return new RequestError(400, e.message, { param: "max_tokens", code: "context_length_exceeded" });
  if (isT2sError(e, "cancelled")) return new RequestError(503, `${e.message} (the model was unloaded or the server is stopping)`, { code: "cancelled" });
  if (isT2sError(e, "chat_template_failed") || isT2sError(e, "usage")) return new RequestError(400, e.message);
  // guided decoding: a limit or a schema with no way on is the client's to fix; a failed engine is retried
  if (isT2sError(e, "guided_limit") || isT2sError(e, "guided_decoding")) return new RequestError(400, e.message, { param: "response_format", code: e.code });
  if (isT2sError(e, "guided_unavailable")) return new RequestError(503, e.message, { code: e.code });
  // the engine thread died, or the engine closed under the request (the server is stopping)
  if (isT2sError(e, "engine_failed") || isT2sError(e, "engine_closed")) return new RequestError(503, e.message, { code: e.code });
  if (isT2sError(e, "missing_file") || isT2sError(e, "bad_adapter") || isT2sError(e, "adapter_mismatch") || isT2sError(e, "bad_safetensors")) return new RequestError(400, e.message, { code: e.code });
  // errors of the framework itself (a body over the limit, a bad content type) carry their status
  const status = (e as { statusCode?: unknown })?.statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) return new RequestError(status, (e as Error).message);
  return new RequestError(500, scrub(e instanceof Error ? e.message : String(e)));
}
