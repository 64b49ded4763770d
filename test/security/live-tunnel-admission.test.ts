/**
 * Admission stepped around through a tunnel added to a live session (wire.ts
 * ADD): every rule a HELLO's tunnel meets holds on an added one, judged
 * alone, with the code the HELLO would get (max_tunnels, the session's cap,
 * allowed_protocols, system and reserved names, names held by others and by
 * the session itself, custom hostnames, require_auth, access rules, the
 * traffic quota, the operator's traffic policies), and is judged again live
 * after an admin change as a HELLO's tunnel is. And the hostile peer: ADD
 * before READY, from an agent that did not say `live`, malformed, or in a
 * flood, is a protocol error; a REMOVE cannot touch another session's
 * tunnel. The agent is played by hand over a raw connection.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType, MAX_PENDING_CHANGES, MAX_SESSION_TUNNELS, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import type { AdminClient } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { rawConnection, type RawConnection } from "../harness/raw-agent.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { waitUntil } from "../harness/wait.ts";

/** Liveness only: an ADD is answered in milliseconds. */
const WAIT_MS = 10_000;
/** What is promised: an admin change reaches what is live within this. */
const LIVE_EFFECT_MS = 5_000;

let rig: Rig;
let api: AdminClient;
const open: RawConnection[] = [];

beforeAll(async () => {
  rig = await withServer({ username: "owner" });
  api = rig.api;
}, 30_000);
afterAll(async () => {
  for (const c of open) c.close();
  await rig?.close();
});

/** A user with these settings and a token of theirs. */
async function userWith(name: string, settings: Record<string, unknown> = {}): Promise<{ id: number; token: string }> {
  const id = await api.createUser(name, settings);
  return { id, token: await api.createToken(id) };
}

const json = (f: { payload: Buffer }) => JSON.parse(f.payload.toString());

/** An agent played by hand: HELLO (saying `live` unless told not to) with `tunnels`, then READY. */
async function session(token: string, tunnels: unknown[], live = true): Promise<{ conn: RawConnection; ready: any }> {
  const conn = await rawConnection({ port: rig.server.edgePort, via: "websocket" });
  open.push(conn);
  conn.send(encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels, agent: "live-admission-test", partial: true, revoke: true, ...(live ? { live: true } : {}) })));
  const answer = () => conn.frames.find((f) => f.type === FrameType.READY || f.type === FrameType.ERROR);
  await conn.until(() => answer() !== undefined || conn.closed, WAIT_MS);
  const a = answer();
  if (a?.type !== FrameType.READY) throw new Error(`no READY: ${a ? a.payload.toString() : "closed"}`);
  return { conn, ready: json(a) };
}

let refs = 1;
/** ADD, and its answer (ADDED's JSON). */
async function add(conn: RawConnection, tunnel: unknown, name = "added"): Promise<{ tunnel?: any; refused?: { code: string; message: string } }> {
  const ref = refs++;
  conn.send(encodeFrame(FrameType.ADD, 0, jsonPayload({ ref, name, tunnel })));
  const answer = () => conn.frames.find((f) => f.type === FrameType.ADDED && json(f).ref === ref);
  if (!(await conn.until(() => answer() !== undefined || conn.closed, WAIT_MS))) throw new Error("no ADDED");
  const a = answer();
  if (!a) throw new Error(`the connection closed: ${conn.frames.filter((f) => f.type === FrameType.ERROR).map((f) => f.payload.toString())}`);
  return json(a);
}

/** The connection's ERROR, once it came (or undefined). */
async function errorOf(conn: RawConnection): Promise<{ code: string; message: string } | undefined> {
  await conn.until(() => conn.closed || conn.frames.some((f) => f.type === FrameType.ERROR), WAIT_MS);
  const e = conn.frames.find((f) => f.type === FrameType.ERROR);
  return e && json(e);
}

const active = async (): Promise<{ subdomain?: string; port?: number; username: string }[]> => (await api.get("/api/tunnels/active")).body;

