import { pino, type Logger } from 'pino';

export type { Logger };

/** Structured logs; every field that could carry a credential is redacted before it is written. */
export function createLogger(level = 'info'): Logger {
  return pino({
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
  });
}
