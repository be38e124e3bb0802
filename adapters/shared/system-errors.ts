/**
 * A Node.js system error (EPIPE, ECONNRESET, ECONNREFUSED, ETIMEDOUT, …): what a socket to a
 * store's server gives when the server ended, reset or refused the connection. A driver usually
 * wraps these in its own error types, but not always: a write on a connection whose server has
 * just ended it ("This socket has been ended by the other party", EPIPE) can reach the caller as
 * the socket's own error (the MongoDB driver rejects with it while it waits to write).
 */
export function isSystemError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as NodeJS.ErrnoException).code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code);
}
