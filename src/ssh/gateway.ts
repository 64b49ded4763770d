/**
 * The SSH gateway (`burrow server --ssh-port N`): OpenSSH's `ssh -R` opens
 * tunnels with burrow's users, limits, names and rules, a user's SSH key
 * being a device of theirs. The listener here keeps what a connection may
 * cost before it signs in: each takes a place in the agents' connection
 * budget (--max-agents-per-ip, and nothing new while descriptors are
 * short); at most --ssh-max-handshakes of an address's connections, and
 * MAX_HANDSHAKES in all, may be signing in at once; one that has not signed
 * in within --ssh-handshake-timeout is cut. Signed in, a client is its
 * GatewayConnection's (connection.ts); a silent one is found by keepalive
 * (KEEPALIVE_MS, dead after KEEPALIVE_MISSES unanswered).
 *
 * The version line says "SSH-2.0-burrow", without burrow's version.
 * ssh2 (mscdex/ssh2) is the protocol: a well-kept library in JavaScript,
 * which runs under Bun and compiles into the single executable on its
 * pure-JavaScript path (build/ssh2-pure-js.ts); docs/ssh.md says why it
 * was chosen.
 */
import { createServer, type Server as NetServer, type Socket } from "node:net";
import { Server, type Connection } from "ssh2";
import { canonicalAddress } from "../http/addresses.ts";
import { log } from "../log.ts";
import { GatewayConnection, type GatewayContext } from "./connection.ts";
import { loadHostKeys, type HostKey } from "./host-keys.ts";
import { disconnectWith, DISCONNECT } from "./ssh2-extras.ts";

/** What the version line says after "SSH-2.0-": no version a scanner could match to a flaw. */
export const IDENT = "burrow";
/** How often a signed-in client is asked whether it is there... */
export const KEEPALIVE_MS = 10_000;
/** ...and how many questions it may leave unanswered before it is taken for dead (some 30 s of silence). */
export const KEEPALIVE_MISSES = 2;
/** At a stop, how long a signed-in client has to read why before its connection is cut. */
const STOP_GRACE_MS = 1_000;
/** Connections signing in at once, over every address: what a flood of half-open handshakes can hold. */
export const MAX_HANDSHAKES = 1024;

export interface SshGatewayOptions extends GatewayContext {
  host: string;
  port: number;
  dataDir: string;
  /** --ssh-handshake-timeout, ms: from the connection to signed in. */
  handshakeTimeoutMs: number;
  /** --ssh-max-handshakes: connections of one address signing in at once. */
  maxHandshakesPerAddress: number;
  /** A place in the agents' connection budget for a new connection from `address`; false: close it. */
  admit(address: string): boolean;
  release(address: string): void;
}

export interface RunningSshGateway {
  port: number;
  hostKeys: HostKey[];
  /** Takes no new connection (a stop begins); those there go on. */
  pause(): void;
  /** Stops listening and ends every connection (its tunnels held for their keys as a dropped agent's). */
  stop(): Promise<void>;
}

/** A connection from its accept to its end, as the listener counts it. */
interface Accepted {
  address: string;
  remote: string;
  /** Still signing in: counted among the handshakes. */
  handshake: boolean;
  timer?: ReturnType<typeof setTimeout>;
  client?: Connection;
}

export async function startSshGateway(opts: SshGatewayOptions): Promise<RunningSshGateway> {
  const hostKeys = loadHostKeys(opts.dataDir);
  const accepted = new Map<Socket, Accepted>();
  const handshakes = new Map<string, number>();
  let handshaking = 0;
  const connections = new Set<GatewayConnection>();

  const endHandshake = (a: Accepted) => {
    if (!a.handshake) return;
    a.handshake = false;
    clearTimeout(a.timer);
    handshaking--;
    const n = (handshakes.get(a.address) ?? 1) - 1;
    if (n <= 0) handshakes.delete(a.address);
    else handshakes.set(a.address, n);
  };

  const ssh = new Server(
    { hostKeys: hostKeys.map((k) => k.privateKey), ident: IDENT, keepaliveInterval: KEEPALIVE_MS, keepaliveCountMax: KEEPALIVE_MISSES },
    (client) => {
      const socket = (client as unknown as { _sock: Socket })._sock;
      const a = accepted.get(socket);
      if (!a) return void client.end();
      a.client = client;
      const conn = new GatewayConnection(client, { remote: a.remote, address: a.address }, opts, () => endHandshake(a));
      connections.add(conn);
      client.on("close", () => connections.delete(conn));
    },
  );

  const listener: NetServer = createServer({ noDelay: true }, (socket) => {
    const address = canonicalAddress(socket.remoteAddress ?? "");
    const remote = `${address.includes(":") ? `[${address}]` : address}:${socket.remotePort ?? 0}`;
    if (!opts.admit(address)) return void socket.destroy();
    const perAddress = handshakes.get(address) ?? 0;
    if (perAddress >= opts.maxHandshakesPerAddress || handshaking >= MAX_HANDSHAKES) {
      opts.release(address);
      return void socket.destroy();
    }
    handshakes.set(address, perAddress + 1);
    handshaking++;
    const a: Accepted = { address, remote, handshake: true };
    a.timer = setTimeout(() => {
      if (!a.handshake) return;
      // a client that got as far as the protocol is told; one that did not is cut
      if (a.client) disconnectWith(a.client, DISCONNECT.BY_APPLICATION, `burrow: no sign-in within ${opts.handshakeTimeoutMs / 1000} s`);
      socket.destroy();
    }, opts.handshakeTimeoutMs);
    accepted.set(socket, a);
    socket.once("close", () => {
      endHandshake(a);
      accepted.delete(socket);
      opts.release(address);
    });
    socket.on("error", () => {}); // ssh2 hears it too; a reset is no one's fault
    ssh.injectSocket(socket);
  });

  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen(opts.port, opts.host, () => {
      listener.off("error", reject);
      resolve();
    });
  });
  listener.on("error", (err) => log.warn("ssh gateway listener error", { err: String(err) }));
  const port = (listener.address() as { port: number }).port;

  const closed = new Promise<void>((resolve) => listener.once("close", () => resolve()));
  const pause = () => {
    if (listener.listening) listener.close();
  };
  return {
    port,
    hostKeys,
    pause,
    stop: () =>
      new Promise<void>((resolve) => {
        pause();
        void closed.then(() => {
          clearTimeout(cut);
          resolve();
        });
        for (const conn of connections) conn.end("burrow: SERVER_SHUTDOWN: the server is shutting down");
        for (const [socket, a] of accepted) if (a.handshake) socket.destroy();
        // what was told why has a moment to read it; then whatever is left is cut
        const cut = setTimeout(() => {
          for (const socket of accepted.keys()) socket.destroy();
        }, STOP_GRACE_MS);
      }),
  };
}
