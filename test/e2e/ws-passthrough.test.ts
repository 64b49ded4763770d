/**
 * WebSocket upgrades pass through the tunnel: messages both ways, text and
 * binary, identical; the local service may speak first; its subprotocol
 * choice reaches the visitor; a close on either side closes the other.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { ServerWebSocket } from "bun";
import type { TestAgent } from "../harness/agent.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { deferred, within } from "../harness/wait.ts";

const WAIT_MS = 10_000;

// -- the local service ----------------------------------------------------------------------------

interface Upgrade {
  path: string;
  id: string;
  headers: [string, string][];
  offered: string | null;
}

/** What each upgrade (by its ?id=) looked like, and when its socket closed on the service's side. */
const upgrades = new Map<string, Upgrade>();
const serviceClosed = new Map<string, ReturnType<typeof deferred<{ code: number }>>>();
const closedOnService = (id: string) => {
  if (!serviceClosed.has(id)) serviceClosed.set(id, deferred<{ code: number }>());
  return serviceClosed.get(id)!.promise;
};

const upstream = Bun.serve<Upgrade>({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req, srv) {
    const url = new URL(req.url);
    const id = url.searchParams.get("id") ?? "";
    if (url.pathname === "/reject") return new Response("no WebSockets here", { status: 403 });
    const offered = req.headers.get("sec-websocket-protocol");
    // pick the last one offered, so the choice is visibly the service's, not a default
    const chosen = offered?.split(",").map((p) => p.trim()).at(-1);
    const data: Upgrade = { path: url.pathname, id, headers: [...req.headers], offered };
    upgrades.set(id, data);
    const ok = srv.upgrade(req, { data, headers: chosen ? { "Sec-WebSocket-Protocol": chosen } : {} });
    return ok ? undefined : new Response("upgrade failed", { status: 400 });
  },
  websocket: {
    perMessageDeflate: false,
    maxPayloadLength: 32 * 1024 * 1024,
    open(ws: ServerWebSocket<Upgrade>) {
      if (ws.data.path === "/push") ws.send("welcome, pushed by the service before any message");
    },
    message(ws: ServerWebSocket<Upgrade>, message: string | Buffer) {
      if (message === "close-me") return ws.close(4001, "the service closes");
      ws.send(message);
    },
    close(ws: ServerWebSocket<Upgrade>, code: number) {
      closedOnService(ws.data.id);
      serviceClosed.get(ws.data.id)!.resolve({ code });
    },
  },
});

let rig: Rig;
let agent: TestAgent;

beforeAll(async () => {
  rig = await withServer({ username: "socketeer" });
  const start = (args: string[]) => rig.startAgent({ kind: "http", target: `127.0.0.1:${upstream.port}`, args });
  [agent] = await Promise.all([start(["--subdomain", "sockets"]), start(["--subdomain", "sockets-rw", "--host-header", "rewrite"])]);
});

afterAll(async () => {
  await rig?.close();
  upstream.stop(true);
});

// -- a visitor ----------------------------------------------------------------------------------------

/** A visitor WebSocket through the edge, with its messages queued for next(). */
class Visitor {
  readonly ws: WebSocket;
  readonly id = crypto.randomUUID().slice(0, 8);
  private inbox: (string | Uint8Array)[] = [];
  private wake?: () => void;
  readonly opened: Promise<void>;
  readonly closed: Promise<CloseEvent>;

