/**
 * The TLS front with real parts: certificates made by openssl in a temp
 * dir, clients that are Bun's TLS client and openssl s_client, all on
 * loopback. Each name gets its own certificate, a wildcard covers one
 * label, no SNI gets the first; what is not TLS is closed at once and a
 * silent or trickling peer at the hello timeout; 5 MiB go both ways intact
 * through the pipe with a reader that stalls; the handler learns the
 * visitor's address; new certificates serve new connections while an old
 * one goes on; pause/resume/stop as PublicListener's; and a routed
 * connection arrives undecrypted.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import type { Socket, SocketHandler } from "bun";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PendingWrites } from "../../src/sockets/pending-writes.ts";
import { SocketPipe } from "../../src/sockets/socket-pipe.ts";
import { TlsFront, type Passthrough, type Peer, type Route, type TlsFrontOptions } from "../../src/sockets/tls-front.ts";
import { parseClientHello } from "../../src/tls/client-hello.ts";
import { captureHello } from "../harness/client-hello.ts";
import { chooseEntry } from "../../src/tls/sni.ts";
import type { TlsEntry, TlsSource } from "../../src/tls/tls-source.ts";
import { refuses } from "../harness/ports.ts";
import { waitUntil, within } from "../harness/wait.ts";

const ALPN_H2_HTTP1 = new Uint8Array([2, ...Buffer.from("h2"), 8, ...Buffer.from("http/1.1")]);

let dir: string;
const certs: Record<string, { cert: string; key: string }> = {};

/** A self-signed certificate whose subject is CN=`cn`, for `names`. */
function makeCertificate(cn: string, names: string[]): { cert: string; key: string } {
  const base = join(dir, cn.replace(/\W/g, "_"));
  const made = Bun.spawnSync(
    ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", `/CN=${cn}`, "-addext", `subjectAltName=${names.map((n) => `DNS:${n}`).join(",")}`, "-keyout", `${base}.key`, "-out", `${base}.crt`],
    { stdout: "ignore", stderr: "pipe", timeout: 10_000 },
  );
  if (made.exitCode !== 0) throw new Error(`openssl: ${made.stderr.toString()}`);
  return { cert: readFileSync(`${base}.crt`, "utf8"), key: readFileSync(`${base}.key`, "utf8") };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "tls-front-"));
  certs.default = makeCertificate("default.test", ["default.test"]);
  certs.a1 = makeCertificate("a-one", ["a.test"]);
  certs.a2 = makeCertificate("a-two", ["a.test"]);
  certs.b = makeCertificate("b.test", ["b.test"]);
  certs.wild = makeCertificate("wild", ["*.wild.test"]);
  certs.pass = makeCertificate("passthrough backend", ["pass.test"]);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A TlsSource whose entries the test replaces, as ACME does. */
function changingSource(entries: TlsEntry[]) {
  const listeners = new Set<() => void>();
  const source = {
    entries: () => entries,
    primary: () => entries[0]!,
    onChange(listener: () => void) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    set(next: TlsEntry[]) {
      entries = next;
      for (const l of listeners) l();
    },
  } satisfies TlsSource & { set(next: TlsEntry[]): void };
  return source;
}

const standardEntries = (): TlsEntry[] => [certs.default!, { ...certs.a1!, serverName: "a.test" }, { ...certs.b!, serverName: "b.test" }, { ...certs.wild!, serverName: "*.wild.test" }];

// -- cleanup, whatever a test did ----------------------------------------------------------

const fronts: TlsFront<any>[] = [];
const closers: (() => void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) close();
  await Promise.all(fronts.splice(0).map((f) => within(f.stop(true), 5_000, "the front stops")));
});

// -- the handler: an echo with backpressure, noting who it serves ---------------------------

interface Echo {
  pending: PendingWrites;
  peerAtOpen: Peer;
  peerAtData?: Peer;
  localPort: number;
}

interface EchoFront {
  front: TlsFront<Echo>;
  served: Socket<Echo>[];
}

