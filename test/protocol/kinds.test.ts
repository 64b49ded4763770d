/**
 * The kind table (src/protocol/kinds.ts): each kind's facts agree with each
 * other, and the lists the rest of the tree reads (the HELLO and READY
 * schemas, OPEN's kinds, allowed_protocols, the database's enum) are the
 * table's, so that a kind added to the table is a kind everywhere.
 */
import { describe, expect, test } from "bun:test";
import * as v from "valibot";
import { isNamedKind, isPortKind, isPrivateKind, KIND_NAMES, KINDS, type KindFacts, NAMED_KINDS, PORT_KINDS, PRIVATE_KINDS, reachedByName, reachedByPort, STREAM_KINDS } from "../../src/protocol/kinds.ts";
import { Hello, OpenMeta, readOpenMeta, Ready } from "../../src/protocol/messages.ts";
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
