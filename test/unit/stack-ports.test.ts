import t from '#tap';
import { type StackProfile, stackProfile } from '../../infra/stack.js';

// A server port inside the kernel's ephemeral range can be held for a moment as the local end of
// some client's connection; a server started then fails with "Address already in use" (a cluster
// suite once failed that way on clickhouse4). Every profile keeps all of its ports below it and
// apart from the other profiles', so the three stacks run side by side.
const EPHEMERAL_FROM = 32768;

function ports(p: StackProfile): Array<[string, number]> {
  return [
    ...p.nats.flatMap(
      (n): Array<[string, number]> => [
        [`${n.name} client`, n.port],
        [`${n.name} monitor`, n.monitorPort],
        [`${n.name} routes`, n.clusterPort],
      ],
    ),
    ...p.clickhouse.flatMap(
      (c): Array<[string, number]> => [
        [`${c.name} http`, c.httpPort],
        [`${c.name} native`, c.tcpPort],
        [`${c.name} interserver`, c.interserverPort],
      ],
    ),
    ...(p.zookeeperPort ? [['zookeeper', p.zookeeperPort] as [string, number]] : []),
    ['postgresql', p.pgPort],
    ['ingest', p.ingestPort],
    ['processors', p.ingestPort + 200],
    ['core-api', p.apiPort],
    ['edge https', p.edgePort],
    ['edge http', p.edgeHttpPort],
  ];
}

t.test('every fixed port is below the ephemeral range and used once across the profiles', async (t) => {
  const seen = new Map<number, string>();
  for (const name of ['dev', 'test', 'cluster'] as const) {
    for (const [what, port] of ports(stackProfile(name))) {
      t.ok(port > 1024 && port < EPHEMERAL_FROM, `${name} ${what}: ${port}`);
      t.notOk(seen.has(port), `${name} ${what}: ${port} not also ${seen.get(port)}`);
      seen.set(port, `${name} ${what}`);
    }
  }
  t.equal(stackProfile('cluster').zookeeperPort, 32181, 'the cluster runs ZooKeeper');
  t.equal(stackProfile('test').zookeeperPort, undefined, 'a single ClickHouse runs without ZooKeeper');
});
