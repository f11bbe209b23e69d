import fs from 'node:fs';
import { spawn } from 'node:child_process';
import { startTier } from './dist/test/helpers/stack.js';
const downs = []; const t = { teardown: (f) => downs.push(f) };
const tier = process.argv[2];
const x = await startTier(t, tier);
const env = Object.fromEntries(fs.readFileSync(`/proc/${x.proc.pid}/environ`, 'utf8').split('\0').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
await x.stop('SIGTERM');
fs.rmSync('/tmp/prof', { recursive: true, force: true });
const t0 = performance.now();
const p = spawn(process.execPath, ['--cpu-prof', '--cpu-prof-dir=/tmp/prof', `dist/${tier}/main.js`], { env, stdio: 'ignore' });
const port = env.PROCESSORS_PORT ?? env.API_PORT ?? env.INGEST_PORT;
for (;;) { await new Promise((r) => setTimeout(r, 20)); const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status === 200, () => false); if (ok) break; }
console.log('ready after', (performance.now() - t0).toFixed(0), 'ms');
p.kill('SIGTERM'); await new Promise((r) => p.on('exit', r));
for (const f of downs.reverse()) await f();
process.exit(0);
