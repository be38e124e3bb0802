import { AsyncLocalStorage } from 'node:async_hooks';
import { format, stripVTControlCharacters } from 'node:util';
import { pino, type DestinationStream, type Logger } from 'pino';

export type { DestinationStream, Logger };

/** Fields every log line written while a request is being answered carries (its request id). */
const requestFields = new AsyncLocalStorage<Record<string, unknown>>();

/**
 * Runs `work` with `fields` added to every log line written during it, wherever the line is
 * written (the policy engine's fail-closed warning, a store error): the request id ties a line to
 * the request's answer and audit entry without handing the request to every module.
 */
export function withLogFields<T>(fields: Record<string, unknown>, work: () => T): T {
  return requestFields.run(fields, work);
}

/**
 * Structured logs; every field that could carry a credential is redacted before it is written.
 * JSON lines go to stdout, or to `destination` (tests read what the server logged).
 */
export function createLogger(level = 'info', destination?: DestinationStream): Logger {
  const options = {
    level,
    mixin: () => requestFields.getStore() ?? {},
    redact: {
      paths: [
        '*.authorization',
        '*.password',
        '*.client_secret',
        '*.clientSecret',
        '*.token',
        '*.access_token',
        '*.refresh_token',
        '*.code',
        '*.assertion',
        '*.client_assertion',
        '*.device_code',
        '*.user_code',
        'req.headers.authorization',
        'req.headers["x-admin-api-key"]',
        'req.headers.cookie',
      ],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

/**
 * What libraries print to the console (oidc-provider's `WARNING:`/`NOTICE:` lines) becomes JSON
 * log lines like every other, so that a log pipeline parses every line of the process's output.
 * Called once by the server's entry point; tests keep their console.
 */
export function consoleToLog(log: Logger): void {
  const library = log.child({ component: 'library' });
  const line = (text: string) => stripVTControlCharacters(text); // oidc-provider colours a terminal's lines
  console.info = (...args: unknown[]) => library.info(line(format(...args)));
  console.log = console.info;
  console.warn = (...args: unknown[]) => library.warn(line(format(...args)));
  console.error = (...args: unknown[]) => library.error(line(format(...args)));
}
