/**
 * The one tunnel spec (src/agent/settings/tunnel-spec.ts): each rule of what
 * goes with what is said by all three front-ends (the flags, burrow.yml,
 * burrow-agent's options) with the same words, in each one's own names.
 */
import { describe, expect, test } from "bun:test";
import { answerOf, fileSays, TUNNELS_FILE } from "../harness/tunnel-spec-answers.ts";
import { FLAG_VOICE, tunnelFromFlags } from "../../src/cli/tunnel-flags.ts";
import { CLI_KINDS } from "../../src/cli/kinds/index.ts";
import { parseTunnelsFile } from "../../src/agent/settings/tunnels-file.ts";
import { KINDS, OPTION_NAMES, specProblem, TUNNEL_OPTIONS, type Voice } from "../../src/agent/settings/tunnel-spec.ts";
import { forward } from "../../sdk/src/index.ts";

const FILE = TUNNELS_FILE;
const target = () => ({ host: "localhost", port: 3000, tls: false });
const flagsSay = (kind: "http" | "tcp", values: Record<string, unknown>) => answerOf(() => tunnelFromFlags(kind, values, target()));
const optionsSay = (options: Record<string, unknown>) =>
  forward({ port: 3000, server: "http://127.0.0.1:1", token: "x", ...options }).then(
    () => "accepted",
    (err: Error) => err.message,
  );
const SECRET = { issuer: "https://id.example.com", clientId: "c", clientSecret: "s" };

describe("each rule, said by the three front-ends in their own names", () => {
  test("basic auth or OIDC, not both", async () => {
    expect(flagsSay("http", { "basic-auth": ["u:secretsecret"], "oidc-issuer": SECRET.issuer, "oidc-client-id": "c", "oidc-client-secret": "s" })).toBe(
      "--oidc-issuer: a tunnel takes --basic-auth or --oidc-issuer, not both",
    );
    expect(fileSays("tunnels:\n  a:\n    proto: http\n    addr: 3000\n    basic_auth: u:secretsecret\n    oidc: {issuer: https://id.example.com, client_id: c, client_secret: s}\n")).toBe(
      `${FILE}:6: tunnels.a.oidc: a tunnel takes basic_auth or oidc, not both`,
    );
    expect(await optionsSay({ basicAuth: ["u:secretsecret"], oidc: SECRET })).toBe("oidc: a tunnel takes basicAuth or oidc, not both");
  });

  test("a private tunnel has no public name, and no access rule on http", async () => {
    expect(flagsSay("http", { private: true, name: "app", subdomain: "pub", "basic-auth": ["u:secretsecret"] })).toBe(
      "--private: a private tunnel is not public: --subdomain, --basic-auth do not go with it; --share says who may reach it",
    );
    expect(fileSays("tunnels:\n  a: {proto: http, addr: 3000, private: true, name: app, subdomain: pub, basic_auth: 'u:secretsecret'}\n")).toBe(
      `${FILE}:2: tunnels.a.private: a private tunnel is not public: subdomain, basic_auth do not go with it; share says who may reach it`,
    );
    expect(await optionsSay({ private: true, name: "app", subdomain: "pub", basicAuth: ["u:secretsecret"] })).toBe(
      "private: a private tunnel is not public: subdomain, basicAuth do not go with it; share says who may reach it",
    );
  });

  test("a private tunnel needs a name; name and share go with private only", async () => {
    expect(flagsSay("tcp", { private: true })).toBe("--name: missing: a private tunnel's name, reached as you/NAME");
    expect(fileSays("tunnels:\n  a: {proto: tcp, addr: 22, private: true}\n")).toBe(`${FILE}:2: tunnels.a.name: missing: a private tunnel's name, reached as you/NAME`);
    expect(await optionsSay({ protocol: "tcp", private: true })).toBe("name: missing: a private tunnel's name, reached as you/NAME");
    expect(flagsSay("tcp", { share: "bob" })).toBe("--share: goes with --private");
    expect(fileSays("tunnels:\n  a: {proto: tcp, addr: 22, share: bob}\n")).toBe(`${FILE}:2: tunnels.a.share: goes with private: true`);
    expect(await optionsSay({ protocol: "tcp", share: ["bob"] })).toBe("share: goes with private: true");
  });

  test("an option of another kind: the file and the options say so (the commands have no such flag)", async () => {
    expect(fileSays("tunnels:\n  a: {proto: tcp, addr: 22, subdomain: x}\n")).toBe(`${FILE}:2: tunnels.a.subdomain: is for http and tls tunnels; this one is tcp`);
    expect(await optionsSay({ protocol: "tcp", subdomain: "x" })).toBe("subdomain: is for http and tls tunnels; this one is tcp");
    expect(await optionsSay({ protocol: "tls", private: true, name: "x" })).toBe("private: is for http, tcp and udp tunnels; this one is tls");
  });

  test("a traffic policy: not with a private tunnel, not on udp; the options take its text or an object; at most 128 KiB", async () => {
    expect(fileSays("tunnels:\n  a: {proto: http, addr: 3000, private: true, name: app, policy: {on_http_request: []}}\n")).toBe(
      `${FILE}:2: tunnels.a.private: a private tunnel is not public: policy does not go with it; share says who may reach it`,
    );
    expect(await optionsSay({ private: true, name: "app", policy: "{}" })).toBe("private: a private tunnel is not public: policy does not go with it; share says who may reach it");
    expect(fileSays("tunnels:\n  a: {proto: udp, addr: 53, policy: {on_tcp_connect: []}}\n")).toBe(`${FILE}:2: tunnels.a.policy: is for http, tcp and tls tunnels; this one is udp`);
    expect(await optionsSay({ protocol: "udp", policy: "{}" })).toBe("policy: is for http, tcp and tls tunnels; this one is udp");
    expect(await optionsSay({ policy: 7 })).toBe("policy: must be the policy's YAML or JSON text, or an object");
    expect(await optionsSay({ policy: "x".repeat(128 * 1024 + 1) })).toStartWith("policy: is 131073 characters; a tunnel's own policy may have 131072 at most");
    // the file's inline policy is sent as its own lines of the file, so the edge's errors name them too
    const file = parseTunnelsFile("tunnels:\n  a:\n    proto: http\n    addr: 3000\n    policy:\n      on_http_request: []\n", FILE);
    const sent = (file.tunnels[0]!.request as { policy?: string }).policy!;
    expect(sent.split("\n")[5]).toBe("      on_http_request: []");
    expect(file.tunnels[0]!.policyFrom).toBe(FILE);
  });

  test("a tcp pool needs its remote port", () => {
    expect(flagsSay("tcp", { pool: true, "pool-balance": "round-robin" })).toBe("--pool: a tcp pool needs --remote-port: the port is the pool's name");
    expect(fileSays("tunnels:\n  a: {proto: tcp, addr: 22, pool: true}\n")).toBe(`${FILE}:2: tunnels.a.pool: a tcp pool needs remote_port: the port is the pool's name`);
  });
});

