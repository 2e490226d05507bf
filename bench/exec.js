// Executor speed: onnxq against onnxruntime-node on the PaddleOCR models, in the same run.
//
//   node bench/exec.js ONNXQ_EXE [MODEL_DIR]
//
// For every model and thread count (1, 2) the two runtimes are measured in alternation:
// each round runs `onnxq run --time N` (one process: load, plan, warm-up, N timed runs,
// median) and then N timed runs of an onnxruntime session (created once, warmed up).
// After ROUNDS rounds the median of the per-round medians is reported for each, with
// the ratio onnxq/ORT. Both get the same input (deterministic pseudo-random [0, 1)).
//
// Environment: ONNXQ_CACHE (default ~/.cache/onnxq; onnxruntime-node is loaded from
// $ONNXQ_CACHE/node_modules by tests/ortlib.js, models from $ONNXQ_CACHE/ocr/package/assets),
// ONNXQ_ORT_DIR / ONNXQ_OCR_DIR override those, BENCH_ROUNDS (default 5),
// BENCH_RUNS (timed runs per round, default 10; det uses half), BENCH_MODELS
// (comma list of det,rec,cls), BENCH_THREADS (comma list, default 1,2), BENCH_DET_SIZE
// (det input height and width, default 640), BENCH_QUANT_DIR (a folder holding
// det.q.onnx, rec.q.onnx, cls.q.onnx: each round then also times onnxq on the quantized
// model, and the table gets the ratio quantized/float in onnxq), BENCH_QUANT_TARGETS
// (comma list of `onnxq run --target` values for the quantized model, default
// "reference,host": one column each, the median over rounds of (quantized time / float
// time of the same round)), BENCH_ONNXQ_ISA=avx2 (onnxq's AVX2 kernels on any CPU:
// ONNXQ_HOST_CPU, ONNXQ_SGEMM_ISA, ONNXQ_QGEMM_ISA and ONNXQ_QUANT_ISA set to avx2 for the
// onnxq runs only; onnxruntime keeps the kernels it picks for this CPU, AVX-512 where the
// CPU has it, so the ratio is then pessimistic for onnxq against an AVX2-only CPU).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const cache = process.env.ONNXQ_CACHE || path.join(os.homedir(), '.cache', 'onnxq');
const modelDir = process.argv[3] || process.env.ONNXQ_OCR_DIR || path.join(cache, 'ocr', 'package', 'assets');
const exe = process.argv[2];
if (!exe) {
  console.error('usage: node bench/exec.js ONNXQ_EXE [MODEL_DIR]');
  process.exit(2);
}
const { ort, ortDir, writeNpy, randomInput } = require(path.join(__dirname, '..', 'tests', 'ortlib.js'));
const ROUNDS = +(process.env.BENCH_ROUNDS || 5);
const RUNS = +(process.env.BENCH_RUNS || 10);
const THREADS = (process.env.BENCH_THREADS || '1,2').split(',').map(Number);
const WANT = (process.env.BENCH_MODELS || 'det,rec,cls').split(',');
const DET = +(process.env.BENCH_DET_SIZE || 640);
const QDIR = process.env.BENCH_QUANT_DIR || '';
const QTARGETS = (process.env.BENCH_QUANT_TARGETS || 'reference,host').split(',');
const ISA = process.env.BENCH_ONNXQ_ISA || '';
const childEnv = { ...process.env };
if (ISA === 'avx2')
  for (const v of ['ONNXQ_HOST_CPU', 'ONNXQ_SGEMM_ISA', 'ONNXQ_QGEMM_ISA', 'ONNXQ_QUANT_ISA'])
    childEnv[v] = 'avx2';
else if (ISA)
  throw new Error(`BENCH_ONNXQ_ISA=${ISA}: only avx2 (or unset: this CPU's best) is known`);

