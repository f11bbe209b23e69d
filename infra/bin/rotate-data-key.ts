import { parseArgs } from 'node:util';
import { connectPg } from '../../lib/pg.js';
import { DataCipher } from '../../lib/credentials/data-cipher.js';
import { integrationTokenKey, stackProfile, stackUrls } from '../stack.js';
import { rotateSecrets } from '../../lib/credentials/stored-secrets.js';

/**
 * npm run rotate-data-key [-- --tenant ID …]
 * Rewrites every secret stored at rest (webhook signing secrets, provider tokens, OAuth verifiers)
 * under the first key of DATA_ENCRYPTION_KEY, reading the others (and INTEGRATION_TOKEN_KEY) for
 * the values written before; webhook secrets still kept in clear are encrypted. Runs beside the
 * tiers, which must already hold the new key first (docs/security.md, "Keys of secrets at rest").
 * Without DATA_ENCRYPTION_KEY it uses the local stack's key (STACK_PROFILE, .data/<profile>/), and
 * DATABASE_URL defaults to that stack's. `--tenant` limits it to those workspaces (a staged
 * rotation). Exits 1 when a value no configured key opens is left.
 */
const { values } = parseArgs({ options: { tenant: { type: 'string', multiple: true, default: [] } } });
const say = (line: string) => process.stderr.write(`rotate-data-key: ${line}\n`);
const profile = stackProfile(process.env.STACK_PROFILE);
const cipher = DataCipher.fromSettings(
  process.env.DATA_ENCRYPTION_KEY ?? '',
  process.env.INTEGRATION_TOKEN_KEY ?? (process.env.DATA_ENCRYPTION_KEY ? '' : integrationTokenKey(profile)),
);
if (!cipher) {
  say('no key: set DATA_ENCRYPTION_KEY (the new key first, then the old ones)');
  process.exit(1);
}
const sql = connectPg(process.env.DATABASE_URL ?? stackUrls(profile).DATABASE_URL, 1);
try {
  say(`rewriting under key ${cipher.currentKeyId}`);
  const report = await rotateSecrets(sql, cipher, say, { tenants: values.tenant });
  const unreadable = Object.entries(report.unreadable);
  for (const [column, n] of unreadable) say(`${column}: ${n} value(s) no configured key opens, left as they are`);
  process.stdout.write(`${JSON.stringify({ key_id: cipher.currentKeyId, ...report })}\n`);
  process.exitCode = unreadable.length ? 1 : 0;
} catch (err) {
  say(`failed: ${(err as Error).message}`);
  process.exitCode = 1;
} finally {
  await sql.end({ timeout: 5 });
}
