import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The local stack's addresses. Two profiles run side by side without touching each other:
 * `dev` (npm start) and `test` (npm test), each with its own ports and data folder under .data/.
 */
export interface StackProfile {
  name: 'dev' | 'test';
  dataDir: string;
  natsPort: number;
  natsMonitorPort: number;
  chHttpPort: number;
  chTcpPort: number;
  pgPort: number;
  ingestPort: number;
  apiPort: number;
  /** HTTPS edge (Caddy); its plain-HTTP port answers with redirects to it. */
  edgePort: number;
  edgeHttpPort: number;
}

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

const PROFILES: Record<StackProfile['name'], Omit<StackProfile, 'name' | 'dataDir'>> = {
  dev: {
    natsPort: 14222,
    natsMonitorPort: 18222,
    chHttpPort: 18123,
    chTcpPort: 19000,
    pgPort: 15432,
    ingestPort: 3100,
    apiPort: 3200,
    edgePort: 3443,
    edgeHttpPort: 3080,
  },
  test: {
    natsPort: 24222,
    natsMonitorPort: 28222,
    chHttpPort: 28123,
    chTcpPort: 29000,
    pgPort: 25432,
    ingestPort: 23100,
    apiPort: 23200,
    edgePort: 23443,
    edgeHttpPort: 23080,
  },
};

/** `name` is the --profile option or STACK_PROFILE of the calling command; `dev` when neither is given. */
export function stackProfile(name = 'dev'): StackProfile {
  if (name !== 'dev' && name !== 'test') throw new Error(`unknown stack profile "${name}" (dev or test)`);
  return { name, dataDir: path.join(ROOT, '.data', name), ...PROFILES[name] };
}

export interface StackUrls {
  NATS_URL: string;
  CLICKHOUSE_URL: string;
  DATABASE_URL: string;
}

export function stackUrls(p: StackProfile): StackUrls {
  return {
    NATS_URL: `nats://127.0.0.1:${p.natsPort}`,
    CLICKHOUSE_URL: `http://127.0.0.1:${p.chHttpPort}`,
    DATABASE_URL: `postgres://postgres@127.0.0.1:${p.pgPort}/csp`,
  };
}

/**
 * The local stack's key for provider tokens at rest (INTEGRATION_TOKEN_KEY): 32 random bytes,
 * base64, generated on first use into the profile's data folder (owner-only, git-ignored).
 */
export function integrationTokenKey(p: StackProfile): string {
  const file = path.join(p.dataDir, 'integration-token.key');
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    fs.mkdirSync(p.dataDir, { recursive: true });
    const key = randomBytes(32).toString('base64');
    try {
      fs.writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
      return key;
    } catch {
      // Written by another process meanwhile: theirs is the key.
      return fs.readFileSync(file, 'utf8').trim();
    }
  }
}
