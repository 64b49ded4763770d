/**
 * TLS-ALPN-01 answers (acme/tls-alpn01.ts): which hellos are handed to a
 * challenge certificate, and the limits on answers in flight. The whole
 * validation against a real CA is in test/e2e/acme-tls-alpn.test.ts.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { MAX_TLS_ALPN_ANSWERS, TLS_ALPN_TTL_MS, TlsAlpnAnswers } from "../../src/acme/tls-alpn01.ts";

const KA = "token-abc.thumbprint-xyz";
let answers: TlsAlpnAnswers | undefined;
afterEach(() => answers?.clear());

describe("TLS-ALPN-01 answers", () => {
  test("only a hello that offers acme-tls/1 for a name with an answer in flight is handed to it", async () => {
    answers = new TlsAlpnAnswers();
    await answers.add("Demo.Example.test", KA);
    expect(answers.route({ serverName: "demo.example.test", alpn: ["acme-tls/1"] })).toBeDefined();
    expect(answers.route({ serverName: "demo.example.test", alpn: ["h2", "http/1.1"] })).toBeUndefined();
    expect(answers.route({ serverName: "demo.example.test" })).toBeUndefined();
    expect(answers.route({ serverName: "other.example.test", alpn: ["acme-tls/1"] })).toBeUndefined();
    expect(answers.route({ alpn: ["acme-tls/1"] })).toBeUndefined();
    answers.remove("demo.example.test");
    expect(answers.route({ serverName: "demo.example.test", alpn: ["acme-tls/1"] })).toBeUndefined();
  });

  test("an answer expires by itself, and at most MAX_TLS_ALPN_ANSWERS are in flight", async () => {
    let now = 1_000_000;
    answers = new TlsAlpnAnswers(() => now);
    await answers.add("a.example.test", KA);
    now += TLS_ALPN_TTL_MS + 1;
    expect(answers.route({ serverName: "a.example.test", alpn: ["acme-tls/1"] })).toBeUndefined();
    expect(answers.size).toBe(0);
    for (let i = 0; i < MAX_TLS_ALPN_ANSWERS; i++) await answers.add(`n${i}.example.test`, KA);
    await expect(answers.add("one-more.example.test", KA)).rejects.toThrow(/in flight already/);
    // the same name again replaces its answer rather than counting twice
    await answers.add("n0.example.test", `${KA}-2`);
    expect(answers.size).toBe(MAX_TLS_ALPN_ANSWERS);
  }, 30_000);
});
