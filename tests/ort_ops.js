// Single-operator models (tests/ort_ops/*.onnx, made by make_models.py) run in onnxq
// and in onnxruntime-node on the same seeded random inputs; outputs must agree within
// rtol 1e-4 / atol 1e-5.
//
//   node tests/ort_ops.js ONNXQ_EXE MODEL_DIR [TMP_DIR]
//
// onnxruntime-node is found by tests/ortlib.js; without it the script prints SKIP
// and exits 77 (ort_ops.sh skips).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { ort, readNpy, writeNpy } = require(path.join(__dirname, 'ortlib.js'));

const [exe, modelDir] = [process.argv[2], process.argv[3]];
const tmp = fs.mkdtempSync(path.join(process.argv[4] || os.tmpdir(), 'onnxq-ops-'));
const RTOL = 1e-4, ATOL = 1e-5;
// quantized (8-bit integer) outputs may differ by one step where a value falls within
// float rounding of a .5 tie; everything else must match as above
const QTOL = 1;
const ORT_TYPE = { float32: Float32Array, uint8: Uint8Array, int8: Int8Array };

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
