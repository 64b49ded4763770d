/**
 * The kind table (src/protocol/kinds.ts): each kind's facts agree with each
 * other, and the lists the rest of the tree reads (the HELLO and READY
 * schemas, OPEN's kinds, allowed_protocols, the database's enum) are the
 * table's, so that a kind added to the table is a kind everywhere. Each
 * kind is a unit on each side (protocol/kinds/, agent/kinds/, cli/kinds/):
 * its request is one of HELLO's variants, it has an agent unit that serves
 * its stream and a command, and the words it is shown with.
 */
import { describe, expect, test } from "bun:test";
import * as v from "valibot";
import {
  addressText,
  isNamedKind,
  isPortKind,
  isPrivateKind,
  KIND_NAMES,
  KIND_UNITS,
  kindNamed,
  KINDS,
  type KindFacts,
  NAMED_KINDS,
  namedKindOf,
  PORT_KINDS,
  PRIVATE_KINDS,
  reachedByName,
  reachedByPort,
  STREAM_KINDS,
} from "../../src/protocol/kinds.ts";
import { Hello, OpenMeta, readOpenMeta, Ready, TunnelRequest } from "../../src/protocol/messages.ts";
import { AGENT_KINDS, SERVE_BY_STREAM } from "../../src/agent/kinds/index.ts";
import { CLI_KINDS } from "../../src/cli/kinds/index.ts";
import { EDGE_KINDS } from "../../src/edge/kinds/index.ts";
import { kindAddress } from "../../src/edge/public-addresses.ts";
import { COMMANDS, MAIN_HELP } from "../../src/cli/help.ts";
import { headingOf } from "../../src/cli/agent-output/screen-view.ts";
import { PROTOCOLS } from "../../src/validate/fields.ts";
import { liveTunnels, privateNames } from "../../src/db/schema.ts";
import { liveTunnels as liveTunnelsPg, privateNames as privateNamesPg } from "../../src/db/schema-pg.ts";

const helloWith = (protocol: string) => ({ version: 1, token: "t", tunnels: [{ protocol }] });

describe("the kind table", () => {
  test("every kind's facts agree: a port space exactly when reached by a port, the name kinds and port kinds split the table", () => {
    for (const name of KIND_NAMES) {
      const k: KindFacts = KINDS[name];
      expect(k.portSpace !== undefined).toBe(k.reachedBy === "port");
      expect(reachedByPort(name)).toBe(!reachedByName(name));
      // datagrams go with their own port space: a datagram kind is never reached by a name
      if (k.carries === "datagrams") expect(k.reachedBy).toBe("port");
    }
    expect([...NAMED_KINDS, ...PORT_KINDS].sort()).toEqual([...KIND_NAMES].sort());
    expect(PRIVATE_KINDS.every((k) => KINDS[k].canBePrivate)).toBe(true);
    for (const protocol of KIND_NAMES) {
      expect(isPrivateKind({ protocol })).toBe(PRIVATE_KINDS.includes(protocol as never));
      expect(isPortKind({ protocol })).toBe(reachedByPort(protocol));
      expect(isNamedKind({ protocol })).toBe(reachedByName(protocol));
    }
    expect(new Set(KIND_NAMES.map((k) => KINDS[k].stream)).size).toBe(KIND_NAMES.length);
    expect(new Set(KIND_NAMES.map((k) => KINDS[k].metricsLabel)).size).toBe(KIND_NAMES.length);
  });

  test("HELLO accepts exactly the table's kinds", () => {
    for (const name of KIND_NAMES) expect(v.safeParse(Hello, helloWith(name)).success).toBe(true);
    for (const other of ["h1", "ws", "HTTP", "sctp", ""]) expect(v.safeParse(Hello, helloWith(other)).success).toBe(false);
  });

  test("READY's tunnels and its connector's kinds are the table's", () => {
    const ready = (protocol: string) => ({ session: "s", username: "u", tunnels: [{ id: "1", protocol, url: "x" }] });
    for (const name of KIND_NAMES) expect(v.safeParse(Ready, ready(name)).success).toBe(true);
    expect(v.safeParse(Ready, ready("sctp")).success).toBe(false);
    const connect = (protocol: string) => ({ session: "s", username: "u", tunnels: [], connect: { target: "a/b", protocol } });
    for (const name of KIND_NAMES) expect(v.safeParse(Ready, connect(name)).success).toBe(KINDS[name].canBePrivate);
  });

  test("OPEN's kinds are the table's streams, in the schema and in the fast path", () => {
    for (const kind of STREAM_KINDS) {
      const meta = { tunnel: "t", kind, remote: "1.2.3.4:5", head: "GET / HTTP/1.1\r\n\r\n" };
      expect(v.safeParse(OpenMeta, meta).success).toBe(true);
      expect(readOpenMeta(meta)).toBeDefined();
    }
    for (const kind of ["http", "ws", "sctp"]) {
      const meta = { tunnel: "t", kind, remote: "1.2.3.4:5", head: "GET / HTTP/1.1\r\n\r\n" };
      expect(v.safeParse(OpenMeta, meta).success).toBe(false);
      expect(readOpenMeta(meta)).toBeUndefined();
    }
  });

  test("allowed_protocols and the database's enums name the table's kinds (db/ cannot import protocol/: same layer)", () => {
    expect([...PROTOCOLS]).toEqual(KIND_NAMES);
    expect([...liveTunnels.protocol.enumValues]).toEqual(KIND_NAMES);
    expect([...liveTunnelsPg.protocol.enumValues]).toEqual(KIND_NAMES);
    expect([...privateNames.protocol.enumValues]).toEqual(PRIVATE_KINDS);
    expect([...privateNamesPg.protocol.enumValues]).toEqual(PRIVATE_KINDS);
  });
});

