import type { Logger } from '../lib/logger.js';
import type { Sql } from '../lib/pg.js';
import type { Notifier } from './notify.js';

/** What route modules need; built once in main.ts. */
export interface Deps {
  sql: Sql;
  notify: Notifier;
  log: Logger;
  baseUrl: string;
}

export const isUniqueViolation = (err: unknown, constraint?: string): boolean =>
  (err as { code?: string })?.code === '23505' &&
  (constraint === undefined || (err as { constraint_name?: string }).constraint_name === constraint);

/** Today in UTC as YYYY-MM-DD. */
export const todayUtc = (): string => new Date().toISOString().slice(0, 10);
