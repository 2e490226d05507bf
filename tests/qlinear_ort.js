// Runs the models of tests/qlinear_models.py in onnxruntime-node with all graph
// optimizations (its fused QLinearConv / QLinearMatMul / QGemm kernels) and writes the
// outputs: node qlinear_ort.js CASEDIR OUTDIR [LIST] (LIST: a file of CASEDIR naming the
// models, default cases.txt). Run it natively and under
// `qemu-x86_64 -cpu Haswell` (an AVX2 CPU without VNNI) by tests/qlinear_ort.sh.
'use strict';
const fs = require('fs');
const path = require('path');
const { ort, readNpyF32, writeNpy } = require('./ortlib.js');

async function main() {
  const [dir, out, list] = process.argv.slice(2);
  fs.mkdirSync(out, { recursive: true });
  const cases = fs.readFileSync(path.join(dir, list || 'cases.txt'), 'utf8').split('\n').filter(s => s);
  for (const c of cases) {
    const sess = await ort.InferenceSession.create(path.join(dir, c + '.onnx'),
      { graphOptimizationLevel: 'all', intraOpNumThreads: 1 });
    const x = readNpyF32(path.join(dir, c + '.x.npy'));
    const r = await sess.run({ x: new ort.Tensor('float32', x.data, x.shape) });
    writeNpy(path.join(out, c + '.npy'), r.y.data, r.y.dims);
  }
  console.log(`onnxruntime ${ort.env.versions ? ort.env.versions.common : ''}: ${cases.length} models`);
}
main().catch(e => { console.error(e); process.exit(1); });
