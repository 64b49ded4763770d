/**
 * close-connection: the visitor's connection is closed at once, without
 * an answer, as ngrok has it (no config). In on_tcp_connect nothing of the
 * connection reaches the service; in on_http_request the request is not
 * answered: an HTTP/1.1 connection is closed, an HTTP/2 stream reset and
 * its connection sent GOAWAY (edge/traffic-policy/policy-closed.ts says
 * why). It ends the run, as deny does.
 */
import * as v from "valibot";
import { defineAction } from "./types.ts";

export const closeConnection = defineAction({
  type: "close-connection",
  phases: ["on_tcp_connect", "on_http_request"],
  schema: v.strictObject({}),
  compile() {
    return { type: "close-connection", run: () => CLOSED };
  },
});

const CLOSED = { kind: "close", note: "connection closed" } as const;
