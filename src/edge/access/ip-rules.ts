/**
 * A tunnel's IP rules, compiled once at the handshake: the visitor must be
 * in every allow list that has entries (the agent's own, the user's
 * allow_cidrs) and in no deny entry. Deny wins. They run as the first
 * rule of the tunnel's flags layer for its requests and connections
 * (flag-layer.ts), and are asked directly where no policy runs (a udp
 * datagram, a connector's stream) and of what stays open when they narrow
 * (judgement/live-visits.ts).
 */
import { CidrList } from "../../http/addresses.ts";

/** Addresses whose answer is kept: a visitor asks again with each request. */
const ANSWERS_KEPT = 256;

export class IpRules {
  private readonly allow: CidrList[];
  private readonly deny: CidrList;
  private readonly answers = new Map<string, boolean>();

  constructor(allowLists: readonly (readonly string[])[], deny: readonly string[]) {
    this.allow = allowLists.filter((l) => l.length > 0).map((l) => new CidrList(l.map((c) => c.trim())));
    this.deny = new CidrList(deny.map((c) => c.trim()));
  }

  /** Whether there is any rule at all (none: every visitor passes). */
  get empty(): boolean {
    return this.allow.length === 0 && this.deny.empty;
  }

  /** `address`: the visitor's canonical address (behind a trusted proxy, the client it names). */
  allows(address: string): boolean {
    let answer = this.answers.get(address);
    if (answer === undefined) {
      answer = this.judge(address);
      if (this.answers.size >= ANSWERS_KEPT) this.answers.clear();
      this.answers.set(address, answer);
    }
    return answer;
  }

  private judge(address: string): boolean {
    if (this.deny.matches(address)) return false;
    for (const list of this.allow) if (!list.matches(address)) return false;
    return true;
  }
}
