/** The HTTPS page's words, as pure functions of the report and the time: the mode, expiry with its tone, "in 3 h". */
import { describe, expect, test } from "bun:test";
import { EXPIRY_WARNING_DAYS, expiry, isWildcard, modeSentence, until } from "../../src/admin/panel/web/certificates.ts";

const NOW = Date.parse("2026-11-23T12:00:00Z");
const DAY = 86_400_000;
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(NOW + ms).toISOString();

describe("the mode at the top", () => {
  test.each([
    [{ mode: "acme", directory: "https://ca.example/dir" }, "Certificates from https://ca.example/dir, renewed automatically."],
    [{ mode: "acme" }, "Certificates from the ACME CA, renewed automatically."],
    [{ mode: "files" }, "From files given at start: renew them yourself and restart."],
    [{ mode: "off" }, "No HTTPS on the public port: a proxy in front terminates TLS, or none."],
  ] as const)("%p reads %p", (report, sentence) => expect(modeSentence(report)).toBe(sentence));
});

describe("expiry", () => {
  test.each([
    [60 * DAY + HOUR, "ok", "expires in 60 days"],
    [EXPIRY_WARNING_DAYS * DAY, "ok", "expires in 14 days"],
    [EXPIRY_WARNING_DAYS * DAY - 1, "warn", "expires in 13 days"],
    [DAY + HOUR, "warn", "expires in 1 day"],
    [HOUR, "warn", "expires in less than a day"],
    [0, "bad", "expired today"],
    [-HOUR, "bad", "expired today"],
    [-DAY, "bad", "expired 1 day ago"],
    [-2 * DAY - HOUR, "bad", "expired 2 days ago"],
  ])("%p ms left: %p, %p", (left, tone, text) => expect(expiry(iso(left), NOW)).toEqual({ tone: tone as "ok", text }));

  test("no certificate yet, or a date that does not parse, is neither good nor bad", () => {
    expect(expiry(null, NOW)).toEqual({ tone: "muted", text: "no certificate yet" });
    expect(expiry("someday", NOW).tone).toBe("muted");
  });
});

describe("until", () => {
  test.each([
    [30 * DAY + HOUR, "in 30 days"],
    [DAY, "in 1 day"],
    [3 * HOUR + 10 * 60_000, "in 3 h"],
    [45 * 60_000, "in 45 min"],
    [10_000, "in 1 min"],
    [0, "due now"],
    [-HOUR, "due now"],
  ])("%p ms ahead reads %p", (ahead, text) => expect(until(iso(ahead), NOW)).toBe(text));
});

test("a wildcard name is one that starts with *.", () => {
  expect(isWildcard("*.tunnels.example.com")).toBe(true);
  expect(isWildcard("tunnels.example.com")).toBe(false);
});
