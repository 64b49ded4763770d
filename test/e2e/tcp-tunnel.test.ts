/**
 * TCP tunnels: `burrow tcp` relays bytes both ways between a public port and
 * a local TCP service, keeps half-closes, carries many connections at once,
 * honours --remote-port, logs each connection, and moves 100 MiB each way
 * intact.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Socket, TCPSocketListener } from "bun";
import { createCipheriv, createHash } from "node:crypto";
import net from "node:net";
import type { TestAgent } from "../harness/agent.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { within } from "../harness/wait.ts";

const MiB = 1024 * 1024;
const BIG = 100 * MiB;
const CHUNK = 256 * 1024;
const WAIT_MS = 10_000;

// a range of 100 ports for this file's server, away from the kernel's ephemeral ports (32768+)
const FIRST_PORT = 30_000 + Math.floor(Math.random() * 27) * 100;
const LAST_PORT = FIRST_PORT + 99;

function prng(seed: string) {
  const cipher = createCipheriv("aes-256-ctr", createHash("sha256").update(seed).digest(), Buffer.alloc(16));
  return (n: number): Buffer => cipher.update(Buffer.alloc(n));
}

// -- local services ------------------------------------------------------------------------------------

/** Echoes what it gets; when the client half-closes, adds "<eof>" and closes its side too. */
const echo: TCPSocketListener<undefined> = Bun.listen({
  hostname: "127.0.0.1",
  port: 0,
  allowHalfOpen: true,
  socket: {
    data(socket, data) {
      socket.write(data);
    },
    end(socket) {
      socket.end("<eof>");
    },
  },
});

interface BulkState {
  mode?: "download" | "upload";
  /** download: bytes still to send, the generator */
  left: number;
  next?: (n: number) => Buffer;
  queued?: Buffer;
  /** upload: the hash of what arrived */
  hash?: ReturnType<typeof createHash>;
  bytes: number;
}

/**
 * The first byte picks the job: "D" sends BIG pseudo-random bytes and closes,
 * honouring backpressure; "U" hashes everything up to the client's half-close
 * and answers with "<bytes> <sha256>".
 */
const bulk: TCPSocketListener<BulkState> = Bun.listen<BulkState>({
  hostname: "127.0.0.1",
  port: 0,
  allowHalfOpen: true,
  socket: {
    open(socket) {
      socket.data = { left: 0, bytes: 0 };
    },
    data(socket, data) {
      const st = socket.data;
      if (!st.mode) {
        st.mode = data[0] === 0x44 ? "download" : "upload";
        data = data.subarray(1);
        if (st.mode === "download") {
          st.left = BIG;
          st.next = prng("tcp-download");
          return pump(socket);
        }
        st.hash = createHash("sha256");
      }
      if (st.mode === "upload") {
        st.hash!.update(data);
        st.bytes += data.byteLength;
      }
    },
    drain: (socket) => pump(socket),
    end(socket) {
      const st = socket.data;
      if (st.mode === "upload") socket.end(`${st.bytes} ${st.hash!.digest("hex")}`);
    },
  },
});

function pump(socket: Socket<BulkState>) {
  const st = socket.data;
  for (;;) {
    if (!st.queued) {
      if (st.left === 0) return void socket.end();
      const n = Math.min(CHUNK, st.left);
      st.queued = st.next!(n);
      st.left -= n;
    }
    const written = socket.write(st.queued);
    if (written < st.queued.byteLength) {
      st.queued = st.queued.subarray(Math.max(written, 0));
      return; // drain calls again
    }
    st.queued = undefined;
  }
}

// -- server and agents ---------------------------------------------------------------------------------

let rig: Rig;
let echoAgent: TestAgent;
let bulkAgent: TestAgent;

beforeAll(async () => {
  rig = await withServer({ server: { args: ["--tcp-ports", `${FIRST_PORT}-${LAST_PORT}`] }, username: "piper" });
  const start = (port: number) => rig.startAgent({ kind: "tcp", target: `127.0.0.1:${port}` });
  [echoAgent, bulkAgent] = await Promise.all([start(echo.port), start(bulk.port)]);
});

afterAll(async () => {
  await rig?.close();
  echo.stop(true);
  bulk.stop(true);
});

// -- a visitor -----------------------------------------------------------------------------------------

interface Conversation {
  socket: net.Socket;
  /** Everything received until the tunnel closed its side. */
  received: Promise<Buffer>;
}

/** Connects with allowHalfOpen, so ending our side still lets the answer in. */
async function connect(port: number): Promise<Conversation> {
  const socket = net.connect({ port, host: "127.0.0.1", allowHalfOpen: true });
  const chunks: Buffer[] = [];
  socket.on("data", (c: Buffer) => chunks.push(c));
  const received = new Promise<Buffer>((resolve, reject) => {
    socket.on("end", () => resolve(Buffer.concat(chunks)));
    socket.on("error", reject);
  });
  received.catch(() => {});
  await within(
    new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    }),
    WAIT_MS,
    `connect to port ${port}`,
  );
  return { socket, received };
}

// -- the tests -------------------------------------------------------------------------------------------

test("the agent prints the public address of a port inside the server's range", () => {
  expect(echoAgent.publicUrl).toMatch(/^localhost:\d+$/);
  expect(echoAgent.port).toBeGreaterThanOrEqual(FIRST_PORT);
  expect(echoAgent.port).toBeLessThanOrEqual(LAST_PORT);
  expect(bulkAgent.port).not.toBe(echoAgent.port);
});

