// node_clients.js - Node.js clients meeting a fault; prints
// "RESULT <error> <ms> [<attempts the client reports>]".
// usage: node node_clients.js net|fetch|axios|s3|s3-warn HOST PORT [PATH]
'use strict';
const net = require('net');
const [mode, host, port, path = '/'] = process.argv.slice(2);
const t0 = Date.now();
const done = (name, attempts) => {
  console.log(`RESULT ${name} ${Date.now() - t0}${attempts ? ' ' + attempts : ''}`);
  process.exit(0);
};

function viaNet() {
  const s = net.connect({ host, port: Number(port) });
  s.setTimeout(2000);
  s.on('connect', () => s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`));
  s.on('timeout', () => done(s.connecting ? 'ConnectTimeout' : 'ReadTimeout'));
  s.on('data', () => done('ok'));
  s.on('error', (e) => done(e.code));
}

async function viaFetch() {
  try {
    const r = await fetch(`http://${host}:${port}${path}`, { signal: AbortSignal.timeout(2000) });
    await r.arrayBuffer();
    done('ok');
  } catch (e) {
    done(e.name);
  }
}

// axios with a 2 s timeout (connect and response together).
async function viaAxios() {
  const axios = require('axios');
  try {
    await axios.get(`http://${host}:${port}${path}`, { timeout: 2000 });
    done('ok');
  } catch (e) {
    done(e.code || e.name);
  }
}

// Story 3: the S3 client against a silent peer. With throwOnRequestTimeout
// the request timeout fails the call, and the SDK retries (maxAttempts 3);
// without it ("s3-warn") the timeout only warns and the call never ends.
async function viaS3(throwing) {
  const { S3Client, ListBucketsCommand } = require('@aws-sdk/client-s3');
  const client = new S3Client({
    endpoint: `http://${host}:${port}`, region: 'us-east-1', forcePathStyle: true,
    credentials: { accessKeyId: 'k', secretAccessKey: 's' }, maxAttempts: 3,
    requestHandler: { connectionTimeout: 1000, requestTimeout: 2000, throwOnRequestTimeout: throwing },
    logger: { debug() {}, info() {}, warn() {}, error() {} },
  });
  if (!throwing) setTimeout(() => done('still-pending'), 8000);
  try {
    await client.send(new ListBucketsCommand({}));
    done('ok');
  } catch (e) {
    done(e.name, e.$metadata && e.$metadata.attempts);
  }
}

({ net: viaNet, fetch: viaFetch, axios: viaAxios, s3: () => viaS3(true), 's3-warn': () => viaS3(false) })[mode]();
