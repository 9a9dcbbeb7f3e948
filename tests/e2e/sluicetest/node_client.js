// Node 20 `https` through a CONNECT proxy, with no npm package: Node has no
// built-in proxy agent, so TunnelAgent opens each connection as a CONNECT
// tunnel and runs TLS over it. keepAlive with one socket: sequential
// requests share one tunnel.
//
// usage: node node_client.js '{"proxy": "127.0.0.1:PORT", "ca": "PEM file",
//          "requests": [{"method": "GET", "url": "https://...", "headers": {}, "body": "..."}]}'
// prints {"results": [{"status", "headers", "body"}], "tunnels": N}, or
// {"error": "..."} and exits 1.
'use strict';
const fs = require('fs');
const http = require('http');
const https = require('https');
const tls = require('tls');

class TunnelAgent extends https.Agent {
  constructor(proxy, options) {
    super(options);
    const [host, port] = proxy.split(':');
    this.proxyHost = host;
    this.proxyPort = Number(port);
    this.tunnels = 0;
  }

  createConnection(options, callback) {
    const target = `${options.host}:${options.port || 443}`;
    const req = http.request({
      host: this.proxyHost, port: this.proxyPort, method: 'CONNECT', path: target,
      headers: { Host: target }, agent: false,
    });
    req.once('connect', (res, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        callback(new Error(`CONNECT ${target}: ${res.statusCode}`));
        return;
      }
      this.tunnels += 1;
      callback(null, tls.connect({
        socket, servername: options.servername || options.host, ca: options.ca,
        ALPNProtocols: ['http/1.1'],
      }));
    });
    req.once('error', callback);
    req.end();
  }
}

function one(agent, r) {
  return new Promise((resolve, reject) => {
    const req = https.request(r.url, { method: r.method || 'GET', headers: r.headers || {}, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({
        status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('latin1'),
      }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (r.body !== undefined) req.write(r.body);
    req.end();
  });
}

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const agent = new TunnelAgent(spec.proxy, {
    keepAlive: true, maxSockets: 1, ca: fs.readFileSync(spec.ca),
  });
  const results = [];
  for (const r of spec.requests) results.push(await one(agent, r));
  agent.destroy();
  process.stdout.write(JSON.stringify({ results, tunnels: agent.tunnels }));
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ error: String(e && e.message || e) }));
  process.exit(1);
});
