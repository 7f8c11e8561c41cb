// s3_quota.js - the pinned @aws-sdk/client-s3 (tests/conformance) making
// GetObject calls on one client, run under the shim in front of a real
// server; prints one JSON line: the SDK's own count of sends per call
// ($metadata.attempts), each call's outcome, and its duration.
//
// usage: node s3_quota.js HOST PORT CALLS [default|fast] [MAX_ATTEMPTS]
//   HOST PORT: an http endpoint, path-style; HOST "https" (PORT ignored):
//   no endpoint option at all, the SDK's own default
//   (https://bucket.s3.us-east-1.amazonaws.com), virtual-hosted;
//   default: the client as an app would build it (the SDK's own backoff);
//   fast: the same standard retry strategy and quota, with zero backoff
//   delays, so that 60 throttled calls take seconds rather than minutes
//   (the quota's arithmetic does not depend on the delays).
'use strict';
const path = require('path');
const mods = path.join(__dirname, '..', 'conformance', 'node_modules');
const { S3Client, GetObjectCommand } = require(path.join(mods, '@aws-sdk/client-s3'));
const { StandardRetryStrategy } = require(path.join(mods, '@smithy/core/retry'));

const [host, port, calls, mode = 'default', maxAttempts = '3'] = process.argv.slice(2);
const config = {
  region: 'us-east-1',
  credentials: { accessKeyId: 'k', secretAccessKey: 's' }, maxAttempts: Number(maxAttempts),
  logger: { debug() {}, info() {}, warn() {}, error() {} },
};
if (host !== 'https')
  Object.assign(config, { endpoint: `http://${host}:${port}`, forcePathStyle: true });
if (mode === 'fast')
  config.retryStrategy = new StandardRetryStrategy({
    maxAttempts: Number(maxAttempts),
    backoff: { computeNextBackoffDelay: () => 0, setDelayBase() {} },
  });
const client = new S3Client(config);

async function main() {
  // extra_ca: the file Node.js read its extra roots from (faultctl run's).
  const out = { attempts: [], outcomes: [], ms: [], extra_ca: process.env.NODE_EXTRA_CA_CERTS };
  for (let i = 0; i < Number(calls); i++) {
    const t0 = Date.now();
    try {
      const r = await client.send(new GetObjectCommand({ Bucket: 'bucket', Key: `key-${i}` }));
      await r.Body.transformToByteArray();
      out.attempts.push(r.$metadata.attempts);
      out.outcomes.push('ok');
    } catch (e) {
      out.attempts.push(e.$metadata ? e.$metadata.attempts : -1);
      out.outcomes.push(e.name === 'Error' && e.code ? e.code : e.name);
    }
    out.ms.push(Date.now() - t0);
  }
  console.log(JSON.stringify(out));
}

main();
