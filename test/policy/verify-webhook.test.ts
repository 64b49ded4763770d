/**
 * verify-webhook: each provider's signature made here with node:crypto as
 * the provider's documentation says it makes it (the providers' own npm
 * libraries are not dependencies yet), accepted; the same request with one
 * byte of its body changed, another secret, or (where a timestamp is
 * signed) an old timestamp, refused with 403.
 */
import { describe, expect, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";

const SECRET = "whsec_test_0123456789abcdef";
const hmac = (alg: string, ...parts: string[]) => {
  const h = createHmac(alg, SECRET);
  for (const p of parts) h.update(p);
  return h;
};
const policy = (provider: string, extra = "") =>
  policyOf(`
on_http_request:
  - actions:
      - type: verify-webhook
        config: { provider: ${provider}, secret: "${SECRET}"${extra} }
      - type: add-headers
        config: { headers: { x-verified: "\${actions.ngrok.verify_webhook.verified}" } }
`);

const flip = (body: string) => body.slice(0, 5) + String.fromCharCode(body.charCodeAt(5) ^ 1) + body.slice(6);
const body = '{"event":"push","n":1}';
const now = () => Math.floor(Date.now() / 1000);

async function expectVerdicts(provider: string, make: (body: string, ts: number) => { headers: [string, string][]; target?: string; contentType?: string }, extra = "") {
  const p = policy(provider, extra);
  const run = (b: string, ts = now()) => {
    const m = make(b, ts);
    return p.run("on_http_request", requestInput({ method: "POST", target: m.target ?? "/hook", body: b, headers: [["Content-Type", m.contentType ?? "application/json"], ...m.headers] }));
  };
  const good = await run(body);
  expect(good.verdict.kind).toBe("continue");
  expect(good.request!.headers).toContainEqual(["x-verified", "true"]);
  // signed over the original, sent with one byte changed
  const signed = make(body, now());
  const tampered = await p.run("on_http_request", requestInput({ method: "POST", target: signed.target ?? "/hook", body: flip(body), headers: [["Content-Type", signed.contentType ?? "application/json"], ...signed.headers] }));
  expect(answered(tampered)?.status).toBe(403);
  return { p, run };
}

describe("each provider's scheme", () => {
  test("GitHub: X-Hub-Signature-256: sha256=hex HMAC of the body", async () => {
    await expectVerdicts("github", (b) => ({ headers: [["X-Hub-Signature-256", `sha256=${hmac("sha256", b).digest("hex")}`]] }));
  });

  test("Stripe: Stripe-Signature t=,v1= over 't.body'; an old timestamp refused, a rolled secret's extra v1 taken", async () => {
    const sign = (b: string, ts: number) => hmac("sha256", `${ts}.`, b).digest("hex");
    const { run } = await expectVerdicts("stripe", (b, ts) => ({ headers: [["Stripe-Signature", `t=${ts},v1=${sign(b, ts)},v0=ignored`]] }));
    expect(answered(await run(body, now() - 3600))?.status).toBe(403);
    const p = policy("stripe");
    const ts = now();
    const two = await p.run("on_http_request", requestInput({ method: "POST", body, headers: [["Stripe-Signature", `t=${ts},v1=${"0".repeat(64)},v1=${sign(body, ts)}`]] }));
    expect(two.verdict.kind).toBe("continue");
  });

  test("Slack: X-Slack-Signature v0= over 'v0:ts:body' with X-Slack-Request-Timestamp; an old timestamp refused", async () => {
    const { run } = await expectVerdicts("slack", (b, ts) => ({
      headers: [
        ["X-Slack-Request-Timestamp", String(ts)],
        ["X-Slack-Signature", `v0=${hmac("sha256", `v0:${ts}:`, b).digest("hex")}`],
      ],
    }));
    expect(answered(await run(body, now() - 600))?.status).toBe(403);
  });

  test("Shopify: X-Shopify-Hmac-Sha256: base64 HMAC of the body", async () => {
    await expectVerdicts("shopify", (b) => ({ headers: [["X-Shopify-Hmac-Sha256", hmac("sha256", b).digest("base64")]] }));
  });

  test("Twilio, a form: X-Twilio-Signature base64 HMAC-SHA1 of the URL and the sorted parameters", async () => {
    const url = "https://app.tunnels.example.com/sms?x=1";
    const sign = (b: string) => {
      const params = [...new URLSearchParams(b)].sort(([a], [c]) => (a < c ? -1 : a > c ? 1 : 0));
      return hmac("sha1", url + params.map(([k, v]) => k + v).join("")).digest("base64");
    };
    const form = "To=%2B15551234567&From=%2B15557654321&Body=hello+there";
    const p = policy("twilio");
    const send = (b: string, sig: string) =>
      p.run("on_http_request", requestInput({ method: "POST", target: "/sms?x=1", body: b, headers: [["Content-Type", "application/x-www-form-urlencoded"], ["X-Twilio-Signature", sig]] }));
    expect((await send(form, sign(form))).verdict.kind).toBe("continue");
    expect(answered(await send(form.replace("hello", "hellp"), sign(form)))?.status).toBe(403);
    // Twilio's library tries the URL with the port written out too
    const withPort = hmac("sha1", "https://app.tunnels.example.com:443/sms?x=1" + "BodyhelloFrom+15557654321To+15551234567").digest("base64");
    expect((await send("Body=hello&From=%2B15557654321&To=%2B15551234567", withPort)).verdict.kind).toBe("continue");
  });

  test("Twilio, JSON: the URL's bodySHA256 is the body's SHA-256, and the signature is over the URL", async () => {
    const digest = createHash("sha256").update(body).digest("hex");
    const target = `/hook?bodySHA256=${digest}`;
    await expectVerdicts("twilio", () => ({ target, headers: [["X-Twilio-Signature", hmac("sha1", `https://app.tunnels.example.com${target}`).digest("base64")]] }));
  });

  test("burrow's generic hmac: the header, algorithm, encoding and prefix the policy names", async () => {
    await expectVerdicts(
      "hmac",
      (b) => ({ headers: [["X-Signature", `sha512=${hmac("sha512", b).digest("base64")}`]] }),
      ", header: X-Signature, algorithm: sha512, encoding: base64, prefix: 'sha512='",
    );
  });
});

describe("what every provider shares", () => {
  test("enforce: false goes on and says verified: false; a request with no body fails", async () => {
    const soft = policy("github", ", enforce: false");
    const out = await soft.run("on_http_request", requestInput({ method: "POST", body, headers: [["X-Hub-Signature-256", "sha256=00"]] }));
    expect(out.verdict.kind).toBe("continue");
    expect(out.request!.headers).toContainEqual(["x-verified", "false"]);
    const noBody = await policy("github").run("on_http_request", requestInput({ method: "POST", headers: [["X-Hub-Signature-256", `sha256=${hmac("sha256", "").digest("hex")}`]] }));
    expect(answered(noBody)?.status).toBe(403);
    expect(noBody.matched[0]!.actions[0]!.note).toContain("no body");
  });

  test("the action asks the edge for the body", () => {
    expect(policy("github").readsBody).toBe(true);
  });

  test("an unknown provider, or hmac without its header, is refused at load; no error repeats the secret", () => {
    const errors = [
      ...errorsOf(`on_http_request:\n  - actions:\n      - type: verify-webhook\n        config: { provider: gitlub, secret: "${SECRET}" }\n`),
      ...errorsOf(`on_http_request:\n  - actions:\n      - type: verify-webhook\n        config: { provider: hmac, secret: "${SECRET}" }\n`),
      ...errorsOf(`on_http_request:\n  - actions:\n      - type: verify-webhook\n        config: { provider: github, secret: 12345678901 }\n`),
    ];
    expect(errors.map((e) => e.code)).toEqual(["ACTION_CONFIG", "ACTION_CONFIG", "ACTION_CONFIG"]);
    expect(errors[0]!.message).toContain("gitlub");
    expect(JSON.stringify(errors)).not.toContain(SECRET);
    expect(JSON.stringify(errors)).not.toContain("12345678901");
  });
});
