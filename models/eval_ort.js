// The quantized model as onnxruntime runs it: output SQNR against the float model with
// onnxruntime's graph optimizations on (its fused integer kernels) and off (QDQ reference
// math), and for cls/rec the agreement of the argmax of every output row.
//   node models/eval_ort.js det|cls|rec FLOAT.onnx QUANT.onnx SET_DIR [--max N]
// SET_DIR is one model's folder of a make_text_images.py set (tensors/NNN/x.npy). The float
// model runs with optimizations on, one thread. SQNR is over all samples together:
// 10 log10(sum f^2 / sum (f - q)^2). Prints one JSON line. Under `qemu-x86_64 -cpu Haswell
// node ...` onnxruntime takes its AVX2 kernels (what a CPU without VNNI computes).
'use strict';
const fs = require('fs');
const path = require('path');
const { ort, readNpyF32 } = require(path.join(__dirname, '..', 'tests', 'ortlib.js'));

(async () => {
  const args = process.argv.slice(2);
  let max = Infinity;
  const mi = args.indexOf('--max');
  if (mi >= 0) { max = Number(args[mi + 1]); args.splice(mi, 2); }
  const [kind, fmodel, qmodel, setDir] = args;
  if (!['det', 'cls', 'rec'].includes(kind) || !setDir || !(max > 0)) {
    console.error('usage: node models/eval_ort.js det|cls|rec FLOAT.onnx QUANT.onnx SET_DIR [--max N]');
    process.exit(2);
  }
  const tdir = path.join(setDir, 'tensors');
  const samples = fs.readdirSync(tdir).filter(s => fs.existsSync(path.join(tdir, s, 'x.npy'))).sort().slice(0, max);
  if (!samples.length) { console.error(`${tdir}: no samples`); process.exit(2); }
  const open = (m, level) => ort.InferenceSession.create(m, { graphOptimizationLevel: level, intraOpNumThreads: 1 });
  const f = await open(fmodel, 'all');
  const runs = { on: await open(qmodel, 'all'), off: await open(qmodel, 'disabled') };
  const acc = {};
  for (const k of Object.keys(runs)) acc[k] = { s: 0, e: 0, agree: 0, rows: 0 };
  for (const s of samples) {
    const x = readNpyF32(path.join(tdir, s, 'x.npy'));
    const feeds = { [f.inputNames[0]]: new ort.Tensor('float32', x.data, x.shape) };
    const fy = (await f.run(feeds))[f.outputNames[0]];
    for (const [k, sess] of Object.entries(runs)) {
      const qy = (await sess.run(feeds))[sess.outputNames[0]];
      const a = acc[k];
      for (let i = 0; i < fy.data.length; i++) {
        a.s += fy.data[i] * fy.data[i];
        a.e += (fy.data[i] - qy.data[i]) ** 2;
      }
      if (kind === 'det') continue;
      const C = fy.dims[fy.dims.length - 1];
      for (let r = 0; r < fy.data.length / C; r++) {
        let bf = 0, bq = 0;
        for (let c = 1; c < C; c++) {
          if (fy.data[r * C + c] > fy.data[r * C + bf]) bf = c;
          if (qy.data[r * C + c] > qy.data[r * C + bq]) bq = c;
        }
        a.agree += bf === bq;
        a.rows++;
      }
    }
  }
  const out = { kind, model: qmodel, samples: samples.length };
  for (const [k, a] of Object.entries(acc)) {
    out[`sqnr_db_opt_${k}`] = +(10 * Math.log10(a.s / a.e)).toFixed(2);
    if (a.rows) out[`agreement_opt_${k}`] = +(a.agree / a.rows).toFixed(4);
  }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e.message); process.exit(1); });