function echoFront(options: Partial<TlsFrontOptions<Echo>> = {}): EchoFront {
  const served: Socket<Echo>[] = [];
  let front!: TlsFront<Echo>;
  const socket: SocketHandler<Echo> = {
    open(s) {
      s.data = { pending: new PendingWrites(s), peerAtOpen: front.peerOf(s), localPort: s.localPort };
      served.push(s);
    },
    data(s, chunk) {
      s.data.peerAtData ??= front.peerOf(s);
      if (!s.data.pending.write(chunk, true)) s.pause();
    },
    drain(s) {
      if (s.data.pending.flush()) s.resume();
    },
    end(s) {
      // a half-close: answer after it, then close
      s.write("bye after your FIN");
      s.end();
    },
  };
  front = new TlsFront<Echo>({ hostname: "127.0.0.1", port: 0, socket, allowHalfOpen: true, ...options });
  fronts.push(front);
  return { front, served };
}

// -- clients ---------------------------------------------------------------------------------

interface Client {
  socket: Socket<undefined>;
  /** The server certificate's subject ("CN=a.test"). */
  subject: string;
  alpn: string | false | null;
  received(): Buffer;
  /** Resolves once `n` bytes in all have come. */
  until(n: number): Promise<void>;
  /** Called when the socket can take more. */
  onDrain?: () => void;
  closed: Promise<void>;
}

async function tlsClient(port: number, serverName: string | undefined, alpn?: Uint8Array): Promise<Client> {
  const chunks: Buffer[] = [];
  let total = 0;
  let waiter: { n: number; resolve: () => void } | undefined;
  let onDrain: (() => void) | undefined;
  const handshake = Promise.withResolvers<void>();
  const closed = Promise.withResolvers<void>();
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    allowHalfOpen: true,
    tls: { rejectUnauthorized: false, ...(serverName ? { serverName } : {}), ...(alpn ? { ALPNProtocols: alpn } : {}) },
    socket: {
      // the certificates are self-signed: any other failure is one
      handshake: (_s, _ok, err) => (err && !/self.signed/i.test(err.message) ? handshake.reject(err) : handshake.resolve()),
      drain: () => onDrain?.(),
      data(_s, chunk) {
        chunks.push(chunk);
        total += chunk.length;
        if (waiter && total >= waiter.n) waiter.resolve();
      },
      close() {
        handshake.reject(new Error("closed before the handshake"));
        closed.resolve();
      },
      error() {},
    },
  });
  closers.push(() => socket.terminate());
  await within(handshake.promise, 5_000, `TLS handshake for ${serverName ?? "no name"}`);
  return {
    socket,
    subject: socket.getPeerX509Certificate().subject.replace(/\n/g, ", "),
    alpn: socket.alpnProtocol,
    received: () => Buffer.concat(chunks),
    until: (n) => {
      if (total >= n) return Promise.resolve();
      const p = Promise.withResolvers<void>();
      waiter = { n, resolve: p.resolve };
      return within(p.promise, 10_000, `${n} bytes (have ${total})`);
    },
    set onDrain(f: (() => void) | undefined) {
      onDrain = f;
    },
    closed: closed.promise,
  };
}

/** The subject openssl s_client sees ("CN = b.test"), with `-servername name` or with `-noservername`. */
async function opensslSubject(port: number, serverName?: string): Promise<string> {
  const proc = Bun.spawn(["openssl", "s_client", "-connect", `127.0.0.1:${port}`, ...(serverName ? ["-servername", serverName] : ["-noservername"])], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "ignore",
  });
  closers.push(() => proc.kill());
  const out = await within(new Response(proc.stdout).text(), 10_000, "openssl s_client");
  return /^subject=(.*)$/m.exec(out)?.[1] ?? `(no subject in: ${out.slice(0, 200)})`;
}

/** A plain TCP connection; resolves `closed` with the ms it stayed open. */
async function rawClient(port: number) {
  const closed = Promise.withResolvers<number>();
  const start = performance.now();
  const socket = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {}, close: () => closed.resolve(performance.now() - start), error() {} } });
  closers.push(() => socket.terminate());
  return { socket, closed: within(closed.promise, 5_000, "the front closes the connection") };
}

async function echoes(client: Client, text: string): Promise<void> {
  const before = client.received().length;
  client.socket.write(text);
  await client.until(before + text.length);
  expect(client.received().subarray(before).toString()).toBe(text);
}