const models = [
  { name: 'det', file: 'ch_PP-OCRv4_det_infer.onnx', dims: [1, 3, DET, DET], runs: Math.max(3, RUNS >> 1) },
  { name: 'rec', file: 'ch_PP-OCRv4_rec_infer.onnx', dims: [1, 3, 48, 320], runs: RUNS },
  { name: 'cls', file: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', dims: [1, 3, 48, 192], runs: RUNS },
].filter(m => WANT.includes(m.name));

const median = a => { const s = [...a].sort((x, y) => x - y); const n = s.length;
  return n % 2 ? s[(n - 1) >> 1] : (s[n / 2 - 1] + s[n / 2]) / 2; };

function onnxqMedian(model, npy, inName, runs, threads, extra = []) {
  const out = execFileSync(exe, ['run', model, '--input', `${inName}=${npy}`, '--time', String(runs),
    '--threads', String(threads), ...extra],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: childEnv });
  const m = out.match(/time: median ([0-9.]+) ms over \d+ runs \(min ([0-9.]+)/);
  if (!m) throw new Error(`no timing in onnxq output:\n${out}`);
  return { med: +m[1], min: +m[2] };
}

async function ortMedian(sess, feeds, runs) {
  const t = [];
  for (let i = 0; i < runs; i++) {
    const t0 = process.hrtime.bigint();
    await sess.run(feeds);
    t.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return { med: median(t), min: Math.min(...t) };
}

(async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxq-bench-'));
  const cpu = (os.cpus()[0] || {}).model || '?';
  console.log(`machine: ${cpu}, ${os.cpus().length} CPUs; onnxruntime-node ${require(path.join(ortDir, 'onnxruntime-node', 'package.json')).version}`);
  let flags = '';
  try {
    flags = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m) || ['', ''])[1];
  } catch (e) { /* not Linux */ }
  const has = f => new RegExp(`\\b${f}\\b`).test(flags);
  if (flags)
    console.log(`cpu flags: avx2 ${has('avx2') ? 'yes' : 'no'}, fma ${has('fma') ? 'yes' : 'no'}, ` +
      `avx512f ${has('avx512f') ? 'yes' : 'no'}, avx512_vnni ${has('avx512_vnni') ? 'yes' : 'no'}` +
      ` (onnxruntime picks its kernels from these)`);
  const forced = ['ONNXQ_HOST_CPU', 'ONNXQ_SGEMM_ISA', 'ONNXQ_QGEMM_ISA', 'ONNXQ_QUANT_ISA']
    .filter(v => childEnv[v]).map(v => `${v}=${childEnv[v]}`);
  console.log(`onnxq kernels: ${forced.length ? forced.join(' ') : "this CPU's best"}`);
  console.log(`load average at start: ${os.loadavg().map(x => x.toFixed(2)).join(' ')}`);
  console.log(`rounds ${ROUNDS}, timed runs per round ${RUNS} (det ${Math.max(3, RUNS >> 1)}), warm-up 1 (onnxq: inside --time) + 2 (ORT)`);
  const rows = [];
  for (const m of models) {
    const file = path.join(modelDir, m.file);
    const n = m.dims.reduce((a, b) => a * b, 1);
    const data = randomInput(n, 12345);
    const npy = path.join(tmp, `${m.name}.npy`);
    writeNpy(npy, data, m.dims);
    for (const th of THREADS) {
      const sess = await ort.InferenceSession.create(file, {
        intraOpNumThreads: th, interOpNumThreads: 1, executionMode: 'sequential',
        graphOptimizationLevel: 'all' });
      const inName = sess.inputNames[0];
      const feeds = { [inName]: new ort.Tensor('float32', data, m.dims) };
      for (let w = 0; w < 2; w++) await sess.run(feeds);
      const q = [], o = [], z = QTARGETS.map(() => []), zr = QTARGETS.map(() => []);
      let qmin = Infinity, omin = Infinity;
      const qfile = QDIR ? path.join(QDIR, `${m.name}.q.onnx`) : '';
      const haveQ = qfile && fs.existsSync(qfile);
      for (let r = 0; r < ROUNDS; r++) {
        const a = onnxqMedian(file, npy, inName, m.runs, th);
        const b = await ortMedian(sess, feeds, m.runs);
        if (haveQ)
          QTARGETS.forEach((t, i) => {
            const v = onnxqMedian(qfile, npy, inName, m.runs, th, ['--target', t]).med;
            z[i].push(v);
            zr[i].push(v / a.med);
          });
        q.push(a.med);
        o.push(b.med);
        qmin = Math.min(qmin, a.min);
        omin = Math.min(omin, b.min);
      }
      if (sess.release) await sess.release();
      const row = { model: m.name, shape: m.dims.join('x'), threads: th, onnxq: median(q), ort: median(o) };
      row.ratio = row.onnxq / row.ort;
      row.qmin = qmin;
      row.omin = omin;
      row.best = qmin / omin;
      row.quant = QTARGETS.map((t, i) => haveQ ? median(z[i]) : NaN);
      row.qratio = QTARGETS.map((t, i) => haveQ ? median(zr[i]) : NaN);
      rows.push(row);
      console.log(`${row.model.padEnd(4)} ${row.shape.padEnd(12)} threads ${th}  onnxq ${row.onnxq.toFixed(2).padStart(8)} ms  ` +
        `ort ${row.ort.toFixed(2).padStart(8)} ms  ratio ${row.ratio.toFixed(2)}  (fastest runs: ${qmin.toFixed(2)} / ${omin.toFixed(2)} = ${row.best.toFixed(2)})` +
        (haveQ ? QTARGETS.map((t, i) => `  quantized ${t} ${row.quant[i].toFixed(2)} ms (${row.qratio[i].toFixed(2)}x float)`).join('') : '') +
        `   (onnxq rounds: ${q.map(x => x.toFixed(1)).join(' ')}; ort: ${o.map(x => x.toFixed(1)).join(' ')}` +
        (haveQ ? QTARGETS.map((t, i) => `; quantized ${t}: ${z[i].map(x => x.toFixed(1)).join(' ')}`).join('') : '') + ')');
    }
  }
  console.log(`load average at end: ${os.loadavg().map(x => x.toFixed(2)).join(' ')}`);
  console.log('\nmedian of the per-round medians; "fastest" is the single fastest run of each (less sensitive to load)');
  const hq = rows.some(r => !isNaN(r.quant[0]));
  console.log('| model | input | threads | onnxq ms | ORT ms | onnxq/ORT | fastest onnxq ms | fastest ORT ms | ratio of fastest |' +
    (hq ? QTARGETS.map(t => ` quantized ${t} ms | quantized ${t}/float |`).join('') : ''));
  console.log('|---|---|---|---|---|---|---|---|---|' + (hq ? QTARGETS.map(() => '---|---|').join('') : ''));
  for (const r of rows)
    console.log(`| ${r.model} | ${r.shape} | ${r.threads} | ${r.onnxq.toFixed(2)} | ${r.ort.toFixed(2)} | **${r.ratio.toFixed(2)}** | ` +
      `${r.qmin.toFixed(2)} | ${r.omin.toFixed(2)} | ${r.best.toFixed(2)} |` +
      (hq ? QTARGETS.map((t, i) => ` ${isNaN(r.quant[i]) ? '-' : r.quant[i].toFixed(2)} | **${isNaN(r.qratio[i]) ? '-' : r.qratio[i].toFixed(2)}** |`).join('') : ''));
  fs.rmSync(tmp, { recursive: true, force: true });
})().catch(e => { console.error(e); process.exit(1); });
