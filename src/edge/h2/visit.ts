/** One HTTP/2 stream on its way through the judgement: an HttpVisit (http-door.ts) whose connection carries it among others. */
import type { H2Stream } from "../../http2/stream.ts";
import { ErrorCode } from "../../http2/wire.ts";
import type { RequestHead } from "../../http/request-head.ts";
import type { HttpConnection } from "../http-connection.ts";
import { HttpVisit } from "../http-door.ts";
import type { H2Body } from "../traffic-policy/stream-body.ts";
import type { H2Session } from "./session.ts";

export class H2Visit extends HttpVisit {
  /** Its body, read for a traffic policy action that needs it: H2Exchange sends these bytes first. */
  body: H2Body | undefined;

  constructor(
    conn: HttpConnection,
    /** The HTTP/1.1 head the stream stands for (http2/http1.ts), and its text. */
    head: RequestHead,
    text: string,
    startedAt: number,
    /** The stream the request came on, and is answered on. */
    readonly stream: H2Stream,
    /** Its connection's HTTP/2 side. */
    readonly session: H2Session,
  ) {
    super(conn, head, text, startedAt);
  }

  /** A traffic policy closed the visitor's connection (traffic-policy/policy-closed.ts): the stream reset, no new one taken on its connection (GOAWAY), those in flight let finish. */
  closedByPolicy(): void {
    this.stream.reset(ErrorCode.CANCEL);
    this.session.engine.goAway();
  }
}
