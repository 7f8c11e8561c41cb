// client.test.js - the Node.js helper against real processes under the
// shim (node:test): group changes, pid changes, typed records, withFault,
// spawnWithFaults, errors with the reason. Loopback only.
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Faultnet, FaultnetError, spawnWithFaults, preloadWith, faultnetFor, ruleText } = require('..');

const POLICY = `rules = (
  { name = "nat-lost"; action = "blackhole"; enabled = false; match = { to = "127.89.1.1/32"; }; },
  { name = "refused"; action = "refuse"; match = { to = "127.89.1.2/32"; }; }
);
`;
const AGENT = `
const net = require('net');
let buf = '';
process.stdin.on('data', (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\\n')) >= 0) {
    const ip = buf.slice(0, i); buf = buf.slice(i + 1);
    const s = net.connect({ host: ip, port: 9 });
    s.setTimeout(300, () => { s.destroy(); console.log('timeout'); });
    s.on('connect', () => { s.destroy(); console.log('connected'); });
    s.on('error', (e) => console.log(e.code));
  }
});
`;

function agent(fn, config) {
  const p = spawnWithFaults(fn, process.execPath, ['-e', AGENT], { config, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = [];
  const waiters = [];
  let buf = '';
  p.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const l = buf.slice(0, i); buf = buf.slice(i + 1);
      if (waiters.length) waiters.shift()(l); else lines.push(l);
    }
  });
  return {
    p,
    connect: (ip) => new Promise((resolve) => { waiters.push(resolve); p.stdin.write(ip + '\n'); }),
    ready: async () => { for (let i = 0; i < 100; i++) { if ((await fn.targets()).some((t) => t.pid === p.pid)) return; await new Promise((r) => setTimeout(r, 50)); } },
    close: () => p.kill(),
  };
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fn-node-'));
const config = path.join(dir, 'p.conf');
fs.writeFileSync(config, POLICY);

test('a group change reaches a live process, and is undone', async () => {
  const fn = new Faultnet({ group: `node-${process.pid}-1` });
  const a = agent(fn, config);
  await a.ready();
  try {
    assert.strictEqual(await a.connect('127.89.1.1'), 'ECONNREFUSED');
    await fn.enable('nat-lost');
    assert.strictEqual(await a.connect('127.89.1.1'), 'timeout');
    await fn.disable('nat-lost');
    assert.strictEqual(await a.connect('127.89.1.1'), 'ECONNREFUSED');
  } finally { a.close(); await fn.reset(); }
});

test('withFault adds and removes a rule; attempts are counted', async () => {
  const fn = new Faultnet({ group: `node-${process.pid}-2` });
  const a = agent(fn, config);
  await a.ready();
  try {
    await assert.rejects(fn.withFault('blackhole', { name: 'ctx', to: '127.89.1.3/32' }, async () => {
      assert.strictEqual(await a.connect('127.89.1.3'), 'timeout');
      throw new Error('inside');
    }), /inside/);
    assert.ok(!(await fn.rules()).some((r) => r.name === 'ctx'));
    for (let i = 0; i < 3; i++) assert.strictEqual(await a.connect('127.89.1.2'), 'ECONNREFUSED');
    assert.strictEqual(await fn.attempts('refused'), 3);
    const dest = (await fn.stats()).find((r) => r.kind === 'dest' && r.dest === '127.89.1.2:9');
    assert.strictEqual(dest.attempts, 3);
  } finally { a.close(); await fn.reset(); }
});

test('pid targets, and errors carry the reason', async () => {
  const g = new Faultnet({ group: `node-${process.pid}-3` });
  const a = agent(g, config);
  await a.ready();
  const fn = new Faultnet({ pids: [a.p.pid] });
  try {
    await fn.enable('nat-lost');
    assert.strictEqual(await a.connect('127.89.1.1'), 'timeout');
    await assert.rejects(fn.enable('no-such-rule'), FaultnetError);
    await assert.rejects(g.enable('no-such-rule'), /no-such-rule/);
    await assert.rejects(fn.change('enable', 'a\nrm b'), /one line/);
  } finally { a.close(); }
});

