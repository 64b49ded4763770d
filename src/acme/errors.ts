/**
 * What can go wrong getting a certificate, as values: a stable code from one
 * table, a sentence an operator can act on, and when. The admin API reports
 * a certificate's last failure as `last_error`; the log prints the same.
 * Nothing here throws past the module's edge: issuance and renewal return
 * `AcmeResult`s, so a CA that refuses or vanishes never crashes the server.
 */

/**
 * Every code: the words a failure's message starts with, what it means,
 * and what to do about it (docs/reference/codes.md is made from this table).
 */
export const ACME_ERRORS = {
  CA_UNREACHABLE: {
    message: "the ACME CA could not be reached",
    meaning: "No answer from the CA: connection refused, name not found, timed out.",
    advice: "Check the server's DNS and its outbound HTTPS to `--acme-directory`; the attempt is retried.",
  },
  CA_UNTRUSTED: {
    message: "the ACME CA's HTTPS certificate is not trusted",
    meaning: "The directory's HTTPS certificate is not trusted, or the `--acme-ca-root` file cannot be read or is not a PEM certificate.",
    advice: "For a test CA, give its root with `--acme-ca-root`; otherwise check the machine's clock and CA certificates.",
  },
  CA_ERROR: {
    message: "the ACME CA failed",
    meaning: "The CA kept answering 5xx, or answered something that is not ACME.",
    advice: "Wait: the attempt is retried (`--acme-retry-min`, doubling up to an hour); the CA's status page may say more.",
  },
  RATE_LIMITED: {
    message: "the ACME CA's rate limit was hit",
    meaning: "The CA said 429 (`retry_after` says when it will talk again); or this server made `--acme-names-per-week` certificates on demand for single names this week.",
    advice: "Wait; for many names, use the wildcard certificate (`--dns-port`) instead of one per name.",
  },
  ACCOUNT_REFUSED: {
    message: "the ACME CA refused the account",
    meaning: "Registering (or finding) the account failed.",
    advice: "Check `--acme-email`; the CA's words are in the message.",
  },
  BAD_NAME: {
    message: "a name is not one a certificate can carry",
    meaning: "A name asked for is not one a certificate can carry (checked before asking the CA).",
    advice: "Check `--domain` and the name the message gives.",
  },
  ORDER_REFUSED: {
    message: "the ACME CA refused the names",
    meaning: "The CA will not issue for these names (blocked, malformed, policy).",
    advice: "The CA's words in the message say why; a name it will not issue for needs another name or another CA.",
  },
  NO_SOLVER: {
    message: "no challenge the CA offers can be answered here",
    meaning: "None of the challenges the CA offers can be answered here (a wildcard needs DNS-01).",
    advice: "For the wildcard, let burrow answer DNS-01 (`--dns-port`, with `_acme-challenge.D` delegated to it); for single names, the CA must reach `--http-port` on port 80.",
  },
  CHALLENGE_FAILED: {
    message: "a challenge failed",
    meaning: "Answering a challenge failed, or the CA could not validate the answer.",
    advice: "For DNS-01 run `burrow server dns-check`; for HTTP-01 check that the CA reaches `--http-port` on port 80.",
  },
  FINALIZE_FAILED: {
    message: "the certificate was not issued",
    meaning: "The CA would not finalize the order or hand out the certificate.",
    advice: "The attempt is retried; the CA's words in the message say why.",
  },
  INVALID_CERTIFICATE: {
    message: "the certificate is not usable",
    meaning: "A certificate (from the CA or on disk) does not parse, does not match its key, or lacks a name.",
    advice: "For `--tls-cert` and `--tls-key`: check that both are PEM, that they match, and that the certificate names `D` and `*.D`.",
  },
  STORAGE_FAILED: {
    message: "the certificate store could not be written",
    meaning: "Reading or writing the data dir failed.",
    advice: "Check that the server may write its data dir, and that the disk has room.",
  },
  ORDERED_ELSEWHERE: {
    message: "another node is ordering this certificate",
    meaning: "Several nodes: another node holds the order for these names now; the certificate it gets is served here too.",
    advice: "Nothing to do: the attempt is retried, and the other node's certificate replaces this line when it is stored.",
  },
  TIMEOUT: {
    message: "getting the certificate took too long",
    meaning: "The whole attempt took longer than its deadline (5 minutes from order to chain).",
    advice: "The attempt is retried; look at what is slow: the CA, or its view of the challenge.",
  },
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
  if (code && UNTRUSTED_CODES.has(code)) return { code: "CA_UNTRUSTED", message: `${ACME_ERRORS.CA_UNTRUSTED.message} (${code})`, at };
  if (code) return { code: "CA_UNREACHABLE", message: `${ACME_ERRORS.CA_UNREACHABLE.message} (${code}: ${messageOf(err)})`, at };
  return { code: step, message: `${ACME_ERRORS[step].message}: ${messageOf(err)}`, at };
}
