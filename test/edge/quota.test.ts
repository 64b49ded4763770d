/**
 * Live quota enforcement on a real core and registry: a user past their
 * limit loses their tunnels; while the database does not answer, the check
 * says so (rate-limited) and closes nothing; once it answers again, the
 * next round enforces as before.
 */
import { afterAll, beforeAll, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCore, type Core } from "../../src/core/index.ts";
import { openDatabase, type OpenedDb } from "../../src/db/open.ts";
import { TrafficMeter } from "../../src/edge/meter.ts";
import { enforceQuotas } from "../../src/edge/quota.ts";
import { Registry, type AgentLink } from "../../src/edge/registry.ts";

let dir: string;
let database: OpenedDb;
let core: Core;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "burrow-quota-"));
  const quiet = spyOn(console, "log").mockImplementation(() => {});
  try {
    database = openDatabase(dir);
  } finally {
    quiet.mockRestore();
  }
  core = createCore({ store: database.store, systemSubdomains: [] });
});
afterAll(() => {
  database?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A user with a 100-byte quota, one live tunnel, and 150 bytes counted on it (not flushed yet). */
async function userOverQuota(name: string) {
  const user = await core.users.create({ username: name, password: "quota-test-password-1", trafficLimit: 100 });
  const meter = new TrafficMeter(core);
  const registry = new Registry(meter);
  const refusals: string[] = [];
  const link: AgentLink = { sessionId: `session-${name}`, userId: user.id, tokenId: 1, openStream: () => undefined, refuse: (code) => void refusals.push(code) };
  const tunnel = registry.newTunnel("http", { subdomain: name }, { userId: user.id, username: name, tokenId: 1 }, false);
  registry.attach(link, [tunnel]);
  tunnel.countIn(150);
  return { registry, meter, refusals };
}

/** Warnings and errors written while `fn` runs. */
async function linesOf(fn: () => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const warn = spyOn(console, "warn").mockImplementation((line: string) => void lines.push(line));
  const error = spyOn(console, "error").mockImplementation((line: string) => void lines.push(line));
  const info = spyOn(console, "log").mockImplementation((line: string) => void lines.push(line));
  try {
    await fn();
  } finally {
    warn.mockRestore();
    error.mockRestore();
    info.mockRestore();
  }
  return lines;
}

test("a user past their quota loses their tunnels", async () => {
  const { registry, meter, refusals } = await userOverQuota("over");
  await linesOf(() => enforceQuotas(core, registry, meter));
  expect(refusals).toEqual(["TRAFFIC_EXCEEDED"]);
});

test("with the database out of reach the check says so, closes nothing, and enforces again once it is back", async () => {
  const { registry, meter, refusals } = await userOverQuota("outage");
  const get = core.users.get;
  // what Bun.SQL throws when PostgreSQL refuses the connection
  core.users.get = async () => {
    throw Object.assign(new Error("Connection refused"), { code: "ECONNREFUSED" });
  };
  let lines: string[];
  try {
    lines = await linesOf(async () => {
      for (let round = 0; round < 5; round++) await enforceQuotas(core, registry, meter);
    });
  } finally {
    core.users.get = get;
  }
  expect(refusals).toEqual([]);
  const said = lines.filter((l) => l.includes("traffic quota not checked"));
  expect(said).toHaveLength(1); // five rounds, one line: the rest wait for the next 10 s
  expect(said[0]).toContain(" warn ");
  expect(said[0]).toContain("Connection refused");

  await linesOf(() => enforceQuotas(core, registry, meter));
  expect(refusals).toEqual(["TRAFFIC_EXCEEDED"]);
});
