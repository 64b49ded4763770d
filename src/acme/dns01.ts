/**
 * DNS-01 (RFC 8555 8.4): the CA looks up TXT `_acme-challenge.<name>` and
 * expects the base64url SHA-256 of the key authorization (acme-client hands
 * the solver that digest already). For `*.<domain>` the name looked up is
 * `_acme-challenge.<domain>`, the same as for `<domain>` itself, so an order
 * for both holds two values under one name at once.
 *
 * The values go to a TXT store: burrow's own (dns/challenge-records.ts, served
 * by dns/responder.ts), or anything with the same two methods.
 */
import type { ChallengeSolver } from "./solver.ts";

/** A place TXT values are published: ChallengeRecords, or a test's DNS server. */
export interface TxtPublisher {
  /** Publishes; returns why not (or undefined when it is served). */
  add(name: string, value: string): { code: string; message: string } | undefined | Promise<{ code: string; message: string } | undefined>;
  remove(name: string, value: string): unknown;
}

export const DNS01_LABEL = "_acme-challenge";

/** The TXT name the CA looks up for an authorization's identifier (which never carries the `*.`). */
export const dns01RecordName = (identifier: string) => `${DNS01_LABEL}.${identifier.replace(/^\*\./, "").replace(/\.$/, "")}`;

/** A solver answering DNS-01 challenges through `records`. */
export function dns01Solver(records: TxtPublisher): ChallengeSolver {
  return {
    type: "dns-01",
    async prepare(authz, _challenge, digest) {
      const refusal = await records.add(dns01RecordName(authz.identifier.value), digest);
      if (refusal) throw new Error(`the DNS-01 value was not published (${refusal.code}): ${refusal.message}`);
    },
    async cleanup(authz, _challenge, digest) {
      await records.remove(dns01RecordName(authz.identifier.value), digest);
    },
  };
}
