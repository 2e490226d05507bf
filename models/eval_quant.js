// Compare a quantized PaddleOCR det or cls model with its float original on a set of tensors.
//   node models/eval_quant.js det|cls FLOAT.onnx QUANT.onnx SET_DIR [--onnxq-out DIR] [--max N]
// SET_DIR is one model's folder of a make_text_images.py set (e.g. build/textdata/eval/det):
// tensors/NNN/x.npy and, for cls, labels.txt. Runs both models in onnxruntime-node (one
// thread) and prints, for det, the output SQNR over all pages together,
// 20 log10(||f|| / ||f - q||) with f, q all float and quantized outputs concatenated, and the
// worst page; for cls, the agreement of the predicted class with the float model and the
// accuracy of both against the labels. With --onnxq-out DIR, DIR/NNN/<output>.npy holds
// onnxq's outputs for the quantized model (from `onnxq run --output-dir DIR/NNN --npy`), and
// the same numbers are printed for those too. Prints one JSON line last (for scripts).
'use strict';
const fs = require('fs');
const path = require('path');
const { ort, readNpyF32: readNpy } = require(path.join(__dirname, '..', 'tests', 'ortlib.js'));


function usage() {
  console.error('usage: node models/eval_quant.js det|cls FLOAT.onnx QUANT.onnx SET_DIR [--onnxq-out DIR] [--max N]');
  process.exit(2);
}

const db = (s, e) => (e === 0 ? Infinity : 10 * Math.log10(s / e));
const argmax = a => { let k = 0; for (let i = 1; i < a.length; i++) if (a[i] > a[k]) k = i; return k; };

(async () => {
  const args = process.argv.slice(2);
  if (args.length < 4) usage();
  const [kind, fmodel, qmodel, setDir] = args;
  if (kind !== 'det' && kind !== 'cls') usage();
  let oqDir = null, max = Infinity;
  for (let i = 4; i < args.length; i++) {
    if (args[i] === '--onnxq-out') oqDir = args[++i];
    else if (args[i] === '--max') max = Number(args[++i]);
    else usage();
  }
  const tdir = path.join(setDir, 'tensors');
  const samples = fs.readdirSync(tdir).filter(s => fs.existsSync(path.join(tdir, s, 'x.npy'))).sort().slice(0, max);
  if (!samples.length) { console.error(`${tdir}: no samples`); process.exit(2); }
  const opt = { graphOptimizationLevel: 'all', intraOpNumThreads: 1 };
  const fs_ = await ort.InferenceSession.create(fmodel, opt);
  const qs = await ort.InferenceSession.create(qmodel, opt);
  const out = fs_.outputNames[0];
  let labels = null;
  if (kind === 'cls') {
    labels = {};
    for (const line of fs.readFileSync(path.join(setDir, 'labels.txt'), 'utf8').split('\n')) {
      const [img, lab] = line.split('\t');
      if (img) labels[path.basename(img, '.png')] = Number(lab);
    }
  }
  const variants = oqDir ? ['ort', 'onnxq'] : ['ort'];
  const acc = {};
  for (const v of variants) acc[v] = { s: 0, e: 0, worst: Infinity, worstName: '', agree: 0, correct: 0, maxAbs: 0 };
  let floatCorrect = 0;
  for (const s of samples) {
    const x = readNpy(path.join(tdir, s, 'x.npy'));
    const feed = { x: new ort.Tensor('float32', x.data, x.shape) };
    const f = (await fs_.run(feed))[out].data;
    const outs = { ort: (await qs.run(feed))[qs.outputNames[0]].data };
    if (oqDir) outs.onnxq = readNpy(path.join(oqDir, s, out + '.npy')).data;
    const fc = argmax(f);
    if (labels && fc === labels[s]) floatCorrect++;
    for (const v of variants) {
      const q = outs[v];
      if (q.length !== f.length) throw new Error(`${s}: ${v} output has ${q.length} values, float ${f.length}`);
      let ss = 0, ee = 0;
      for (let i = 0; i < f.length; i++) {
        const d = f[i] - q[i];
        ss += f[i] * f[i]; ee += d * d;
        if (Math.abs(d) > acc[v].maxAbs) acc[v].maxAbs = Math.abs(d);
      }
      const a = acc[v];
      a.s += ss; a.e += ee;
      if (db(ss, ee) < a.worst) { a.worst = db(ss, ee); a.worstName = s; }
      if (kind === 'cls') {
        const qc = argmax(q);
        if (qc === fc) a.agree++;
        if (qc === labels[s]) a.correct++;
      }
    }
  }
  const n = samples.length;
  const res = { kind, samples: n };
  if (kind === 'cls') res.float_accuracy = floatCorrect / n;
  for (const v of variants) {
    const a = acc[v];
    const sq = db(a.s, a.e);
    res[v] = { sqnr_db: Number(sq.toFixed(2)), worst_db: Number(a.worst.toFixed(2)), max_abs_diff: Number(a.maxAbs.toPrecision(3)) };
    let line = `${kind} ${v}: ${n} samples, output SQNR ${sq.toFixed(1)} dB (worst sample ${a.worstName} ${a.worst.toFixed(1)} dB), max |float - quant| ${a.maxAbs.toPrecision(3)}`;
    if (kind === 'cls') {
      res[v].agreement = a.agree / n;
      res[v].accuracy = a.correct / n;
      line += `, class agreement ${a.agree}/${n} (${(100 * a.agree / n).toFixed(1)} %), accuracy ${a.correct}/${n} (float ${floatCorrect}/${n})`;
    }
    console.log(line);
  }
  console.log(JSON.stringify(res));
})().catch(e => { console.error('eval_quant:', e.message); process.exit(1); });
