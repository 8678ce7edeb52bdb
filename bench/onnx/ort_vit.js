// The ONNX Runtime peer of bench/run.sh (bench tooling only): the exported ViT's forward + class-token map,
// ms per image at batch B on THREADS intra-op threads, best and median of ITERS after a warm-up.
//
//   node bench/onnx/ort_vit.js MODEL.onnx B ITERS THREADS [CHECK.bin]
//
// The input is bench's check pattern (attnmap_bench check writes attnmap's map for it): element i of the
// (B, 3, S, S) batch is ((i * 7919) % 1000) / 500 - 1, exact in float32 in both programs. With CHECK.bin
// (attnmap's maps, float32 (B, N)), prints the largest absolute difference and exits 1 above 1e-4.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const [model, bs, its, ths, check] = process.argv.slice(2);
  const B = parseInt(bs, 10), iters = parseInt(its, 10), threads = parseInt(ths, 10);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const size = parseInt(process.env.ORT_SIZE || '224', 10);  // image side in pixels (bench/run.sh sets it)
  const n = B * 3 * size * size;
  const data = new Float32Array(n);
  for (let i = 0; i < n; ++i) data[i] = ((i * 7919) % 1000) / 500 - 1;
  const feeds = { x: new ort.Tensor('float32', data, [B, 3, size, size]) };
  let out = await session.run(feeds);  // warm-up
  const times = [];
  for (let k = 0; k < iters; ++k) {
    const t0 = process.hrtime.bigint();
    out = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(`ort_ms_per_image_b${B}_t${threads} ${(times[0] / B).toFixed(2)}`);
  console.log(`ort_median_ms_per_image_b${B}_t${threads} ${(times[Math.floor(times.length / 2)] / B).toFixed(2)}`);
  if (check) {
    const m = out.map.data;
    const buf = fs.readFileSync(check);
    const ref = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
    if (ref.length !== m.length) throw new Error(`${check}: ${ref.length} floats, the model gives ${m.length}`);
    let d = 0;
    for (let i = 0; i < m.length; ++i) d = Math.max(d, Math.abs(m[i] - ref[i]));
    console.log(`ort_map_max_abs_diff_b${B} ${d.toExponential(3)}`);
    if (!(d <= 1e-4)) {
      console.error(`ort_vit: the map differs from attnmap's by ${d} (> 1e-4)`);
      process.exit(1);
    }
  }
}

main().catch((e) => { console.error(e.message || e); process.exit(2); });
