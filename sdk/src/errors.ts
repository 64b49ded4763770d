/** The package's errors: the server's refusals, and mistakes in options (TypeErrors naming them). */

/** A refusal from the server, with its stable code (docs/reference/codes.md), e.g. SUBDOMAIN_TAKEN. */
export class BurrowError extends Error {
  override readonly name = "BurrowError";
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** `read()`'s value, or a TypeError naming the option with what was wrong (the CLI's words for its flag). */
export function checked<T>(option: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new TypeError(`${option}: ${(err as Error).message}`);
  }
}
