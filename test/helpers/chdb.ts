import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { applyToServer } from '../../infra/apply.js';
import { ROOT } from '../../infra/stack.js';

/**
 * A current ClickHouse in this process: chDB, the engine of ClickHouse 26 as a library (the npm
 * package `chdb`; its Linux build comes in `@chdb/lib-linux-x64-gnu`, about 550 MB installed).
 * Not a dependency of the project: the first test that needs it installs it into `.data/chdb/`
 * (ignored, kept between runs), so `npm ci` stays as fast as before and production never has it.
 * Installing took 11 s here with npm's cache warm, 15 s with an empty one (184 MB downloaded)
 * (docs/clickhouse.md).
 */
export const CHDB_VERSION = '3.4.0';
const PREFIX = path.join(ROOT, '.data/chdb');

interface ChdbSession {
  query(sql: string, format?: string): string;
  queryBind(sql: string, args: object, format?: string): string;
  cleanup(): void;
}
interface ChdbModule {
  Session: new (path?: string) => ChdbSession;
}

const installed = () => {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(PREFIX, 'node_modules/chdb/package.json'), 'utf8'));
    return pkg.version === CHDB_VERSION && fs.existsSync(path.join(PREFIX, 'node_modules/@chdb/lib-linux-x64-gnu'));
  } catch {
    return false;
  }
};

/**
 * Installs chDB into `.data/chdb/` unless that version is there: into a folder of this process
 * first, renamed into place when complete, so an install cut short or run twice at once never
 * leaves a half-installed engine behind. Says how long it took.
 */
export function ensureChdb(say: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): void {
  if (installed()) return;
  const tmp = `${PREFIX}.${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  const t0 = Date.now();
  const npm = spawnSync(
    'npm',
    ['install', '--no-save', '--no-audit', '--no-fund', '--no-package-lock', '--prefix', tmp, `chdb@${CHDB_VERSION}`],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  if (npm.status !== 0) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw new Error(`npm install chdb@${CHDB_VERSION} failed (exit ${npm.status})`);
  }
  if (installed()) fs.rmSync(tmp, { recursive: true, force: true });
  else {
    fs.rmSync(PREFIX, { recursive: true, force: true });
    fs.renameSync(tmp, PREFIX);
  }
  say(`# chdb@${CHDB_VERSION} installed into .data/chdb in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

let loaded: ChdbModule | undefined;
function chdbModule(): ChdbModule {
  ensureChdb();
  loaded ??= createRequire(path.join(PREFIX, 'node_modules/'))('chdb') as ChdbModule;
  return loaded;
}

/** A ClickHouse error's number (`Code: 62`), as the product's clients read it. */
export const errorCode = (err: unknown): number | undefined => {
  const m = /Code: (\d+)/.exec(String((err as Error)?.message ?? err));
  return m ? Number(m[1]) : undefined;
};

/** One chDB session with a data folder of its own (removed by `close`). */
export class Chdb {
  private readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chdb-'));
  private readonly session: ChdbSession;

  constructor() {
    this.session = new (chdbModule().Session)(this.dir);
  }

  /** The statement's answer as text in `format` (none for statements that answer nothing). */
  run(sql: string, format = 'TabSeparated'): string {
    return this.session.query(sql, format);
  }

  /** Rows of a SELECT (without FORMAT), parsed from JSONEachRow. */
  rows<T = Record<string, unknown>>(sql: string): T[] {
    return this.run(sql, 'JSONEachRow')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as T);
  }

  /** The statement's syntax tree as ClickHouse 26 formats it: throws when it does not parse. */
  parse(sql: string): string {
    return this.session.queryBind('SELECT formatQuery({q:String})', { q: sql }, 'TabSeparatedRaw');
  }

  version(): string {
    return this.run('SELECT version()').trim();
  }

  /** schema.sql applied as infra/apply.ts applies it to a server (applyToServer), statement by statement. */
  async applySchema(): Promise<void> {
    await applyToServer(async (sql) => this.run(sql));
  }

  close(): void {
    this.session.cleanup();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
