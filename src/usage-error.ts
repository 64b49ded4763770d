/** A mistake on the command line: printed as one line, exit code 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

export const EXIT_USAGE = 2;
