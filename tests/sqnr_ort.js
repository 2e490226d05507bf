// Output SQNR of a quantized model against its float model in onnxruntime-node, on
// deterministic random inputs: for models whose input is a feature tensor.
//   node tests/sqnr_ort.js FLOAT.onnx QUANT.onnx [--samples N (64)] [--seed S (1)]
//        [--normal MEAN,STD (0,1)] [--dim NAME=N]...
// Each float32 input gets N(MEAN, STD) values (Box-Muller on tests/ortlib.js randomInput);
// symbolic dimensions are 1 unless --dim sets them. Both models run with graph
// optimizations on (onnxruntime's fused kernels) and the quantized one also with them off,
// one thread. SQNR per output over all samples: 10 log10(sum f^2 / sum (f - q)^2).
// Prints one JSON line.
'use strict';
const path = require('path');
const { ort, randomInput } = require(path.join(__dirname, 'ortlib.js'));

function option(args, name, dflt) {
  const i = args.indexOf(name);
  if (i < 0) return dflt;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
}

(async () => {
  const args = process.argv.slice(2);
  const n = Number(option(args, '--samples', '64')), seed = Number(option(args, '--seed', '1'));
  const [mean, std] = option(args, '--normal', '0,1').split(',').map(Number);
  const dims = {};
  for (let d; (d = option(args, '--dim', null)) !== null;) dims[d.split('=')[0]] = Number(d.split('=')[1]);
  const [fm, qm] = args;
  if (!qm || !(n > 0) || !(std > 0)) {
    console.error('usage: node tests/sqnr_ort.js FLOAT.onnx QUANT.onnx [--samples N] [--seed S] [--normal M,S] [--dim NAME=N]');
    process.exit(2);
  }
  const open = (m, level) => ort.InferenceSession.create(m, { graphOptimizationLevel: level, intraOpNumThreads: 1 });
  const f = await open(fm, 'all');
  const runs = { on: await open(qm, 'all'), off: await open(qm, 'disabled') };
  const meta = f.inputMetadata;
  const acc = {};
  for (let s = 0; s < n; s++) {
    const feeds = {};
    f.inputNames.forEach((name, k) => {
      const md = Array.isArray(meta) ? meta[k] : meta[name];
      const shape = (md && md.shape ? md.shape : []).map(d => (typeof d === 'number' && d > 0 ? d : dims[d] || 1));
      const cnt = shape.reduce((a, b) => a * b, 1);
      const u = randomInput(2 * cnt, seed * 100003 + s * 7919 + k);
      const x = new Float32Array(cnt);
      for (let i = 0; i < cnt; i++) /* Box-Muller */
        x[i] = mean + std * Math.sqrt(-2 * Math.log(1 - u[2 * i])) * Math.cos(2 * Math.PI * u[2 * i + 1]);
      feeds[name] = new ort.Tensor('float32', x, shape);
    });
    const fy = await f.run(feeds);
    for (const [k, sess] of Object.entries(runs)) {
      const qy = await sess.run(feeds);
      for (const o of f.outputNames) {
        const a = (acc[`${o}:${k}`] = acc[`${o}:${k}`] || { s: 0, e: 0 });
        for (let i = 0; i < fy[o].data.length; i++) {
          a.s += fy[o].data[i] ** 2;
          a.e += (fy[o].data[i] - qy[o].data[i]) ** 2;
        }
      }
    }
  }
  const out = { model: qm, samples: n, input: `normal(${mean}, ${std})` };
  for (const [k, a] of Object.entries(acc)) out[`sqnr_db_${k.replace(/:(on|off)$/, '_opt_$1')}`] = +(10 * Math.log10(a.s / a.e)).toFixed(2);
  console.log(JSON.stringify(out));
})().catch(e => { console.error('onnxruntime:', e.message); process.exit(1); });
