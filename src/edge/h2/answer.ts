/**
 * A Response of the edge's own (a page, a sign-in's 401 or redirect, the
 * warning, a 502) as the answer on an HTTP/2 stream: its status and fields,
 * lower-cased and without those that describe an HTTP/1.1 connection
 * (Connection, Keep-Alive...: malformed in HTTP/2), Set-Cookie kept apart,
 * and its body whole with its length. The edge's own answers are small:
 * the body is read first, as http/response-bytes.ts does for HTTP/1.1.
 */
import { headerList } from "../../http/header-list.ts";
import { bodilessStatus } from "../../http/response-bytes.ts";
import type { H2Stream } from "../../http2/stream.ts";
import { ErrorCode } from "../../http2/wire.ts";

/** Said by the answer itself, from its body. */
const LENGTH: ReadonlySet<string> = new Set(["content-length"]);

/** Sends `res` on `stream` (`head`: the request was HEAD, the length is said and no body follows). */
export async function answerStream(stream: H2Stream, res: Response, head: boolean): Promise<void> {
  let body: Uint8Array | undefined;
  try {
    body = res.body === null ? undefined : new Uint8Array(await res.arrayBuffer());
  } catch {
    return stream.reset(ErrorCode.INTERNAL_ERROR); // a body that would not be read: nothing sensible to send
  }
  // the client may have reset the stream, or the connection gone, while the body was read
  if (stream.isClosed || stream.responded) return;
  const fields = headerList(res.headers, LENGTH);
  if (bodilessStatus(res.status)) return stream.respond(res.status, fields, true);
  const length = body?.byteLength ?? 0;
  fields.push(["content-length", String(length)]);
  if (head || length === 0) return stream.respond(res.status, fields, true);
  stream.respond(res.status, fields);
  stream.write(body!);
  stream.end();
}
