/**
 * HELLO's tunnel requests are made of the kinds' units (src/protocol/kinds/),
 * and the wire must not notice: agents and servers of either side of that
 * change talk to each other. The schema as it was written before, in one
 * piece, is kept here as the reference; the units' TunnelRequest must
 * accept what it accepted, with the same output, and refuse what it
 * refused, with the same issues, on hand-written HELLOs and on random ones.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import * as v from "valibot";
import { Hello, TunnelRequest } from "../../src/protocol/messages.ts";
import { fuzzParams } from "../harness/fuzz.ts";

// -- the reference: TunnelRequest as one schema, before the kinds were units (do not edit) --------

const UPGRADE_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$/;
const CidrTexts = v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(64))), v.maxLength(256)));
const HeaderPairs = v.optional(v.pipe(v.array(v.tuple([v.pipe(v.string(), v.maxLength(256)), v.pipe(v.string(), v.maxLength(8192))])), v.maxLength(64)));
const HttpAccess = v.object({
  basicAuth: v.optional(v.pipe(v.array(v.object({ user: v.pipe(v.string(), v.maxLength(256)), password: v.pipe(v.string(), v.maxLength(1024)) })), v.maxLength(64))),
  allowCidrs: CidrTexts,
  denyCidrs: CidrTexts,
  requestHeaderAdd: HeaderPairs,
  requestHeaderRemove: v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(256))), v.maxLength(64))),
  responseHeaderAdd: HeaderPairs,
  oidc: v.optional(
    v.object({
      issuer: v.pipe(v.string(), v.maxLength(2048)),
      clientId: v.pipe(v.string(), v.maxLength(512)),
      clientSecret: v.pipe(v.string(), v.maxLength(2048)),
      allowEmails: v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(320))), v.maxLength(256))),
    }),
  ),
});
const TcpAccess = v.object({ allowCidrs: CidrTexts, denyCidrs: CidrTexts });
const PrivateRequest = v.object({
  name: v.pipe(v.string(), v.maxLength(63)),
  share: v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(64))), v.maxLength(64))),
  localPort: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
});
const Before = v.variant("protocol", [
  v.object({
    protocol: v.literal("http"),
    subdomain: v.optional(v.pipe(v.string(), v.maxLength(253))),
    hostname: v.optional(v.pipe(v.string(), v.maxLength(253))),
    skipWarning: v.optional(v.boolean()),
    responseTimeout: v.optional(v.pipe(v.number(), v.minValue(0.1), v.maxValue(86_400))),
    access: v.optional(HttpAccess),
    pool: v.optional(v.boolean()),
    balance: v.optional(v.picklist(["round-robin", "least-requests"])),
    private: v.optional(PrivateRequest),
    allowUpgrade: v.optional(v.pipe(v.array(v.pipe(v.string(), v.regex(UPGRADE_TOKEN))), v.maxLength(16))),
  }),
  v.object({
    protocol: v.literal("tcp"),
    port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
    access: v.optional(TcpAccess),
    private: v.optional(PrivateRequest),
    pool: v.optional(v.boolean()),
    balance: v.optional(v.picklist(["round-robin", "least-requests"])),
  }),
  v.object({
    protocol: v.literal("tls"),
    subdomain: v.optional(v.pipe(v.string(), v.maxLength(253))),
    hostname: v.optional(v.pipe(v.string(), v.maxLength(253))),
    access: v.optional(TcpAccess),
  }),
  v.object({
    protocol: v.literal("udp"),
    port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
    access: v.optional(TcpAccess),
    private: v.optional(PrivateRequest),
  }),
]);

// -- added since, on purpose: a tunnel's own traffic policy (http, tcp, tls), which Before drops -------

const PolicyText = v.optional(v.pipe(v.string(), v.maxLength(128 * 1024)));
const Now = v.variant(
  "protocol",
  // after `access`, where the units have it: issues come in the order of the entries
  Before.options.map((o) =>
    o.entries.protocol.literal === "udp" ? o : v.object(Object.fromEntries(Object.entries(o.entries).flatMap(([k, s]) => (k === "access" ? [[k, s], ["policy", PolicyText]] : [[k, s]])))),
  ) as unknown as typeof NowShape,
);
declare const NowShape: [
  v.ObjectSchema<(typeof Before.options)[0]["entries"] & { policy: typeof PolicyText }, undefined>,
  v.ObjectSchema<(typeof Before.options)[1]["entries"] & { policy: typeof PolicyText }, undefined>,
  v.ObjectSchema<(typeof Before.options)[2]["entries"] & { policy: typeof PolicyText }, undefined>,
  (typeof Before.options)[3],
];

// -- the types are the same both ways (checked by tsc --noEmit) ---------------------------------------

type Equal<X, Y> = (<T>() => T extends X ? 1 : 2) extends <T>() => T extends Y ? 1 : 2 ? true : false;
export const sameOutput: Equal<v.InferOutput<typeof TunnelRequest>, v.InferOutput<typeof Now>> = true;
export const sameInput: Equal<v.InferInput<typeof TunnelRequest>, v.InferInput<typeof Now>> = true;

/** What a schema says of a value: its output, or its issues as kind, path, expected, received and message. */
function verdict(schema: v.GenericSchema, value: unknown): unknown {
  const r = v.safeParse(schema, value);
  if (r.success) return { ok: r.output };
  return { issues: r.issues.map((i) => ({ kind: i.kind, type: i.type, path: v.getDotPath(i), expected: i.expected, received: i.received, message: i.message })) };
}

