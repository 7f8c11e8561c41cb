// grpc_client.js - the Node.js @grpc/grpc-js client of tests/h2/grpc_test.py:
// one call as its JSON argument says (the same spec as grpc_client.py), its
// outcome as one JSON line on stdout: status code name, details, elapsed
// seconds, messages received. Generic calls on raw bytes (no generated code).
// usage: node grpc_client.js MODULES_DIR SPEC_JSON
'use strict';
const path = require('path');
const fs = require('fs');
const grpc = require(path.join(process.argv[2], '@grpc/grpc-js'));

const SVC = 'faultnet.test.Echo';
const RETRY = { methodConfig: [{ name: [{ service: SVC }], retryPolicy: {
  maxAttempts: 4, initialBackoff: '0.05s', maxBackoff: '0.2s', backoffMultiplier: 2,
  retryableStatusCodes: ['UNAVAILABLE'] } }] };
const CODES = Object.fromEntries(Object.entries(grpc.status).map(([k, v]) => [v, k]));
const raw = (b) => b;

const spec = JSON.parse(process.argv[3]);
const opts = { 'grpc.enable_retries': spec.retry ? 1 : 0 };
if (spec.retry) opts['grpc.service_config'] = JSON.stringify(RETRY);
if (spec.call === 'flood') {
  // A ping every 20 ms with or without calls: the server's policy answers.
  Object.assign(opts, { 'grpc.keepalive_time_ms': 20, 'grpc.keepalive_timeout_ms': 5000,
    'grpc.keepalive_permit_without_calls': 1 });
}
let creds = grpc.credentials.createInsecure();
if (spec.tls) {
  creds = grpc.credentials.createSsl(spec.tls.roots ? fs.readFileSync(spec.tls.roots) : null);
  opts['grpc.ssl_target_name_override'] = spec.tls.name;
}
const client = new grpc.Client(spec.target, creds, opts);
const deadline = () => new Date(Date.now() + 1000 * (spec.deadline || 10));
const out = { code: 'OK', details: '', got: 0 };
const t0 = process.hrtime.bigint();

function done(err) {
  if (err) { out.code = CODES[err.code] || String(err.code); out.details = err.details || ''; }
  out.elapsed = Math.round(Number(process.hrtime.bigint() - t0) / 1e6) / 1000;
  process.stdout.write(JSON.stringify(out) + '\n');
  client.close();
}

const method = '/' + SVC + '/' + (spec.method || 'Unary');
if (spec.call === 'unary' || spec.call === 'flood') {
  const msg = spec.payload || 'ping';
  client.makeUnaryRequest(method, raw, raw, Buffer.from(msg), new grpc.Metadata(),
    { deadline: deadline() }, (err, r) => {
      if (!err) out.got = r.toString() === msg ? 1 : -1;
      done(err);
    });
} else {
  const n = spec.call === 'cancel' ? 200 : (spec.n || 5);
  const call = client.makeServerStreamRequest('/' + SVC + '/Stream', raw, raw,
    Buffer.from(String(n)), new grpc.Metadata(), { deadline: deadline() });
  call.on('data', (m) => {
    out.got += m.toString() === 'm' + out.got ? 1 : 1000;
    if (spec.call === 'cancel' && out.got === 1) call.cancel();
  });
  let ended = false;
  const end = (err) => {
    if (ended) return;
    ended = true;
    // After a cancel, time for the RST_STREAM to leave before exit.
    setTimeout(() => done(err), spec.call === 'cancel' ? 300 : 0);
  };
  call.on('error', end);
  call.on('status', (s) => { if (s.code === 0) end(null); });
}
