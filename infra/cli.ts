import { stackProfile, stackUrls } from './stack.js';
import { applyAll } from './apply.js';
import { InfraError } from './proc.js';
import { downAll, ensurePackages, stopStarted, upAll } from './services.js';

/**
 * npm run infra:up   [-- --profile dev|test|serial|cluster]   install (as root) and start NATS, ClickHouse (and
 *                                                      ZooKeeper for a cluster), PostgreSQL; apply definitions
 * npm run infra:down [-- --profile dev|test|serial|cluster]   stop exactly the processes infra:up started
 */
const say = (line: string) => process.stderr.write(`infra: ${line}\n`);

async function main(argv: string[]): Promise<void> {
  const cmd = argv[0];
  const i = argv.indexOf('--profile');
  const profile = stackProfile(i >= 0 ? argv[i + 1] : process.env.STACK_PROFILE);
  const maxBytes = Number(process.env.EVENTS_STREAM_MAX_BYTES ?? 20 * 1024 ** 3);
  if (cmd === 'up') {
    const t0 = Date.now();
    ensurePackages(profile, say);
    const started = await upAll(profile, say);
    try {
      await applyAll(profile, say, maxBytes);
    } catch (err) {
      await stopStarted(profile, started, say);
      throw err;
    }
    say(`${profile.name} stack up in ${Date.now() - t0} ms: ${Object.values(stackUrls(profile)).join('  ')}`);
  } else if (cmd === 'down') {
    await downAll(profile, say);
    say(`${profile.name} stack down`);
  } else {
    throw new InfraError('usage: infra/cli.js up|down [--profile dev|test|serial|cluster]');
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof InfraError) say(err.message);
  else say(`failed: ${(err as Error)?.stack ?? String(err)}`);
  process.exit(1);
});
