// index.js - faultnet from Node.js, no dependencies: change the faults of
// live processes (a group, or given pids), read their rules, counters and
// events, and start programs under the shim (spawnWithFaults). Queries and
// changes to pids speak the control protocol over the processes' Unix
// sockets; a change to a group goes through `faultctl -g GROUP ...`, since
// the group's journal is guarded by flock(2), which Node.js cannot take.
'use strict';
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const { execFile, spawn } = require('child_process');

class FaultnetError extends Error {}

function rundir() {
  if (process.env.FAULTNET_RUNDIR) return process.env.FAULTNET_RUNDIR;
  if (process.env.XDG_RUNTIME_DIR) return path.join(process.env.XDG_RUNTIME_DIR, 'faultnet');
  const tmp = `/tmp/faultnet-${process.geteuid()}`;
  try {
    const st = fs.lstatSync(tmp);
    if (st.uid === process.geteuid() && !(st.mode & 0o077)) return tmp;
  } catch (e) {
    return tmp;
  }
  return path.join(os.homedir(), '.faultnet-run');
}

// 'a=1 b="x y"' -> { a: 1, b: 'x y' }, C escapes undone.
function parseRecord(line) {
  const sp = line.indexOf(' ');
  const rec = { kind: sp < 0 ? line : line.slice(0, sp) };
  const re = /([^\s=]+)=("((?:[^"\\]|\\.)*)"|\S*)/g;
  let m;
  while ((m = re.exec(sp < 0 ? '' : line.slice(sp + 1)))) {
    let v = m[3] !== undefined
      ? m[3].replace(/\\x([0-9a-fA-F]{2})/g, (_, h) => String.fromCharCode(parseInt(h, 16)))
          .replace(/\\(.)/g, (_, c) => ({ n: '\n', t: '\t', r: '\r' })[c] || c)
      : m[2];
    rec[m[1]] = /^(0|[1-9][0-9]*)$/.test(v) ? Number(v) : v;
  }
  return rec;
}

// A rule in the policy file's syntax from an action and keys; match keys
// (to, port, proto, from_zone, to_zone, host, method, path) go in match.
function ruleText(action, keys = {}) {
  const matchKeys = ['to', 'port', 'proto', 'from_zone', 'to_zone', 'host', 'method', 'path'];
  const value = (v) => (typeof v === 'boolean' || typeof v === 'number' ? String(v)
    : Array.isArray(v) ? `[ ${v.map(value).join(', ')} ]`
      : `"${String(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`);
  const name = keys.name || `js-${action}-${process.pid}-${Date.now() % 100000}`;
  const parts = [`name = ${value(name)};`, `action = ${value(action)};`];
  const match = [];
  for (const [k, v] of Object.entries(keys)) {
    if (k === 'name') continue;
    (matchKeys.includes(k) ? match : parts).push(`${k} = ${value(v)};`);
  }
  if (match.length) parts.push(`match = { ${match.join(' ')} };`);
  return { text: `{ ${parts.join(' ')} }`, name };
}

function request(sockPath, line, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const s = net.connect(sockPath);
    let buf = '';
    const done = (t) => /^(ok|error)/.test(t) ? t.endsWith('\n') : t === 'end\n' || t.endsWith('\nend\n');
    s.setTimeout(timeoutMs, () => { s.destroy(); reject(new FaultnetError(`no reply from ${sockPath}`)); });
    s.on('connect', () => s.write(line + '\n'));
    s.on('data', (d) => { buf += d; if (done(buf)) { s.end(); resolve(buf); } });
    s.on('error', (e) => reject(new FaultnetError(`${sockPath}: ${e.message}`)));
    s.on('end', () => resolve(buf));
  });
}

class Faultnet {
  constructor({ group, pids, dir, faultctl } = {}) {
    this.group = group || process.env.FAULTNET_GROUP || 'default';
    this.pids = pids || [];
    this.dir = dir || rundir();
    this.faultctl = faultctl || 'faultctl';
  }

