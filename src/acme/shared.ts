/**
 * ACME shared by several nodes (cluster/acme-sharing.ts keeps it in
 * PostgreSQL). What one node does, every node sees:
 *
 * - one account key for the cluster (the first node's), so the CA's limits
 *   and history are one account's;
 * - the certificates: a node that stores one tells the others, which serve
 *   it at once; a node starting takes what is there;
 * - the challenge answers: published on every node before the CA is asked
 *   to look, so the CA may reach any of them (a load balancer, several A
 *   records, the DNS-01 zone delegated to several nodes);
 * - the orders: a node takes a lease on a certificate before it orders, so a
 *   certificate the nodes all want is ordered once; the others wait for it;
 * - the names that had a certificate on demand this week, counted once for
 *   the cluster against --acme-names-per-week.
 */
import type { ChallengeSolver } from "./solver.ts";

/** An answer any node gives: HTTP-01's key authorization for a token, or a DNS-01 TXT value of a name. */
export interface SharedChallenge {
  type: "http-01" | "dns-01" | "tls-alpn-01";
  /** The token (http-01), the TXT record's name (dns-01), or the name proven (tls-alpn-01). */
  name: string;
  value: string;
}

export interface SharedCertificate {
  id: string;
  certPem: string;
  keyPem: string;
}

export interface AcmeSharing {
  /** The cluster's account key: the one stored, else `make()`'s, stored unless another node stored one first (then that one). */
  accountKey(make: () => Promise<string>): Promise<string>;
  certificates(): Promise<SharedCertificate[]>;
  certificate(id: string): Promise<SharedCertificate | undefined>;
  /** Stores a certificate for every node, and tells them. */
  putCertificate(cert: SharedCertificate & { notAfter: Date }): Promise<void>;
  /** Serves an answer on every node until withdrawn or `ttlMs` has passed; resolves once the other nodes were told. */
  publish(challenge: SharedChallenge, ttlMs: number): Promise<void>;
  withdraw(challenge: SharedChallenge): Promise<void>;
  /** The answers still to be served (a node starting, or one whose messages were lost). */
  challenges(): Promise<SharedChallenge[]>;
  /** Takes the order of certificate `id` for `ms` (or until released); false while another node holds it. */
  lease(id: string, ms: number): Promise<boolean>;
  release(id: string): Promise<void>;
  /** Counts `name` as made on demand now, unless `limit` names were this week (cluster-wide): false then. */
  countOnDemand(name: string, limit: number): Promise<boolean>;
  /** What the other nodes say from now on. */
  listen(handlers: SharingHandlers): void;
}

export interface SharingHandlers {
  /** Another node stored certificate `id`. */
  certificate(id: string): void;
  /** Another node published (added) or withdrew an answer; settles once it is served here. */
  challenge(challenge: SharedChallenge, added: boolean): void | Promise<void>;
}

/** `solver`, with each answer also published on every node before the CA is asked to look, and withdrawn after. */
export function sharedSolver(solver: ChallengeSolver, sharing: AcmeSharing, answer: (authzName: string, token: string | undefined, keyAuthorization: string) => SharedChallenge, ttlMs: number): ChallengeSolver {
  return {
    type: solver.type,
    async prepare(authz, challenge, keyAuthorization) {
      await solver.prepare(authz, challenge, keyAuthorization);
      await sharing.publish(answer(authz.identifier.value, challenge.token, keyAuthorization), ttlMs);
    },
    async cleanup(authz, challenge, keyAuthorization) {
      try {
        await sharing.withdraw(answer(authz.identifier.value, challenge.token, keyAuthorization));
      } finally {
        await solver.cleanup(authz, challenge, keyAuthorization);
      }
    },
  };
}