describe("the handshake's rules hold on an added tunnel, each refusing only that tunnel", () => {
  test("max_tunnels counts the session's own tunnels and the user's others", async () => {
    const u = await userWith("limited", { max_tunnels: 3 });
    await session(u.token, [{ protocol: "http", subdomain: "lim-other" }]);
    const { conn } = await session(u.token, [{ protocol: "http", subdomain: "lim-a" }]);
    expect((await add(conn, { protocol: "http", subdomain: "lim-b" })).tunnel?.subdomain).toBe("lim-b");
    const over = await add(conn, { protocol: "http", subdomain: "lim-c" });
    expect(over.refused?.code).toBe("TUNNEL_LIMIT");
    expect((await active()).filter((t) => t.username === "limited").length).toBe(3);
    // the session goes on, with what it had
    expect(conn.closed).toBe(false);
  });

  test(`one connection holds at most ${MAX_SESSION_TUNNELS} tunnels, whatever max_tunnels says`, async () => {
    const u = await userWith("many");
    const { conn } = await session(u.token, [{ protocol: "http", subdomain: "many-0" }]);
    for (let i = 1; i < MAX_SESSION_TUNNELS; i++) expect((await add(conn, { protocol: "http", subdomain: `many-${i}` })).tunnel).toBeDefined();
    expect((await add(conn, { protocol: "http", subdomain: "many-more" })).refused?.code).toBe("TUNNEL_LIMIT");
  });

  test("allowed_protocols", async () => {
    const u = await userWith("http-only", { allowed_protocols: "http" });
    const { conn } = await session(u.token, [{ protocol: "http" }]);
    expect((await add(conn, { protocol: "tcp" })).refused?.code).toBe("PROTOCOL_DENIED");
    expect((await add(conn, { protocol: "udp" })).refused?.code).toBe("PROTOCOL_DENIED");
  });

  test("system names, names reserved for another user, names held by another tunnel or by the session itself", async () => {
    const other = await userWith("holder");
    expect((await api.post("/api/domains", { subdomain: "kept-for-holder", user_id: other.id })).status).toBe(201);
    await session(other.token, [{ protocol: "http", subdomain: "held-by-holder" }]);
    const u = await userWith("name-seeker", { allowed_protocols: "http,tcp,tls" });
    const { conn } = await session(u.token, [{ protocol: "http", subdomain: "seeker-own" }]);
    expect((await add(conn, { protocol: "http", subdomain: "admin" })).refused?.code).toBe("SUBDOMAIN_RESERVED");
    expect((await add(conn, { protocol: "http", subdomain: "kept-for-holder" })).refused?.code).toBe("SUBDOMAIN_RESERVED");
    expect((await add(conn, { protocol: "tls", subdomain: "held-by-holder" })).refused?.code).toBe("SUBDOMAIN_TAKEN");
    expect((await add(conn, { protocol: "http", subdomain: "held-by-holder" })).refused?.code).toBe("SUBDOMAIN_TAKEN");
    // its own live tunnel's name is not taken over a second time by the same session
    expect((await add(conn, { protocol: "http", subdomain: "seeker-own" })).refused?.code).toBe("SUBDOMAIN_TAKEN");
    expect((await add(conn, { protocol: "http", subdomain: "NOT a name" })).refused?.code).toBe("SUBDOMAIN_INVALID");
    expect((await active()).filter((t) => t.username === "name-seeker").map((t) => t.subdomain)).toEqual(["seeker-own"]);
  });

  test("a custom hostname that is not the user's, verified", async () => {
    const u = await userWith("no-hostnames");
    const { conn } = await session(u.token, [{ protocol: "http" }]);
    expect((await add(conn, { protocol: "http", hostname: "demo.example.org" })).refused?.code).toBe("HOSTNAME_NOT_ALLOWED");
  });

  test("require_auth: an added tunnel without basic auth or OIDC is refused; with basic auth it is granted, its rules enforced", async () => {
    const u = await userWith("must-auth", { require_auth: true });
    const { conn } = await session(u.token, [{ protocol: "http", subdomain: "auth-first", access: { basicAuth: [{ user: "u", password: "p4ssword" }] } }]);
    expect((await add(conn, { protocol: "http", subdomain: "auth-open" })).refused?.code).toBe("AUTH_REQUIRED");
    expect((await add(conn, { protocol: "tcp" })).refused?.code).toBe("AUTH_REQUIRED");
    const granted = await add(conn, { protocol: "http", subdomain: "auth-closed", access: { basicAuth: [{ user: "u", password: "p4ssword" }] } });
    expect(granted.tunnel?.access).toBe(true);
    // the edge asks for the password before anything reaches the agent
    expect((await tunnelFetch(rig.server.edgePort, "auth-closed", "/")).status).toBe(401);
  });

  test("access rules that do not hold are refused as at a HELLO", async () => {
    const u = await userWith("bad-rules");
    const { conn } = await session(u.token, [{ protocol: "http" }]);
    expect((await add(conn, { protocol: "http", access: { allowCidrs: ["not-a-cidr"] } })).refused?.code).toBe("CIDR_INVALID");
  });

  test("the operator's traffic policies cover an added tunnel", async () => {
    const u = await userWith("policed");
    const made = await api.post("/api/policies", {
      name: "no one in",
      scope: "user",
      user_id: u.id,
      policy: "on_http_request:\n  - actions:\n      - type: deny\n        config: { status_code: 451 }\n",
    });
    expect(made.status).toBe(201);
    const { conn } = await session(u.token, [{ protocol: "http", subdomain: "policed-a" }]);
    expect((await add(conn, { protocol: "http", subdomain: "policed-b" })).tunnel).toBeDefined();
    expect((await tunnelFetch(rig.server.edgePort, "policed-b", "/")).status).toBe(451);
  });

  test("the traffic quota: a user over it adds nothing", async () => {
    const u = await userWith("spent", { traffic_limit: 1 });
    const { conn } = await session(u.token, [{ protocol: "http", subdomain: "spent-a" }]);
    // a visitor's request counts its bytes toward the quota (the hand-played agent never answers it)
    void tunnelFetch(rig.server.edgePort, "spent-a", "/", { signal: AbortSignal.timeout(2_000) }).catch(() => {});
    await waitUntil(() => conn.frames.some((f) => f.type === FrameType.OPEN), WAIT_MS, "the request's stream");
    const answer = await add(conn, { protocol: "http", subdomain: "spent-b" }).catch(() => undefined);
    // refused alone, or the whole session closed by the quota's own round first: either way nothing was added
    if (answer) expect(answer.refused?.code).toBe("TRAFFIC_EXCEEDED");
    else expect((await errorOf(conn))?.code).toBe("TRAFFIC_EXCEEDED");
    expect((await active()).some((t) => t.subdomain === "spent-b")).toBe(false);
  });
});

