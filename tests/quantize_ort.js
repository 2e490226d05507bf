// Run a model in onnxruntime-node on .npy inputs and write every output as OUT_DIR/<name>.npy.
//   node tests/quantize_ort.js MODEL OUT_DIR NAME=FILE.npy...
// onnxruntime-node comes from $ONNXQ_ORT_DIR, else $ONNXQ_CACHE/node_modules, else
// ~/.cache/onnxq/node_modules. Exit 77 when it is missing (the caller skips).
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');
const cache = process.env.ONNXQ_CACHE || path.join(os.homedir(), '.cache', 'onnxq');
const dirs = [process.env.ONNXQ_ORT_DIR, path.join(cache, 'node_modules'), '/work/cache/node_modules'];
let ort = null;
for (const d of dirs) {
  if (!d) continue;
  try { ort = require(path.join(d, 'onnxruntime-node')); break; } catch (e) { /* next */ }
}
if (!ort) { console.log('SKIP: onnxruntime-node not found'); process.exit(77); }

function readNpy(file) {
  const b = fs.readFileSync(file);
  const hl = b.readUInt16LE(8);
  const header = b.slice(10, 10 + hl).toString('latin1');
  if (!/'descr': '<f4'/.test(header) || /'fortran_order': True/.test(header)) throw new Error(`${file}: need float32 C-order`);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const off = 10 + hl;
  const data = new Float32Array(b.buffer.slice(b.byteOffset + off, b.byteOffset + b.length));
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
  const sess = await ort.InferenceSession.create(model, { graphOptimizationLevel: level, intraOpNumThreads: 1 });
  const res = await sess.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  for (const name of sess.outputNames) writeNpy(path.join(outDir, name + '.npy'), res[name]);
})().catch(e => { console.error('onnxruntime:', e.message); process.exit(1); });