test("the table: every option is taken by some kind, and is public only on kinds that take it", () => {
  for (const [option, { kinds, ...rest }] of Object.entries(TUNNEL_OPTIONS)) {
    expect(kinds.length, option).toBeGreaterThan(0);
    for (const kind of (rest as { public?: readonly string[] }).public ?? []) expect(kinds as readonly string[], option).toContain(kind);
    for (const kind of kinds) expect(KINDS as readonly string[]).toContain(kind);
  }
  const voice: Voice = { name: (o) => `<${o}>`, on: (o) => `<${o}=true>` };
  expect(specProblem({ kind: "udp", target: target(), pool: true }, voice)).toEqual({ option: "pool", message: "is for http and tcp tunnels; this one is udp" });
  expect(specProblem({ kind: "http", target: target(), private: true, name: "ok" }, voice)).toBeUndefined();
});

test("each command's flags are the options its kind takes, by the spec's table (burrow http's inspect is the inspector's flag, not a tunnel's)", () => {
  const optionOfFlag = new Map(OPTION_NAMES.map((o) => [FLAG_VOICE.name(o).slice(2), o]));
  // the OIDC settings are four flags of one option
  for (const flag of ["oidc-client-id", "oidc-client-secret", "oidc-allow-email"]) optionOfFlag.set(flag, "oidc");
  for (const kind of KINDS) {
    const options = new Set(Object.keys(CLI_KINDS[kind].doc.flags).flatMap((flag) => optionOfFlag.get(flag) ?? []));
    const taken = OPTION_NAMES.filter((o) => (TUNNEL_OPTIONS[o].kinds as readonly string[]).includes(kind) && o !== "inspect");
    expect([...options].sort(), kind).toEqual(taken.sort());
  }
});