// -- the tests -------------------------------------------------------------------------------

describe("chooseEntry", () => {
  test("the exact name before a wildcard, a wildcard for one label only, else the first; case and a trailing dot do not matter", () => {
    const entries = [{ id: "first" }, { id: "wild", serverName: "*.x.test" }, { id: "exact", serverName: "a.x.test" }];
    expect(chooseEntry(entries, "a.x.test")?.id).toBe("exact");
    expect(chooseEntry(entries, "A.X.Test.")?.id).toBe("exact");
    expect(chooseEntry(entries, "b.x.test")?.id).toBe("wild");
    expect(chooseEntry(entries, "c.b.x.test")?.id).toBe("first");
    expect(chooseEntry(entries, "x.test")?.id).toBe("first");
    expect(chooseEntry(entries, undefined)?.id).toBe("first");
    expect(chooseEntry([], "a.test")).toBeUndefined();
  });
});

describe("certificates by server name", () => {
  test("each name its own, a wildcard for one label, others and no SNI the first (Bun's client and openssl)", async () => {
    const { front } = echoFront({ tls: changingSource(standardEntries()) });
    const subjectFor = async (name: string | undefined) => (await tlsClient(front.port, name)).subject;
    expect(await subjectFor("a.test")).toBe("CN=a-one");
    expect(await subjectFor("B.TEST")).toBe("CN=b.test");
    expect(await subjectFor("x.wild.test")).toBe("CN=wild");
    expect(await subjectFor("y.x.wild.test")).toBe("CN=default.test");
    expect(await subjectFor("unknown.test")).toBe("CN=default.test");
    expect(await opensslSubject(front.port, "b.test")).toBe("CN = b.test");
    expect(await opensslSubject(front.port, "q.wild.test")).toBe("CN = wild");
    expect(await opensslSubject(front.port)).toBe("CN = default.test");
  });

  test("ALPN: a client offering h2 and http/1.1 gets http/1.1; one offering nothing gets none", async () => {
    const { front } = echoFront({ tls: changingSource(standardEntries()) });
    expect((await tlsClient(front.port, "a.test", ALPN_H2_HTTP1)).alpn).toBe("http/1.1");
    expect((await tlsClient(front.port, "a.test")).alpn).toBe(false);
  });

  test("new certificates serve new connections, while a connection on the old one goes on", async () => {
    const source = changingSource(standardEntries());
    const { front } = echoFront({ tls: source });
    const old = await tlsClient(front.port, "a.test");
    expect(old.subject).toBe("CN=a-one");
    await echoes(old, "before the change");
    source.set([certs.default!, { ...certs.a2!, serverName: "a.test" }]);
    const fresh = await tlsClient(front.port, "a.test");
    expect(fresh.subject).toBe("CN=a-two");
    await echoes(old, "after the change, on the old certificate");
    await echoes(fresh, "on the new one");
    // entries that left are gone for new connections: b.test now gets the first
    expect((await tlsClient(front.port, "b.test")).subject).toBe("CN=default.test");
  });
});