  constructor(path: string, opts: { protocols?: string[]; headers?: Record<string, string>; subdomain?: string } = {}) {
    const sep = path.includes("?") ? "&" : "?";
    this.ws = new WebSocket(`ws://127.0.0.1:${rig.server.edgePort}${path}${sep}id=${this.id}`, {
      headers: { host: `${opts.subdomain ?? "sockets"}.localhost:${rig.server.edgePort}`, ...opts.headers },
      protocols: opts.protocols,
    } as any);
    this.ws.binaryType = "arraybuffer";
    this.opened = new Promise((resolve, reject) => {
      this.ws.addEventListener("open", () => resolve());
      this.ws.addEventListener("error", () => reject(new Error("the WebSocket failed to open")));
    });
    this.closed = new Promise((resolve) => this.ws.addEventListener("close", (ev) => resolve(ev)));
    this.ws.addEventListener("message", (ev) => {
      this.inbox.push(typeof ev.data === "string" ? ev.data : new Uint8Array(ev.data as ArrayBuffer));
      this.wake?.();
    });
  }

  /** The next message; fails at once if the socket closes first. */
  async next(what = "a message"): Promise<string | Uint8Array> {
    const deadline = Date.now() + WAIT_MS;
    const closedFirst = this.closed.then((ev) => {
      throw new Error(`the socket closed (${ev.code} ${ev.reason}) while waiting for ${what}`);
    });
    closedFirst.catch(() => {});
    while (this.inbox.length === 0) {
      const d = deferred();
      this.wake = d.resolve;
      await within(Promise.race([d.promise, closedFirst]), Math.max(1, deadline - Date.now()), what);
    }
    return this.inbox.shift()!;
  }
}

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(out.subarray(i, Math.min(n, i + 65536)));
  return out;
}

// -- the tests ------------------------------------------------------------------------------------------

test("text and binary messages go through to an echo service and come back identical", async () => {
  const v = new Visitor("/echo");
  try {
    await within(v.opened, WAIT_MS, "the WebSocket to open");
    const messages: (string | Uint8Array)[] = [
      "hello",
      "unicode: héllo wörld ✓ 🚀",
      "",
      new Uint8Array([0, 1, 2, 253, 254, 255]),
      new Uint8Array(0),
      randomBytes(100_000),
      "y".repeat(100_000),
    ];
    for (const m of messages) v.ws.send(m);
    for (const [i, m] of messages.entries()) {
      const got = await v.next(`echo of message ${i}`);
      if (typeof m === "string") expect(got).toBe(m);
      else {
        expect(got).toBeInstanceOf(Uint8Array);
        expect(Buffer.from(got as Uint8Array).equals(Buffer.from(m))).toBe(true);
      }
    }
  } finally {
    v.ws.close();
  }
});

test("messages of several MiB go through to an echo service and come back identical", async () => {
  const v = new Visitor("/echo");
  try {
    await within(v.opened, WAIT_MS, "the WebSocket to open");
    const big = randomBytes(2 * 1024 * 1024 + 3);
    const text = "ü".repeat(512 * 1024);
    v.ws.send(big);
    v.ws.send(text);
    v.ws.send("after the big ones");
    const got = await v.next("the echo of the 2 MiB binary message");
    expect(Buffer.from(got as Uint8Array).equals(Buffer.from(big))).toBe(true);
    expect(await v.next("the echo of the 1 MiB text message")).toBe(text);
    expect(await v.next()).toBe("after the big ones");
  } finally {
    v.ws.close();
  }
});

test("many small messages come back in the order they were sent", async () => {
  const v = new Visitor("/echo");
  try {
    await within(v.opened, WAIT_MS, "the WebSocket to open");
    for (let i = 0; i < 500; i++) v.ws.send(i % 2 ? `message ${i}` : new TextEncoder().encode(`binary ${i}`));
    for (let i = 0; i < 500; i++) {
      const got = await v.next(`message ${i}`);
      expect(typeof got === "string" ? got : new TextDecoder().decode(got)).toBe(i % 2 ? `message ${i}` : `binary ${i}`);
      expect(typeof got === "string").toBe(i % 2 === 1);
    }
  } finally {
    v.ws.close();
  }
});

test("the local service can send the first message", async () => {
  const v = new Visitor("/push");
  try {
    await within(v.opened, WAIT_MS, "the WebSocket to open");
    expect(await v.next("the pushed message")).toBe("welcome, pushed by the service before any message");
  } finally {
    v.ws.close();
  }
});

