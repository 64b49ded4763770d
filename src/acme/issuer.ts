/**
 * One issuance: order a certificate for a set of names, answer each name's
 * challenge with the first solver the CA allows for it, finalize with a new
 * key (ECDSA P-256) and download the chain. Each step that fails says which
 * it was (errors.ts), with the CA's words; nothing throws.
 *
 * acme-client's `auto()` does the same steps but also checks each answer
 * itself first (an HTTP-01 fetch of its own name, a DNS lookup through the
 * public resolvers), which a server behind NAT or a split-horizon resolver
 * cannot always do and which only delays what the CA will tell anyway; so
 * the steps are spelled out here, without that check.
 */
import * as acme from "acme-client";
import { systemClock, type Clock } from "../core/clock.ts";
import { log } from "../log.ts";
import { openAccount, type AccountOptions, type AcmeAccount } from "./account.ts";
import { readCertificate } from "../tls/certificate-info.ts";
import { isCertName } from "./certificate-store.ts";
import { AcmeStepError, failureOf, type AcmeErrorCode, type AcmeResult } from "./errors.ts";
import type { ChallengeSolver } from "./solver.ts";

/**
 * One issuance, at most, from order to chain. Let's Encrypt takes seconds;
 * past this something is stuck and the renewal schedule tries again later.
 */
export const ISSUE_TIMEOUT_MS = 5 * 60 * 1000;
/** Names in one certificate, at most (Let's Encrypt's limit is 100). */
export const MAX_NAMES_PER_CERTIFICATE = 100;

export interface IssueRequest {
  /** The names the certificate is for; the first is its id in the store. */
  names: string[];
  /** In order of preference; for each name, the first whose type the CA offers is used. */
  solvers: ChallengeSolver[];
  timeoutMs?: number;
}

export interface IssuedCertificate {
  names: string[];
  /** The chain, leaf first, as the CA sent it. */
  certPem: string;
  keyPem: string;
}

/** Gets a certificate for `request.names` from the account's CA. */
export async function obtainCertificate(account: Pick<AcmeAccount, "client">, request: IssueRequest, clock: Clock = systemClock): Promise<AcmeResult<IssuedCertificate>> {
  const names = [...new Set(request.names.map((n) => n.toLowerCase().replace(/\.$/, "")))];
  const bad = names.find((n) => !isCertName(n));
  if (names.length === 0 || names.length > MAX_NAMES_PER_CERTIFICATE || bad !== undefined) {
    const why = bad !== undefined ? `not a DNS name: ${JSON.stringify(bad)}` : `a certificate holds 1 to ${MAX_NAMES_PER_CERTIFICATE} names, not ${names.length}`;
    return { ok: false, error: failureOf(new AcmeStepError("BAD_NAME", why), "BAD_NAME", clock.now()) };
  }
  const timeoutMs = request.timeoutMs ?? ISSUE_TIMEOUT_MS;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AcmeStepError("TIMEOUT", `no certificate for ${names.join(", ")} after ${Math.round(timeoutMs / 1000)} s`)), timeoutMs);
  });
  try {
    // what is still running at the deadline goes on in the background and cleans up after itself
    return { ok: true, value: await Promise.race([issue(account.client, names, request.solvers), deadline]) };
  } catch (err) {
    return { ok: false, error: failureOf(err, err instanceof StepFailure ? err.step : "CA_ERROR", clock.now()) };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `obtainCertificate` with the account and solvers bound: what renewal.ts
 * calls. The account is opened (registered if need be) at the first call
 * and kept; a failure to open it is that attempt's failure, and the next
 * attempt tries again, so a server started while the CA is down gets its
 * certificates once the CA is back.
 */
export function accountIssuer(account: AccountOptions, solvers: ChallengeSolver[], clock: Clock = systemClock): (names: string[]) => Promise<AcmeResult<IssuedCertificate>> {
  let opened: Promise<AcmeResult<AcmeAccount>> | undefined;
  return async (names) => {
    opened ??= openAccount(account, clock);
    const result = await opened;
    if (!result.ok) {
      opened = undefined;
      return result;
    }
    return obtainCertificate(result.value, { names, solvers }, clock);
  };
}

/** An error from a step, tagged with that step's code (unless it is a more specific AcmeStepError). */
class StepFailure extends Error {
  constructor(
    readonly step: AcmeErrorCode,
    original: unknown,
    context?: string,
  ) {
    const why = original instanceof Error ? original.message : String(original);
    super(context ? `${context}: ${why}` : why);
    // kept as the cause so that failureOf still sees a transport fault's code
    this.cause = original;
    this.name = "StepFailure";
  }
}

async function step<T>(code: AcmeErrorCode, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw err instanceof AcmeStepError || err instanceof StepFailure ? err : new StepFailure(code, err);
  }
}