const HANDWRITTEN: unknown[] = [
  // as the agents send them
  { protocol: "http", subdomain: "demo", skipWarning: false },
  { protocol: "http", hostname: "demo.acme.com", pool: true, balance: "least-requests", responseTimeout: 90, allowUpgrade: ["h2c"] },
  { protocol: "http", private: { name: "web", share: ["bob", "carol"], localPort: 3000 } },
  {
    protocol: "http",
    subdomain: "a",
    access: {
      basicAuth: [{ user: "u", password: "p" }],
      allowCidrs: ["10.0.0.0/8"],
      denyCidrs: ["::1"],
      requestHeaderAdd: [["x-a", "1"]],
      requestHeaderRemove: ["cookie"],
      responseHeaderAdd: [["x-b", "2"]],
      oidc: { issuer: "https://id.example.com", clientId: "c", clientSecret: "s", allowEmails: ["@example.com"] },
    },
  },
  { protocol: "tcp" },
  { protocol: "tcp", port: 20000, pool: true, balance: "round-robin", access: { allowCidrs: ["127.0.0.1"] } },
  { protocol: "tcp", private: { name: "db" }, access: { denyCidrs: [] } },
  { protocol: "tls", subdomain: "vault", access: { allowCidrs: ["192.0.2.0/24"] } },
  { protocol: "tls", hostname: "vault.acme.com" },
  { protocol: "udp", port: 20053 },
  { protocol: "udp", private: { name: "dns", share: ["bob"] } },
  { protocol: "http", subdomain: "p", policy: "on_http_request: []" },
  { protocol: "tcp", policy: "on_tcp_connect: []" },
  { protocol: "tls", subdomain: "v", policy: "{}" },
  { protocol: "udp", policy: "dropped: udp takes none" },
  // unknown keys are dropped, as an older server drops a newer agent's
  { protocol: "tls", subdomain: "x", private: { name: "no" }, pool: true, port: 1 },
  { protocol: "udp", pool: true, subdomain: "x", future: { anything: 1 } },
  // refused
  { protocol: "h1" },
  { protocol: "HTTP" },
  { protocol: "" },
  {},
  null,
  "http",
  [{ protocol: "http" }],
  { protocol: "http", subdomain: "x".repeat(254) },
  { protocol: "http", responseTimeout: 0.01 },
  { protocol: "http", allowUpgrade: ["h2c/2"] },
  { protocol: "http", allowUpgrade: Array.from({ length: 17 }, () => "a") },
  { protocol: "http", balance: "random" },
  { protocol: "http", access: { oidc: { issuer: "https://x" } } },
  { protocol: "tcp", port: 0 },
  { protocol: "tcp", port: 65536 },
  { protocol: "tcp", port: 1.5 },
  { protocol: "tcp", port: "22" },
  { protocol: "tcp", access: { allowCidrs: "10.0.0.0/8" } },
  { protocol: "tls", hostname: 7 },
  { protocol: "udp", port: -1 },
  { protocol: "udp", private: { name: "x".repeat(64) } },
  { protocol: "udp", private: { share: ["bob"] } },
  { protocol: "http", policy: 7 },
  { protocol: "tcp", policy: "x".repeat(128 * 1024 + 1) },
];

