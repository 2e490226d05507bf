// onnxruntime's outputs for tests/weight_only.sh: for each line "NAME BASE ..." of
// DIR/cases.txt, runs DIR/NAME.onnx on DIR/x_BASE.npy (graph optimizations on: its
// MatMulNBits kernel and DequantizeLinear folding) and writes DIR/ort_NAME.npy.
//   node tests/weight_only_ort.js DIR
'use strict';
const fs = require('fs');
const path = require('path');
const { ort, readNpyF32, writeNpy } = require(path.join(__dirname, 'ortlib.js'));

(async () => {
  const dir = process.argv[2];
  const cases = fs.readFileSync(path.join(dir, 'cases.txt'), 'utf8').split('\n').filter(l => l.trim());
  for (const line of cases) {
    const [name, base] = line.split(/\s+/);
    const sess = await ort.InferenceSession.create(path.join(dir, `${name}.onnx`),
      { graphOptimizationLevel: 'all', intraOpNumThreads: 1 });
    const x = readNpyF32(path.join(dir, `x_${base}.npy`));
    const y = (await sess.run({ x: new ort.Tensor('float32', x.data, x.shape) }))[sess.outputNames[0]];
    writeNpy(path.join(dir, `ort_${name}.npy`), y.data, y.dims);
  }
  console.log(`onnxruntime ${ort.env.versions ? ort.env.versions.common : ''}: ran ${cases.length} models`);
})().catch(e => { console.error(`FAIL: ${e.message}`); process.exit(1); });