describe("each kind is a unit on every side", () => {
  test("every unit is filed under its own name, and the table's facts are the units'", () => {
    for (const name of KIND_NAMES) {
      expect(KIND_UNITS[name].name).toBe(name);
      expect(KINDS[name]).toBe(KIND_UNITS[name].facts);
    }
    expect(Object.keys(KIND_UNITS)).toEqual(KIND_NAMES);
  });

  test("HELLO's variants are the units' requests, one each, in the table's order, each its own kind's", () => {
    expect(TunnelRequest.options).toEqual(KIND_NAMES.map((k) => KIND_UNITS[k].request));
    for (const name of KIND_NAMES) {
      const request = KIND_UNITS[name].request;
      expect(TunnelRequest.options.filter((o) => o === request)).toHaveLength(1);
      expect(v.safeParse(request, { protocol: name }).success).toBe(true);
      for (const other of KIND_NAMES.filter((k) => k !== name)) expect(v.safeParse(request, { protocol: other }).success).toBe(false);
    }
  });

  test("every kind has an agent unit that serves its stream, and a command; nothing else does", () => {
    expect(Object.keys(AGENT_KINDS).sort()).toEqual([...KIND_NAMES].sort());
    expect(Object.keys(CLI_KINDS).sort()).toEqual([...KIND_NAMES].sort());
    // one unit each: no kind filed under another's
    expect(new Set(Object.values(AGENT_KINDS)).size).toBe(KIND_NAMES.length);
    expect(new Set(Object.values(CLI_KINDS)).size).toBe(KIND_NAMES.length);
    for (const name of KIND_NAMES) {
      expect(SERVE_BY_STREAM[KINDS[name].stream]).toBe(AGENT_KINDS[name].serve);
      expect(CLI_KINDS[name].doc.name).toBe(name);
    }
    expect(Object.keys(SERVE_BY_STREAM).sort()).toEqual([...STREAM_KINDS].sort());
    // OPEN's kind is looked up in a table without a prototype: a name such as toString finds nothing
    expect((SERVE_BY_STREAM as Record<string, unknown>).toString).toBeUndefined();
    expect((SERVE_BY_STREAM as Record<string, unknown>).constructor).toBeUndefined();
  });

  test("every kind has an edge unit: its address, where it is placed, the doors its visitors come through (its own kind's door, or a relayed or private one)", () => {
    expect(Object.keys(EDGE_KINDS).sort()).toEqual([...KIND_NAMES].sort());
    expect(new Set(Object.values(EDGE_KINDS)).size).toBe(KIND_NAMES.length);
    const at = { httpUrl: (n: string) => `http://${n}`, tcpAddress: (p: number) => `tcp:${p}`, udpAddress: (p: number) => `udp:${p}`, tlsAddress: (n: string) => `tls://${n}` };
    for (const name of KIND_NAMES) {
      const unit = EDGE_KINDS[name];
      expect(typeof unit.place).toBe("function");
      // a kind reached by a port is reached by its own door; every door named is one the judgement has
      expect(unit.doors.length).toBeGreaterThan(0);
      if (KINDS[name].reachedBy === "port") expect(unit.doors).toContain(name);
      if (KINDS[name].canBePrivate) expect(unit.doors).toContain("private");
      const shown = kindAddress(at, name, "demo", 20000);
      expect(shown).toBe(KINDS[name].reachedBy === "port" ? `${name}:20000` : name === "http" ? "http://demo" : "tls://demo");
    }
  });

  test("every kind has its words: a help line starting with its command, a heading, its traffic's name, what burrow connect says", () => {
    for (const name of KIND_NAMES) {
      const d = KIND_UNITS[name].display;
      expect(d.synopsis.split(" ")[0]).toBe(name);
      for (const words of [d.summary, d.heading, d.traffic, d.connectVerb]) expect(words.trim().length).toBeGreaterThan(0);
      expect(COMMANDS).toContainEqual({ name, synopsis: d.synopsis, summary: d.summary });
      expect(MAIN_HELP).toContain(`burrow ${d.synopsis}`);
    }
    // a kind alone is headed by its own words; kinds together by what their visitors' traffic is called
    for (const name of KIND_NAMES) expect(headingOf([{ protocol: name }])).toBe(KIND_UNITS[name].display.heading);
    expect(headingOf([])).toBe("HTTP Requests");
    expect(headingOf([{ protocol: "http" }, { protocol: "tcp" }])).toBe("Requests and Connections");
    expect(headingOf([{ protocol: "tcp" }, { protocol: "tls" }])).toBe("TCP Connections");
    expect(headingOf([{ protocol: "tls" }, { protocol: "udp" }])).toBe("Connections and Flows");
    expect(headingOf([{ protocol: "udp" }, { protocol: "http" }, { protocol: "tcp" }])).toBe("Requests, Connections and Flows");
  });

  test("every kind writes its public address, a link only for http", () => {
    const at = { host: "a.tunnels.example.com", port: 8443, web: "https" as const };
    expect(KIND_NAMES.map((k) => addressText(k, at))).toEqual([
      "https://a.tunnels.example.com:8443",
      "a.tunnels.example.com:8443",
      "tls://a.tunnels.example.com:8443",
      "udp://a.tunnels.example.com:8443",
    ]);
    // a name on its scheme's own port has none written
    expect(addressText("http", { host: "a.localhost", web: "http" })).toBe("http://a.localhost");
    expect(addressText("tls", { host: "a.localhost" })).toBe("tls://a.localhost");
    expect(KIND_NAMES.filter((k) => KIND_UNITS[k].display.link)).toEqual(["http"]);
  });

  test("names from outside become kinds only when the table has them", () => {
    for (const name of KIND_NAMES) expect(kindNamed(name)).toBe(name);
    for (const other of ["h1", "HTTP", "", "toString", "__proto__", "constructor"]) expect(kindNamed(other)).toBeUndefined();
    // a row of a name says its named kind; anything else was http's
    for (const name of NAMED_KINDS) expect(namedKindOf(name)).toBe(name);
    for (const other of [...PORT_KINDS, undefined, "sctp"]) expect(namedKindOf(other)).toBe("http");
  });
});
