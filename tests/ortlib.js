// Shared by the node scripts that drive onnxruntime-node in tests and models/.
//   const { ort, readNpyF32 } = require('.../tests/ortlib.js');
// onnxruntime-node is taken from $ONNXQ_ORT_DIR, else $ONNXQ_CACHE/node_modules
// (ONNXQ_CACHE defaults to ~/.cache/onnxq, where .ci/fetch-models.sh installs it).
// When it is missing the process prints SKIP and exits 77 (callers skip).
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');

const cache = process.env.ONNXQ_CACHE || path.join(os.homedir(), '.cache', 'onnxq');
const ortDir = process.env.ONNXQ_ORT_DIR || path.join(cache, 'node_modules');
let ort;
try {
  ort = require(path.join(ortDir, 'onnxruntime-node'));
} catch (e) {
  console.log(`SKIP: onnxruntime-node not found under ${ortDir}`);
  process.exit(77);
}

// A float32, C-order .npy file as { data: Float32Array, shape: number[] }.
function readNpyF32(file) {
  const b = fs.readFileSync(file);
  const hl = b.readUInt16LE(8);
  const header = b.slice(10, 10 + hl).toString('latin1');
  if (!/'descr': '<f4'/.test(header) || /'fortran_order': True/.test(header)) throw new Error(`${file}: need float32 C-order`);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const off = 10 + hl;
  const data = new Float32Array(b.buffer.slice(b.byteOffset + off, b.byteOffset + b.length));
  return { data, shape };
}

module.exports = { ort, readNpyF32 };
