// node_client.js - Node's net module meeting a fault: prints which event
// came first and when, as "RESULT <event> <ms>".
// usage: node node_client.js connect|read|fetch HOST PORT TIMEOUT_MS [PATH]
// fetch reads an HTTP response to its end: "RESULT <event> <ms> <bytes> <chunks>".
'use strict';
const net = require('net');

const [mode, host, port, timeout] = process.argv.slice(2);
const t0 = Date.now();
let done = false;
let bytes = 0;
let chunks = 0;
function report(what) {
  if (done) return;
  done = true;
  const extra = mode === 'fetch' ? ` ${bytes} ${chunks}` : '';
  console.log(`RESULT ${what} ${Date.now() - t0}${extra}`);
  sock.destroy();
}

const sock = net.connect({ host, port: Number(port) });
sock.setTimeout(Number(timeout));
sock.on('connect', () => {
  if (mode === 'connect') return report('connect');
  if (mode === 'fetch') return sock.write(`GET ${process.argv[6]} HTTP/1.0\r\nHost: x\r\n\r\n`);
  sock.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
});
sock.on('data', (d) => {
  bytes += d.length;
  chunks++;
  if (mode !== 'fetch') report('data');
});
sock.on('end', () => report('end'));
sock.on('timeout', () => report(mode !== 'connect' && sock.readyState === 'open' ? 'read-timeout' : 'connect-timeout'));
sock.on('error', (e) => report('error:' + e.code));
