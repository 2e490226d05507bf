// Run a model in onnxruntime-node on .npy inputs and write every output as OUT_DIR/<name>.npy.
//   node tests/quantize_ort.js MODEL OUT_DIR NAME=FILE.npy...
// onnxruntime-node is found by tests/ortlib.js; exit 77 when it is missing (the caller skips).
// ONNXQ_ORT_OPT: graph optimization level (default all); ONNXQ_ORT_OPTIMIZED=FILE: also
// write the model as onnxruntime optimized it (to see which nodes it fused).
'use strict';
const fs = require('fs');
const path = require('path');
const { ort, readNpyF32 } = require(path.join(__dirname, 'ortlib.js'));

function readNpy(file) {
  const { data, shape } = readNpyF32(file);
  return new ort.Tensor('float32', data, shape);
}

function writeNpy(file, t) {
  const descr = { float32: '<f4', uint8: '|u1', int8: '|i1', int64: '<i8', int32: '<i4' }[t.type];
  if (!descr) throw new Error(`output type ${t.type} not supported`);
  let h = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${t.dims.join(', ')}${t.dims.length === 1 ? ',' : ''}), }`;
  const total = 10 + h.length + 1;
  h += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1; head[7] = 0;
  head.writeUInt16LE(h.length, 8);
  const data = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(h, 'latin1'), data]));
}

(async () => {
  const [model, outDir, ...ins] = process.argv.slice(2);
  const feeds = {};
  for (const a of ins) {
    const k = a.indexOf('=');
    feeds[a.slice(0, k)] = readNpy(a.slice(k + 1));
  }
  const level = process.env.ONNXQ_ORT_OPT || 'all';
  const opts = { graphOptimizationLevel: level, intraOpNumThreads: 1 };
  if (process.env.ONNXQ_ORT_OPTIMIZED) { /* without the warning that such a file is machine-specific */
    opts.optimizedModelFilePath = process.env.ONNXQ_ORT_OPTIMIZED;
    opts.logSeverityLevel = 3;
  }
  const sess = await ort.InferenceSession.create(model, opts);
  const res = await sess.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  for (const name of sess.outputNames) writeNpy(path.join(outDir, name + '.npy'), res[name]);
})().catch(e => { console.error('onnxruntime:', e.message); process.exit(1); });