describe("HELLO's tunnel requests on the wire, made of the kinds' units", () => {
  test("accept and refuse hand-written requests exactly as the schema before them, with the same output and issues", () => {
    for (const t of HANDWRITTEN) expect(verdict(TunnelRequest, t)).toEqual(verdict(Now, t));
    // and inside a whole HELLO, as the edge reads it
    for (const t of HANDWRITTEN) {
      const hello = { version: 1, token: "brw_x", tunnels: [t], partial: true };
      const ours = v.safeParse(Hello, hello);
      const before = v.safeParse(v.object({ version: v.number(), token: v.string(), tunnels: v.array(Now) }), hello);
      expect(ours.success).toBe(before.success);
      if (ours.success && before.success) expect(ours.output.tunnels).toEqual(before.output.tunnels);
    }
  });

  test("a server before traffic policies drops a tunnel's policy, and takes the rest as before (READY then lacks `policy: true`)", () => {
    const asked = { protocol: "http", subdomain: "p", policy: "on_http_request: []" };
    expect(v.parse(Before, asked)).toEqual({ protocol: "http", subdomain: "p" });
    expect(v.parse(TunnelRequest, asked)).toEqual(asked as never);
  });

  test("the hand-written ones cover every kind, accepted and refused", () => {
    for (const protocol of ["http", "tcp", "tls", "udp"]) {
      const mine = HANDWRITTEN.filter((t) => (t as { protocol?: unknown } | null)?.protocol === protocol);
      expect(mine.some((t) => v.is(Before, t))).toBe(true);
      expect(mine.some((t) => !v.is(Before, t))).toBe(true);
    }
  });

  test("random requests, near the valid ones: the same verdict as before", () => {
    const text = fc.oneof(fc.constantFrom("", "a", "demo", "h2c", "x".repeat(64), "x".repeat(254), "10.0.0.0/8"), fc.string({ maxLength: 8 }));
    const number = fc.oneof(fc.constantFrom(0, 1, 0.05, 0.1, 1.5, 20000, 65535, 65536, -1, 86_400, 86_401), fc.double());
    const leaf = fc.oneof(text, number, fc.boolean(), fc.constant(null), fc.constant(undefined));
    const list = fc.array(leaf, { maxLength: 3 });
    const value = fc.oneof(leaf, list, fc.constantFrom(["h2c"], [["x-a", "1"]], [{ user: "u", password: "p" }], ["round-robin"]));
    const access = fc.record(
      {
        allowCidrs: fc.oneof(list, value),
        denyCidrs: list,
        basicAuth: fc.oneof(value, fc.constant([{ user: "u", password: "p" }])),
        requestHeaderAdd: value,
        oidc: fc.oneof(value, fc.record({ issuer: text, clientId: text, clientSecret: text }, { requiredKeys: [] })),
      },
      { requiredKeys: [] },
    );
    const request = fc.record(
      {
        protocol: fc.oneof(fc.constantFrom("http", "tcp", "tls", "udp"), text),
        subdomain: fc.oneof(text, value),
        hostname: text,
        port: number,
        skipWarning: fc.oneof(fc.boolean(), value),
        responseTimeout: number,
        access: fc.oneof(access, value),
        pool: fc.oneof(fc.boolean(), value),
        balance: fc.oneof(fc.constantFrom("round-robin", "least-requests"), text),
        private: fc.oneof(fc.record({ name: text, share: fc.oneof(list, fc.constant(["bob"])), localPort: number }, { requiredKeys: [] }), value),
        allowUpgrade: fc.oneof(fc.constant(["h2c"]), list, value),
        policy: fc.oneof(text, value),
      },
      { requiredKeys: ["protocol"] },
    );
    fc.assert(
      fc.property(fc.oneof({ weight: 9, arbitrary: request }, { weight: 1, arbitrary: value }), (t) => {
        expect(verdict(TunnelRequest, t)).toEqual(verdict(Now, t));
      }),
      fuzzParams(3000, 20_000),
    );
  });
});
