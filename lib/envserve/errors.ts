/** The environment service's request errors: the HTTP layer answers each with its status and message. */
import { T2sError } from "../core/errors.js";

/** A bad request (400), or with `status` an unknown task (404), a refused database (403), an oversized body (413). */
export class BadRequest extends T2sError {
  constructor(message: string, readonly status = 400) {
    super("bad_request", message);
  }
}

/** Refuses a request object holding a field not in `allowed`, naming it and the fields there are. */
export function refuseUnknownFields(body: Record<string, unknown>, allowed: readonly string[], what: string): void {
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length) {
    throw new BadRequest(`unknown field${unknown.length > 1 ? "s" : ""} ${unknown.map((k) => JSON.stringify(k)).join(", ")} in ${what}; the fields are ${allowed.map((k) => JSON.stringify(k)).join(", ")}`);
  }
}
