import fs from 'node:fs';
import path from 'node:path';

/**
 * node dist/bench/cpu-summary.js <dir or .cpuprofile files> [--events N] [--top K]
 * Sums the V8 CPU profiles a `--profile-cpu` run wrote (one per ingest process) and prints where
 * the time went: self time by function, then by file, as a share of the busy time and, with
 * --events (the events the run accepted), as µs per event. Idle and GC are listed apart.
 */
interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

function files(args: string[]): string[] {
  return args.flatMap((a) =>
    fs.statSync(a).isDirectory()
      ? fs
          .readdirSync(a)
          .filter((f) => f.endsWith('.cpuprofile'))
          .map((f) => path.join(a, f))
      : [a],
  );
}

function main(): void {
  const argv = process.argv.slice(2);
  const flag = (name: string) => {
    const i = argv.indexOf(name);
    if (i < 0) return undefined;
    const v = Number(argv[i + 1]);
    argv.splice(i, 2);
    return v;
  };
  const events = flag('--events');
  const top = flag('--top') ?? 30;
  if (!argv.length) throw new Error('usage: cpu-summary <dir|file.cpuprofile …> [--events N] [--top K]');
  const byFn = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  for (const f of files(argv)) {
    const p = JSON.parse(fs.readFileSync(f, 'utf8')) as Profile;
    const node = new Map(p.nodes.map((n) => [n.id, n]));
    for (let i = 0; i < p.samples.length; i++) {
      const n = node.get(p.samples[i])!;
      const us = p.timeDeltas[i] ?? 0;
      const { functionName, url, lineNumber } = n.callFrame;
      const file = url ? url.replace(/^file:\/\//, '').replace(/^.*?\/(dist|node_modules)\//, '$1/') : '';
      const name = `${functionName || '(anonymous)'} ${file ? `${file}:${lineNumber + 1}` : ''}`.trim();
      byFn.set(name, (byFn.get(name) ?? 0) + us);
      const where = file ? file.replace(/^(node_modules\/(@[^/]+\/)?[^/]+).*$/, '$1') : `(${functionName})`;
      byFile.set(where, (byFile.get(where) ?? 0) + us);
      total += us;
    }
  }
  let idle = 0;
  for (const [k, us] of byFn) if (k.startsWith('(idle)')) idle += us;
  const busy = total - idle;
  const line = (name: string, us: number) =>
    `${((us / busy) * 100).toFixed(1).padStart(5)} %${events ? `  ${(us / events).toFixed(2).padStart(6)} µs/event` : ''}  ${name}`;
  const show = (title: string, m: Map<string, number>) => {
    process.stdout.write(`\n${title}\n`);
    const shown = [...m].filter(([k]) => !k.includes('(idle)')).sort((a, b) => b[1] - a[1]);
    for (const [name, us] of shown.slice(0, top)) process.stdout.write(`${line(name, us)}\n`);
  };
  process.stdout.write(
    `busy ${(busy / 1e6).toFixed(2)} s of ${(total / 1e6).toFixed(2)} s sampled` +
      (events ? `; ${(busy / events).toFixed(2)} µs of busy CPU per event over ${events} events` : '') +
      '\n',
  );
  show('self time by function', byFn);
  show('self time by file or package', byFile);
}

main();
