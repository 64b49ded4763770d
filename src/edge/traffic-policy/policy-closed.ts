/**
 * A request a traffic policy's close-connection ended in on_http_request:
 * a Refusal (POLICY) with no answer, as a closed on_tcp_connect's is, which
 * each door carries out in its medium, the visitor getting no byte of an
 * answer:
 *
 * - HTTP/1.1 (http-door.ts): the socket is closed, as for on_tcp_connect;
 * - HTTP/2 (h2/door.ts): the stream is reset (CANCEL) and the connection
 *   sent GOAWAY: no new stream is taken on it, so the visitor must connect
 *   again, which is what ngrok's action is for (a flood's connection
 *   ended), while the streams already in flight on it finish. Not a
 *   connection cut at once: one HTTP/2 connection may carry a browser's
 *   requests to other tunnels of the server (connection coalescing under
 *   one certificate), and a tunnel's rule must not cut those;
 * - a request relayed from another node (cluster/relayed-doors.ts): the
 *   stream is reset with POLICY_CLOSED, and the visitor's node, which holds
 *   the connection, closes it as above (forward.ts, h2/exchange.ts).
 */
import { Refusal } from "../judgement/pipeline.ts";

export class PolicyClosed extends Refusal {
  constructor(message: string) {
    super("access", "POLICY", message);
  }
}

/** The status the inspector and the log show for a request closed without an answer (nginx's 444, "no response"). */
export const CLOSED_STATUS = 444;
