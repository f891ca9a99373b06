import t from 'tap';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { resolveHosts, writeResourceConfig as writeRc, type HostIdentity } from '../../src/channels/hosts.js';

const FACTS = { instanceType: 'ml.m5.xlarge', networkInterfaceName: 'eth0' };
const writeResourceConfig = (dir: string, id: HostIdentity) => writeRc(dir, id, FACTS);

async function tmp(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-hosts-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

t.test('default: one host algo-1', async (t) => {
  t.same(await resolveHosts(await tmp(t), {}, {}), { currentHost: 'algo-1', hosts: ['algo-1'], hostIndex: 0, hostCount: 1, source: 'default' });
});

t.test('an existing resourceconfig.json comes first', async (t) => {
  const dir = await tmp(t);
  await writeFile(path.join(dir, 'resourceconfig.json'), JSON.stringify({ current_host: 'algo-2', hosts: ['algo-1', 'algo-2', 'algo-3'], network_interface_name: 'eth0' }));
  const id = await resolveHosts(dir, { currentHost: 'algo-1' }, { RANK: '0', WORLD_SIZE: '2' });
  t.match(id, { currentHost: 'algo-2', hostIndex: 1, hostCount: 3, source: 'resourceconfig' });
  await writeResourceConfig(dir, id);
  t.same(JSON.parse(await readFile(path.join(dir, 'resourceconfig.json'), 'utf8')).network_interface_name, 'eth0', 'SageMaker\'s own file is left as it is');
});

t.test('--host-config names another file', async (t) => {
  const dir = await tmp(t);
  const other = path.join(dir, 'rc.json');
  await writeFile(other, JSON.stringify({ current_host: 'b', hosts: ['a', 'b'] }));
  t.match(await resolveHosts(path.join(dir, 'config'), { hostConfig: other }, {}), { currentHost: 'b', hostIndex: 1, hostCount: 2 });
  await t.rejects(resolveHosts(dir, { hostConfig: path.join(dir, 'missing.json') }, {}), /cannot read host config/);
});

t.test('a resourceconfig.json sluice wrote earlier is not a source', async (t) => {
  const dir = await tmp(t);
  await writeResourceConfig(dir, await resolveHosts(dir, { currentHost: 'algo-1', hostCount: 2 }, {}));
  t.match(await resolveHosts(dir, { currentHost: 'algo-2', hostCount: 2 }, {}), { currentHost: 'algo-2', source: 'flags' });
  t.same(JSON.parse(await readFile(path.join(dir, 'resourceconfig.json'), 'utf8')), {
    current_host: 'algo-1', current_instance_type: 'ml.m5.xlarge', current_group_name: 'homogeneousCluster', hosts: ['algo-1', 'algo-2'],
    instance_groups: [{ instance_group_name: 'homogeneousCluster', instance_type: 'ml.m5.xlarge', hosts: ['algo-1', 'algo-2'] }],
    network_interface_name: 'eth0',
  }, 'SageMaker\'s shape: instance type, group and instance groups');
});

t.test('RANK/WORLD_SIZE, then JOB_COMPLETION_INDEX, then flags', async (t) => {
  const dir = await tmp(t);
  t.match(await resolveHosts(dir, { currentHost: 'x' }, { RANK: '2', WORLD_SIZE: '4', JOB_COMPLETION_INDEX: '0' }), { currentHost: 'algo-3', hosts: ['algo-1', 'algo-2', 'algo-3', 'algo-4'], hostIndex: 2, source: 'torchrun' });
  t.match(await resolveHosts(dir, { hostCount: 3, currentHost: 'x' }, { JOB_COMPLETION_INDEX: '1' }), { currentHost: 'algo-2', hostIndex: 1, hostCount: 3, source: 'indexed-job' });
  t.match(await resolveHosts(dir, { currentHost: 'h2', hosts: 'h1,h2,h3' }, {}), { currentHost: 'h2', hostIndex: 1, hostCount: 3, source: 'flags' });
  t.match(await resolveHosts(dir, { currentHost: 'algo-4', hostCount: 4 }, {}), { hostIndex: 3, hostCount: 4 });
  t.match(await resolveHosts(dir, { currentHost: 'solo' }, {}), { hosts: ['solo'], hostIndex: 0 });
});

t.test('bad host settings get one-line errors', async (t) => {
  const dir = await tmp(t);
  const cases: [Parameters<typeof resolveHosts>[1], NodeJS.ProcessEnv, RegExp][] = [
    [{}, { RANK: '1' }, /RANK is set without WORLD_SIZE/],
    [{}, { RANK: '4', WORLD_SIZE: '4' }, /RANK 4 is not below WORLD_SIZE 4/],
    [{}, { RANK: 'a', WORLD_SIZE: '4' }, /RANK "a" is not a non-negative integer/],
    [{}, { JOB_COMPLETION_INDEX: '0' }, /JOB_COMPLETION_INDEX is set but the host count is not/],
    [{ hostCount: 2 }, { JOB_COMPLETION_INDEX: '2' }, /JOB_COMPLETION_INDEX 2 is not below the host count 2/],
    [{ hosts: 'a,b' }, {}, /without --current-host/],
    [{ currentHost: 'c', hosts: 'a,b' }, {}, /current host "c" is not in hosts/],
    [{ currentHost: 'a', hosts: 'a,a' }, {}, /listed twice/],
    [{ currentHost: 'a', hosts: 'a', hostCount: 1 }, {}, /both given/],
  ];
  for (const [flags, env, re] of cases) {
    await t.rejects(resolveHosts(dir, flags, env), { code: 'SLUICE_CONFIG', message: re }, String(re));
  }
  await writeFile(path.join(dir, 'resourceconfig.json'), '{"hosts": []}');
  await t.rejects(resolveHosts(dir, {}, {}), /needs "current_host"/);
});

t.test('--host-config: the file\'s fields are kept in the resourceconfig.json sluice writes', async (t) => {
  const dir = await tmp(t);
  const other = path.join(dir, 'rc.json');
  const sagemaker = { current_host: 'algo-2', hosts: ['algo-1', 'algo-2'], current_group_name: 'g', current_instance_type: 'ml.p5.48xlarge', instance_groups: [{ instance_group_name: 'g', instance_type: 'ml.p5.48xlarge', hosts: ['algo-1', 'algo-2'] }], topology: [] };
  await writeFile(other, JSON.stringify(sagemaker));
  const id = await resolveHosts(dir, { hostConfig: other }, {});
  await writeResourceConfig(dir, id);
  t.same(JSON.parse(await readFile(path.join(dir, 'resourceconfig.json'), 'utf8')), { ...sagemaker, network_interface_name: 'eth0' });
});
