// node_client.js - Node's net module meeting a fault: prints which event
// came first and when, as "RESULT <event> <ms>".
// usage: node node_client.js connect|read HOST PORT TIMEOUT_MS
'use strict';
const net = require('net');

const [mode, host, port, timeout] = process.argv.slice(2);
const t0 = Date.now();
let done = false;
function report(what) {
  if (done) return;
  done = true;
  console.log(`RESULT ${what} ${Date.now() - t0}`);
  sock.destroy();
}

const sock = net.connect({ host, port: Number(port) });
sock.setTimeout(Number(timeout));
sock.on('connect', () => {
  if (mode === 'connect') return report('connect');
  sock.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
});
sock.on('data', () => report('data'));
sock.on('end', () => report('end'));
sock.on('timeout', () => report(mode === 'read' && sock.readyState === 'open' ? 'read-timeout' : 'connect-timeout'));
sock.on('error', (e) => report('error:' + e.code));
