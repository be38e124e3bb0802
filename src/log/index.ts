import { pino, type DestinationStream, type Logger } from 'pino';

export type { DestinationStream, Logger };

/**
 * Structured logs; every field that could carry a credential is redacted before it is written.
 * JSON lines go to stdout, or to `destination` (tests read what the server logged).
 */
export function createLogger(level = 'info', destination?: DestinationStream): Logger {
  const options = {
    level,
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
        'req.headers.authorization',
        'req.headers["x-admin-api-key"]',
        'req.headers.cookie',
      ],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
