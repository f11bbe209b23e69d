import { pino, type Logger } from 'pino';

export type { Logger };

/** One root logger per process; modules take children of it. Credentials never reach a log line. */
export function createLogger(name: string, level = 'info'): Logger {
  return pino({
    name,
    level,
    base: { pid: process.pid, svc: name },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        'authorization',
        'x-api-key',
        'password',
        'secret',
        'api_key',
        'ingestion_key',
        '*.authorization',
        '*.x-api-key',
        '*.password',
        '*.secret',
        '*.api_key',
        '*.ingestion_key',
        'headers.authorization',
        'headers["x-api-key"]',
      ],
      censor: '[redacted]',
    },
  });
}
