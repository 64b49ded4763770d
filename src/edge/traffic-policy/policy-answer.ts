/**
 * A policy's answer in the service's place as HTTP/1.1 bytes: what an
 * on_http_response rule's custom-response, or a response's run that
 * failed, sends instead of the service's response (response-filter.ts,
 * response-head-rules.ts). The framing is the edge's own: the policy's
 * fields cannot set it.
 */
import { STATUS_CODES } from "node:http";
import type { PolicyResponse } from "../../policy/index.ts";

/** A policy's answer in place of the service's: status, fields, Content-Length and body (none to a HEAD, or for a bodiless status). */
export function answerBytes(r: PolicyResponse, head: boolean, close: boolean): Uint8Array {
  const body = typeof r.body === "string" ? Buffer.from(r.body, "utf8") : Buffer.from(r.body);
  const bodiless = r.status < 200 || r.status === 204 || r.status === 304;
  let text = `HTTP/1.1 ${r.status} ${STATUS_CODES[r.status] ?? ""}\r\n`;
  for (const [name, value] of r.headers) {
    const lower = name.toLowerCase();
    // the framing is the edge's to say; a line break would be a field of the policy's making
    if (lower === "content-length" || lower === "transfer-encoding" || lower === "connection" || /[\r\n]/.test(name + value)) continue;
    text += `${name}: ${value}\r\n`;
  }
  if (!bodiless) text += `content-length: ${body.byteLength}\r\n`;
  if (close) text += "connection: close\r\n";
  const headBytes = Buffer.from(`${text}\r\n`, "latin1");
  return bodiless || head || body.byteLength === 0 ? headBytes : Buffer.concat([headBytes, body]);
}
