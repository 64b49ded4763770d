/**
 * A visitor request to the local service, from its stream's OPEN to its
 * end: a connection from the pool (or a new one), an exchange on it
 * (exchange.ts), and one more on a new connection when a kept-alive one
 * turns out to have been closed by the service before it saw the request.
 * The stream's FIN and reset are heard here, once, whichever attempt is
 * under way.
 */
import type { Stream } from "../../protocol/mux.ts";
import { WireError } from "../../protocol/wire.ts";
import type { ExchangeTap } from "../inspector/tap.ts";
import { describeLocalError } from "../local-target.ts";
import { Exchange, resetReason, type ExchangeReport, type VisitorSide } from "./exchange.ts";
import type { ConnectionPool, LocalService } from "./pool.ts";
import type { LocalRequest } from "./request.ts";

/**
 * Carries `request` to the service and its response into `stream`; resolves when the exchange is over. Never throws.
 * `tap`: the inspector's copy, shown the bodies (without their framing) as they pass.
 */
export async function forwardRequest(
  stream: Stream,
  request: LocalRequest,
  service: LocalService,
  pool: ConnectionPool,
  report: ExchangeReport,
  tap?: ExchangeTap,
): Promise<void> {
  let current: Exchange | undefined;
  let gone: string | undefined;
  // the visitor left (or the edge gave up waiting): drop the local request too, so it holds no connection
  stream.whenReset((code) => {
    gone = code;
    current?.abandon(code);
  });
  const visitor: VisitorSide = { ended: false };
  stream.onEnd = () => {
    visitor.ended = true;
    current?.visitorEnded();
  };
  let mayReuse = true;
  for (;;) {
    const conn = (mayReuse ? pool.take(service) : undefined) ?? (await pool.open(service));
    if (gone !== undefined) {
      if (!(conn instanceof Error)) pool.put(conn); // nothing was written on it
      tap?.failed(resetReason(gone));
      return report.cancelled();
    }
    if (conn instanceof Error) {
      const why = describeLocalError(conn);
      stream.reset(`${WireError.UPSTREAM_FAILED} ${why}`);
      tap?.failed(why);
      return report.failed(why);
    }
    current = new Exchange(stream, conn, request, pool, report, visitor, tap);
    if ((await current.run()) === "done") return;
    // once only: a new connection is never stale
    mayReuse = false;
  }
}
