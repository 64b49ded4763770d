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
