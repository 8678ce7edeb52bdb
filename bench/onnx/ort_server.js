// The ONNX Runtime co-process of bench/folder_ort.py (bench tooling only): Python's onnxruntime is not
// installable on the bench machine, so the folder job's session lives here, in onnxruntime-node, and the
// Python script talks to it over pipes. ONE InferenceSession (intra-op threads = the usable cores, or
// THREADS; graph optimisation 'all'; sequential), then a loop of requests on stdin until EOF:
//
//   node bench/onnx/ort_server.js MODEL.onnx [THREADS]
//
// Protocol (all little-endian):
//   once, on start-up (session created): 8 bytes  "ORTREADY"
//   request:   uint32 B, uint32 S, then B*3*S*S float32  (the normalised (B, 3, S, S) batch, input "x");
//              B = 0 ends the loop
//   response:  uint32 ndim, ndim x uint32 dims, then prod(dims) float32  (the first output, "map":
//              (B, N) for bench/onnx/export.py's model, the last block's class-token map, mean over heads)
'use strict';
const fs = require('fs');
const os = require('os');
const ort = require('onnxruntime-node');

// Reads exactly n bytes from stdin (a pipe), waiting for data as it arrives.
class Reader {
  constructor(stream) {
    this.chunks = []; this.have = 0; this.ended = false; this.wake = null;
    stream.on('data', (c) => { this.chunks.push(c); this.have += c.length; this.poke(); });
    stream.on('end', () => { this.ended = true; this.poke(); });
  }
  poke() { if (this.wake) { const w = this.wake; this.wake = null; w(); } }
  async read(n) {
    while (this.have < n) {
      if (this.ended) return null;
      await new Promise((r) => { this.wake = r; });
    }
    const all = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.chunks = rest.length ? [rest] : [];
    this.have = rest.length;
    return out;
  }
}

function writeAll(buf) {  // synchronous: stdout is a pipe; retried on EAGAIN
  let off = 0;
  while (off < buf.length) {
    try {
      off += fs.writeSync(1, buf, off, buf.length - off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
    }
  }
}

async function main() {
  const [model, ths] = process.argv.slice(2);
  const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  const threads = ths ? parseInt(ths, 10) : cores;
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const input = session.inputNames[0], output = session.outputNames[0];
  writeAll(Buffer.from('ORTREADY'));
  const rd = new Reader(process.stdin);
  for (;;) {
    const h = await rd.read(8);
    if (h === null) break;
    const B = h.readUInt32LE(0), S = h.readUInt32LE(4);
    if (B === 0) break;
    const n = B * 3 * S * S;
    const raw = await rd.read(n * 4);
    if (raw === null) throw new Error('stdin ended inside a request');
    // A copy into an aligned Float32Array (the Buffer's offset need not be a multiple of 4).
    const x = new Float32Array(n);
    Buffer.from(x.buffer).set(raw);
    const out = (await session.run({ [input]: new ort.Tensor('float32', x, [B, 3, S, S]) }))[output];
    const dims = out.dims;
    const head = Buffer.alloc(4 * (1 + dims.length));
    head.writeUInt32LE(dims.length, 0);
    dims.forEach((d, i) => head.writeUInt32LE(d, 4 * (i + 1)));
    writeAll(head);
    const m = out.data;  // Float32Array
    writeAll(Buffer.from(m.buffer, m.byteOffset, m.byteLength));
  }
}

main().catch((e) => { console.error('ort_server: ' + (e.message || e)); process.exit(2); });
