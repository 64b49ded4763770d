/**
 * Why an update (or a check, or a rollback) did not happen: a stable code a
 * script may match, and words for a person. Every one of them leaves the
 * installed executable as it was.
 */
export type UpdateErrorCode =
  | "NOT_COMPILED" // run from source: there is no executable of ours to replace
  | "NO_RELEASE_KEY" // built without the release's public key: nothing to check a download with
  | "BAD_SOURCE" // --from is neither an http(s) URL nor a directory
  | "UNREACHABLE" // the release's address did not answer, or answered an error
  | "NOT_FOUND" // no such release, or no such file in it
  | "BAD_SIGNATURE" // SHA256SUMS.minisig does not verify with the built-in key
  | "BAD_LIST" // SHA256SUMS is not a list of checksums
  | "NO_BUILD" // the release has no executable for this platform
  | "NOT_NEWER" // the release is older than this one, and --version did not name it
  | "VERSION_NOT_THERE" // --version names a version the source does not hold
  | "TOO_LARGE" // a file past its cap
  | "CUT_SHORT" // the download ended before its declared length
  | "CHECKSUM_MISMATCH" // the download is not the file SHA256SUMS lists
  | "DOES_NOT_RUN" // the new executable does not run here, or says another version or platform
  | "NOT_WRITABLE" // no permission to write beside the executable
  | "NO_SPACE" // the disk beside the executable is full
  | "NO_PREVIOUS" // --rollback with no burrow.old beside the executable
  | "IN_PROGRESS"; // another update or rollback is at work on the same executable

export class UpdateError extends Error {
  override name = "UpdateError";
  constructor(
    readonly code: UpdateErrorCode,
    message: string,
  ) {
    super(message);
  }
}
