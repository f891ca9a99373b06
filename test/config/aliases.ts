/** Issue 45: mount-s3, s3fs and AWS CLI option names (src/config/aliases.ts) as parseOptions sees them. */
import t from 'tap';
import { translateAliases } from '../../src/config/aliases.js';
import { parseOptions, type OptionName } from '../../src/config/options.js';
import { InvalidArgumentError } from '../../src/errors.js';

const MOUNT = ['endpoint', 'pathStyle', 'logLevel', 'allowOther', 'allowRoot', 'uid', 'gid', 'fileMode', 'dirMode', 'daemon', 'cacheDir', 'region', 'profile', 'requesterPays', 'noSignRequest'] as const satisfies readonly OptionName[];
const parse = (argv: string[]) => parseOptions('mount', argv, MOUNT, {}, {});

t.test('renamed flags', async (t) => {
  const p = parse(['--endpoint-url', 'http://m:9000', '--force-path-style', '--debug', '--cache', '/nvme/c']);
  t.equal(p.options.endpoint, 'http://m:9000');
  t.equal(p.options.pathStyle, true);
  t.equal(p.options.logLevel, 'debug');
  t.equal(p.options.cacheDir, '/nvme/c');
  t.equal(parse(['--endpoint-url=http://x:1']).options.endpoint, 'http://x:1', '--flag=value form');
  t.equal(parse(['-d']).options.logLevel, 'debug', "s3fs's -d");
});

t.test('flags asking for what sluice does anyway are accepted', async (t) => {
  const p = parse(['--foreground', '-f', '--read-only', 'a', 'b']);
  t.same(p.positionals, ['a', 'b']);
  t.equal(p.options.daemon, false);
});

t.test('-o mount options', async (t) => {
  const p = parse(['-o', 'allow_other,uid=1000,gid=100,umask=027,ro,nonempty,_netdev', '-o', 'url=http://s:1,use_path_request_style,endpoint=eu-west-1,profile=team,requester_pays,public_bucket=1,dbglevel=warn']);
  t.equal(p.options.allowOther, true);
  t.equal(p.options.uid, 1000);
  t.equal(p.options.gid, 100);
  t.equal(p.options.dirMode, 0o550);
  t.equal(p.options.fileMode, 0o440);
  t.equal(p.options.endpoint, 'http://s:1');
  t.equal(p.options.pathStyle, true);
  t.equal(p.options.region, 'eu-west-1');
  t.equal(p.options.profile, 'team');
  t.equal(p.options.requesterPays, true);
  t.equal(p.options.noSignRequest, true);
  t.equal(p.options.logLevel, 'warn');
  t.equal(parse(['-oallow_root']).options.allowRoot, true, '-oOPTS joined');
  t.throws(() => parse(['-o', 'big_writes']), { message: /unknown -o option "big_writes"/ });
  t.throws(() => parse(['-o', 'rw']), { message: /-o rw: sluice mounts are read-only/ });
  t.throws(() => parse(['-o', 'uid=me']), { message: /uid.*"me" is not an integer/ });
  t.throws(() => parse(['-o', 'umask=9']), { message: /-o umask=9: bad value/ });
  t.throws(() => parse(['-o']), InvalidArgumentError);
});

t.test('refused flags say why', async (t) => {
  t.throws(() => parse(['--bind', 'eth0']), { message: /--bind .*no sluice counterpart/ });
  t.throws(() => parse(['--allow-delete']), { message: /read-only/ });
});

t.test('an alias applies only where its target is a flag of the command', async (t) => {
  const takesNothing = () => false;
  t.same(translateAliases(['-f', '--debug', '-o', 'x'], 'status', takesNothing), ['-f', '--debug', '-o', 'x']);
  t.throws(() => parseOptions('status', ['-f'], ['metricsPort'], {}, {}), { message: /unknown option '-f'/i });
});