test("the subprotocol the local service chooses reaches the visitor", async () => {
  const v = new Visitor("/echo", { protocols: ["chat.v1", "chat.v2"] });
  try {
    await within(v.opened, WAIT_MS, "the WebSocket to open");
    expect(upgrades.get(v.id)?.offered?.split(",").map((p) => p.trim())).toEqual(["chat.v1", "chat.v2"]);
    expect(v.ws.protocol).toBe("chat.v2");
    v.ws.send("still works");
    expect(await v.next()).toBe("still works");
  } finally {
    v.ws.close();
  }
});

test("the upgrade reaches the local service with the visitor's headers, Host and forwarding headers", async () => {
  const v = new Visitor("/echo?x=1", { headers: { "x-custom": "from the visitor", cookie: "session=s1" } });
  try {
    await within(v.opened, WAIT_MS, "the WebSocket to open");
    const h = new Map(upgrades.get(v.id)!.headers);
    expect(h.get("x-custom")).toBe("from the visitor");
    expect(h.get("cookie")).toBe("session=s1");
    expect(h.get("x-forwarded-for")).toBe("127.0.0.1");
    expect(h.get("x-forwarded-proto")).toBe("http");
    expect(h.get("x-forwarded-host")).toBe(`sockets.localhost:${rig.server.edgePort}`);
    expect(h.get("host")).toBe(`sockets.localhost:${rig.server.edgePort}`);
  } finally {
    v.ws.close();
  }
});

test("with --host-header rewrite the upgrade reaches the local service with its own address as Host", async () => {
  const v = new Visitor("/echo", { subdomain: "sockets-rw" });
  try {
    await within(v.opened, WAIT_MS, "the WebSocket to open");
    expect(new Map(upgrades.get(v.id)!.headers).get("host")).toBe(`127.0.0.1:${upstream.port}`);
    v.ws.send("rewritten");
    expect(await v.next()).toBe("rewritten");
  } finally {
    v.ws.close();
  }
});

test("closing from the visitor closes the local service's socket with the same code", async () => {
  const v = new Visitor("/echo");
  await within(v.opened, WAIT_MS, "the WebSocket to open");
  v.ws.send("ping");
  expect(await v.next()).toBe("ping");
  v.ws.close(4002, "visitor leaves");
  const onService = await within(closedOnService(v.id), WAIT_MS, "the service's socket to close");
  expect(onService.code).toBe(4002);
  await within(v.closed, WAIT_MS, "the visitor's socket to close");
});

test("closing from the local service closes the visitor's socket with the same code and reason", async () => {
  const v = new Visitor("/echo");
  await within(v.opened, WAIT_MS, "the WebSocket to open");
  v.ws.send("close-me");
  const ev = await within(v.closed, WAIT_MS, "the visitor's socket to close");
  expect(ev.code).toBe(4001);
  expect(ev.reason).toBe("the service closes");
  await within(closedOnService(v.id), WAIT_MS, "the service's side to be closed");
});

test("a local service that refuses the upgrade makes the visitor's WebSocket fail, not hang", async () => {
  const v = new Visitor("/reject");
  const outcome = await within(
    v.opened.then(
      () => "opened",
      () => "failed",
    ),
    WAIT_MS,
    "the WebSocket to fail",
  );
  expect(outcome).toBe("failed");
  await within(v.closed, WAIT_MS, "the visitor's socket to close");
});

test("the agent prints a line for each WebSocket it opens", async () => {
  const v = new Visitor("/echo?logged=yes");
  try {
    await within(v.opened, WAIT_MS, "the WebSocket to open");
    await agent.output.waitFor(new RegExp(`GET\\s+/echo\\?logged=yes&id=${v.id}\\s+101`), 5_000);
  } finally {
    v.ws.close();
  }
});
