/** burrow's mark: in the header and on the sign-in page. */
export function Logo() {
  return (
    <svg class="logo" viewBox="0 0 32 32" width="26" height="26" aria-hidden="true">
      <rect width="32" height="32" rx="8" fill="currentColor" />
      <path d="M7 23a9 9 0 0 1 18 0" fill="none" stroke="#fff" stroke-width="3.5" stroke-linecap="round" />
      <circle cx="16" cy="23" r="2.4" fill="#f2a541" />
    </svg>
  );
}
