/**
 * WebSocket messages carried over a byte stream: each message is a record
 *   kind u8 (1 text, 2 binary, 3 close) | length u32 | bytes
 * A close record carries the close code (u16) and reason (UTF-8), so each
 * side closes its WebSocket the way the other side's was closed.
 * A record may span DATA frames; the decoder reassembles it, refusing any
 * record longer than MAX_WS_MESSAGE before buffering it.
 */
export const MAX_WS_MESSAGE = 16 * 1024 * 1024;
export const RecordKind = { TEXT: 1, BINARY: 2, CLOSE: 3 } as const;
const HEADER = 5;

export function encodeRecord(data: string | Uint8Array): Uint8Array {
  const kind = typeof data === "string" ? RecordKind.TEXT : RecordKind.BINARY;
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const out = new Uint8Array(HEADER + bytes.byteLength);
  out[0] = kind;
  new DataView(out.buffer).setUint32(1, bytes.byteLength);
  out.set(bytes, HEADER);
  return out;
}

/** A close record; codes a peer may not send (1005, 1006, 1015, out of range) become 1000. */
export function encodeCloseRecord(code: number, reason: string): Uint8Array {
  const sendable = code === 1000 || (code >= 1001 && code <= 1014 && ![1004, 1005, 1006].includes(code)) || (code >= 3000 && code <= 4999);
  const why = new TextEncoder().encode(reason).subarray(0, 123);
  const out = new Uint8Array(HEADER + 2 + why.byteLength);
  out[0] = RecordKind.CLOSE;
  const view = new DataView(out.buffer);
  view.setUint32(1, 2 + why.byteLength);
  view.setUint16(HEADER, sendable ? code : 1000);
  out.set(why, HEADER + 2);
  return out;
}

export type CloseHandler = (code: number, reason: string) => void;

export class RecordDecoder {
  private buffered: Uint8Array[] = [];
  private bufferedBytes = 0;
  private readonly text = new TextDecoder();

  /** Feeds bytes; calls `deliver` for each complete message. Throws on a bad or oversized record. */
  push(chunk: Uint8Array, deliver: (message: string | Uint8Array) => void, onClose?: CloseHandler): void {
    this.buffered.push(chunk);
    this.bufferedBytes += chunk.byteLength;
    for (;;) {
      if (this.bufferedBytes < HEADER) return;
      const head = this.peek(HEADER);
      const kind = head[0];
      const length = new DataView(head.buffer, head.byteOffset, HEADER).getUint32(1);
      if (kind !== RecordKind.TEXT && kind !== RecordKind.BINARY && kind !== RecordKind.CLOSE) {
        throw new Error(`bad WebSocket record kind ${kind}`);
      }
      if (length > MAX_WS_MESSAGE) throw new Error(`WebSocket message of ${length} bytes exceeds ${MAX_WS_MESSAGE}`);
      if (this.bufferedBytes < HEADER + length) return;
      const record = this.take(HEADER + length).subarray(HEADER);
      if (kind === RecordKind.CLOSE) {
        if (record.byteLength < 2) throw new Error("close record shorter than its code");
        const code = new DataView(record.buffer, record.byteOffset, 2).getUint16(0);
        onClose?.(code, new TextDecoder().decode(record.subarray(2)));
      } else deliver(kind === RecordKind.TEXT ? this.text.decode(record) : record);
    }
  }

  private peek(n: number): Uint8Array {
    // merge a short first piece once, so later pushes of the same record peek without copying
    if (this.buffered[0]!.byteLength < n) this.buffered = [Buffer.concat(this.buffered)];
    return this.buffered[0]!.subarray(0, n);
  }

  private take(n: number): Uint8Array {
    const all = this.buffered.length === 1 ? this.buffered[0]! : Buffer.concat(this.buffered);
    const out = all.slice(0, n);
    const rest = all.subarray(n);
    this.buffered = rest.byteLength > 0 ? [rest] : [];
    this.bufferedBytes = rest.byteLength;
    return out;
  }
}
