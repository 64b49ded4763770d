/**
 * DNS over TCP for the challenge responder (RFC 7766): each message is
 * preceded by its length (u16), a client may send several queries on one
 * connection, back to back without waiting, and each is answered in turn.
 *
 * A length outside what a query can be (under a header, over
 * MAX_QUERY_BYTES) closes the connection as soon as its two bytes are read,
 * before anything is buffered for it; so does a message answerQuery drops,
 * and a client over its answer rate. What is buffered is at most one
 * incomplete query, and answers the client has not read up to
 * `tcpMaxUnsent`; a client past that is closed. A connection that completes
 * no query for `tcpIdleMs` is closed (trickling bytes does not count), and
 * connections are counted per client and in all.
 */
import type { Socket, SocketHandler } from "bun";
import type { SocketBudget } from "../sockets/socket-budget.ts";
import type { TxtRecords } from "./challenge-records.ts";
import { answerQuery, type Zone } from "./answer.ts";
import { clientKey } from "../http/addresses.ts";
import { PendingWrites } from "../sockets/pending-writes.ts";
import type { SourceRate } from "../core/source-rate.ts";
import { HEADER_LENGTH, MAX_QUERY_BYTES, TCP_LENGTH_PREFIX } from "./wire.ts";

export interface DnsCounters {
  /** Answers sent, over UDP and TCP. */
  answered: number;
  /** Messages dropped unanswered (UDP), or that closed their connection (TCP). */
  dropped: number;
  /** UDP queries left unanswered, and TCP connections closed, for being over the answer rate. */
  limited: number;
  /** TCP connections closed at once for being over the connection limits. */
  refused: number;
}

export interface ResponderContext {
  zone: Zone;
  records: TxtRecords;
  rate: SourceRate;
  counters: DnsCounters;
  /** A client's fault, for the rate-limited log. */
  fault: (msg: string, fields: Record<string, unknown>) => void;
}

export interface TcpLimits {
  idleMs: number;
  maxUnsent: number;
}

export interface Connection {
  client: string;
  /** The start of a message whose bytes have not all come. */
  partial: Buffer;
  /** Answers written but not yet taken by the kernel. */
  unsent: PendingWrites;
  idle: ReturnType<typeof setTimeout>;
  closing: boolean;
}

type DnsSocket = Socket<Connection | undefined>;

const EMPTY = Buffer.alloc(0);

export function tcpHandlers(
  ctx: ResponderContext,
  budget: SocketBudget,
  limits: TcpLimits,
  open: Set<DnsSocket>,
): SocketHandler<Connection | undefined> {
  const close = (socket: DnsSocket, msg: string, fields: Record<string, unknown> = {}) => {
    const c = socket.data;
    if (!c || c.closing) return;
    c.closing = true;
    ctx.fault(msg, { client: c.client, ...fields });
    socket.terminate();
  };

  /** Writes what the kernel takes, keeps the rest for drain; false when the client has let too much pile up. */
  const send = (c: Connection, bytes: Buffer): boolean => {
    c.unsent.write(bytes);
    return c.unsent.queued <= limits.maxUnsent;
  };

  return {
    open(socket) {
      socket.data = undefined; // every other handler reads it
      // a client that reset before open ran has no address any more
      if (typeof socket.remoteAddress !== "string") {
        socket.terminate();
        return;
      }
      const client = clientKey(socket.remoteAddress);
      if (!budget.admit(client)) {
        ctx.counters.refused++;
        ctx.fault("dns tcp connection refused", { client, why: budget.refusal(client) });
        socket.terminate();
        return;
      }
      const idle = setTimeout(() => {
        const c = socket.data;
        if (!c || c.closing) return;
        c.closing = true;
        socket.end(); // an idle client is not at fault: a polite close
      }, limits.idleMs);
      socket.data = { client, partial: EMPTY, unsent: new PendingWrites(socket), idle, closing: false };
      open.add(socket);
    },

    data(socket, chunk) {
      const c = socket.data;
      if (!c || c.closing) return;
      let buf = c.partial.length > 0 ? Buffer.concat([c.partial, chunk]) : chunk;
      while (buf.length >= TCP_LENGTH_PREFIX) {
        const length = buf.readUInt16BE(0);
        if (length < HEADER_LENGTH || length > MAX_QUERY_BYTES) {
          ctx.counters.dropped++;
          return close(socket, "dns tcp message refused", { length });
        }
        if (buf.length < TCP_LENGTH_PREFIX + length) break;
        const message = buf.subarray(TCP_LENGTH_PREFIX, TCP_LENGTH_PREFIX + length);
        buf = buf.subarray(TCP_LENGTH_PREFIX + length);
        if (!ctx.rate.take(c.client)) {
          ctx.counters.limited++;
          return close(socket, "dns tcp client over the answer rate");
        }
        const verdict = answerQuery(message, "tcp", ctx.zone, ctx.records);
        if (verdict.kind === "drop") {
          ctx.counters.dropped++;
          return close(socket, "dns tcp query dropped", { reason: verdict.reason });
        }
        const prefix = Buffer.alloc(TCP_LENGTH_PREFIX);
        prefix.writeUInt16BE(verdict.bytes.length);
        ctx.counters.answered++;
        if (!send(c, Buffer.concat([prefix, verdict.bytes]))) return close(socket, "dns tcp client not reading its answers");
        c.idle.refresh();
      }
      // a copy: at most one incomplete query, and no hold on the chunk's memory
      c.partial = buf.length > 0 ? Buffer.from(buf) : EMPTY;
    },

    drain(socket) {
      socket.data?.unsent.flush();
    },

    close(socket) {
      const c = socket.data;
      if (!c) return;
      socket.data = undefined;
      clearTimeout(c.idle);
      budget.release(c.client);
      open.delete(socket);
    },

    error(socket, err) {
      ctx.fault("dns tcp socket error", { client: socket.data?.client, err: err.message });
    },
  };
}
