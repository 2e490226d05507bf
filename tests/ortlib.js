// Shared by the node scripts that drive onnxruntime-node in tests, models/ and bench/.
//   const { ort, readNpy, readNpyF32, writeNpy, randomInput } = require('.../tests/ortlib.js');
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
  console.log(`SKIP: onnxruntime-node not found under ${ortDir} (set ONNXQ_ORT_DIR): ${e.message.split('\n')[0]}`);
  process.exit(77);
}

// .npy dtypes (little-endian) the scripts read and write, as typed arrays.
const NPY_TYPES = { '<f4': Float32Array, '|u1': Uint8Array, '|i1': Int8Array, '<i8': BigInt64Array };

// A C-order .npy file (format version 1 to 3) of one of NPY_TYPES as
// { data: TypedArray, shape: number[], descr: string }.
function readNpy(file) {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = b[6];
  const hl = major >= 2 ? b.readUInt32LE(8) : b.readUInt16LE(8);
  const off = (major >= 2 ? 12 : 10) + hl;
  const header = b.toString('latin1', off - hl, off);
  const descr = (header.match(/'descr':\s*'([^']*)'/) || [])[1];
  const Type = NPY_TYPES[descr];
  if (!Type || /'fortran_order':\s*True/.test(header)) {
    throw new Error(`${file}: need C order and one of ${Object.keys(NPY_TYPES).join(' ')}: ${header.trim()}`);
  }
  const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const data = new Type(b.buffer.slice(b.byteOffset + off, b.byteOffset + b.length));
  const n = shape.reduce((x, y) => x * y, 1);
  if (data.length !== n) throw new Error(`${file}: ${data.length} elements, shape [${shape}] needs ${n}`);
  return { data, shape, descr };
}

// readNpy restricted to float32.
function readNpyF32(file) {
  const t = readNpy(file);
  if (t.descr !== '<f4') throw new Error(`${file}: need float32, have ${t.descr}`);
  return t;
}

// Writes a Float32Array, Uint8Array or Int8Array as a version 1 .npy file of shape dims.
function writeNpy(file, data, dims) {
  const descr = Object.keys(NPY_TYPES).find(k => data instanceof NPY_TYPES[k]);
  if (!descr) throw new Error(`${file}: cannot write ${data.constructor.name} as .npy`);
  let h = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims.join(', ')}${dims.length === 1 ? ',' : ''}), }`;
  const total = 10 + h.length + 1;
  h += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const pre = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, h.length & 0xff, h.length >> 8]);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(h, 'latin1'),
                                        Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

// n deterministic floats in [0, 1) from a small LCG, independent of both runtimes.
function randomInput(n, seed) {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = (s >>> 8) / 16777216;
  }
  return a;
}

module.exports = { ort, ortDir, readNpy, readNpyF32, writeNpy, randomInput };
