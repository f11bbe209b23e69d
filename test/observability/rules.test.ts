import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import t from '#tap';
import { RULE_FILES } from '../../infra/observability/prometheus.js';
import { ROOT } from '../../infra/stack.js';
import { promtool } from '../helpers/prometheus.js';
import { alertRules } from '../helpers/rules.js';

// The shipped rules, checked with Debian's promtool: their syntax, and the unit tests of
// infra/observability/tests/, which must make every alert fire and stay quiet at least once each.
const run = promisify(execFile);
const dir = path.join(ROOT, 'infra', 'observability');
const bin = promtool();
const rules = alertRules(fs.readFileSync(path.join(dir, 'alerts.yml'), 'utf8'));
const testFiles = fs
  .readdirSync(path.join(dir, 'tests'))
  .filter((f) => f.endsWith('.yml'))
  .map((f) => path.join(dir, 'tests', f));

t.test('promtool check rules accepts the recording and alert rules', async (t) => {
  const { stdout } = await run(bin, ['check', 'rules', ...RULE_FILES]);
  t.match(stdout, /SUCCESS: 13 rules found/, 'recordings.yml');
  t.match(stdout, new RegExp(`SUCCESS: ${rules.length} rules found`), 'alerts.yml');
  t.ok(rules.length >= 20, `${rules.length} alerts`);
});

t.test('promtool test rules: every unit test passes', async (t) => {
  const r = await run(bin, ['test', 'rules', ...testFiles]).catch((err: { stdout: string; code: number }) => err);
  t.equal((r as { code?: number }).code ?? 0, 0, r.stdout.slice(-4000));
  t.equal((r.stdout.match(/SUCCESS/g) ?? []).length, testFiles.length, 'each file succeeds');
});

t.test('each alert has a unit test where it fires and one where it does not', async (t) => {
  const cases = testFiles.flatMap((f) =>
    [...fs.readFileSync(f, 'utf8').matchAll(/alertname: (\w+)\n\s+exp_alerts:(.*)\n(\s+- exp_labels)?/g)].map((m) => ({
      name: m[1],
      fires: m[3] !== undefined,
      quiet: m[2].trim() === '[]',
    })),
  );
  for (const { name } of rules) {
    t.ok(
      cases.some((c) => c.name === name && c.fires),
      `${name} fires in a test`,
    );
    t.ok(
      cases.some((c) => c.name === name && c.quiet),
      `${name} stays quiet in a test`,
    );
  }
  const unknown = cases.filter((c) => !rules.some((r) => r.name === c.name)).map((c) => c.name);
  t.same(unknown, [], 'tests name only alerts that exist');
});

t.test('each alert says what it is, how bad, and where its runbook is', async (t) => {
  const operations = fs.readFileSync(path.join(ROOT, 'docs', 'operations.md'), 'utf8');
  for (const r of rules) {
    t.match(r.text, /severity: (critical|warning)/, `${r.name}: severity`);
    t.match(r.text, /summary: /, `${r.name}: summary`);
    t.match(r.text, /description: /, `${r.name}: description`);
    t.match(r.text, new RegExp(`runbook: docs/operations\\.md#${r.name.toLowerCase()}\\n`), `${r.name}: runbook link`);
    t.match(operations, new RegExp(`^### ${r.name}$`, 'm'), `${r.name}: a section in docs/operations.md`);
  }
});
