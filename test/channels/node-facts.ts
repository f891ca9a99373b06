/** Node facts from local files: fake /dev, DMI and route files stand in for a GPU host on EC2. */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { countGpus, countNeuronCores, defaultInterface, instanceTypeFromDmi } from '../../src/channels/node-facts.js';

t.test('facts from files', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-facts-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const dev = path.join(dir, 'dev');
  await mkdir(dev);
  for (const n of ['nvidia0', 'nvidia1', 'nvidia7', 'nvidiactl', 'nvidia-uvm', 'nvidia-caps', 'null']) await writeFile(path.join(dev, n), '');
  t.equal(await countGpus(dev), 3, 'nvidiaN devices only (not nvidiactl, nvidia-uvm)');
  t.equal(await countGpus(path.join(dir, 'missing')), 0);

  const dmi = path.join(dir, 'dmi');
  await mkdir(dmi);
  await writeFile(path.join(dmi, 'sys_vendor'), 'Amazon EC2\n');
  await writeFile(path.join(dmi, 'product_name'), 'p4d.24xlarge\n');
  t.equal(await instanceTypeFromDmi(dmi), 'ml.p4d.24xlarge');
  await writeFile(path.join(dmi, 'sys_vendor'), 'QEMU\n');
  t.equal(await instanceTypeFromDmi(dmi), undefined, 'not EC2');
  t.equal(await instanceTypeFromDmi(path.join(dir, 'none')), undefined);

  const route = path.join(dir, 'route');
  await writeFile(route, 'Iface\tDestination\tGateway\n' + 'ens5\t0000FEA9\t00000000\n' + 'ens5\t00000000\t0100A8C0\n');
  t.equal(await defaultInterface(route), 'ens5', 'the default route\'s interface');
  t.equal(await defaultInterface(path.join(dir, 'none')), 'eth0');

  t.equal(await countNeuronCores('ml.trn2.48xlarge', { PATH: '' }), 64, 'the toolkit\'s fixed count');
  t.equal(await countNeuronCores('ml.p4d.24xlarge', { PATH: dir }), 0, 'no neuron-ls');
  const bin = path.join(dir, 'bin');
  await mkdir(bin);
  await writeFile(path.join(bin, 'neuron-ls'), '#!/bin/sh\necho \'[{"nc_count": 2}, {"nc_count": 2}]\'\n', { mode: 0o755 });
  t.equal(await countNeuronCores('ml.trn1.2xlarge', { PATH: bin }), 4, 'the sum of nc_count from neuron-ls -j');
});