describe("what is not a TLS hello", () => {
  test("plain HTTP sent to the TLS port is closed at once, not held until the timeout", async () => {
    const { front, served } = echoFront({ tls: changingSource(standardEntries()) });
    const client = await rawClient(front.port);
    client.socket.write("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    expect(await client.closed).toBeLessThan(2_000);
    expect(served).toHaveLength(0);
  });

  test("a hello that says it is longer than 16 KiB is closed at once", async () => {
    const { front } = echoFront({ tls: changingSource(standardEntries()) });
    const client = await rawClient(front.port);
    client.socket.write(new Uint8Array([22, 3, 1, 0x40, 0x00, 1, 0x00, 0x40, 0x00]));
    expect(await client.closed).toBeLessThan(2_000);
  });

  test("a silent peer, and one that trickles its hello, are closed at the hello timeout", async () => {
    const { front } = echoFront({ tls: changingSource(standardEntries()), helloTimeoutMs: 300 });
    const silent = await rawClient(front.port);
    const trickler = await rawClient(front.port);
    const header = [22, 3, 1, 0, 200, 1, 0, 0, 196];
    let sent = 0;
    const drip = setInterval(() => sent < header.length && trickler.socket.write(new Uint8Array([header[sent++]!])), 40);
    closers.push(() => clearInterval(drip));
    for (const took of [await silent.closed, await trickler.closed]) {
      expect(took).toBeGreaterThan(250);
      expect(took).toBeLessThan(3_000);
    }
  });
});

describe("the pipe", () => {
  test("5 MiB each way arrive intact through a reader that stalls for a while (backpressure on every hop)", async () => {
    const { front } = echoFront({ tls: changingSource(standardEntries()) });
    const client = await tlsClient(front.port, "a.test");
    const payload = crypto.getRandomValues(new Uint8Array(5 * 1024 * 1024));
    let offset = 0;
    const pump = () => {
      while (offset < payload.length) {
        const n = client.socket.write(payload.subarray(offset, offset + 256 * 1024));
        if (n <= 0) return;
        offset += n;
      }
    };
    client.onDrain = pump;
    client.socket.pause();
    pump();
    await Bun.sleep(300); // the client reads nothing meanwhile: the echo and the pipe must hold back, not buffer 5 MiB
    client.socket.resume();
    await client.until(payload.length);
    expect(offset).toBe(payload.length);
    const back = client.received();
    expect(back.length).toBe(payload.length);
    expect(Bun.hash(back)).toBe(Bun.hash(payload));
  });

  test("a half-close passes through: the client's FIN reaches the handler, whose answer after it still arrives", async () => {
    const { front } = echoFront({ tls: changingSource(standardEntries()) });
    const client = await tlsClient(front.port, "a.test");
    await echoes(client, "ping");
    client.socket.shutdown();
    await within(client.closed, 5_000, "the close after the answer");
    expect(client.received().toString()).toBe("pingbye after your FIN");
  });

  test("peerOf gives the visitor's address and port, the public port's end it reached, and its hello with its JA4's pieces, at open and at the first byte", async () => {
    const { front, served } = echoFront({ tls: changingSource(standardEntries()) });
    const client = await tlsClient(front.port, "a.test");
    await echoes(client, "who am I");
    const [socket] = served;
    const hello = expect.objectContaining({ serverName: "a.test", pieces: expect.objectContaining({ cipherSuites: expect.any(Array), extensions: expect.any(Array) }) });
    const visitor = { address: "127.0.0.1", port: client.socket.localPort, localAddress: "127.0.0.1", localPort: front.port, hello };
    expect(socket!.data.peerAtOpen).toEqual(visitor);
    expect(socket!.data.peerAtData).toEqual(visitor);
    // the decrypted socket's own remote is the front's connection, not the visitor
    expect(socket!.remotePort).not.toBe(client.socket.localPort);
  });

  test("a handler with a handshake callback (Bun then opens TLS sockets before the handshake) knows the visitor by its handshake", async () => {
    const atHandshake: Peer[] = [];
    let front!: TlsFront<undefined>;
    front = new TlsFront<undefined>({
      hostname: "127.0.0.1",
      port: 0,
      tls: changingSource(standardEntries()),
      socket: {
        handshake: (s) => void atHandshake.push(front.peerOf(s)),
        data: (s, chunk) => void s.write(chunk),
      },
    });
    fronts.push(front);
    const client = await tlsClient(front.port, "b.test");
    await echoes(client, "x");
    expect(atHandshake).toEqual([{ address: "127.0.0.1", port: client.socket.localPort, localAddress: "127.0.0.1", localPort: front.port, hello: expect.objectContaining({ serverName: "b.test" }) }]);
  });

  test("a local stranger connecting straight to an internal TLS listener is closed, unseen by the handler", async () => {
    const { front, served } = echoFront({ tls: changingSource(standardEntries()) });
    await echoes(await tlsClient(front.port, "a.test"), "hello");
    const internalPort = served[0]!.data.localPort;
    const closed = Promise.withResolvers<void>();
    const stranger = await Bun.connect({
      hostname: "127.0.0.1",
      port: internalPort,
      tls: { rejectUnauthorized: false, serverName: "a.test" },
      socket: { data() {}, close: () => closed.resolve(), error() {} },
    });
    closers.push(() => stranger.terminate());
    await within(closed.promise, 5_000, "the stranger is closed");
    expect(served).toHaveLength(1);
  });
});

describe("without TLS", () => {
  test("the handler gets the public sockets as they are; peerOf is their own remote", async () => {
    const { front, served } = echoFront();
    const closed = Promise.withResolvers<void>();
    let got = "";
    const client = await Bun.connect({
      hostname: "127.0.0.1",
      port: front.port,
      socket: { data: (_s, d) => void (got += d.toString()), close: () => closed.resolve() },
    });
    closers.push(() => client.terminate());
    client.write("plain");
    await waitUntil(() => got === "plain", 5_000, "the echo", 5);
    expect(served[0]!.data.peerAtOpen).toEqual({ address: "127.0.0.1", port: client.localPort });
  });
});

describe("lifecycle", () => {
  test("pause stops accepting and keeps connections; resume takes the port again, or says why not", async () => {
    const { front } = echoFront({ tls: changingSource(standardEntries()) });
    const client = await tlsClient(front.port, "a.test");
    front.pause();
    expect(front.paused).toBe(true);
    expect(await refuses(front.port)).toBe(true);
    await echoes(client, "still served while paused");
    // someone else takes the port meanwhile
    const squatter = Bun.listen({ hostname: "127.0.0.1", port: front.port, exclusive: true, socket: { data() {} } });
    closers.push(() => squatter.stop(true));
    expect(front.resume()).toBe(false);
    expect(front.listenError).toMatch(/EADDRINUSE/);
    squatter.stop(true);
    expect(front.resume()).toBe(true);
    expect(front.listenError).toBeUndefined();
    expect(front.paused).toBe(false);
    expect((await tlsClient(front.port, "b.test")).subject).toBe("CN=b.test");
  });

  test("a second front on the same port fails with EADDRINUSE", () => {
    const { front } = echoFront({ tls: changingSource(standardEntries()) });
    expect(() => echoFront({ port: front.port })).toThrow(/EADDRINUSE|Failed to listen/);
  });

  test("stop(false) lets connections finish and resolves when the last closes; stop(true) cuts them", async () => {
    const gentle = echoFront({ tls: changingSource(standardEntries()) });
    const client = await tlsClient(gentle.front.port, "a.test");
    let stopped = false;
    const stopping = gentle.front.stop(false).then(() => void (stopped = true));
    expect(await refuses(gentle.front.port)).toBe(true);
    await echoes(client, "finishing");
    expect(stopped).toBe(false);
    client.socket.end();
    await within(stopping, 5_000, "stop(false) resolves after the last connection");

    const hard = echoFront({ tls: changingSource(standardEntries()) });
    const cut = await tlsClient(hard.front.port, "b.test");
    await echoes(cut, "about to be cut");
    await within(hard.front.stop(true), 5_000, "stop(true) resolves");
    await within(cut.closed, 5_000, "the client sees its connection cut");
  });
});

describe("route", () => {
  test("a routed connection is handed over undecrypted, ClientHello first; the others are decrypted here", async () => {
    // the passthrough's destination: a TLS server of its own, with its own certificate
    const backend = Bun.listen<{ pending: PendingWrites }>({
      hostname: "127.0.0.1",
      port: 0,
      tls: certs.pass!,
      socket: {
        open: (s) => void (s.data = { pending: new PendingWrites(s) }),
        data: (s, chunk) => void s.data.pending.write(chunk, true),
        drain: (s) => void s.data.pending.flush(),
      },
    });
    closers.push(() => backend.stop(true));
    const firstBytes: Uint8Array[] = [];
    /** Pipes the raw connection to the backend, as TLS passthrough will to an agent. */
    const passthrough = (): Passthrough => {
      let pipe: SocketPipe | undefined;
      return {
        open(visitor, first) {
          firstBytes.push(first.slice());
          visitor.pause();
          void Bun.connect({
            hostname: "127.0.0.1",
            port: backend.port,
            allowHalfOpen: true,
            socket: {
              open(b) {
                pipe = new SocketPipe(visitor, b);
                pipe.start(first, false);
              },
              data: (_b, chunk) => pipe?.data("b", chunk),
              drain: () => pipe?.drain("b"),
              end: () => pipe?.end("b"),
              close: (_b, err) => pipe?.closed("b", err),
            },
          });
        },
        data: (_v, chunk) => pipe?.data("a", chunk),
        drain: () => pipe?.drain("a"),
        end: () => pipe?.end("a"),
        close: (_v, err) => pipe?.closed("a", err),
      };
    };
    const { front, served } = echoFront({
      tls: changingSource(standardEntries()),
      route: (hello) => (hello.serverName === "pass.test" ? passthrough() : "terminate"),
    });
    const routed = await tlsClient(front.port, "pass.test");
    expect(routed.subject).toBe("CN=passthrough backend");
    await echoes(routed, "through to the backend");
    expect(parseClientHello(firstBytes[0]!)).toMatchObject({ serverName: "pass.test" });
    expect(served).toHaveLength(0);
    const terminated = await tlsClient(front.port, "a.test");
    expect(terminated.subject).toBe("CN=a-one");
    await echoes(terminated, "decrypted here");
    expect(served).toHaveLength(1);
  });
});

describe("passing through only: a route and no certificates (the server's --tls-port)", () => {
  /**
   * A front that takes `name` undecrypted (its hello and what follows are
   * echoed back as they came) and refuses every other; `later`: its answer
   * comes from a promise (a name looked up on another node), which it settles.
   */
  function passFront(name: string, helloTimeoutMs?: number, later?: (answer: Route) => Promise<Route>) {
    const firsts: Uint8Array[] = [];
    const echo: Route = {
      open(socket, first) {
        firsts.push(first.slice());
        socket.write(first);
      },
      data: (socket, chunk) => void socket.write(chunk),
      end: (socket) => void socket.end(),
    };
    const front = new TlsFront<undefined>({
      hostname: "127.0.0.1",
      port: 0,
      helloTimeoutMs,
      route: (hello) => {
        const answer = hello.serverName !== name ? "unrecognized" : echo;
        return later ? later(answer) : answer;
      },
      socket: { open: (s) => void s.terminate() },
    });
    fronts.push(front);
    return { front, firsts };
  }

  /** A plain client that collects what comes back, until the front closes it. */
  async function collecting(port: number) {
    const chunks: Uint8Array[] = [];
    const closed = Promise.withResolvers<void>();
    const socket = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data: (_s, d) => void chunks.push(d), close: () => closed.resolve(), error() {} } });
    closers.push(() => socket.terminate());
    return { socket, received: () => Buffer.concat(chunks), closed: within(closed.promise, 5_000, "the front closes the connection") };
  }

  /** A real hello for `serverName` (Bun's TLS client, captured on a plain socket). */
  const helloFor = (serverName: string) =>
    captureHello(async (port) => {
      await Bun.connect({ hostname: "127.0.0.1", port, tls: { serverName, rejectUnauthorized: false }, socket: { data() {}, error() {} } }).catch(() => {});
    });

  test("the name it takes is handed on undecrypted, its hello first, and bytes go both ways", async () => {
    const { front, firsts } = passFront("svc.test");
    const hello = await helloFor("svc.test");
    const client = await collecting(front.port);
    client.socket.write(hello);
    await within((async () => { while (client.received().length < hello.length) await Bun.sleep(5); })(), 5_000, "the hello echoed");
    expect(firsts).toHaveLength(1);
    expect(Buffer.from(firsts[0]!).equals(Buffer.from(hello))).toBe(true);
    client.socket.write("after the hello");
    await within((async () => { while (client.received().length < hello.length + 15) await Bun.sleep(5); })(), 5_000, "bytes after the hello echoed");
    expect(client.received().subarray(hello.length).toString()).toBe("after the hello");
  });

  test("any other name, and no name, get the fatal unrecognized_name alert, then the connection ends", async () => {
    const { front, firsts } = passFront("svc.test");
    for (const hello of [await helloFor("other.test"), await captureHello(async (port) => void (await Bun.connect({ hostname: "127.0.0.1", port, tls: { rejectUnauthorized: false }, socket: { data() {}, error() {} } }).catch(() => {})))]) {
      const client = await collecting(front.port);
      client.socket.write(hello);
      await client.closed;
      expect([...client.received()]).toEqual([21, 3, 3, 0, 2, 2, 112]);
    }
    expect(firsts).toHaveLength(0);
    // openssl says so in its own words
    const proc = Bun.spawn(["openssl", "s_client", "-connect", `127.0.0.1:${front.port}`, "-servername", "other.test"], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    closers.push(() => proc.kill());
    const said = await within(Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]), 10_000, "openssl s_client");
    expect(said.join("")).toMatch(/unrecognized name/i);
  });

  test("a route answered later (another node asked): the connection waits, paused, and what the visitor sent meanwhile follows its hello", async () => {
    const { front, firsts } = passFront("svc.test", undefined, (answer) => Bun.sleep(100).then(() => answer));
    const hello = await helloFor("svc.test");
    const client = await collecting(front.port);
    client.socket.write(hello);
    await Bun.sleep(20);
    client.socket.write("sent while it was asked");
    const want = hello.length + "sent while it was asked".length;
    await within((async () => { while (client.received().length < want) await Bun.sleep(5); })(), 5_000, "the hello and what followed, echoed");
    expect(client.received().subarray(hello.length).toString()).toBe("sent while it was asked");
    expect(firsts).toHaveLength(1);
    // a name the later answer does not take: the alert, as at once
    const other = await collecting(front.port);
    other.socket.write(await helloFor("other.test"));
    await other.closed;
    expect([...other.received()]).toEqual([21, 3, 3, 0, 2, 2, 112]);
  });

  test("a route whose lookup fails is unrecognized_name; one that never answers is closed at the hello's timeout", async () => {
    const failing = passFront("svc.test", undefined, () => Promise.reject(new Error("the database is away")));
    const refused = await collecting(failing.front.port);
    refused.socket.write(await helloFor("svc.test"));
    await refused.closed;
    expect([...refused.received()]).toEqual([21, 3, 3, 0, 2, 2, 112]);
    const hanging = passFront("svc.test", 300, () => new Promise<Route>(() => {}));
    const waiting = await collecting(hanging.front.port);
    waiting.socket.write(await helloFor("svc.test"));
    await waiting.closed;
    expect(waiting.received().length).toBe(0);
    expect(hanging.firsts).toHaveLength(0);
  });

  test("what is not TLS, a hello over 16 KiB, and a silent peer are closed with nothing said", async () => {
    const { front, firsts } = passFront("svc.test", 300);
    const plain = await collecting(front.port);
    plain.socket.write("GET / HTTP/1.1\r\nHost: svc.test\r\n\r\n");
    const huge = await collecting(front.port);
    huge.socket.write(new Uint8Array([22, 3, 1, 0x40, 0x00, 1, 0x00, 0x40, 0x00]));
    const silent = await collecting(front.port);
    await Promise.all([plain.closed, huge.closed, silent.closed]);
    for (const c of [plain, huge, silent]) expect(c.received().length).toBe(0);
    expect(firsts).toHaveLength(0);
  });

  test("fuzz: 300 hellos cut short, corrupted or random, each closed or refused, never passed on; the front serves after", async () => {
    const { front, firsts } = passFront("svc.test", 1_000);
    const hello = await helloFor("svc.test");
    let seed = 12345;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) >>> 0) % n);
    for (let i = 0; i < 300; i++) {
      const bytes = Buffer.from(hello);
      const kind = i % 3;
      let sent: Uint8Array;
      if (kind === 0) sent = bytes.subarray(0, rand(bytes.length));
      else if (kind === 1) {
        for (let k = 0; k < 1 + rand(6); k++) bytes[5 + rand(bytes.length - 5)] = rand(256); // the record's header kept: the hello itself broken
        sent = bytes;
      } else sent = Uint8Array.from({ length: 1 + rand(600) }, () => rand(256));
      const client = await collecting(front.port);
      client.socket.write(sent);
      client.socket.end();
      await client.closed;
    }
    // a corrupted byte inside the name's text may still parse (another name, refused); none reached the route's passthrough but intact ones
    for (const f of firsts) expect(parseClientHello(f)).toMatchObject({ serverName: "svc.test" });
    const after = await collecting(front.port);
    after.socket.write(hello);
    await within((async () => { while (after.received().length < hello.length) await Bun.sleep(5); })(), 5_000, "a good hello after the fuzz");
  });
});
