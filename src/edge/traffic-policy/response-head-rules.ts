/**
 * on_http_response for a tunnel whose response rules only add and remove
 * fields (TunnelPolicy.responseInHead): the head judged where it lies,
 * while the parser reads it, and what the rules made of it spliced into
 * the response's bytes as they go on in place (forward.ts), without the
 * response filter (response-filter.ts) and its pieces: such rules never
 * wait, never compress and never touch the body. Their fields are read
 * from the head's bytes only if a rule asks for them; rules that add
 * constant fields and read nothing (TunnelPolicy.responseFields) need no
 * run at all, their fields known at load. A run that fails
 * (an action that throws, past its cost) answers 500 in the response's
 * place, as the filter's does.
 */
import { parseHead, responseHeadBytes, type ParsedHead } from "../../http/response-head.ts";
import type { HeaderPairs, ResponseFacts } from "../../policy/facts.ts";
import { sameFields, WorkingResponse } from "../../policy/message.ts";
import type { LayeredRun } from "./layered-run.ts";
import { tellPassed, tellPassedKnown } from "./passed-notes.ts";
import type { TunnelPolicy } from "./tunnel-policy.ts";
import { answerBytes } from "./policy-answer.ts";

/**
 * What the rules made of the head, in the bytes it lay in: `src[from, to)`
 * is replaced by `put` (bytes, or text to write as latin1); `answered`:
 * `put` is the policy's answer in the response's place, and the body is
 * not sent.
 */
export interface HeadChange {
  src: Uint8Array;
  from: number;
  to: number;
  put: Uint8Array | string;
  answered: boolean;
}

/** The head as the run's facts: its status, and its fields read from its bytes when a rule first asks. */
class HeadInPlace implements ResponseFacts {
  private whole: ParsedHead | undefined;

  constructor(
    /** Read for its framing only (forward.ts reads a visitor's HTTP/1.1 responses so). */
    private readonly head: ParsedHead,
    private readonly src: Uint8Array,
    private readonly from: number,
    private readonly to: number,
    private readonly method: string,
  ) {}

  get status(): number {
    return this.head.status;
  }

  get headers(): HeaderPairs {
    return this.full().headers;
  }

  /** The head with every field (the parser read it for its framing only). */
  full(): ParsedHead {
    if (this.whole) return this.whole;
    const { src, from, to } = this;
    const text = Buffer.from(src.buffer, src.byteOffset + from, to - from - 4).toString("latin1");
    const head = parseHead(text, this.method, true);
    // the parser read these bytes already
    if (typeof head === "string") throw new Error(`a response head read before does not read again: ${head}`);
    return (this.whole = head);
  }
}

/**
 * Runs the response's rules on its head, `src[from, to)` (the blank line
 * included), during the parser's call: what changes, or undefined when
 * the head goes as it came. Throws what the run threw; the caller ends the
 * response as the filter does.
 */
export function judgeHeadInPlace(run: LayeredRun, policy: TunnelPolicy, head: ParsedHead, src: Uint8Array, from: number, to: number, method: string): HeadChange | undefined {
  // rules that add constant fields and read nothing: their run is known, and its fields are added without it
  const known = policy.responseFields;
  if (known !== undefined) {
    // the agent's inspector told what matched (passed-notes.ts), when it asked
    if (run.noteTunnel !== undefined) tellPassedKnown(run, policy);
    return known === "" ? undefined : { src, from: to - 2, to: to - 2, put: policy.responseFieldBytes!, answered: false };
  }
  const facts = new HeadInPlace(head, src, from, to, method);
  const verdict = run.respond(new WorkingResponse(facts), policy.responseLayers);
  // tunnel-policy.ts HEAD_ACTIONS never wait (TunnelPolicy.responseInHead runs no other)
  if (verdict instanceof Promise) throw new Error("a response rule of fields only waited");
  if (run.noteTunnel !== undefined) tellPassed(run, policy, verdict);
  if (verdict.kind === "respond") return { src, from, to, put: answerBytes(verdict.response, method === "HEAD", !head.keepAlive), answered: true };
  const res = run.response!;
  const added = res.appended();
  if (added === undefined) return { src, from, to, put: responseHeadBytes(facts.full(), res.headers), answered: false };
  if (added.length === 0) return undefined;
  // fields only added: they go before the blank line, the head's own bytes as they came
  return { src, from: to - 2, to: to - 2, put: addedText(added), answered: false };
}

/** The last fields added and their text: a response rule adds the same ones response after response. */
let lastAdded: HeaderPairs = [];
let lastText = "";

function addedText(added: HeaderPairs): string {
  if (sameFields(added, lastAdded)) return lastText;
  let text = "";
  for (let i = 0; i < added.length; i++) text += `${added[i]![0]}: ${added[i]![1]}\r\n`;
  lastAdded = added;
  return (lastText = text);
}