  async targets() {
    let names = [];
    try { names = fs.readdirSync(this.dir); } catch (e) { return []; }
    const out = [];
    for (const n of names) {
      const m = /^(.+)\.(\d+)\.sock$/.exec(n);
      if (!m) continue;
      const pid = Number(m[2]);
      if (this.pids.length ? !this.pids.includes(pid) : m[1] !== this.group) continue;
      out.push({ pid, group: m[1], path: path.join(this.dir, n) });
    }
    return out.sort((a, b) => a.pid - b.pid);
  }

  async query(verb) {
    const recs = [];
    for (const t of await this.targets()) {
      let text;
      try { text = await request(t.path, verb); } catch (e) { continue; } // gone meanwhile
      for (const line of text.split('\n')) {
        if (line.startsWith('error')) throw new FaultnetError(`process ${t.pid}: ${line.slice(6)}`);
        if (line && line !== 'end' && !line.startsWith('ok')) recs.push(parseRecord(line));
      }
    }
    return recs;
  }

  async change(verb, ...args) {
    if ([verb, ...args].some((a) => /[\r\n\0]/.test(a))) throw new FaultnetError('a change is one line: no line breaks');
    if (this.pids.length) {
      const bad = [];
      let line = [verb, ...args].join(' ');
      if (verb === 'enable') line += ` since=${Date.now()}`;
      for (const t of await this.targets()) {
        const r = await request(t.path, line);
        if (!r.startsWith('ok')) bad.push(`process ${t.pid}: ${r.trim()}`);
      }
      if (bad.length) throw new FaultnetError(bad.join('; '));
      return;
    }
    await new Promise((resolve, reject) => {
      execFile(this.faultctl, ['-g', this.group, verb, ...args], { env: { ...process.env, FAULTNET_RUNDIR: this.dir } },
        (err, stdout, stderr) => (err ? reject(new FaultnetError((stderr || stdout || err.message).trim())) : resolve()));
    });
  }

  enable(name) { return this.change('enable', name); }
  disable(name) { return this.change('disable', name); }
  rm(name) { return this.change('rm', name); }
  load(file) { return this.change('load', file); }
  zone(z) { return this.change('zone', z); }
  reset() { return this.change('reset'); }
  add(rule, keys) {
    const text = typeof rule === 'string' && rule.trim().startsWith('{') ? rule : ruleText(rule, keys).text;
    return this.change('add', text.replace(/\s+/g, ' '));
  }

  async rules() { return (await this.query('rules')).filter((r) => r.kind === 'rule'); }
  stats() { return this.query('stats'); }
  async events() { return (await this.query('events')).filter((r) => r.kind === 'event'); }
  async attempts(rule) {
    return (await this.stats()).filter((r) => r.kind === 'rule' && r.name === rule)
      .reduce((n, r) => n + (r.attempts || 0), 0);
  }

  // Runs fn with a rule added, and removes it afterwards, even if fn throws.
  async withFault(action, keys, fn) {
    const { text, name } = ruleText(action, keys);
    await this.add(text);
    try { return await fn(name); } finally { await this.rm(name); }
  }
}

function findLibrary() {
  if (process.env.FAULTNET_LIBRARY) return process.env.FAULTNET_LIBRARY;
  for (const d of (process.env.PATH || '').split(':')) {
    const ctl = path.join(d, 'faultctl');
    if (!fs.existsSync(ctl)) continue;
    const real = fs.realpathSync(ctl);
    for (const lib of [path.join(path.dirname(real), 'libfaultnet.so'), path.join(path.dirname(real), '..', 'lib', 'libfaultnet.so')])
      if (fs.existsSync(lib)) return path.resolve(lib);
  }
  throw new FaultnetError('libfaultnet.so not found: set FAULTNET_LIBRARY or put faultctl on PATH');
}

// A child process under the shim, in the client's group.
function spawnWithFaults(fn, cmd, args = [], { config, zone, library, ...options } = {}) {
  const env = { ...(options.env || process.env), LD_PRELOAD: library || findLibrary(),
    FAULTNET_GROUP: fn.group, FAULTNET_RUNDIR: fn.dir };
  if (config) env.FAULTNET_CONFIG = path.resolve(config);
  if (zone) env.FAULTNET_ZONE = zone;
  return spawn(cmd, args, { ...options, env });
}

module.exports = { Faultnet, FaultnetError, spawnWithFaults, ruleText, parseRecord, rundir };
