/**
 * POLICY_PASSED payloads as the agent reads them (protocol/policy-passed.ts):
 * a note whose bytes are the last one's with another stream is that note
 * for this stream without being parsed again; anything else is parsed and
 * checked whole, and a payload that is not a note is refused as before.
 */
import { describe, expect, test } from "bun:test";
import { ProtocolError } from "../../src/protocol/frames.ts";
import { PassedNoteReader, passedNoteHead } from "../../src/protocol/policy-passed.ts";

const encoder = new TextEncoder();
const bytes = (text: string) => encoder.encode(text);
const TAIL = `,"request":{"rules":[{"rule":"tell","actions":["add-headers"]}]}}`;
const note = (tunnel: string, stream: number | string, tail = TAIL) => bytes(`{"tunnel":${JSON.stringify(tunnel)},"stream":${stream}${tail}`);

describe("the agent's reading of POLICY_PASSED", () => {
  test("the edge's form: its head is the tunnel and the stream's key", () => {
    expect(new TextDecoder().decode(passedNoteHead('t"1'))).toBe('{"tunnel":"t\\"1","stream":');
  });

  test("notes with the same bytes but their stream read as the first with each one's stream", () => {
    const reader = new PassedNoteReader();
    const first = reader.read(note("t1", 7));
    expect(first).toEqual({ tunnel: "t1", stream: 7, request: { rules: [{ rule: "tell", actions: ["add-headers"] }] } });
    for (const stream of [9, 0, 123456, 4294967295]) expect(reader.read(note("t1", stream))).toEqual({ ...first, stream });
  });

  test("a note of another tunnel, or with other rules, is read whole", () => {
    const reader = new PassedNoteReader();
    reader.read(note("t1", 1));
    expect(reader.read(note("t2", 3)).tunnel).toBe("t2");
    const other = reader.read(note("t2", 5, `,"response":{"rules":[]},"status":503}`));
    expect(other).toEqual({ tunnel: "t2", stream: 5, response: { rules: [] }, status: 503 });
    // and the last one read whole is the one known again
    expect(reader.read(note("t2", 6, `,"response":{"rules":[]},"status":503}`))).toEqual({ ...other, stream: 6 });
  });

  test("a stream that is not a note's (too large, a leading zero, not a number) is refused as the whole parse refuses it", () => {
    const reader = new PassedNoteReader();
    reader.read(note("t1", 1));
    expect(() => reader.read(note("t1", 4294967296))).toThrow(ProtocolError);
    expect(() => reader.read(note("t1", "01"))).toThrow(ProtocolError);
    expect(() => reader.read(note("t1", "-1"))).toThrow(ProtocolError);
    expect(() => reader.read(note("t1", '"2"'))).toThrow(ProtocolError);
    expect(() => reader.read(note("t1", ""))).toThrow(ProtocolError);
    // and the one before is still known
    expect(reader.read(note("t1", 2)).stream).toBe(2);
  });

  test("a payload that only looks like the last one's is checked whole", () => {
    const reader = new PassedNoteReader();
    reader.read(note("t1", 1));
    expect(() => reader.read(note("t1", 2, `,"request":{"rules":[{"rule":"tell","actions":["add-headers"]}]}`))).toThrow(ProtocolError);
    expect(() => reader.read(note("t1", 2, TAIL.replace("tell", "t\u0001ll")))).toThrow(ProtocolError);
    expect(() => reader.read(bytes("not json"))).toThrow(ProtocolError);
  });
});
