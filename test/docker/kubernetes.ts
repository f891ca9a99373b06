/**
 * docker/kubernetes/*.yaml parse, and hold what docker/README.md and their comments promise:
 * FastFile through a FUSE device plugin (resource request, SYS_ADMIN, no privileged and no
 * hostPath /dev/fuse, which the device cgroup would refuse), volumes at /opt/ml/input and
 * /opt/ml/output (not /opt/ml, which would hide /opt/ml/code), a /readyz readiness probe on
 * the metrics port, a PodMonitor that selects the Job's pods and names that port, and the
 * device plugin's resource name matching the Job's request.
 */
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

const dir = new URL('../../docker/kubernetes/', import.meta.url);
type Obj = Record<string, any>;
const docs: Obj[] = [];
for (const f of readdirSync(dir).filter((n) => n.endsWith('.yaml'))) {
  for (const d of parseAllDocuments(readFileSync(new URL(f, dir), 'utf8'))) {
    t.same(d.errors, [], `${f} parses`);
    docs.push({ ...(d.toJS() as Obj), file: f });
  }
}
const find = (kind: string) => docs.filter((d) => d.kind === kind);

t.test('the Indexed Job', async (t) => {
  const [job] = find('Job');
  t.ok(job, 'a Job');
  t.equal(job!.spec.completionMode, 'Indexed');
  const pod = job!.spec.template.spec;
  const c = pod.containers[0];
  const env = Object.fromEntries((c.env ?? []).map((e: Obj) => [e.name, e.value]));
  t.equal(Number(env.SLUICE_HOST_COUNT), job!.spec.completions, 'SLUICE_HOST_COUNT = completions');

  // FUSE: device plugin, not privileged, no hostPath /dev/fuse.
  t.equal(String(c.resources.limits['squat.ai/fuse']), '1', 'requests /dev/fuse from the device plugin');
  t.notOk(c.securityContext.privileged, 'not privileged');
  t.ok(c.securityContext.capabilities.add.includes('SYS_ADMIN'), 'SYS_ADMIN for mount(2)');
  t.equal(c.securityContext.appArmorProfile?.type, 'Unconfined');
  t.notOk((pod.volumes ?? []).some((v: Obj) => v.hostPath?.path === '/dev/fuse'), 'no hostPath /dev/fuse (EPERM without privileged)');

  // Volumes: input and output, never /opt/ml itself or the code folder.
  const mounts = c.volumeMounts.map((m: Obj) => m.mountPath);
  t.ok(mounts.includes('/opt/ml/input'));
  t.ok(mounts.includes('/opt/ml/output'));
  t.notOk(mounts.some((p: string) => p === '/opt/ml' || p === '/opt/ml/' || p.startsWith('/opt/ml/code')), 'does not hide /opt/ml/code');
  for (const m of c.volumeMounts) t.ok(pod.volumes.some((v: Obj) => v.name === m.name), `volume ${m.name} is declared`);

  // Readiness and metrics.
  const port = c.ports.find((p: Obj) => p.name === 'metrics');
  t.equal(port?.containerPort, 9400);
  t.same(c.readinessProbe.httpGet, { path: '/readyz', port: 'metrics' });
  // Issue 45: the liveness probe docs/METRICS.md promises.
  t.same(c.livenessProbe?.httpGet, { path: '/healthz', port: 'metrics' }, 'liveness on /healthz');
  const metricsMd = readFileSync(new URL('../../docs/METRICS.md', import.meta.url), 'utf8');
  t.match(metricsMd, /livenessProbe:[^\n]*\n\s*httpGet: \{ path: \/healthz, port: metrics \}/, 'as docs/METRICS.md shows it');
  t.equal(job!.spec.template.metadata.annotations['prometheus.io/port'], String(port.containerPort));
  t.equal(c.args[c.args.indexOf('--input-data-config') + 1], `${c.volumeMounts.find((m: Obj) => m.name === 'channels').mountPath}/channels.json`, 'channels file from the ConfigMap');
});

t.test('the PodMonitor selects the Job\'s pods and scrapes the metrics port', async (t) => {
  const [pm] = find('PodMonitor');
  const [job] = find('Job');
  t.equal(pm!.apiVersion, 'monitoring.coreos.com/v1');
  const labels = job!.spec.template.metadata.labels;
  for (const [k, v] of Object.entries(pm!.spec.selector.matchLabels)) t.equal(labels[k], v, `pod label ${k}`);
  t.same(pm!.spec.podMetricsEndpoints.map((e: Obj) => [e.port, e.path]), [['metrics', '/metrics']]);
  // Issue 45: the job label tells Jobs apart: it comes from the pod label Kubernetes sets to the Job's name.
  t.equal(pm!.spec.jobLabel, 'job-name', 'job label from the pod\'s job-name label');
});

t.test('the device plugin advertises the resource the Job requests', async (t) => {
  const [ds] = find('DaemonSet');
  const c = ds!.spec.template.spec.containers[0];
  t.match(c.image, /generic-device-plugin/);
  // Issue 45: a pinned image, not privileged, not on every node.
  t.match(c.image, /@sha256:[0-9a-f]{64}$|:v?\d+\.\d+/, 'image pinned to a digest or a release');
  t.notOk(c.image.endsWith(':latest'), 'not :latest');
  t.not(c.securityContext?.privileged, true, 'not privileged');
  t.equal(c.securityContext?.allowPrivilegeEscalation, false);
  t.same(c.securityContext?.capabilities?.drop, ['ALL'], 'every capability dropped');
  t.ok(c.volumeMounts.find((m: Obj) => m.mountPath === '/dev')?.readOnly, '/dev read-only');
  const sel = ds!.spec.template.spec.nodeSelector as Obj | undefined;
  t.ok(sel && Object.keys(sel).length > 0, 'a nodeSelector: only the nodes that run FastFile pods');
  t.match(readFileSync(new URL('../../docker/README.md', import.meta.url), 'utf8'), new RegExp(`${Object.keys(sel ?? {})[0]}=${Object.values(sel ?? {})[0]}`), 'docker/README.md names the node label');
  const { parse } = await import('yaml');
  const device = parse(c.args[c.args.indexOf('--device') + 1]) as Obj;
  t.equal(`squat.ai/${device.name}`, 'squat.ai/fuse');
  t.same(device.groups[0].paths, [{ path: '/dev/fuse' }]);
  t.ok(ds!.spec.template.spec.volumes.some((v: Obj) => v.hostPath?.path === '/var/lib/kubelet/device-plugins'), 'registers with the kubelet');
});

t.test('docker/README.md explains both FUSE setups and says which the example uses', async (t) => {
  const readme = readFileSync(new URL('../../docker/README.md', import.meta.url), 'utf8');
  t.match(readme, /device plugin/i);
  t.match(readme, /privileged: true/);
  t.match(readme, /example uses the device plugin/i);
  t.match(readme, /\/dev\/fd\/N/);
  t.match(readme, /Bases checked/i);
  // FastFile refuses ShardedByS3Key (src/channels/input-config.ts): the page must not say it shards.
  t.notMatch(readme, /ShardedByS3Key[^.]*work[^.]*as with FastFile/i, 'does not say FastFile shards by key');
  t.match(readme, /FastFile[^.]*refuses\s+ShardedByS3Key/, 'says FastFile refuses it');
});