async function issue(client: acme.Client, names: string[], solvers: ChallengeSolver[]): Promise<IssuedCertificate> {
  const order = await step("ORDER_REFUSED", () => client.createOrder({ identifiers: names.map((value) => ({ type: "dns", value })) }));
  const authorizations = await step("ORDER_REFUSED", () => client.getAuthorizations(order));

  // every authorization settles (and cleans up) before the first failure is reported
  const settled = await Promise.allSettled(authorizations.map((authz) => authorize(client, authz, solvers)));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) throw failed.reason;

  const key = await acme.crypto.createPrivateEcdsaKey("P-256");
  const [, csr] = await acme.crypto.createCsr({ altNames: names }, key);
  const finalized = await step("FINALIZE_FAILED", () => client.finalizeOrder(order, csr));
  const certPem = await step("FINALIZE_FAILED", () => client.getCertificate(finalized));
  const keyPem = key.toString();
  try {
    const info = readCertificate(certPem, keyPem);
    const missing = names.filter((n) => !info.names.includes(n));
    if (missing.length > 0) throw new Error(`it does not name ${missing.join(", ")}`);
  } catch (err) {
    throw new AcmeStepError("INVALID_CERTIFICATE", `the CA's certificate is not usable: ${(err as Error).message}`);
  }
  return { names, certPem, keyPem };
}

/** Proves control of one name; throws (a StepFailure or AcmeStepError) when it cannot. */
async function authorize(client: acme.Client, authz: acme.Authorization, solvers: ChallengeSolver[]): Promise<void> {
  if (authz.status === "valid") return; // proven lately (the CA reuses authorizations)
  const name = (authz.wildcard ? "*." : "") + authz.identifier.value;
  const offered: string[] = authz.challenges.map((c) => c.type);
  const solver = solvers.find((s) => offered.includes(s.type));
  const challenge = solver && authz.challenges.find((c) => (c.type as string) === solver.type);
  if (!solver || !challenge) {
    await deactivate(client, authz);
    throw new AcmeStepError("NO_SOLVER", `${name}: the CA offers ${offered.join(", ") || "no challenge"}, burrow answers ${solvers.map((s) => s.type).join(", ") || "none"} here`);
  }
  const offer = { type: challenge.type, url: challenge.url, ...("token" in challenge ? { token: challenge.token } : {}) };
  const keyAuthorization = await step("CHALLENGE_FAILED", () => client.getChallengeKeyAuthorization(challenge));
  let submitted = false;
  try {
    await step("CHALLENGE_FAILED", async () => solver.prepare(authz, offer, keyAuthorization));
    await step("CHALLENGE_FAILED", () => client.completeChallenge(challenge));
    submitted = true;
    await step("CHALLENGE_FAILED", () => client.waitForValidStatus(challenge));
  } catch (err) {
    // a challenge never submitted leaves a pending authorization, which counts against the CA's limits
    if (!submitted) await deactivate(client, authz);
    throw err instanceof AcmeStepError ? err : new StepFailure("CHALLENGE_FAILED", err instanceof StepFailure ? err.cause : err, `${name} (${challenge.type})`);
  } finally {
    try {
      await solver.cleanup(authz, offer, keyAuthorization);
    } catch (err) {
      log.warn("acme challenge cleanup failed", { name, challenge: challenge.type, err });
    }
  }
}

async function deactivate(client: acme.Client, authz: acme.Authorization): Promise<void> {
  try {
    await client.deactivateAuthorization(authz);
  } catch {
    // best effort: the authorization expires on its own
  }
}
