/**
 * The Jupyter messaging wire format (protocol 5.3): a message is the routing prefix, the `<IDS|MSG>`
 * delimiter, an HMAC-SHA256 signature over the four JSON parts, then header, parent header, metadata and
 * content. The kernel rejects unsigned or badly signed messages, and so do we.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

export const DELIMITER = Buffer.from("<IDS|MSG>");
export const PROTOCOL_VERSION = "5.3";

export interface MessageHeader {
  msg_id: string;
  msg_type: string;
  session: string;
  username: string;
  date: string;
  version: string;
}

export interface JupyterMessage {
  header: MessageHeader;
  parent_header: Partial<MessageHeader>;
  metadata: Record<string, unknown>;
  content: Record<string, unknown>;
}

/** A fresh random hex id (message ids, session ids, keys). */
export function randomId(bytes = 16): string {
  return randomBytes(bytes).toString("hex");
}

/** The hex HMAC-SHA256 of the given parts, or "" when the key is empty (signing disabled). */
export function sign(key: string, parts: Array<string | Buffer>): string {
  if (!key) return "";
  const h = createHmac("sha256", key);
  for (const p of parts) h.update(p);
  return h.digest("hex");
}

/** A new request message of the given type for a session. */
export function newMessage(session: string, msgType: string, content: Record<string, unknown>): JupyterMessage {
  return {
    header: { msg_id: randomId(), msg_type: msgType, session, username: "t2s", date: new Date().toISOString(), version: PROTOCOL_VERSION },
    parent_header: {},
    metadata: {},
    content,
  };
}

/** The frames to send for a message from a DEALER socket (no routing prefix). */
export function encode(key: string, msg: JupyterMessage): Buffer[] {
  const parts = [msg.header, msg.parent_header, msg.metadata, msg.content].map((p) => Buffer.from(JSON.stringify(p)));
  return [DELIMITER, Buffer.from(sign(key, parts)), ...parts];
}

/**
 * Parses received frames (any routing prefix or PUB topic before the delimiter is skipped).
 * Returns null for frames without a delimiter; throws when the signature does not match, since a
 * message we cannot authenticate must not be trusted as a cell's output.
 */
export function decode(key: string, frames: Buffer[]): JupyterMessage | null {
  const at = frames.findIndex((f) => f.equals(DELIMITER));
  if (at < 0 || frames.length < at + 6) return null;
  const signature = frames[at + 1].toString();
  const parts = frames.slice(at + 2, at + 6);
  if (key) {
    const want = Buffer.from(sign(key, parts));
    const got = Buffer.from(signature);
    if (want.length !== got.length || !timingSafeEqual(want, got)) throw new Error("kernel message with an invalid HMAC signature");
  }
  const [header, parent, metadata, content] = parts.map((p) => JSON.parse(p.toString("utf8")));
  return { header, parent_header: parent ?? {}, metadata: metadata ?? {}, content: content ?? {} };
}
