import { test } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { decode, DELIMITER, encode, newMessage, sign } from "../../lib/notebooks/protocol.js";

test("encode signs header, parent, metadata and content with HMAC-SHA256", () => {
  const msg = newMessage("sess", "execute_request", { code: "1+1" });
  const frames = encode("secret", msg);
  assert.ok(frames[0].equals(DELIMITER));
  const want = createHmac("sha256", "secret").update(frames[2]).update(frames[3]).update(frames[4]).update(frames[5]).digest("hex");
  assert.equal(frames[1].toString(), want);
  assert.equal(JSON.parse(frames[2].toString()).msg_type, "execute_request");
  assert.equal(JSON.parse(frames[2].toString()).version, "5.3");
});

test("decode skips the routing prefix and round-trips a message", () => {
  const msg = newMessage("sess", "stream", { name: "stdout", text: "hi\n" });
  const got = decode("k", [Buffer.from("routing-id"), ...encode("k", msg)]);
  assert.deepEqual(got?.content, { name: "stdout", text: "hi\n" });
  assert.equal(got?.header.msg_id, msg.header.msg_id);
});

test("decode rejects a message signed with another key and ignores frames without a delimiter", () => {
  const frames = encode("right", newMessage("s", "status", {}));
  assert.throws(() => decode("wrong", frames), /invalid HMAC/);
  assert.equal(decode("k", [Buffer.from("no delimiter")]), null);
});

test("sign is empty when signing is disabled (empty key)", () => {
  assert.equal(sign("", [Buffer.from("x")]), "");
});
