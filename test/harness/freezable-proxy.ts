/**
 * A TCP proxy on loopback that can go silent on the connections it already
 * carries while it keeps forwarding new ones: what a NAT that forgot a flow,
 * a crashed middlebox or a half-dead network path looks like to both ends.
 * Neither end sees an error or a close; bytes simply stop arriving. This is
 * the case only a keepalive finds.
 */
import type { Socket } from "bun";

interface Side {
  peer?: Socket<Side>;
  /** Bytes that arrived before the other side was connected. */
  early: Uint8Array[];
  frozen: boolean;
}

export interface FreezableProxy {
  port: number;
  /** Connections made so far. */
  readonly connections: number;
  /** From now on the connections open now forward nothing, either way (new ones forward as before). */
  freezeEstablished(): void;
  stop(): void;
}

export function startFreezableProxy(target: { host: string; port: number }): FreezableProxy {
  const sides = new Set<Side>();
  let connections = 0;
  const forward = (from: Side, data: Uint8Array) => {
    if (from.frozen) return; // dropped: the sender's kernel saw them taken, nobody gets them
    if (from.peer) from.peer.write(data);
    else from.early.push(new Uint8Array(data));
  };
  const listener = Bun.listen<Side>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(client) {
        connections++;
        const down: Side = { early: [], frozen: false };
        const up: Side = { early: [], frozen: false };
        client.data = down;
        sides.add(down).add(up);
        void Bun.connect<Side>({
          hostname: target.host,
          port: target.port,
          data: up,
          socket: {
            open(server) {
              down.peer = server;
              up.peer = client;
              for (const chunk of down.early) server.write(chunk);
              down.early = [];
            },
            data: (_s, data) => forward(up, data),
            close: () => {
              sides.delete(up);
              if (!up.frozen) client.end();
            },
            error: () => void client.end(),
          },
        }).catch(() => void client.end());
      },
      data: (client, data) => forward(client.data, data),
      close(client) {
        sides.delete(client.data);
        if (!client.data.frozen) client.data.peer?.end();
      },
      error() {},
    },
  });
  return {
    port: listener.port,
    get connections() {
      return connections;
    },
    freezeEstablished() {
      for (const s of sides) s.frozen = true;
      sides.clear();
    },
    stop: () => listener.stop(true),
  };
}
