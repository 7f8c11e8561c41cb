// index.js - faultnet from Node.js, no dependencies: change the faults of
// live processes (a group, or given pids), read their rules, counters and
// events, and start programs under the shim (spawnWithFaults). Everything
// goes through faultctl with --json: processes publish their state in
// files that faultctl reads, and take their changes from their group's
// journal, which faultctl writes (under flock(2), which Node.js cannot
// take) and checks.
'use strict';
const fs = require('fs');
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

class Faultnet {
  // ahead: changes are meant for processes that will join the group later;
  // without it a change to a group nobody has joined is refused.
  constructor({ group, pids, dir, faultctl, ahead } = {}) {
    this.ahead = !!ahead;
    this.group = group || process.env.FAULTNET_GROUP || 'default';
    this.pids = pids || [];
    this.dir = dir || rundir();
    this.faultctl = faultctl || 'faultctl';
  }

  // faultctl with the client's targets; resolves to its stdout.
  run(...args) {
    const sel = this.pids.length ? this.pids.flatMap((p) => ['-p', String(p)]) : ['-g', this.group, ...(this.ahead ? ['--ahead'] : [])];
    return new Promise((resolve, reject) => {
      execFile(this.faultctl, [...sel, ...args], { env: { ...process.env, FAULTNET_RUNDIR: this.dir } },
        (err, stdout, stderr) => (err ? reject(new FaultnetError((stderr || stdout || err.message).trim()))
          : resolve(stdout)));
    });
  }

  async query(verb) {
    const out = await this.run('--json', verb);
    return out.split('\n').filter((l) => l.startsWith('{')).map((l) => {
      const { type, ...fields } = JSON.parse(l);
      return { kind: type, ...fields };
    });
  }

  async targets() {
    try {
      return (await this.query('ps')).map((r) => ({ pid: r.pid, group: r.group })).sort((a, b) => a.pid - b.pid);
    } catch (e) {
      return [];
    }
  }

  async change(verb, ...args) {
    if ([verb, ...args].some((a) => /[\r\n\0]/.test(a))) throw new FaultnetError('a change is one line: no line breaks');
    await this.run(verb, ...args);
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
  // A rule's counter summed over the group's processes. A request rule
  // (respond, slow, abort) counts requests, never attempts (connects):
  // asking it for attempts is an error, not a silent 0.
  async count(rule, word) {
    const recs = (await this.stats()).filter((r) => r.kind === 'rule' && r.name === rule);
    const other = word === 'attempts' ? 'requests' : 'attempts';
    if (recs.some((r) => other in r && !(word in r)))
      throw new FaultnetError(`rule ${rule} counts ${other}, not ${word}: use ${other}()`);
    return recs.reduce((n, r) => n + (r[word] || 0), 0);
  }
  attempts(rule) { return this.count(rule, 'attempts'); }
  requests(rule) { return this.count(rule, 'requests'); }

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

// LD_PRELOAD with the shim first and what was there kept after it (an
// app's jemalloc, another preload); a sanitizer runtime already first stays
// first, as it must.
function preloadWith(lib, old) {
  const parts = (old || '').split(/[: ]/).filter((p) => p && p !== lib);
  const first = parts.length && /^lib(a|t|ub|l|hwa)san[.]so/.test(path.basename(parts[0])) ? [parts[0]] : [];
  return [...first, lib, ...parts.slice(first.length)].join(':');
}

// A child process under the shim, in the client's group.
function spawnWithFaults(fn, cmd, args = [], { config, zone, library, ...options } = {}) {
  const base = options.env || process.env;
  const env = { ...base, LD_PRELOAD: preloadWith(library || findLibrary(), base.LD_PRELOAD),
    FAULTNET_GROUP: fn.group, FAULTNET_RUNDIR: fn.dir };
  if (config) env.FAULTNET_CONFIG = path.resolve(config);
  if (zone) env.FAULTNET_ZONE = zone;
  return spawn(cmd, args, { ...options, env });
}

// node:test's fixture, as the pytest plugin's: a client of a fresh group
// for the test t, reset when the test ends, so that nothing a test changed
// outlives it. The group's name is made here, never misspelt: a change may
// come before the test's process has joined (ahead).
let serial = 0;
function faultnetFor(t, options = {}) {
  serial += 1;
  const fn = new Faultnet({ group: `nodetest-${process.pid}-${serial}`, ahead: true, ...options });
  t.after(async () => {
    try { await fn.reset(); } catch (e) { /* a group nothing changed */ }
  });
  return fn;
}

module.exports = { Faultnet, FaultnetError, spawnWithFaults, preloadWith, faultnetFor, ruleText, rundir };
