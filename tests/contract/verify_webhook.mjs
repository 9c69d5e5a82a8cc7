// Verifies one webhook delivery with the Standard Webhooks reference verifier (npm standardwebhooks), as a receiver
// would: node verify_webhook.mjs SECRET ID TIMESTAMP SIGNATURE, the body on standard input. Exits 0 when it verifies,
// 1 (with the verifier's message) when it does not, 2 on bad usage.
import { readFileSync } from "node:fs";
import { Webhook } from "standardwebhooks";

const [secret, id, timestamp, signature] = process.argv.slice(2);
if (!signature) {
  console.error("usage: verify_webhook.mjs SECRET ID TIMESTAMP SIGNATURE < body");
  process.exit(2);
}
const body = readFileSync(0, "utf8");
try {
  // The verifier refuses a timestamp more than five minutes from now: tests sign with the current time.
  new Webhook(secret).verify(body, { "webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": signature });
} catch (e) {
  console.error(`not verified: ${e.message}`);
  process.exit(1);
}
