// Run the PaddleOCR models in onnxq and in onnxruntime-node on the same random input
// and compare every output within rtol 1e-3 / atol 1e-4.
//
//   node tests/ort_paddleocr.js ONNXQ_EXE [MODEL_DIR] [TMP_DIR]
//
// onnxruntime-node is found by tests/ortlib.js; when it is missing the script prints
// SKIP and exits 77 (ort_paddleocr.sh skips). Exit 1 on any mismatch.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { ort, readNpyF32, writeNpy, randomInput } = require(path.join(__dirname, 'ortlib.js'));

const exe = process.argv[2];
const modelDir = process.argv[3] || process.env.ONNXQ_OCR_DIR || ((process.env.ONNXQ_CACHE || (process.env.HOME + '/.cache/onnxq')) + '/ocr/package/assets');
const tmp = fs.mkdtempSync(path.join(process.argv[4] || os.tmpdir(), 'onnxq-ort-'));
const RTOL = 1e-3, ATOL = 1e-4;

if (!exe) {
  console.error('usage: node ort_paddleocr.js ONNXQ_EXE [MODEL_DIR]');
  process.exit(2);
}

const cases = [
  { file: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', dims: [1, 3, 48, 192] },
  { file: 'ch_PP-OCRv4_rec_infer.onnx', dims: [1, 3, 48, 320] },
  // det: a smooth image-like pattern, so that the probability map is not all ~0
  { file: 'ch_PP-OCRv4_det_infer.onnx', dims: [1, 3, 160, 160], pattern: true },
];

// normalised "text on paper": dark horizontal strokes on a bright background
function patternInput(dims) {
  const [, C, H, W] = dims;
  const a = new Float32Array(C * H * W);
  for (let c = 0; c < C; c++)
    for (let y = 0; y < H; y++)
      for (let x = 0; x < W; x++) {
        const line = (y % 32) >= 10 && (y % 32) < 20 && (x % 40) < 30 && ((x * 7 + y * 3) % 5) < 3;
        const v = line ? 0.1 : 0.9;
        a[(c * H + y) * W + x] = (v - 0.5) / 0.5;
      }
  return a;
}

async function main() {
  let failed = false;
  for (const c of cases) {
    const model = path.join(modelDir, c.file);
    if (!fs.existsSync(model)) {
      console.log(`SKIP ${c.file}: not found in ${modelDir}`);
      continue;
    }
    const n = c.dims.reduce((x, y) => x * y, 1);
    const x = c.pattern ? patternInput(c.dims) : randomInput(n, 12345);
    const sess = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
    const inName = sess.inputNames[0];
    const inFile = path.join(tmp, 'x.npy');
    writeNpy(inFile, x, c.dims);
    const outDir = path.join(tmp, c.file.replace(/\.onnx$/, ''));
    fs.mkdirSync(outDir, { recursive: true });
    execFileSync(exe, ['run', model, '--input', `${inName}=${inFile}`, '--output-dir', outDir, '--npy'],
                 { stdio: ['ignore', 'ignore', 'inherit'] });
    const res = await sess.run({ [inName]: new ort.Tensor('float32', x, c.dims) });
    for (const name of sess.outputNames) {
      const ref = res[name];
      const got = readNpyF32(path.join(outDir, name.replace(/[/\\]/g, '_') + '.npy'));
      const shapeOk = JSON.stringify(got.shape) === JSON.stringify(Array.from(ref.dims));
      let maxAbs = 0, maxRel = 0, bad = 0, worst = -1, worstExcess = 0;
      if (shapeOk) {
        for (let i = 0; i < ref.data.length; i++) {
          const e = ref.data[i], g = got.data[i];
          const d = Math.abs(g - e);
          if (!(d <= ATOL + RTOL * Math.abs(e))) {
            bad++;
            const ex = Number.isNaN(d) ? Infinity : d - (ATOL + RTOL * Math.abs(e));
            if (worst < 0 || ex > worstExcess) { worst = i; worstExcess = ex; }
          }
          if (d > maxAbs) maxAbs = d;
          const r = d / Math.max(Math.abs(e), 1e-12);
          if (Math.abs(e) > 1e-3 && r > maxRel) maxRel = r;
        }
      }
      const ok = shapeOk && bad === 0;
      failed = failed || !ok;
      let lo = Infinity, hi = -Infinity;
      for (const v of ref.data) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${c.file} ${name} [${Array.from(ref.dims)}] (ort range ${lo.toPrecision(3)}..${hi.toPrecision(3)}): ` +
                  (shapeOk ? `max |diff| ${maxAbs.toExponential(3)}, max rel diff (|ref|>1e-3) ${maxRel.toExponential(3)}` +
                             (bad ? `, ${bad} elements out of tolerance, worst #${worst}: got ${got.data[worst]}, ort ${ref.data[worst]}` : '')
                           : `shape ${JSON.stringify(got.shape)} vs ort ${JSON.stringify(Array.from(ref.dims))}`));
    }
  }
  fs.rmSync(tmp, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
}

main().catch(e => { console.error(e); process.exit(1); });
