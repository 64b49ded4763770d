/**
 * What can go wrong getting a certificate, as values: a stable code from one
 * table, a sentence an operator can act on, and when. The admin API reports
 * a certificate's last failure as `last_error`; the log prints the same.
 * Nothing here throws past the module's edge: issuance and renewal return
 * `AcmeResult`s, so a CA that refuses or vanishes never crashes the server.
 */

/** Every code, with what it means (the table is the documentation). */
export const ACME_ERRORS = {
  /** No answer from the CA: connection refused, name not found, timed out. */
  CA_UNREACHABLE: "the ACME CA could not be reached",
  /** The directory's HTTPS certificate is not trusted (see --acme-ca-root). */
  CA_UNTRUSTED: "the ACME CA's HTTPS certificate is not trusted",
  /** The CA kept answering 5xx, or answered something that is not ACME. */
  CA_ERROR: "the ACME CA failed",
  /** The CA said 429; `retry_after` says when it will talk again. */
  RATE_LIMITED: "the ACME CA's rate limit was hit",
  /** Registering (or finding) the account failed. */
  ACCOUNT_REFUSED: "the ACME CA refused the account",
  /** A name asked for is not one a certificate can carry (checked before asking the CA). */
  BAD_NAME: "a name is not one a certificate can carry",
  /** The CA will not issue for these names (blocked, malformed, policy). */
  ORDER_REFUSED: "the ACME CA refused the names",
  /** None of the challenges the CA offers can be answered here (a wildcard needs DNS-01). */
  NO_SOLVER: "no challenge the CA offers can be answered here",
  /** Answering a challenge failed, or the CA could not validate the answer. */
  CHALLENGE_FAILED: "a challenge failed",
  /** The CA would not finalize the order or hand out the certificate. */
  FINALIZE_FAILED: "the certificate was not issued",
  /** A certificate (from the CA or on disk) does not parse, does not match its key, or lacks a name. */
  INVALID_CERTIFICATE: "the certificate is not usable",
  /** Reading or writing the data dir failed. */
  STORAGE_FAILED: "the certificate store could not be written",
  /** The whole attempt took longer than its deadline. */
  TIMEOUT: "getting the certificate took too long",
} as const;

export type AcmeErrorCode = keyof typeof ACME_ERRORS;

export interface AcmeFailure {
  code: AcmeErrorCode;
  /** What happened, with the CA's own words where it gave any. */
  message: string;
  /** When it happened (ISO 8601 UTC). */
  at: string;
  /** From the CA's Retry-After, when it sent one (ISO 8601 UTC). */
  retryAfter?: string;
}

export type AcmeResult<T> = { ok: true; value: T } | { ok: false; error: AcmeFailure };

/**
 * Thrown inside this module only (a step of issuance that knows what went
 * wrong), and turned into an AcmeFailure by `failureOf` at its edge.
 */
export class AcmeStepError extends Error {
  constructor(
    readonly code: AcmeErrorCode,
    message: string,
    readonly retryAfter?: Date,
  ) {
    super(message);
    this.name = "AcmeStepError";
  }
}

/** Error codes of Node's (and Bun's) TLS verification: the peer's certificate is not trusted. */
const UNTRUSTED_CODES = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_UNTRUSTED",
  "CERT_SIGNATURE_FAILURE",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/** Socket-level codes: nothing (usable) came back from the CA. */
const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "ECONNABORTED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
  "ERR_SOCKET_CONNECTION_TIMEOUT",
]);

/** The most specific code an error (or its cause) carries. */
function errorCode(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && (UNTRUSTED_CODES.has(code) || UNREACHABLE_CODES.has(code))) return code;
  }
  return undefined;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err)) || "no detail";

/**
 * The failure an error stands for. Transport faults are recognised whatever
 * the step (an unreachable CA is that, during an order or an account
 * lookup); anything else takes the code of the step that failed.
 */
export function failureOf(err: unknown, step: AcmeErrorCode, now: Date): AcmeFailure {
  const at = now.toISOString();
  if (err instanceof AcmeStepError) {
    return { code: err.code, message: err.message, at, ...(err.retryAfter ? { retryAfter: err.retryAfter.toISOString() } : {}) };
  }
  const code = errorCode(err);
  if (code && UNTRUSTED_CODES.has(code)) return { code: "CA_UNTRUSTED", message: `${ACME_ERRORS.CA_UNTRUSTED} (${code})`, at };
  if (code) return { code: "CA_UNREACHABLE", message: `${ACME_ERRORS.CA_UNREACHABLE} (${code}: ${messageOf(err)})`, at };
  return { code: step, message: `${ACME_ERRORS[step]}: ${messageOf(err)}`, at };
}