test('ruleText writes the policy syntax', () => {
  assert.strictEqual(ruleText('respond', { name: 'r', status: 503, host: '*.x.test' }).text,
    '{ name = "r"; action = "respond"; status = 503; match = { host = "*.x.test"; }; }');
});

// ---- issue 41: counts after exit, LD_PRELOAD kept, the node:test fixture ----

function exited(p) {
  return new Promise((resolve) => p.on('exit', (code) => resolve(code)));
}

const CONNECT3 = `
const net = require('net');
let left = 3;
const one = () => {
  const s = net.connect({ host: '127.89.1.2', port: 9 });
  s.on('error', () => { if (--left > 0) one(); else console.log(process.env.LD_PRELOAD); });
};
one();
`;

function libm() {
  for (const d of ['/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu', '/lib/aarch64-linux-gnu', '/lib64'])
    if (fs.existsSync(path.join(d, 'libm.so.6'))) return path.join(d, 'libm.so.6');
  throw new Error('no libm.so.6 to preload');
}

test('spawnWithFaults keeps LD_PRELOAD; attempts() counts a process that has exited', async (t) => {
  const fn = faultnetFor(t);
  const other = libm();
  const p = spawnWithFaults(fn, process.execPath, ['-e', CONNECT3],
    { config, env: { ...process.env, LD_PRELOAD: other }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout.on('data', (d) => { out += d; });
  assert.strictEqual(await exited(p), 0);
  const listed = out.trim().split(':');
  assert.strictEqual(path.basename(listed[0]), 'libfaultnet.so');
  assert.deepStrictEqual(listed.slice(1), [other]);
  assert.strictEqual(await fn.attempts('refused'), 3);
});

test('preloadWith: the shim first, what was there kept, a sanitizer runtime first', () => {
  assert.strictEqual(preloadWith('/x/libfaultnet.so', undefined), '/x/libfaultnet.so');
  assert.strictEqual(preloadWith('/x/libfaultnet.so', '/y/libjemalloc.so.2'), '/x/libfaultnet.so:/y/libjemalloc.so.2');
  assert.strictEqual(preloadWith('/x/libfaultnet.so', '/z/libasan.so.8 /x/libfaultnet.so:/y/a.so'),
    '/z/libasan.so.8:/x/libfaultnet.so:/y/a.so');
});

test('faultnetFor: a fresh group per test, reset when the test ends', async (t) => {
  let fn;
  let a;
  try {
    await t.test('inner', async (t2) => {
      fn = faultnetFor(t2);
      assert.match(fn.group, new RegExp(`^nodetest-${process.pid}-`));
      await fn.enable('nat-lost'); // before any process has joined: ahead
      a = agent(fn, config);
      await a.ready();
      assert.strictEqual(await a.connect('127.89.1.1'), 'timeout');
    });
    assert.notStrictEqual(faultnetFor(t).group, fn.group);
    assert.strictEqual(await a.connect('127.89.1.1'), 'ECONNREFUSED');
  } finally {
    if (a) a.close();
  }
});

test('a request rule counts requests(), and attempts() on it is an error', async (t) => {
  const http = require('http');
  const srv = http.createServer((q, r) => r.end('ok'));
  await new Promise((ok) => srv.listen(0, '127.89.1.3', ok));
  const port = srv.address().port;
  const conf = path.join(dir, 'r.conf');
  fs.writeFileSync(conf, `rules = ({ name = "r503"; action = "respond"; status = 503; ` +
    `match = { to = "127.89.1.3/32"; port = ${port}; path = "/fault"; }; });\n`);
  const fn = faultnetFor(t);
  const get3 = `const http = require('http'); let n = 0;
const one = () => http.get('http://127.89.1.3:${port}/fault', (r) => {
  if (r.statusCode !== 503) process.exit(1);
  r.resume(); r.on('end', () => (++n < 3 ? one() : process.exit(0)));
}).on('error', () => process.exit(2));
one();`;
  const p = spawnWithFaults(fn, process.execPath, ['-e', get3], { config: conf, stdio: 'inherit' });
  try {
    assert.strictEqual(await exited(p), 0);
    assert.strictEqual(await fn.requests('r503'), 3);
    await assert.rejects(fn.attempts('r503'), /counts requests, not attempts/);
  } finally {
    srv.close();
  }
});
