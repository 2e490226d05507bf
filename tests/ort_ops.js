// Single-operator models (tests/ort_ops/*.onnx, made by make_models.py) run in onnxq
// and in onnxruntime-node on the same seeded random inputs; outputs must agree within
// rtol 1e-4 / atol 1e-5.
//
//   node tests/ort_ops.js ONNXQ_EXE MODEL_DIR [TMP_DIR]
//
// onnxruntime-node is loaded from $ONNXQ_ORT_DIR (default $ONNXQ_CACHE/node_modules, ONNXQ_CACHE defaulting to ~/.cache/onnxq);
// without it the test prints SKIP and exits 0.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const [exe, modelDir] = [process.argv[2], process.argv[3]];
const tmp = fs.mkdtempSync(path.join(process.argv[4] || os.tmpdir(), 'onnxq-ops-'));
const ortDir = process.env.ONNXQ_ORT_DIR || ((process.env.ONNXQ_CACHE || (process.env.HOME + '/.cache/onnxq')) + '/node_modules');
const RTOL = 1e-4, ATOL = 1e-5;
// quantized (8-bit integer) outputs may differ by one step where a value falls within
// float rounding of a .5 tie; everything else must match as above
const QTOL = 1;
const NPY = { '<f4': Float32Array, '|u1': Uint8Array, '|i1': Int8Array, '<i8': BigInt64Array };
const ORT_TYPE = { float32: Float32Array, uint8: Uint8Array, int8: Int8Array };

let ort;
try {
  ort = require(path.join(ortDir, 'onnxruntime-node'));
} catch (e) {
  console.log(`SKIP: onnxruntime-node not found under ${ortDir} (set ONNXQ_ORT_DIR)`);
  process.exit(0);
}

function writeNpy(file, data, dims) {
  const descr = data instanceof Uint8Array ? '|u1' : data instanceof Int8Array ? '|i1' : '<f4';
  let h = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims.join(', ')}${dims.length === 1 ? ',' : ''}), }`;
  const total = 10 + h.length + 1;
  h += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const pre = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, h.length & 0xff, h.length >> 8]);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(h, 'latin1'), Buffer.from(data.buffer)]));
}

function readNpy(file) {
  const b = fs.readFileSync(file);
  const hl = b.readUInt16LE(8);
  const h = b.slice(10, 10 + hl).toString('latin1');
  const shape = h.match(/'shape': \(([^)]*)\)/)[1].split(',').map(s => s.trim()).filter(Boolean).map(Number);
  const descr = h.match(/'descr': '([^']*)'/)[1];
  const off = 10 + hl;
  return { shape, descr, data: new NPY[descr](b.buffer.slice(b.byteOffset + off, b.byteOffset + b.length)) };
}

async function main() {
  let failed = false, seed = 1;
  const models = fs.readdirSync(modelDir).filter(f => f.endsWith('.onnx')).sort();
  for (const f of models) {
    const model = path.join(modelDir, f);
    const sess = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
    const feeds = {}, args = ['run', model];
    for (const m of sess.inputMetadata) {
      const n = m.shape.reduce((a, b) => a * b, 1);
      const x = new ORT_TYPE[m.type](n);
      let s = (seed++ * 2654435761) >>> 0;
      for (let i = 0; i < n; i++) {
        s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
        x[i] = m.type === 'float32' ? ((s >>> 8) / 16777216) * 4 - 2 : (s >>> 24) - (m.type === 'int8' ? 128 : 0);
      }
      const file = path.join(tmp, `${f}.${m.name}.npy`);
      writeNpy(file, x, m.shape);
      feeds[m.name] = new ort.Tensor(m.type, x, m.shape);
      args.push('--input', `${m.name}=${file}`);
    }
    const outDir = path.join(tmp, f);
    fs.mkdirSync(outDir);
    args.push('--output-dir', outDir, '--npy', '--threads', '2');
    let ok = true, msg = '';
    try {
      execFileSync(exe, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (e) {
      ok = false;
      msg = `onnxq failed: ${String(e.stderr).trim()}`;
    }
    const res = await sess.run(feeds);
    let worst = 0;
    for (const name of ok ? sess.outputNames : []) {
      const ref = res[name], got = readNpy(path.join(outDir, `${name}.npy`));
      if (JSON.stringify(got.shape) !== JSON.stringify(Array.from(ref.dims))) {
        ok = false;
        msg = `${name}: shape ${JSON.stringify(got.shape)}, ort ${JSON.stringify(Array.from(ref.dims))}`;
        continue;
      }
      const quant = got.descr === '|u1' || got.descr === '|i1';
      for (let i = 0; i < ref.data.length; i++) {
        const d = Math.abs(Number(got.data[i]) - Number(ref.data[i]));
        worst = Math.max(worst, d);
        if (!(d <= (quant ? QTOL : ATOL + RTOL * Math.abs(Number(ref.data[i]))))) {
          if (ok) msg = `${name}[${i}]: onnxq ${got.data[i]}, ort ${ref.data[i]}`;
          ok = false;
        }
      }
    }
    failed = failed || !ok;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${f}: max |diff| ${worst.toExponential(2)}${msg ? ' ' + msg : ''}`);
  }
  fs.rmSync(tmp, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
}

main().catch(e => { console.error(e); process.exit(1); });