test("an added tunnel is judged again live after an admin change, as a HELLO's: closed alone (REVOKE) with the handshake's code within 5 s", async () => {
  const u = await userWith("narrowed", { allowed_protocols: "http,tcp" });
  const { conn } = await session(u.token, [{ protocol: "http", subdomain: "narrowed-a" }]);
  const added = await add(conn, { protocol: "tcp" });
  const id = added.tunnel!.id;
  const since = performance.now();
  expect((await api.put(`/api/users/${u.id}`, { allowed_protocols: "http" })).status).toBe(200);
  const revoked = () => conn.frames.find((f) => f.type === FrameType.REVOKE && json(f).tunnel === id);
  expect(await conn.until(() => revoked() !== undefined, WAIT_MS)).toBe(true);
  expect(performance.now() - since).toBeLessThan(LIVE_EFFECT_MS);
  expect(json(revoked()!).code).toBe("PROTOCOL_DENIED");
  expect(conn.closed).toBe(false);
  expect((await active()).filter((t) => t.username === "narrowed").map((t) => t.subdomain)).toEqual(["narrowed-a"]);
});

describe("a hostile peer", () => {
  test("ADD from an agent whose HELLO did not say `live` is a protocol error", async () => {
    const u = await userWith("not-live");
    const { conn } = await session(u.token, [{ protocol: "http" }], false);
    conn.send(encodeFrame(FrameType.ADD, 0, jsonPayload({ ref: 1, name: "x", tunnel: { protocol: "http" } })));
    expect((await errorOf(conn))?.code).toBe("PROTOCOL_ERROR");
    expect((await active()).some((t) => t.username === "not-live")).toBe(false);
  });

  test("ADD before READY (held with the HELLO, then refused) and a malformed ADD are protocol errors", async () => {
    const u = await userWith("early");
    const conn = await rawConnection({ port: rig.server.edgePort, via: "websocket" });
    open.push(conn);
    conn.send(
      encodeFrame(FrameType.ADD, 0, jsonPayload({ ref: 1, name: "x", tunnel: { protocol: "http" } })),
      encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token: u.token, tunnels: [{ protocol: "http" }], live: true })),
    );
    expect((await errorOf(conn))?.code).toBe("PROTOCOL_ERROR");
    const { conn: second } = await session(u.token, [{ protocol: "http" }]);
    second.send(encodeFrame(FrameType.ADD, 0, jsonPayload({ ref: 1, name: "x", tunnel: { protocol: "gopher" } })));
    expect((await errorOf(second))?.code).toBe("PROTOCOL_ERROR");
  });

  test(`more than ${MAX_PENDING_CHANGES} ADDs waiting at once is a protocol error, and none past the rules is granted`, async () => {
    const u = await userWith("flooder", { max_tunnels: 4 });
    const { conn } = await session(u.token, [{ protocol: "http" }]);
    const frames = Array.from({ length: MAX_PENDING_CHANGES * 3 }, (_, i) => encodeFrame(FrameType.ADD, 0, jsonPayload({ ref: 100 + i, name: `f${i}`, tunnel: { protocol: "http" } })));
    // one message: the edge reads them all in one turn, before it has answered any
    conn.send(Buffer.concat(frames));
    expect((await errorOf(conn))?.code).toBe("PROTOCOL_ERROR");
    await waitUntil(async () => !(await active()).some((t) => t.username === "flooder"), WAIT_MS, "the flooder's tunnels to go");
    expect(conn.frames.filter((f) => f.type === FrameType.ADDED && json(f).tunnel).length).toBeLessThanOrEqual(3);
  });

  test("REMOVE names only the session's own tunnels: another session's stays", async () => {
    const victim = await userWith("victim");
    const { ready } = await session(victim.token, [{ protocol: "http", subdomain: "victim-site" }]);
    const u = await userWith("remover");
    const { conn } = await session(u.token, [{ protocol: "http" }]);
    conn.send(encodeFrame(FrameType.REMOVE, 0, jsonPayload({ ref: 7, tunnel: ready.tunnels[0].id })));
    await conn.until(() => conn.frames.some((f) => f.type === FrameType.REMOVED), WAIT_MS);
    expect((await active()).some((t) => t.subdomain === "victim-site")).toBe(true);
  });
});
