/** HTTP-01 answers as a pure function of the path and the tokens in flight. */
import { describe, expect, test } from "bun:test";
import { answerHttpChallenge, HttpChallengeTokens, http01Solver, MAX_HTTP01_TOKENS } from "../../src/acme/http01.ts";

const TOKEN = "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA";
const KEY_AUTH = `${TOKEN}.9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI`;
const AUTHZ = { identifier: { type: "dns", value: "demo.tunnels.example.com" } };
const CHALLENGE = { type: "http-01", url: "https://ca/chall/1", token: TOKEN };

describe("answerHttpChallenge", () => {
  test("a token in flight is answered with its key authorization, as text, not cached", async () => {
    const tokens = new HttpChallengeTokens();
    tokens.add(TOKEN, KEY_AUTH);
    const res = answerHttpChallenge(tokens, `/.well-known/acme-challenge/${TOKEN}`);
    expect(res?.status).toBe(200);
    expect(await res?.text()).toBe(KEY_AUTH);
    expect(res?.headers.get("content-type")).toBe("text/plain");
    expect(res?.headers.get("cache-control")).toBe("no-store");
  });

  test("other paths and unknown tokens are not answered, so the name's own site serves them", () => {
    const tokens = new HttpChallengeTokens();
    tokens.add(TOKEN, KEY_AUTH);
    for (const path of ["/", "/.well-known/acme-challenge/", `/.well-known/acme-challenge/${TOKEN}x`, `/.well-known/acme-challenge/${TOKEN}/`, `/x/.well-known/acme-challenge/${TOKEN}`, "/.well-known/security.txt"]) {
      expect(answerHttpChallenge(tokens, path)).toBeUndefined();
    }
  });

  test("a token expires on its own, so an issuance that died before cleanup leaves nothing served", () => {
    let now = 1_000;
    const tokens = new HttpChallengeTokens(60_000, () => now);
    tokens.add(TOKEN, KEY_AUTH);
    now += 59_999;
    expect(answerHttpChallenge(tokens, `/.well-known/acme-challenge/${TOKEN}`)).toBeDefined();
    now += 1;
    expect(answerHttpChallenge(tokens, `/.well-known/acme-challenge/${TOKEN}`)).toBeUndefined();
    expect(tokens.size).toBe(0);
  });
});

describe("the tokens held", () => {
  test("malformed tokens and key authorizations that are not the token's are refused", () => {
    const tokens = new HttpChallengeTokens();
    expect(() => tokens.add("short", "short.x")).toThrow("not an HTTP-01 token");
    expect(() => tokens.add("../../etc/passwd/aaaaaaaaaaaaaaaaaaaaaa", "x")).toThrow("not an HTTP-01 token");
    expect(() => tokens.add(TOKEN, "other.thumbprint")).toThrow("does not start with its token");
  });

  test(`at most ${MAX_HTTP01_TOKENS} at once; expired ones make room`, () => {
    let now = 0;
    const tokens = new HttpChallengeTokens(1_000, () => now);
    const token = (i: number) => `token-${String(i).padStart(20, "0")}`;
    for (let i = 0; i < MAX_HTTP01_TOKENS; i++) tokens.add(token(i), `${token(i)}.t`);
    expect(() => tokens.add(token(MAX_HTTP01_TOKENS), `${token(MAX_HTTP01_TOKENS)}.t`)).toThrow("in flight already");
    tokens.add(token(0), `${token(0)}.t`); // one held already: replaced, not refused
    now = 1_000;
    tokens.add(token(MAX_HTTP01_TOKENS), `${token(MAX_HTTP01_TOKENS)}.t`);
    expect(tokens.size).toBe(1);
  });

  test("the solver publishes on prepare and withdraws on cleanup", async () => {
    const tokens = new HttpChallengeTokens();
    const solver = http01Solver(tokens);
    expect(solver.type).toBe("http-01");
    await solver.prepare(AUTHZ, CHALLENGE, KEY_AUTH);
    expect(tokens.get(TOKEN)).toBe(KEY_AUTH);
    await solver.cleanup(AUTHZ, CHALLENGE, KEY_AUTH);
    expect(tokens.get(TOKEN)).toBeUndefined();
    expect(() => solver.prepare(AUTHZ, { type: "http-01", url: "u" }, KEY_AUTH)).toThrow("no token");
  });
});