test("bytes go through to an echo service and come back", async () => {
  const c = await connect(echoAgent.port!);
  try {
    const got: Buffer[] = [];
    const arrived = (n: number) =>
      within(
        new Promise<void>((resolve) => {
          const check = () => (Buffer.concat(got).byteLength >= n ? resolve() : c.socket.once("data", (d: Buffer) => (got.push(d), check())));
          check();
        }),
        WAIT_MS,
        `${n} echoed bytes`,
      );
    c.socket.write("hello, tunnel\n");
    await arrived(14);
    expect(Buffer.concat(got).toString()).toBe("hello, tunnel\n");
    const binary = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 31) & 0xff));
    c.socket.write(binary);
    await arrived(14 + binary.byteLength);
    expect(Buffer.concat(got).subarray(14).equals(binary)).toBe(true);
  } finally {
    c.socket.destroy();
  }
});

test("after the visitor half-closes, the service's answer still comes back", async () => {
  const c = await connect(echoAgent.port!);
  try {
    c.socket.end("last words");
    const got = await within(c.received, WAIT_MS, "the echo after our half-close");
    // "<eof>" is written by the service only after it saw our end: data flowed after the half-close
    expect(got.toString()).toBe("last words<eof>");
  } finally {
    c.socket.destroy();
  }
});

test("many connections at once each get their own bytes back", async () => {
  const conns = await Promise.all(Array.from({ length: 50 }, () => connect(echoAgent.port!)));
  try {
    const payloads = conns.map((_, i) => Buffer.from(`connection ${i}: `.repeat(100 + i * 13)));
    conns.forEach((c, i) => c.socket.end(payloads[i]!));
    const results = await within(Promise.all(conns.map((c) => c.received)), 20_000, "50 echoes");
    results.forEach((got, i) => expect(got.toString()).toBe(payloads[i]!.toString() + "<eof>"));
  } finally {
    for (const c of conns) c.socket.destroy();
  }
});

test("the agent prints a line when a connection opens and when it closes", async () => {
  const c = await connect(echoAgent.port!);
  const remote = `127.0.0.1:${c.socket.localPort}`;
  try {
    await echoAgent.output.waitFor(new RegExp(`connection from ${remote}$`), 5_000);
    c.socket.end("abc");
    await within(c.received, WAIT_MS, "the echo");
    // in: bytes to the local service; out: bytes back from it ("abc<eof>")
    await echoAgent.output.waitFor(new RegExp(`closed ${remote}\\s+in 3 B, out 8 B`), 5_000);
  } finally {
    c.socket.destroy();
  }
});

test("--remote-port gets exactly the port asked for", async () => {
  // a port of the range that nothing holds now
  const taken = new Set([echoAgent.port, bulkAgent.port]);
  let wanted: number | undefined;
  for (let p = LAST_PORT; p >= FIRST_PORT && wanted === undefined; p--) {
    if (taken.has(p)) continue;
    const free = await new Promise<boolean>((resolve) => {
      const probe = net.createServer().once("error", () => resolve(false));
      probe.listen(p, "127.0.0.1", () => probe.close(() => resolve(true)));
    });
    if (free) wanted = p;
  }
  expect(wanted).toBeDefined();
  await using agent = await rig.startAgent({ kind: "tcp", target: `127.0.0.1:${echo.port}`, args: ["--remote-port", String(wanted)] });
  expect(agent.port).toBe(wanted!);
  expect(agent.publicUrl).toBe(`localhost:${wanted}`);
  const c = await connect(wanted!);
  try {
    c.socket.end("on the port I asked for");
    expect((await within(c.received, WAIT_MS, "the echo")).toString()).toBe("on the port I asked for<eof>");
  } finally {
    c.socket.destroy();
  }
});

test("100 MiB from the local service reach the visitor intact", async () => {
  const next = prng("tcp-download");
  const want = createHash("sha256");
  for (let left = BIG; left > 0; left -= CHUNK) want.update(next(Math.min(CHUNK, left)));
  const socket = net.connect({ port: bulkAgent.port!, host: "127.0.0.1", allowHalfOpen: true });
  try {
    const hash = createHash("sha256");
    let bytes = 0;
    const done = new Promise<void>((resolve, reject) => {
      socket.on("data", (c: Buffer) => {
        hash.update(c);
        bytes += c.byteLength;
      });
      socket.on("end", resolve);
      socket.on("error", reject);
    });
    socket.write("D");
    await within(done, 60_000, "the 100 MiB download");
    expect(bytes).toBe(BIG);
    expect(hash.digest("hex")).toBe(want.digest("hex"));
  } finally {
    socket.destroy();
  }
}, 70_000);

test("100 MiB from the visitor reach the local service intact", async () => {
  const c = await connect(bulkAgent.port!);
  try {
    const next = prng("tcp-upload");
    const hash = createHash("sha256");
    c.socket.write("U");
    for (let left = BIG; left > 0; left -= CHUNK) {
      const piece = next(Math.min(CHUNK, left));
      hash.update(piece);
      if (!c.socket.write(piece)) await within(new Promise((r) => c.socket.once("drain", r)), 30_000, "the upload to drain");
    }
    c.socket.end();
    const answer = (await within(c.received, 60_000, "the service's hash")).toString();
    expect(answer).toBe(`${BIG} ${hash.digest("hex")}`);
  } finally {
    c.socket.destroy();
  }
}, 70_000);
