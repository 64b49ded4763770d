/**
 * The gateway's way to an `ssh -R` target (ssh/channel-socket.ts
 * channelDialer) keeps Bun's promise to a socket's user: no byte, EOF or
 * close before connect() has resolved and its caller has the socket. ssh2
 * gives a channel's first bytes in the same read as its confirmation when
 * they come together (a service that speaks first, as an HTTP/2 service's
 * SETTINGS do), and the agent's local connection, which takes bytes only
 * once it knows its socket, would drop them and the connection with them.
 * A channel here is a Node stream fed as ssh2 feeds one.
 */
import { expect, test } from "bun:test";
import { Duplex } from "node:stream";
import type { Connection, ServerChannel } from "ssh2";
import { LocalConnection } from "../../src/agent/local-http/connection.ts";
import { channelDialer } from "../../src/ssh/channel-socket.ts";

/** A client whose forwarded channels bring `first` with their confirmation, as one read would. */
function clientSpeakingFirst(first: string, opened: Duplex[]): Connection {
  return {
    forwardOut(_addr: string, _port: number, _oAddr: string, _oPort: number, cb: (err: Error | undefined, channel: ServerChannel) => void) {
      const channel = new Duplex({ read() {}, write: (_c, _e, done) => done() });
      opened.push(channel);
      cb(undefined, channel as unknown as ServerChannel);
      // the next packet of the same read, parsed in the same turn
      channel.push(Buffer.from(first));
    },
  } as unknown as Connection;
}

test("the first bytes of a channel reach its user after connect() resolved, not before", async () => {
  const opened: Duplex[] = [];
  const dial = channelDialer(clientSpeakingFirst("SETTINGS", opened), "k", { bindAddr: "localhost", port: 80 }, { address: "127.0.0.1", port: 0 });
  const events: string[] = [];
  let connected = false;
  const { promise: heard, resolve } = Promise.withResolvers<void>();
  await dial.connect<undefined>({
    hostname: "localhost",
    port: 80,
    data: undefined,
    socket: {
      data: (_s, bytes) => {
        events.push(`${connected ? "after" : "before"} connect: ${Buffer.from(bytes).toString()}`);
        resolve();
      },
    },
  });
  connected = true;
  await heard;
  expect(events).toEqual(["after connect: SETTINGS"]);
});

test("a local connection through the channel keeps a service's first bytes for the request it carries", async () => {
  const opened: Duplex[] = [];
  const dial = channelDialer(clientSpeakingFirst("first words", opened), "k", { bindAddr: "localhost", port: 80 }, { address: "127.0.0.1", port: 0 });
  const conn = await LocalConnection.open("localhost", 80, "k", false, undefined, dial);
  if (conn instanceof Error) throw conn;
  const { promise: got, resolve } = Promise.withResolvers<string>();
  conn.user = { received: (bytes) => resolve(Buffer.from(bytes).toString()), drained() {}, lost: (err) => resolve(`lost: ${err?.message ?? "closed"}`) };
  expect(await got).toBe("first words");
  expect(conn.closed).toBe(false);
  conn.close();
});

test("a pause by the socket's user holds past the start", async () => {
  const opened: Duplex[] = [];
  const dial = channelDialer(clientSpeakingFirst("held", opened), "k", { bindAddr: "localhost", port: 80 }, { address: "127.0.0.1", port: 0 });
  const got: string[] = [];
  const socket = await dial.connect<undefined>({ hostname: "localhost", port: 80, data: undefined, socket: { data: (_s, b) => void got.push(Buffer.from(b).toString()) } });
  socket.pause();
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  expect(got).toEqual([]);
  expect(opened[0]!.isPaused()).toBe(true);
  const { promise, resolve } = Promise.withResolvers<void>();
  opened[0]!.once("data", () => resolve());
  socket.resume();
  await promise;
  expect(got).toEqual(["held"]);
});
